"""Tacotron-2 hparams: the two presets under their original names, and their validation.

``tacotron2_hparams("rtvc")`` is the TF1 Real-Time-Voice-Cloning synthesizer's ``hparams.py``;
``tacotron2_hparams("rayhane")`` Rayhane-mamah/Tacotron-2's. Listed are the names the model, its loss and its
training recipe read, the audio front-end's (``speechblocks.audio.audio_hparams`` validates those; the model
ignores them) and the training schedule's (batching, test split, learning-rate decay, intervals:
``speechblocks.training`` reads them, the model ignores them); GPU placement and the vocoder are not
listed. :func:`resolve_hparams` turns a preset, a mapping or an hparams object plus overrides into
a validated :class:`Tacotron2HParams`; a bad value raises ``ValueError`` naming the hparam.
Pure Python: imports no framework.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping

__all__ = ["TACOTRON2_PRESETS", "Tacotron2HParams", "resolve_hparams", "tacotron2_hparams", "HPARAM_NAMES"]

_COMMON = dict(
    num_mels=80,
    embedding_dim=512,
    enc_conv_num_layers=3,
    enc_conv_kernel_size=(5,),
    enc_conv_channels=512,
    encoder_lstm_units=256,
    smoothing=False,
    attention_dim=128,
    attention_filters=32,
    attention_kernel=(31,),
    cumulative_weights=True,
    prenet_layers=[256, 256],
    decoder_layers=2,
    decoder_lstm_units=1024,
    postnet_num_layers=5,
    postnet_kernel_size=(5,),
    postnet_channels=512,
    cbhg_kernels=8,
    cbhg_conv_channels=128,
    cbhg_pool_size=2,
    cbhg_projection=256,
    cbhg_projection_kernel_size=3,
    cbhg_highwaynet_layers=4,
    cbhg_highway_units=128,
    cbhg_rnn_units=128,
    mask_encoder=True,
    mask_decoder=False,
    symmetric_mels=True,
    max_abs_value=4.0,
    stop_at_any=True,
    tacotron_zoneout_rate=0.1,
    tacotron_dropout_rate=0.5,
    tacotron_scale_regularization=False,
    tacotron_adam_beta1=0.9,
    tacotron_adam_beta2=0.999,
    tacotron_adam_epsilon=1e-6,
    tacotron_initial_learning_rate=1e-3,
    tacotron_clip_gradients=True,
    tacotron_teacher_forcing_mode="constant",
    tacotron_teacher_forcing_ratio=1.0,
)

# The audio front-end (speechblocks.audio), original names and values. The model reads none of them.
# Two keys are NOT original hparams, they record what the originals hard-coded: ``stft_pad_mode`` (RTVC called
# librosa.stft with librosa 0.6-0.8's default pad_mode="reflect", Rayhane passes pad_mode='constant') and
# ``preemphasis_in_spectrogram`` (RTVC's melspectrogram/linearspectrogram pre-emphasise their input; Rayhane's
# do not: its preprocessor pre-emphasises the waveform before the call). RTVC has no ``trim_silence`` (its
# preprocessing never trims, False here) and no ``magnitude_power`` (its spectrogram is the amplitude, 1.0) nor
# ``num_freq`` (n_fft // 2 + 1 = 401): both are left out so the model keeps inferring num_freq as before.
_RTVC_AUDIO = dict(
    n_fft=800, hop_size=200, win_size=800, fmin=55, fmax=7600, preemphasize=True, preemphasis=0.97,
    signal_normalization=True, allow_clipping_in_normalization=True, min_level_db=-100, ref_level_db=20,
    power=1.5, griffin_lim_iters=60, rescale=True, rescaling_max=0.9, trim_silence=False, trim_top_db=23,
    trim_fft_size=512, trim_hop_size=128, utterance_min_duration=1.6, max_mel_frames=900, clip_mels_length=True,
    stft_pad_mode="reflect", preemphasis_in_spectrogram=True)
_RAYHANE_AUDIO = dict(
    n_fft=2048, hop_size=275, win_size=1100, fmin=55, fmax=7600, preemphasize=True, preemphasis=0.97,
    magnitude_power=2.0, signal_normalization=True, allow_clipping_in_normalization=True, min_level_db=-100,
    ref_level_db=20, power=1.5, griffin_lim_iters=60, rescale=True, rescaling_max=0.999, trim_silence=True,
    trim_top_db=40, trim_fft_size=2048, trim_hop_size=512, max_mel_frames=900, clip_mels_length=True,
    stft_pad_mode="constant", preemphasis_in_spectrogram=False)

# The training schedule and data path (speechblocks.training), original names and values. The model reads none
# of them. ``tacotron_checkpoint_interval``, ``tacotron_eval_interval``, ``tacotron_summary_interval`` and
# ``tacotron_train_steps`` were not hparams in the originals but the train scripts' command-line defaults
# (``--checkpoint_interval`` ...; RTVC's TF1 ``synthesizer_train.py``, Rayhane's ``train.py``), kept here under
# a ``tacotron_`` prefix so one mapping holds the whole recipe.
_RTVC_TRAINING = dict(
    cleaners="english_cleaners", tacotron_num_gpus=1, tacotron_batch_size=36, tacotron_synthesis_batch_size=128,
    tacotron_test_size=0.05, tacotron_test_batches=None, tacotron_data_random_state=1234,
    tacotron_random_seed=5339, tacotron_decay_learning_rate=True, tacotron_start_decay=50000,
    tacotron_decay_steps=50000, tacotron_decay_rate=0.5, tacotron_final_learning_rate=1e-5,
    tacotron_checkpoint_interval=2000, tacotron_eval_interval=100000, tacotron_summary_interval=2500,
    tacotron_train_steps=2000000)
_RAYHANE_TRAINING = dict(
    cleaners="english_cleaners", tacotron_num_gpus=1, tacotron_batch_size=32, tacotron_synthesis_batch_size=1,
    tacotron_test_size=0.05, tacotron_test_batches=None, tacotron_data_random_state=1234,
    tacotron_random_seed=5339, tacotron_decay_learning_rate=True, tacotron_start_decay=40000,
    tacotron_decay_steps=18000, tacotron_decay_rate=0.5, tacotron_final_learning_rate=1e-4,
    tacotron_checkpoint_interval=2500, tacotron_eval_interval=5000, tacotron_summary_interval=250,
    tacotron_train_steps=100000)

#: the presets, original names and defaults (what the model, its loss, its training recipe and the audio
#: front-end read)
TACOTRON2_PRESETS: dict[str, dict] = {
    # TF1 Real-Time-Voice-Cloning synthesizer (SV2TTS): r = 2, speaker embedding concatenated to the memory
    "rtvc": dict(_COMMON, outputs_per_step=2, max_iters=2000, predict_linear=False, cross_entropy_pos_weight=20,
                 sample_rate=16000, tacotron_reg_weight=1e-7, speaker_embedding_size=256, **_RTVC_AUDIO,
                 **_RTVC_TRAINING),
    # Rayhane-mamah/Tacotron-2 (final hparams.py): r = 1, BN after the activation, outputs clipped, post-CBHG
    "rayhane": dict(_COMMON, outputs_per_step=1, max_iters=10000, predict_linear=True, num_freq=1025,
                    cross_entropy_pos_weight=1, sample_rate=22050, tacotron_reg_weight=1e-6,
                    batch_norm_position="after", clip_outputs=True, lower_bound_decay=0.1,
                    synthesis_constraint=False, **_RAYHANE_AUDIO, **_RAYHANE_TRAINING),
}

#: every hparam name the presets know (overrides outside this set are refused as typos)
HPARAM_NAMES = frozenset(k for p in TACOTRON2_PRESETS.values() for k in p) | {
    "num_freq", "batch_norm_position", "clip_outputs", "lower_bound_decay", "synthesis_constraint",
    "speaker_embedding_size"}


def tacotron2_hparams(preset: str = "rtvc") -> dict:
    """The original hparams of a preset as a plain dict (a fresh copy).

    Args:
        preset: ``"rtvc"`` (TF1 Real-Time-Voice-Cloning synthesizer) or ``"rayhane"`` (Rayhane-mamah/Tacotron-2).
    """
    if preset not in TACOTRON2_PRESETS:
        raise ValueError(f"tacotron2_hparams: `preset` must be one of {sorted(TACOTRON2_PRESETS)}; got {preset!r}.")
    return copy.deepcopy(TACOTRON2_PRESETS[preset])


@dataclasses.dataclass(frozen=True)
class Tacotron2HParams:
    """The validated values a Tacotron-2 model uses (original names; kernel sizes as ints).

    ``speaker_embedding_size`` is 0 for a model without speaker embedding (Rayhane). ``variant`` is
    ``"rtvc"`` when the model has a speaker embedding, else ``"rayhane"``: it selects the original ``add_loss``
    (RTVC's adds the mel L1 term and never a linear loss; Rayhane's adds the linear loss when ``predict_linear``).
    """

    n_symbols: int
    num_mels: int
    outputs_per_step: int
    embedding_dim: int
    enc_conv_num_layers: int
    enc_conv_kernel_size: int
    enc_conv_channels: int
    encoder_lstm_units: int
    speaker_embedding_size: int
    attention_dim: int
    attention_filters: int
    attention_kernel: int
    smoothing: bool
    cumulative_weights: bool
    mask_encoder: bool
    prenet_layers: tuple
    decoder_layers: int
    decoder_lstm_units: int
    max_iters: int
    stop_at_any: bool
    postnet_num_layers: int
    postnet_kernel_size: int
    postnet_channels: int
    predict_linear: bool
    num_freq: int
    cbhg_kernels: int
    cbhg_conv_channels: int
    cbhg_pool_size: int
    cbhg_projection: int
    cbhg_projection_kernel_size: int
    cbhg_highwaynet_layers: int
    cbhg_highway_units: int
    cbhg_rnn_units: int
    batch_norm_position: str
    tacotron_zoneout_rate: float
    tacotron_dropout_rate: float
    clip_outputs: bool
    lower_bound_decay: float
    symmetric_mels: bool
    max_abs_value: float
    mask_decoder: bool
    cross_entropy_pos_weight: float
    sample_rate: int
    tacotron_reg_weight: float
    tacotron_scale_regularization: bool
    tacotron_adam_beta1: float
    tacotron_adam_beta2: float
    tacotron_adam_epsilon: float
    tacotron_initial_learning_rate: float
    tacotron_clip_gradients: bool

    @property
    def variant(self) -> str:
        return "rtvc" if self.speaker_embedding_size else "rayhane"

    @property
    def memory_size(self) -> int:
        """Width of the attention memory: encoder outputs (+ the speaker embedding)."""
        return 2 * self.encoder_lstm_units + self.speaker_embedding_size

    @property
    def output_range(self) -> tuple[float, float]:
        """Rayhane's ``T2_output_range``."""
        return (-self.max_abs_value, self.max_abs_value) if self.symmetric_mels else (0.0, self.max_abs_value)

    @property
    def reg_weight(self) -> float:
        """The regularisation weight as ``add_loss`` scales it."""
        if not self.tacotron_scale_regularization:
            return self.tacotron_reg_weight
        scale = 1.0 / (2 * self.max_abs_value) if self.symmetric_mels else 1.0 / self.max_abs_value
        return self.tacotron_reg_weight * scale

    def to_dict(self) -> dict:
        """The original-name dict (JSON-serialisable; kernel sizes as 1-tuples as the originals write them)."""
        d = dataclasses.asdict(self)
        for k in ("enc_conv_kernel_size", "attention_kernel", "postnet_kernel_size"):
            d[k] = [d[k]]
        d["prenet_layers"] = list(d["prenet_layers"])
        d["speaker_embedding_size"] = d["speaker_embedding_size"] or None
        d["num_freq"] = d["num_freq"] or None
        return d


