"""The audio front-end's hparams: original names and values, validated once.

:func:`audio_hparams` turns a preset name (``"rtvc"``, ``"rayhane"``), a mapping of original names (e.g. a whole
``hparams.py`` as a dict, model names included and ignored) or an :class:`AudioHParams` plus overrides into a
frozen :class:`AudioHParams`. A bad value raises ``ValueError`` naming the hparam. The preset values live in
``speechblocks.tacotron2_hparams.TACOTRON2_PRESETS`` next to the model's.

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
    raise ValueError(f"audio: `hparams` must be a preset name ('rtvc', 'rayhane'), a mapping of original hparam "
                     f"names or an AudioHParams; got {type(hparams).__name__}.")


def audio_hparams(hparams="rtvc", *, preset: str | None = None, **overrides) -> AudioHParams:
    """Validated audio hparams.

    Args:
        hparams: a preset name (``"rtvc"``, ``"rayhane"``), an :class:`AudioHParams`, or a mapping (or an object
            with ``values()`` such as the original ``HParams``) of original names; names the front-end does not
            use are ignored. The audio names a mapping lacks come from the preset ``preset``, else from
            ``"rayhane"`` when the mapping has ``magnitude_power`` (only Rayhane's hparams have it), else from
            ``"rtvc"``. A mapping's ``hop_size=None`` takes ``frame_shift_ms`` as the originals' ``get_hop_size``;
            ``win_size=None`` means ``n_fft`` (librosa's ``win_length=None``).
        preset: the preset that fills missing names (only with a mapping).
        **overrides: hparams by original name, applied last; unknown names raise ``ValueError``.

    Returns:
        AudioHParams: frozen and hashable.

    Raises:
        ValueError: naming the first bad hparam (type, range, ``num_freq != n_fft // 2 + 1``,
            ``fmax > sample_rate // 2``, ``win_size > n_fft``, unknown pad mode), an unknown override or preset.
    """
    from ..tacotron2_hparams import TACOTRON2_PRESETS

    unknown = sorted(k for k in overrides if k not in AUDIO_HPARAM_NAMES)
    if unknown:
        raise ValueError(f"audio: unknown hparam override(s) {unknown}; known names: "
                         f"{', '.join(sorted(AUDIO_HPARAM_NAMES))}.")
    for name, value in (("hparams", hparams if isinstance(hparams, str) else None), ("preset", preset)):
        if value is not None and value not in TACOTRON2_PRESETS:
            raise ValueError(f"audio: `{name}` must be a preset ({', '.join(TACOTRON2_PRESETS)}); got {value!r}.")
    if isinstance(hparams, AudioHParams):
        given, base = hparams.to_dict(), hparams.preset
    elif isinstance(hparams, str):
        given, base = {}, hparams
    else:
        given = _as_mapping(hparams)
        base = preset or ("rayhane" if "magnitude_power" in given else "rtvc")
    hp = dict(TACOTRON2_PRESETS[base])
    hp.update(_PRESET_DEFAULTS[base])
    hp.update(given)
    hp.update(overrides)
    if hp.get("win_size") is None:
        hp["win_size"] = hp["n_fft"]
    if hp.get("hop_size") is None and hp.get("frame_shift_ms") is not None:
        hp["hop_size"] = int(_float(hp, "frame_shift_ms", 0.0, low_open=True) / 1000 * _int(hp, "sample_rate"))

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
