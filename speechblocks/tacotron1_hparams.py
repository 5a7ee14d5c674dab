"""Tacotron-1 hparams: the two presets under their original names, and their validation.

``tacotron1_hparams("keithito")`` is keithito/tacotron's ``hparams.py`` (commit d26c763, the code that wrote the
``tacotron-20180906`` checkpoint); ``tacotron1_hparams("mimic2")`` is MycroftAI/mimic2's (commit 9fd123c), a fork
of keithito's 2017 code. Each dict holds exactly the names its ``hparams.py`` defines, with its defaults.
:func:`resolve_tacotron1_hparams` turns a preset, a mapping or an hparams object plus overrides into a validated
:class:`Tacotron1HParams`; a bad value raises ``ValueError`` naming the hparam. Pure Python: imports no framework.

Where the two presets differ in a way that changes numbers:

* **embedding width**: keithito ``embed_depth=256``; mimic2 ``embedding_dim=512`` (its own name for it). The
  embedding feeds the encoder pre-net, so mimic2's ``prenet/dense_1/kernel`` is ``[512, 256]``.
* **sizes that are hparams in one and constants in the other**: keithito (since its April 2018 commits 43bacba,
  038ea80, 51a38a1) reads ``prenet_depths=[256, 128]``, ``encoder_depth``, ``attention_depth``,
  ``decoder_depth``, ``postnet_depth`` (all 256); mimic2 hard-codes the same values in ``models/``
  (pre-net ``[256, 128]``, GRUs of 128 per direction, attention and decoder 256) and has no hparam for them.
  :class:`Tacotron1HParams` carries them for both (keithito's names); for mimic2 they default to its constants.
* **sample rate and spectrograms**: keithito 20 000 Hz with pre-emphasis 0.97 and the full 0..fs/2 mel range;
  mimic2 22 000 Hz, no pre-emphasis (its commit 122f978 dropped it, so ``preemphasis`` is absent), mels limited to
  ``min_mel_freq=125`` .. ``max_mel_freq=7600``, plus silence-trimming hparams ``trim_fft_size``,
  ``trim_hop_size``, ``trim_top_db``. Both: 80 mels, 1025 linear bins, 50 ms frames every 12.5 ms. The loss's
  priority band ``int(3000 / (sample_rate / 2) * num_freq)`` is 307 bins for keithito, 279 for mimic2.
* **attention**: keithito uses TF1's content-only ``BahdanauAttention(256)``; mimic2 its location-sensitive
  attention (``location_conv`` 20 filters x 7 taps without bias over the previous step's alignments, not their
  running sum, and ``location_layer`` to 256 without bias). The kind is a property of the preset, not an hparam
  of either original: :attr:`Tacotron1HParams.attention`.
* **pre-net position** (a layout, :mod:`speechblocks.tacotron1_schema`): keithito since commit bc20c40
  (2018-08-31, the ``tacotron-20180906`` checkpoint) runs the decoder pre-net on the previous frame alone, outside
  the ``AttentionWrapper``; keithito's 2017 code (``tacotron-20170720``) and mimic2 run it inside, on
  ``concat(previous frame, previous context)``, so its dropout also drops half the context.
* **learning-rate schedule**: keithito's ``_learning_rate_decay`` is the tensor2tensor warm-up
  ``initial_learning_rate * 4000**0.5 * min(s * 4000**-1.5, s**-0.5)`` with ``s = global_step + 1`` (or the
  constant rate when ``decay_learning_rate`` is false), ``initial_learning_rate=0.002``; mimic2 uses
  ``tf.train.exponential_decay(0.0015, global_step, learning_rate_decay_halflife=100000, 0.5)`` without staircase,
  i.e. ``0.0015 * 0.5 ** (global_step / 100000)``, and has no ``decay_learning_rate``. See :func:`learning_rate`.
* **cleaners**: both default to ``cleaners='english_cleaners'``, but the name means different code: keithito's
  transliterates with ``unidecode`` and spells numbers with ``inflect`` (``"1999"`` -> "nineteen ninety-nine");
  mimic2's strips every non-ASCII character and spells numbers with its own table (``"1999"`` -> "one thousand nine
  hundred ninety nine", no hyphens, ordinals by suffix). The symbol tables are the same 149 symbols.
  :mod:`speechblocks.text.tacotron1` holds both front-ends.
* **Griffin-Lim**: 60 iterations (keithito) vs 50 (mimic2), both with ``power=1.5``.
"""
from __future__ import annotations