def _as_mapping(hparams) -> dict:
    if hparams is None:
        return tacotron2_hparams("rtvc")
    if isinstance(hparams, str):
        return tacotron2_hparams(hparams)
    if isinstance(hparams, Tacotron2HParams):
        return hparams.to_dict()
    if isinstance(hparams, Mapping):
        return dict(hparams)
    values = getattr(hparams, "values", None)  # tf.contrib.training.HParams
    if callable(values):
        out = values()
        if isinstance(out, Mapping):
            return dict(out)
    if hasattr(hparams, "__dict__"):
        return {k: v for k, v in vars(hparams).items() if not k.startswith("_")}
    raise ValueError(f"Tacotron2: `hparams` must be a preset name, a mapping or an object with attributes; "
                     f"got {type(hparams).__name__}.")


def _int(hp, name, minimum=1):
    v = hp[name]
    if isinstance(v, (list, tuple)) and len(v) == 1:  # (5,) as the originals write kernel sizes
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int) and not (hasattr(v, "__index__") and not isinstance(v, float)):
        raise ValueError(f"Tacotron2: hparam `{name}` must be an integer >= {minimum}; got {hp[name]!r}.")
    v = int(v)
    if v < minimum:
        raise ValueError(f"Tacotron2: hparam `{name}` must be an integer >= {minimum}; got {hp[name]!r}.")
    return v


