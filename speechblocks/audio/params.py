"""The audio front-end's hparams: original names and values, validated once.

:func:`audio_hparams` turns a preset name (``"rtvc"``, ``"rayhane"``), a mapping of original names (e.g. a whole
``hparams.py`` as a dict, model names included and ignored) or an :class:`AudioHParams` plus overrides into a
frozen :class:`AudioHParams`. A bad value raises ``ValueError`` naming the hparam. The preset values live in
``speechblocks.tacotron2_hparams.TACOTRON2_PRESETS`` next to the model's.

The Tacotron-1 presets ``"keithito"`` and ``"mimic2"`` read ``speechblocks.tacotron1_hparams.TACOTRON1_PRESETS``
under these names: ``n_fft = (num_freq - 1) * 2``, ``hop_size = int(frame_shift_ms / 1000 * sample_rate)``,
``win_size = int(frame_length_ms / 1000 * sample_rate)`` (as their ``_stft_parameters``), ``fmin``/``fmax``
mimic2's ``min_mel_freq``/``max_mel_freq`` (keithito: librosa's defaults 0 and ``sample_rate / 2``); a mapping
read with ``preset="keithito"`` or ``"mimic2"`` may use those original names too. What their ``util/audio.py``
hard-codes: the amplitude (``magnitude_power`` 1), ``[0, 1]`` normalisation clipped (``max_abs_value`` 1, not
symmetric), librosa 0.5.1's reflect centre padding, pre-emphasis inside the spectrograms (keithito 0.97; mimic2
none: ``preemphasize`` False), no rescale, no length filter. ``trim_silence`` is False for both (their LJSpeech
preprocessing never trims; mimic2's M-AILABS reader trims with its ``trim_*`` values, which keithito lacks and
inherits here from mimic2).

Two names are not hparams of the originals; they record what the originals hard-coded:

* ``stft_pad_mode``: the STFT's centre padding. RTVC called ``librosa.stft`` without ``pad_mode`` under librosa
  0.6-0.8, whose default was ``"reflect"``; Rayhane passes ``pad_mode='constant'``.
* ``preemphasis_in_spectrogram``: RTVC's ``melspectrogram``/``linearspectrogram`` pre-emphasise their input
  (True); Rayhane's do not, its preprocessor pre-emphasises (and rescales) the waveform first (False).

Defaults of names one original lacks: ``magnitude_power`` 1.0 (RTVC's spectrogram is the amplitude),
``num_freq`` ``n_fft // 2 + 1``, ``trim_silence`` False for RTVC (its preprocessing never trims),
``utterance_min_duration`` None for Rayhane (no such filter). Pure Python: imports no framework.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

__all__ = ["AudioHParams", "audio_hparams", "AUDIO_HPARAM_NAMES"]

_PAD_MODES = ("reflect", "constant")


@dataclasses.dataclass(frozen=True)
class AudioHParams:
    """Validated audio hparams (original names; see the module docstring for the two non-original ones).

    Hashable, so the mel basis is cached per value. ``preset`` is the preset the missing names came from.
    """

    sample_rate: int
    n_fft: int
    hop_size: int
    win_size: int
    num_mels: int
    num_freq: int
    fmin: float
    fmax: float
    preemphasize: bool
    preemphasis: float
    magnitude_power: float
    signal_normalization: bool
    allow_clipping_in_normalization: bool
    symmetric_mels: bool
    max_abs_value: float
    min_level_db: float
    ref_level_db: float
    power: float
    griffin_lim_iters: int
    rescale: bool
    rescaling_max: float
    trim_silence: bool
    trim_top_db: float
    trim_fft_size: int
    trim_hop_size: int
    utterance_min_duration: float | None
    max_mel_frames: int
    clip_mels_length: bool
    stft_pad_mode: str
    preemphasis_in_spectrogram: bool
    preset: str = "rtvc"

    def to_dict(self) -> dict:
        """The original-name dict (``preset`` left out)."""
        d = dataclasses.asdict(self)
        d.pop("preset")
        return d


#: every name :func:`audio_hparams` reads (overrides outside this set are refused as typos)
AUDIO_HPARAM_NAMES = frozenset(f.name for f in dataclasses.fields(AudioHParams) if f.name != "preset")

_PRESET_DEFAULTS = {
    "rtvc": dict(magnitude_power=1.0, trim_silence=False),
    "rayhane": dict(utterance_min_duration=None),
}

#: what both Tacotron-1 ``util/audio.py`` hard-code (``max_mel_frames``: unused, ``clip_mels_length`` is False;
#: ``max_iters * outputs_per_step``)
_TACOTRON1_FIXED = dict(
    n_fft=None, hop_size=None, win_size=None, fmin=0.0, fmax=None, magnitude_power=1.0, signal_normalization=True,
    allow_clipping_in_normalization=True, symmetric_mels=False, max_abs_value=1.0, rescale=False,
    rescaling_max=0.999, trim_silence=False, trim_top_db=40, trim_fft_size=1024, trim_hop_size=256,
    utterance_min_duration=None, max_mel_frames=1000, clip_mels_length=False, stft_pad_mode="reflect",
    preemphasis_in_spectrogram=True)
_TACOTRON1_DEFAULTS = {
    "keithito": dict(_TACOTRON1_FIXED, preemphasize=True),
    "mimic2": dict(_TACOTRON1_FIXED, preemphasize=False, preemphasis=0.97),
}


def _presets() -> dict:
    from ..tacotron1_hparams import TACOTRON1_PRESETS
    from ..tacotron2_hparams import TACOTRON2_PRESETS

    return {**TACOTRON2_PRESETS, **TACOTRON1_PRESETS}


def _base(base: str) -> dict:
    """The preset's values: the original hparams, then what its audio code hard-codes."""
    return {**_presets()[base], **(_TACOTRON1_DEFAULTS.get(base) or _PRESET_DEFAULTS[base])}