import copy
import dataclasses

from .tacotron2_hparams import _as_mapping as _tacotron2_mapping
from .tacotron2_hparams import _bool, _float, _int

__all__ = ["TACOTRON1_PRESETS", "Tacotron1HParams", "resolve_tacotron1_hparams", "tacotron1_hparams",
           "TACOTRON1_HPARAM_NAMES", "learning_rate", "MIMIC2_FIXED_SIZES"]

#: the presets: exactly the names and defaults of each original ``hparams.py``
TACOTRON1_PRESETS: dict[str, dict] = {
    # keithito/tacotron d26c763 hparams.py
    "keithito": dict(
        cleaners="english_cleaners",
        num_mels=80, num_freq=1025, sample_rate=20000, frame_length_ms=50, frame_shift_ms=12.5, preemphasis=0.97,
        min_level_db=-100, ref_level_db=20,
        outputs_per_step=5, embed_depth=256, prenet_depths=[256, 128], encoder_depth=256, postnet_depth=256,
        attention_depth=256, decoder_depth=256,
        batch_size=32, adam_beta1=0.9, adam_beta2=0.999, initial_learning_rate=0.002, decay_learning_rate=True,
        use_cmudict=False,
        max_iters=200, griffin_lim_iters=60, power=1.5),
    # MycroftAI/mimic2 9fd123c hparams.py
    "mimic2": dict(
        cleaners="english_cleaners",
        num_mels=80, num_freq=1025, min_mel_freq=125, max_mel_freq=7600, sample_rate=22000, frame_length_ms=50,
        frame_shift_ms=12.5, min_level_db=-100, ref_level_db=20,
        trim_fft_size=1024, trim_hop_size=256, trim_top_db=40,
        outputs_per_step=5, embedding_dim=512,
        batch_size=32, adam_beta1=0.9, adam_beta2=0.999, initial_learning_rate=0.0015,
        learning_rate_decay_halflife=100000, use_cmudict=False,
        max_iters=200, griffin_lim_iters=50, power=1.5),
}

#: the sizes mimic2's ``models/`` hard-codes, under keithito's hparam names (what :class:`Tacotron1HParams` reads)
MIMIC2_FIXED_SIZES = dict(prenet_depths=[256, 128], encoder_depth=256, attention_depth=256, decoder_depth=256,
                          postnet_depth=256)

#: keithito's 149-symbol table (:mod:`speechblocks.text.tacotron1`), the embedding's rows in both originals
DEFAULT_N_SYMBOLS = 149
#: mimic2's location-sensitive attention: ``location_conv`` filters and kernel size (its constructor defaults)
MIMIC2_LOCATION_FILTERS, MIMIC2_LOCATION_KERNEL = 20, 7

#: every name an override may use: both presets' names, mimic2's fixed sizes and the attention keywords
TACOTRON1_HPARAM_NAMES = frozenset(k for p in TACOTRON1_PRESETS.values() for k in p) | frozenset(
    MIMIC2_FIXED_SIZES) | {"n_symbols", "attention", "location_filters", "location_kernel_size"}

ATTENTION_KINDS = ("bahdanau", "location_sensitive")


def tacotron1_hparams(preset: str = "keithito") -> dict:
    """The original hparams of a preset as a plain dict (a fresh copy).

    Args:
        preset: ``"keithito"`` (keithito/tacotron) or ``"mimic2"`` (MycroftAI/mimic2).
    """
    if preset not in TACOTRON1_PRESETS:
        raise ValueError(f"tacotron1_hparams: `preset` must be one of {sorted(TACOTRON1_PRESETS)}; got {preset!r}.")
    return copy.deepcopy(TACOTRON1_PRESETS[preset])