def _float(hp, name, low=-math.inf, high=math.inf, high_open=False):
    v = hp[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise ValueError(f"Tacotron2: hparam `{name}` must be a number; got {v!r}.")
    v = float(v)
    ok = math.isfinite(v) and low <= v and (v < high if high_open else v <= high)
    if not ok:
        bracket = ")" if high_open else "]"
        raise ValueError(f"Tacotron2: hparam `{name}` must lie in [{low}, {high}{bracket}; got {hp[name]!r}.")
    return v


def _bool(hp, name):
    v = hp[name]
    if type(v).__name__ == "bool_":  # numpy bool
        v = bool(v)
    if not isinstance(v, bool):
        raise ValueError(f"Tacotron2: hparam `{name}` must be True or False; got {v!r}.")
    return v


def resolve_hparams(hparams=None, n_symbols: int | None = None, **overrides) -> Tacotron2HParams:
    """Validated hparams of a Tacotron-2 model.

    Args:
        hparams: a preset name (``"rtvc"``, ``"rayhane"``), a mapping or an object with attributes (e.g. the
            original ``HParams``) using the original names; ``None`` is the RTVC preset. Names the model does not
            use are ignored; names it uses but the mapping lacks take the RTVC preset's value (Rayhane's for the
            Rayhane-only ``batch_norm_position``, ``clip_outputs``, ``lower_bound_decay``: 'before', False, 0.1).
        n_symbols: size of the symbol table (the embedding's rows); default 66 (the original ``symbols``).
        **overrides: hparams by original name, applied last; unknown names raise ``ValueError``.

    Raises:
        ValueError: naming the first bad hparam (wrong type or value, unsupported option, unknown override).
    """
    hp, given = _merged(hparams, overrides)
    _check_supported(hp)
    prenet_layers = _prenet_layers(hp)
    n_sym = _n_symbols(hparams, given, n_symbols)
    spk = hp.get("speaker_embedding_size")
    spk = 0 if spk is None else _int(hp, "speaker_embedding_size", minimum=0)
    predict_linear, num_freq = _linear_output(hp)
    checked = {name: check(hp, name, **bounds) for name, check, bounds in _CHECKED}
    return Tacotron2HParams(n_symbols=n_sym, speaker_embedding_size=spk, prenet_layers=prenet_layers,
                            predict_linear=predict_linear, num_freq=num_freq,
                            batch_norm_position=hp["batch_norm_position"], **checked)


#: the hparams checked by type and range, in the order their errors are found (after the ones
#: :func:`resolve_hparams` checks first: the unsupported options, ``prenet_layers``, ``n_symbols``,
#: ``speaker_embedding_size``, ``predict_linear`` and ``num_freq``)
_UNIT = dict(low=0.0, high=1.0)
_UNIT_OPEN = dict(low=0.0, high=1.0, high_open=True)
_CHECKED = (
    ("num_mels", _int, {}), ("outputs_per_step", _int, {}), ("embedding_dim", _int, {}),
    ("enc_conv_num_layers", _int, {}), ("enc_conv_kernel_size", _int, {}), ("enc_conv_channels", _int, {}),
    ("encoder_lstm_units", _int, {}),
    ("attention_dim", _int, {}), ("attention_filters", _int, {}), ("attention_kernel", _int, {}),
    ("smoothing", _bool, {}), ("cumulative_weights", _bool, {}), ("mask_encoder", _bool, {}),
    ("decoder_layers", _int, {}), ("decoder_lstm_units", _int, {}), ("max_iters", _int, {}),
    ("stop_at_any", _bool, {}),
    ("postnet_num_layers", _int, {}), ("postnet_kernel_size", _int, {}), ("postnet_channels", _int, {}),
    ("cbhg_kernels", _int, {}), ("cbhg_conv_channels", _int, {}), ("cbhg_pool_size", _int, {}),
    ("cbhg_projection", _int, {}), ("cbhg_projection_kernel_size", _int, {}),
    ("cbhg_highwaynet_layers", _int, dict(minimum=0)), ("cbhg_highway_units", _int, {}), ("cbhg_rnn_units", _int, {}),
    ("tacotron_zoneout_rate", _float, _UNIT), ("tacotron_dropout_rate", _float, _UNIT_OPEN),
    ("clip_outputs", _bool, {}), ("lower_bound_decay", _float, dict(low=0.0)),
    ("symmetric_mels", _bool, {}), ("max_abs_value", _float, dict(low=0.0)), ("mask_decoder", _bool, {}),
    ("cross_entropy_pos_weight", _float, dict(low=0.0)), ("sample_rate", _int, {}),
    ("tacotron_reg_weight", _float, dict(low=0.0)), ("tacotron_scale_regularization", _bool, {}),
    ("tacotron_adam_beta1", _float, _UNIT_OPEN), ("tacotron_adam_beta2", _float, _UNIT_OPEN),
    ("tacotron_adam_epsilon", _float, dict(low=0.0)), ("tacotron_initial_learning_rate", _float, dict(low=0.0)),
    ("tacotron_clip_gradients", _bool, {}),
)


def _merged(hparams, overrides: dict) -> tuple[dict, dict]:
    """``(hp, given)``: the RTVC preset's values, replaced by the names ``hparams`` gives (``given``, every name it
    holds) that the model uses, then by ``overrides`` (unknown names refused)."""
    unknown = sorted(k for k in overrides if k not in HPARAM_NAMES)
    if unknown:
        raise ValueError(f"Tacotron2: unknown hparam override(s) {unknown}; known names: the keys of "
                         f"tacotron2_hparams('rtvc') and tacotron2_hparams('rayhane').")
    base = dict(TACOTRON2_PRESETS["rtvc"], batch_norm_position="before", clip_outputs=False, lower_bound_decay=0.1,
                num_freq=None, synthesis_constraint=False)
    given = _as_mapping(hparams)
    hp = dict(base)
    hp.update({k: v for k, v in given.items() if k in HPARAM_NAMES})
    if "speaker_embedding_size" not in given:
        hp["speaker_embedding_size"] = None  # hparams without the name (Rayhane's) describe a model without one
    hp.update(overrides)
    return hp, given


def _check_supported(hp: dict) -> None:
    """Options of the originals this port does not implement, and the batch-norm position's two values."""
    if hp.get("synthesis_constraint"):
        raise ValueError("Tacotron2: hparam `synthesis_constraint=True` (Rayhane's attention windowing at "
                         "synthesis) is not supported; set it to False.")
    if hp.get("tacotron_teacher_forcing_mode", "constant") != "constant" or \
            float(hp.get("tacotron_teacher_forcing_ratio", 1.0)) != 1.0:
        raise ValueError("Tacotron2: hparams `tacotron_teacher_forcing_mode`/`tacotron_teacher_forcing_ratio`: only "
                         "'constant' teacher forcing with ratio 1.0 (both presets' setting) is supported; got "
                         f"{hp.get('tacotron_teacher_forcing_mode')!r} / {hp.get('tacotron_teacher_forcing_ratio')!r}.")
    if hp["batch_norm_position"] not in ("before", "after"):
        raise ValueError(f"Tacotron2: hparam `batch_norm_position` must be 'before' or 'after'; "
                         f"got {hp['batch_norm_position']!r}.")


def _prenet_layers(hp: dict) -> tuple[int, ...]:
    prenet = hp["prenet_layers"]
    if isinstance(prenet, (str, bytes)) or not hasattr(prenet, "__len__") or len(prenet) == 0:
        raise ValueError(f"Tacotron2: hparam `prenet_layers` must be a non-empty list of integers; got {prenet!r}.")
    return tuple(_int({"prenet_layers": p}, "prenet_layers") for p in prenet)


def _n_symbols(hparams, given: dict, n_symbols) -> int:
    """The symbol table's size: ``n_symbols``, else the one a ``Tacotron2HParams`` or a saved config carries,
    else 66."""
    if n_symbols is None:
        n_symbols = hparams.n_symbols if isinstance(hparams, Tacotron2HParams) else given.get("n_symbols")
    return _int({"n_symbols": 66 if n_symbols is None else n_symbols}, "n_symbols")


def _linear_output(hp: dict) -> tuple[bool, int]:
    """``(predict_linear, num_freq)``; ``num_freq`` is required with ``predict_linear`` (0 when absent without)."""
    predict_linear = _bool(hp, "predict_linear")
    if predict_linear and hp.get("num_freq") is None:
        raise ValueError("Tacotron2: hparam `num_freq` is needed when `predict_linear` is True (the linear "
                         "spectrogram's bins, n_fft // 2 + 1).")
    return predict_linear, 0 if hp.get("num_freq") is None else _int(hp, "num_freq")
