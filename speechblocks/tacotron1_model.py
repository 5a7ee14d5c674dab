"""What both frameworks' ``Tacotron1`` agree on before any tensor exists: the hparams and layout of a model, the
number of decoder steps, the loss's priority band. Pure Python: imports no framework.

The maths itself lives once per framework (``tf_layers/tacotron1*.py``, ``torch_layers/tacotron1*.py``); this module
holds only the decisions that must not differ between them.
"""
from __future__ import annotations

from collections.abc import Mapping

from .tacotron1_hparams import Tacotron1HParams, resolve_tacotron1_hparams
from .tacotron1_schema import (
    LAYOUTS,
    MODEL_SCOPE,
    Tacotron1ShapesError,
    check_preset_family,
    infer_layout_and_hparams,
    tf1_variable_shapes,
)
from .tacotron2_schema import shape_problems

__all__ = ["TACOTRON1_SCOPE", "DEFAULT_LAYOUTS", "PRENET_DROP_RATE", "NOISE_MASK_KEYS", "NON_SIZE_HPARAMS",
           "resolve_tacotron1_model", "fit_tacotron1_hparams", "teacher_forced_steps", "step_limit"]

#: the TF1 scope every variable of the model sits under (``train.py``'s ``model`` + ``initialize``'s ``inference``)
TACOTRON1_SCOPE = MODEL_SCOPE
#: the layout a preset's own code wrote: keithito's current code (``tacotron-20180906``) and mimic2's
DEFAULT_LAYOUTS = {"keithito": "keithito-20180906", "mimic2": "mimic2"}
#: both pre-nets' dropout rate (``modules.prenet``: ``0.5 if is_training else 0.0``)
PRENET_DROP_RATE = 0.5
#: the ``noise_masks`` keys: one 0/1 keep-mask per pre-net layer
NOISE_MASK_KEYS = ("encoder_prenet", "decoder_prenet")
#: hparams no checkpoint shape determines (a preset named for a checkpoint gives these; the shapes give the rest)
NON_SIZE_HPARAMS = frozenset({"variant", "sample_rate", "max_iters", "cleaners", "adam_beta1", "adam_beta2",
                              "initial_learning_rate", "decay_learning_rate", "learning_rate_decay_halflife",
                              "attention"})
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


def fit_tacotron1_hparams(shapes: Mapping, hparams=None, overrides: Mapping | None = None,
                          source: str = "the checkpoint", layout: str | None = None) -> tuple[Tacotron1HParams, str]:
    """The hparams and layout of the Tacotron-1 whose TF1 variables have ``shapes`` (``from_tf1_checkpoint`` and
    ``from_migrated`` in both frameworks, ``speechblocks migrate``, ``parity --checkpoint``).

    Args:
        shapes: ``{name relative to model/inference (TF >= 1.2 spelling): shape}``.
        hparams: ``None`` -- the checkpoint's own (every size from the shapes, the rest from its variant's preset);
            a preset name (``"keithito"``, ``"mimic2"``: its values of :data:`NON_SIZE_HPARAMS`, the shapes' sizes;
            a Tacotron-2 preset is refused); a mapping or ``Tacotron1HParams``, taken as given.
        overrides: hparams by original name, applied last.
        source: how messages name the checkpoint or file.
        layout: the layout (``None``: the one the variable names say).

    Raises:
        Tacotron1ShapesError: hparams whose sizes contradict the shapes (one line naming the first variable;
            ``.problems`` lists them all), variables of no layout. ``ModelFamilyError``: a Tacotron-2 preset.
        ValueError: a bad hparam or layout.
    """
    overrides = dict(overrides or {})
    _, found, inferred = infer_layout_and_hparams({f"{MODEL_SCOPE}/{k}": tuple(v) for k, v in shapes.items()}, source)
    if isinstance(hparams, str):
        check_preset_family(hparams, "tacotron1", source)
        if hparams != inferred.variant:
            raise ValueError(f"{source} holds a {inferred.variant} model (layout {found}, {inferred.attention} "
                             f"attention): the {hparams!r} preset does not describe it; use {inferred.variant!r}")
        sizes = {k: v for k, v in inferred.to_dict().items() if k not in NON_SIZE_HPARAMS and k not in overrides}
        hp = resolve_tacotron1_hparams(hparams, **sizes, **overrides)
    elif hparams is None and not overrides:
        hp = inferred
    else:
        hp = resolve_tacotron1_hparams(inferred if hparams is None else hparams, **overrides)
    hp, layout = resolve_tacotron1_model(hp, layout or found)
    problems = shape_problems(shapes, tf1_variable_shapes(hp, layout), "the hparams")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise Tacotron1ShapesError(f"{source} does not fit the hparams: {problems[0]}{more}", problems)
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