def _tacotron1_names(hp: dict, given: dict) -> None:
    """Fills the STFT sizes and mel range from Tacotron-1's names (``num_freq``, ``frame_*_ms``,
    ``min_mel_freq``/``max_mel_freq``) where neither the mapping nor the overrides give them."""
    for name, original in (("fmin", "min_mel_freq"), ("fmax", "max_mel_freq")):
        if name not in given and hp.get(original) is not None:
            hp[name] = hp[original]
    sr = _int(hp, "sample_rate")
    if hp.get("n_fft") is None:
        hp["n_fft"] = (_int(hp, "num_freq", minimum=2) - 1) * 2
    for name, ms in (("hop_size", "frame_shift_ms"), ("win_size", "frame_length_ms")):
        if hp.get(name) is None:
            hp[name] = int(_float(hp, ms, 0.0, low_open=True) / 1000 * sr)
    if hp.get("fmax") is None:
        hp["fmax"] = sr / 2


def _err(name: str, what: str, value) -> ValueError:
    return ValueError(f"audio: hparam `{name}` must be {what}; got {value!r}.")


def _int(hp: dict, name: str, minimum: int = 1) -> int:
    v = hp[name]
    if isinstance(v, bool) or isinstance(v, float) or not hasattr(v, "__index__"):
        raise _err(name, f"an integer >= {minimum}", v)
    if int(v) < minimum:
        raise _err(name, f"an integer >= {minimum}", v)
    return int(v)