@dataclasses.dataclass(frozen=True)
class Tacotron1HParams:
    """The validated values a Tacotron-1 model uses (keithito's names; mimic2's ``embedding_dim`` is
    ``embed_depth`` here).

    ``variant`` is the original whose code the model follows (``"keithito"`` or ``"mimic2"``); ``attention`` is
    ``"bahdanau"`` (keithito) or ``"location_sensitive"`` (mimic2; ``location_filters`` x ``location_kernel_size``,
    zero for Bahdanau). ``learning_rate_decay_halflife`` is 0 where the schedule is keithito's
    (``decay_learning_rate`` then chooses warm-up or constant), mimic2's half-life otherwise.
    """

    variant: str
    n_symbols: int
    num_mels: int
    num_freq: int
    sample_rate: int
    outputs_per_step: int
    embed_depth: int
    prenet_depths: tuple
    encoder_depth: int
    attention_depth: int
    decoder_depth: int
    postnet_depth: int
    attention: str
    location_filters: int
    location_kernel_size: int
    max_iters: int
    cleaners: str
    adam_beta1: float
    adam_beta2: float
    initial_learning_rate: float
    decay_learning_rate: bool
    learning_rate_decay_halflife: int

    @property
    def memory_size(self) -> int:
        """Width of the encoder outputs (two GRUs of ``encoder_depth // 2``): the attention context's width."""
        return 2 * (self.encoder_depth // 2)

    @property
    def n_priority_freq(self) -> int:
        """The linear loss's priority band: the bins below 3 kHz, ``int(3000 / (sample_rate / 2) * num_freq)``."""
        return int(3000 / (self.sample_rate * 0.5) * self.num_freq)

    def to_dict(self) -> dict:
        """Original-name dict (JSON-serialisable) that :func:`resolve_tacotron1_hparams` reads back."""
        d = dataclasses.asdict(self)
        d["prenet_depths"] = list(d["prenet_depths"])
        return d


def learning_rate(global_step: int, hp: Tacotron1HParams) -> float:
    """The original learning rate at ``global_step`` (keithito's warm-up on ``global_step + 1``, or mimic2's
    ``exponential_decay``, or the constant rate when keithito's ``decay_learning_rate`` is false)."""
    lr = hp.initial_learning_rate
    if hp.learning_rate_decay_halflife:
        return lr * 0.5 ** (global_step / hp.learning_rate_decay_halflife)
    if not hp.decay_learning_rate:
        return lr
    warmup = 4000.0
    step = float(global_step + 1)
    return lr * warmup ** 0.5 * min(step * warmup ** -1.5, step ** -0.5)


def _as_mapping(hparams) -> dict:
    if hparams is None:
        return tacotron1_hparams("keithito")
    if isinstance(hparams, str):
        return tacotron1_hparams(hparams)
    if isinstance(hparams, Tacotron1HParams):
        return hparams.to_dict()
    return _checked(_tacotron2_mapping, hparams)  # a mapping, an HParams, an object with attributes


def _checked(check, *args, **bounds):
    """Tacotron-2's argument checks (one message style), naming this family."""
    try:
        return check(*args, **bounds)
    except ValueError as e:
        raise ValueError(str(e).replace("Tacotron2:", "Tacotron1:", 1)) from None


def _variant(given: dict, overrides: dict) -> str:
    """mimic2 when the names say so (its ``embedding_dim``, ``learning_rate_decay_halflife``, or a saved
    ``variant``), else keithito."""
    merged = {**given, **overrides}
    if merged.get("variant") in TACOTRON1_PRESETS:
        return merged["variant"]
    return "mimic2" if {"embedding_dim", "learning_rate_decay_halflife"} & set(merged) else "keithito"


def resolve_tacotron1_hparams(hparams=None, **overrides) -> Tacotron1HParams:
    """Validated hparams of a Tacotron-1 model.

    Args:
        hparams: a preset name (``"keithito"``, ``"mimic2"``), a mapping or an object with attributes (e.g. the
            original ``HParams``) using the original names; ``None`` is the keithito preset. A mapping with mimic2's
            names (``embedding_dim``, ``learning_rate_decay_halflife``) is read as mimic2 (its fixed sizes, its
            location-sensitive attention); names the model does not use are ignored; names it uses but the mapping
            lacks take that preset's value.
        **overrides: hparams by original name (either preset's, plus ``n_symbols``, ``attention``,
            ``location_filters``, ``location_kernel_size``), applied last; unknown names raise ``ValueError``.

    Raises:
        ValueError: naming the first bad hparam (wrong type or value, odd encoder/postnet depth, unknown override).
    """
    unknown = sorted(k for k in overrides if k not in TACOTRON1_HPARAM_NAMES)
    if unknown:
        raise ValueError(f"Tacotron1: unknown hparam override(s) {unknown}; known names: the keys of "
                         f"tacotron1_hparams('keithito') and tacotron1_hparams('mimic2').")
    given = _as_mapping(hparams)
    variant = _variant(given, overrides)
    hp = dict(TACOTRON1_PRESETS[variant], n_symbols=DEFAULT_N_SYMBOLS)
    if variant == "mimic2":
        hp.update(MIMIC2_FIXED_SIZES, attention="location_sensitive", location_filters=MIMIC2_LOCATION_FILTERS,
                  location_kernel_size=MIMIC2_LOCATION_KERNEL, embed_depth=hp["embedding_dim"],
                  decay_learning_rate=True)
    else:
        hp.update(attention="bahdanau", location_filters=0, location_kernel_size=0,
                  learning_rate_decay_halflife=0)
    hp.update({k: v for k, v in given.items() if k in TACOTRON1_HPARAM_NAMES or k == "embed_depth"})
    hp.update(overrides)
    hp["embed_depth"] = _embedding_width(given, overrides, hp["embed_depth"])
    return _build(variant, hp)


def _embedding_width(given: dict, overrides: dict, default):
    """The embedding width under either name (keithito's ``embed_depth``, mimic2's ``embedding_dim``); an
    override wins over the mapping, and each original's own name over the other's."""
    for source in (overrides, given):
        for name in ("embed_depth", "embedding_dim"):
            if name in source:
                return source[name]
    return default


def _build(variant: str, hp: dict) -> Tacotron1HParams:
    if hp["attention"] not in ATTENTION_KINDS:
        raise ValueError(f"Tacotron1: hparam `attention` must be one of {list(ATTENTION_KINDS)}; "
                         f"got {hp['attention']!r}.")
    prenet = hp["prenet_depths"]
    if isinstance(prenet, (str, bytes)) or not hasattr(prenet, "__len__") or len(prenet) == 0:
        raise ValueError(f"Tacotron1: hparam `prenet_depths` must be a non-empty list of integers; got {prenet!r}.")
    prenet_depths = tuple(_checked(_int, {"prenet_depths": p}, "prenet_depths") for p in prenet)
    ints = {name: _checked(_int, hp, name) for name in (
        "n_symbols", "num_mels", "num_freq", "sample_rate", "outputs_per_step", "embed_depth", "encoder_depth",
        "attention_depth", "decoder_depth", "postnet_depth", "max_iters")}
    for name in ("encoder_depth", "postnet_depth"):
        if ints[name] % 2:
            raise ValueError(f"Tacotron1: hparam `{name}` must be even (two GRUs of half the depth, a highway net "
                             f"of half the depth); got {ints[name]}.")
    located = hp["attention"] == "location_sensitive"
    location = {name: _checked(_int, hp, name, minimum=1 if located else 0)
                for name in ("location_filters", "location_kernel_size")}
    if not located:
        location = dict(location_filters=0, location_kernel_size=0)
    if not isinstance(hp["cleaners"], str):
        raise ValueError(f"Tacotron1: hparam `cleaners` must be a comma-separated string of cleaner names; "
                         f"got {hp['cleaners']!r}.")
    unit_open = dict(low=0.0, high=1.0, high_open=True)
    halflife = _checked(_int, hp, "learning_rate_decay_halflife", minimum=0)
    return Tacotron1HParams(
        variant=variant, prenet_depths=prenet_depths, attention=hp["attention"], cleaners=hp["cleaners"],
        adam_beta1=_checked(_float, hp, "adam_beta1", **unit_open),
        adam_beta2=_checked(_float, hp, "adam_beta2", **unit_open),
        initial_learning_rate=_checked(_float, hp, "initial_learning_rate", low=0.0),
        decay_learning_rate=_checked(_bool, hp, "decay_learning_rate"),
        learning_rate_decay_halflife=halflife, **location, **ints)
