"""What both frameworks' ``Tacotron1`` agree on before any tensor exists: the hparams and layout of a model, the
number of decoder steps, the loss's priority band. Pure Python: imports no framework.

The maths itself lives once per framework (``tf_layers/tacotron1*.py``, ``torch_layers/tacotron1*.py``); this module
holds only the decisions that must not differ between them.
"""
from __future__ import annotations

from .tacotron1_hparams import Tacotron1HParams, resolve_tacotron1_hparams
from .tacotron1_schema import LAYOUTS, MODEL_SCOPE

__all__ = ["TACOTRON1_SCOPE", "DEFAULT_LAYOUTS", "PRENET_DROP_RATE", "NOISE_MASK_KEYS", "resolve_tacotron1_model",
           "teacher_forced_steps", "step_limit"]

#: the TF1 scope every variable of the model sits under (``train.py``'s ``model`` + ``initialize``'s ``inference``)
TACOTRON1_SCOPE = MODEL_SCOPE
#: the layout a preset's own code wrote: keithito's current code (``tacotron-20180906``) and mimic2's
DEFAULT_LAYOUTS = {"keithito": "keithito-20180906", "mimic2": "mimic2"}
#: both pre-nets' dropout rate (``modules.prenet``: ``0.5 if is_training else 0.0``)
PRENET_DROP_RATE = 0.5
#: the ``noise_masks`` keys: one 0/1 keep-mask per pre-net layer
NOISE_MASK_KEYS = ("encoder_prenet", "decoder_prenet")
_LAYOUT_ATTENTION = {"keithito-20170720": "bahdanau", "keithito-20180906": "bahdanau",
                     "mimic2": "location_sensitive"}


def resolve_tacotron1_model(hparams=None, layout: str | None = None, **overrides) -> tuple[Tacotron1HParams, str]:
    """The validated hparams and layout of a ``Tacotron1``.

    Args:
        hparams: anything :func:`speechblocks.resolve_tacotron1_hparams` takes (``None``: keithito's preset).
        layout: one of ``speechblocks.tacotron1_schema.LAYOUTS``; ``None``: the preset's own
            (:data:`DEFAULT_LAYOUTS`).
        **overrides: hparams by original name.

    Raises:
        ValueError: a bad hparam, an unknown layout, or a layout whose attention contradicts the hparams' (the
            keithito layouts use content-only Bahdanau attention, mimic2's location-sensitive attention).
    """
    hp = hparams if isinstance(hparams, Tacotron1HParams) and not overrides else resolve_tacotron1_hparams(
        hparams, **overrides)
    if layout is None:
        layout = DEFAULT_LAYOUTS[hp.variant]
    if layout not in LAYOUTS:
        raise ValueError(f"Tacotron1: `layout` must be one of {list(LAYOUTS)}; got {layout!r}.")
    if _LAYOUT_ATTENTION[layout] != hp.attention:
        raise ValueError(f"Tacotron1: layout {layout!r} uses {_LAYOUT_ATTENTION[layout]!r} attention but the hparams "
                         f"say attention={hp.attention!r} (variant {hp.variant!r}); pass matching hparams "
                         f"(e.g. the {'mimic2' if layout == 'mimic2' else 'keithito'} preset) or layout.")
    return hp, layout


def step_limit(max_iters, hp: Tacotron1HParams) -> int:
    """The decoder's ``maximum_iterations``: ``max_iters`` or ``hp.max_iters`` (the originals cap teacher forcing
    by it too). ``ValueError`` naming ``max_iters`` unless it is an integer >= 1."""
    limit = hp.max_iters if max_iters is None else max_iters
    if isinstance(limit, bool) or int(limit) != limit or int(limit) < 1:
        raise ValueError(f"Tacotron1: `max_iters` must be an integer >= 1; got {max_iters!r}.")
    return int(limit)


def teacher_forced_steps(n_target_frames: int, hp: Tacotron1HParams, max_iters=None) -> int:
    """Decoder steps of a teacher-forced run: ``min(n_target_frames // r, max_iters)`` (keithito's
    ``TacoTrainingHelper`` reads ``targets[:, r-1::r]``; ``dynamic_decode`` stops at ``maximum_iterations``).
    ``ValueError`` naming ``mel_targets`` when there is not one whole step (fewer than ``r`` frames)."""
    r = hp.outputs_per_step
    if n_target_frames < r:
        raise ValueError(f"Tacotron1: argument `mel_targets` must have at least outputs_per_step = {r} frames, "
                         f"expected shape (batch, frames >= {r}, {hp.num_mels}); got {n_target_frames} frames.")
    return min(n_target_frames // r, step_limit(max_iters, hp))