def _float(hp: dict, name: str, low: float = -math.inf, high: float = math.inf,
           low_open: bool = False, high_open: bool = False) -> float:
    v = hp[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise _err(name, "a number", v)
    f = float(v)
    ok = math.isfinite(f) and (low < f if low_open else low <= f) and (f < high if high_open else f <= high)
    if not ok:
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise _err(name, f"a finite number in {lo}{low}, {high}{hi}", v)
    return f


def _bool(hp: dict, name: str) -> bool:
    v = hp[name]
    if type(v).__name__ == "bool_":  # numpy bool
        v = bool(v)
    if not isinstance(v, bool):
        raise _err(name, "True or False", v)
    return v


def _as_mapping(hparams) -> dict:
    if isinstance(hparams, Mapping):
        return dict(hparams)
    values = getattr(hparams, "values", None)  # tf.contrib.training.HParams
    if callable(values):
        out = values()
        if isinstance(out, Mapping):
            return dict(out)
    raise ValueError(f"audio: `hparams` must be a preset name ('rtvc', 'rayhane', 'keithito', 'mimic2'), a "
                     f"mapping of original hparam names or an AudioHParams; got {type(hparams).__name__}.")


def audio_hparams(hparams="rtvc", *, preset: str | None = None, **overrides) -> AudioHParams:
    """Validated audio hparams.

    Args:
        hparams: a preset name (``"rtvc"``, ``"rayhane"``, ``"keithito"``, ``"mimic2"``), an
            :class:`AudioHParams`, or a mapping (or an object with ``values()`` such as the original ``HParams``)
            of original names; names the front-end does not use are ignored. The audio names a mapping lacks come from
            the preset ``preset``, else from ``"rayhane"`` when the mapping has ``magnitude_power`` (only Rayhane's
            hparams have it), else from ``"rtvc"``. A mapping's ``hop_size=None`` takes ``frame_shift_ms`` as the
            originals' ``get_hop_size``; ``win_size=None`` means ``n_fft`` (librosa's ``win_length=None``). With
            ``preset="keithito"`` or ``"mimic2"`` the mapping may use Tacotron-1's names (module docstring).
        preset: the preset that fills missing names (only with a mapping).
        **overrides: hparams by original name, applied last; unknown names raise ``ValueError``.

    Returns:
        AudioHParams: frozen and hashable.

    Raises:
        ValueError: naming the first bad hparam (type, range, ``num_freq != n_fft // 2 + 1``,
            ``fmax > sample_rate // 2``, ``win_size > n_fft``, unknown pad mode), an unknown override or preset.
    """
    unknown = sorted(k for k in overrides if k not in AUDIO_HPARAM_NAMES)
    if unknown:
        raise ValueError(f"audio: unknown hparam override(s) {unknown}; known names: "
                         f"{', '.join(sorted(AUDIO_HPARAM_NAMES))}.")
    for name, value in (("hparams", hparams if isinstance(hparams, str) else None), ("preset", preset)):
        if value is not None and value not in _presets():
            raise ValueError(f"audio: `{name}` must be a preset ({', '.join(_presets())}); got {value!r}.")
    if isinstance(hparams, AudioHParams):
        given, base = hparams.to_dict(), hparams.preset
    elif isinstance(hparams, str):
        given, base = {}, hparams
    else:
        given = _as_mapping(hparams)
        base = preset or ("rayhane" if "magnitude_power" in given else "rtvc")
    hp = _base(base)
    hp.update(given)
    hp.update(overrides)
    if base in _TACOTRON1_DEFAULTS:
        _tacotron1_names(hp, {**given, **overrides})
    if hp.get("win_size") is None:
        hp["win_size"] = hp["n_fft"]
    if hp.get("hop_size") is None and hp.get("frame_shift_ms") is not None:
        hp["hop_size"] = int(_float(hp, "frame_shift_ms", 0.0, low_open=True) / 1000 * _int(hp, "sample_rate"))
    return _validated(hp, base)


def _validated(hp: dict, base: str) -> AudioHParams:
    sample_rate = _int(hp, "sample_rate")
    n_fft = _int(hp, "n_fft", minimum=2)
    win_size = _int(hp, "win_size")
    if win_size > n_fft:
        raise _err("win_size", f"<= n_fft ({n_fft})", hp["win_size"])
    num_freq = n_fft // 2 + 1 if hp.get("num_freq") is None else _int(hp, "num_freq")
    if num_freq != n_fft // 2 + 1:
        raise _err("num_freq", f"n_fft // 2 + 1 = {n_fft // 2 + 1}", hp["num_freq"])
    fmax = _float(hp, "fmax", 0.0, low_open=True)
    if fmax > sample_rate // 2:  # the originals assert it in _build_mel_basis
        raise _err("fmax", f"<= sample_rate // 2 = {sample_rate // 2}", hp["fmax"])
    fmin = _float(hp, "fmin", 0.0, fmax, high_open=True)
    if hp["stft_pad_mode"] not in _PAD_MODES:
        raise _err("stft_pad_mode", "'reflect' or 'constant'", hp["stft_pad_mode"])
    umd = hp.get("utterance_min_duration")
    return AudioHParams(
        sample_rate=sample_rate,
        n_fft=n_fft,
        hop_size=_int(hp, "hop_size"),
        win_size=win_size,
        num_mels=_int(hp, "num_mels"),
        num_freq=num_freq,
        fmin=fmin,
        fmax=fmax,
        preemphasize=_bool(hp, "preemphasize"),
        preemphasis=_float(hp, "preemphasis", 0.0, 1.0, high_open=True),
        magnitude_power=_float(hp, "magnitude_power", 0.0, low_open=True),
        signal_normalization=_bool(hp, "signal_normalization"),
        allow_clipping_in_normalization=_bool(hp, "allow_clipping_in_normalization"),
        symmetric_mels=_bool(hp, "symmetric_mels"),
        max_abs_value=_float(hp, "max_abs_value", 0.0, low_open=True),
        min_level_db=_float(hp, "min_level_db", high=0.0, high_open=True),
        ref_level_db=_float(hp, "ref_level_db"),
        power=_float(hp, "power", 0.0, low_open=True),
        griffin_lim_iters=_int(hp, "griffin_lim_iters", minimum=0),
        rescale=_bool(hp, "rescale"),
        rescaling_max=_float(hp, "rescaling_max", 0.0, 1.0, low_open=True),
        trim_silence=_bool(hp, "trim_silence"),
        trim_top_db=_float(hp, "trim_top_db", 0.0, low_open=True),
        trim_fft_size=_int(hp, "trim_fft_size"),
        trim_hop_size=_int(hp, "trim_hop_size"),
        utterance_min_duration=None if umd is None else _float(hp, "utterance_min_duration", 0.0),
        max_mel_frames=_int(hp, "max_mel_frames"),
        clip_mels_length=_bool(hp, "clip_mels_length"),
        stft_pad_mode=hp["stft_pad_mode"],
        preemphasis_in_spectrogram=_bool(hp, "preemphasis_in_spectrogram"),
        preset=base,
    )


def as_audio_hparams(hparams) -> AudioHParams:
    """``hparams`` itself when already validated, else :func:`audio_hparams` of it (internal helper)."""
    return hparams if isinstance(hparams, AudioHParams) else audio_hparams(hparams)
