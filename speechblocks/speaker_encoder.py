"""The framework-free part of the GE2E ``SpeakerEncoder`` (Keras and torch twins): constructor checks, the
partial-utterance windows (the one rule behind ``embed_utterance`` and ``embed_wav``) and the equal error rate,
computed from numpy scores as Real-Time-Voice-Cloning does. Imports no framework (scikit-learn and scipy only
inside :func:`ge2e_eer`)."""
from __future__ import annotations

import numpy as np

__all__ = ["check_speaker_encoder_arguments", "encoder_checkpoint_state", "ge2e_eer", "partial_windows",
           "partial_ranges"]


def check_speaker_encoder_arguments(mel_n_channels, model_hidden_size, model_num_layers, model_embedding_size) -> None:
    """Every size must be >= 1."""
    for arg, value in (("mel_n_channels", mel_n_channels), ("model_hidden_size", model_hidden_size),
                       ("model_num_layers", model_num_layers), ("model_embedding_size", model_embedding_size)):
        if int(value) < 1:
            raise ValueError(f"SpeakerEncoder: `{arg}` must be >= 1; got {value}.")


def encoder_checkpoint_state(data, path: str, what: str) -> tuple[dict, dict[str, int]]:
    """The encoder state dict of a loaded checkpoint and the sizes its shapes describe (both frameworks).

    Accepts a bare state dict or RTVC's / Resemblyzer's ``{"model_state": state_dict, "step": ..., ...}`` (the
    optimizer state, when present, is ignored); values are torch tensors or numpy arrays.

    Args:
        data: what the file held.
        path: the file (for the message).
        what: how the message names the file.

    Returns:
        ``(state_dict, sizes)``: sizes ``mel_n_channels``, ``model_hidden_size``, ``model_num_layers``,
        ``model_embedding_size`` (the constructor's keywords).

    Raises:
        ValueError: no encoder state dict (one line naming the file).
    """
    state = data.get("model_state", data) if isinstance(data, dict) else None
    if not isinstance(state, dict) or not all(len(getattr(state.get(k), "shape", ())) == 2
                                              for k in ("lstm.weight_ih_l0", "lstm.weight_hh_l0", "linear.weight")):
        raise ValueError(f"{what} {path!r} holds no encoder state dict (expected 2-D tensors lstm.weight_ih_l0, "
                         "lstm.weight_hh_l0, linear.weight, ... at top level or under 'model_state').")
    n_layers = sum(1 for k in state if str(k).startswith("lstm.weight_ih_l") and "reverse" not in str(k))
    sizes = dict(mel_n_channels=int(state["lstm.weight_ih_l0"].shape[1]),
                 model_hidden_size=int(state["lstm.weight_hh_l0"].shape[1]), model_num_layers=n_layers,
                 model_embedding_size=int(state["linear.weight"].shape[0]))
    return dict(state), sizes


def partial_ranges(n_frames: int, n_units: int, units_per_frame: int, partials_n_frames: int = 160,
                   overlap: float = 0.5, min_coverage: float = 0.75) -> list[tuple[int, int]]:
    """Frame windows ``[start, stop)`` of RTVC's partial-utterance rule, the coverage measured in any unit.

    Windows are ``partials_n_frames`` long and start every ``step = max(round(partials_n_frames *
    (1 - overlap)), 1)`` frames: ``start = 0, step, 2*step, ...`` while ``start <= n_frames -
    partials_n_frames + step`` (at least one window). The **last** window is dropped when the utterance
    covers less than ``min_coverage`` of it, ``(n_units - start * units_per_frame) / (partials_n_frames *
    units_per_frame)``, unless it is the only one. Mel frames: ``n_units = n_frames``, ``units_per_frame = 1``
    (:func:`partial_windows`); a waveform: samples, ``n_frames = ceil((n_samples + 1) / hop)``
    (``speechblocks.audio.speaker.partial_slices``).

    Args:
        n_frames: number of frames of the utterance (>= 1).
        n_units: the utterance's length in the unit of the coverage (frames or samples).
        units_per_frame: units per frame (1 for frames, the hop for samples).
        partials_n_frames: window length in frames.
        overlap: overlap of consecutive windows in [0, 1).
        min_coverage: minimum covered fraction of the last window in (0, 1].

    Returns:
        list of ``(start, stop)`` frame ranges.
    """
    if n_frames < 1:
        raise ValueError(f"partial_windows: `n_frames` must be >= 1; got {n_frames}.")
    if partials_n_frames < 1:
        raise ValueError(f"partial_windows: `partials_n_frames` must be >= 1; got {partials_n_frames}.")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"partial_windows: `overlap` must lie in [0, 1); got {overlap}.")
    if not 0.0 < min_coverage <= 1.0:
        raise ValueError(f"partial_windows: `min_coverage` must lie in (0, 1]; got {min_coverage}.")
    step = max(int(np.round(partials_n_frames * (1.0 - overlap))), 1)
    last_start = max(0, n_frames - partials_n_frames + step)
    windows = [(s, s + partials_n_frames) for s in range(0, last_start + 1, step)]
    start = windows[-1][0]
    coverage = (n_units - start * units_per_frame) / (partials_n_frames * units_per_frame)
    if coverage < min_coverage and len(windows) > 1:
        windows.pop()
    return windows


def partial_windows(n_frames: int, partials_n_frames: int = 160, overlap: float = 0.5,
                    min_coverage: float = 0.75) -> list[tuple[int, int]]:
    """Frame windows ``[start, stop)`` used to embed a whole utterance (RTVC's partial-utterance rule).

    Windows are ``partials_n_frames`` long and start every ``step = max(round(partials_n_frames *
    (1 - overlap)), 1)`` frames: ``start = 0, step, 2*step, ...`` while ``start <= n_frames -
    partials_n_frames + step`` (at least one window). A window may run past the utterance (it is padded);
    the **last** window is dropped when it covers less than ``min_coverage`` of its frames with real
    frames, unless it is the only one (:func:`partial_ranges` with frames as the unit).

    Example (160 frames, 50 % overlap, 75 %): 200 frames -> ``[(0, 160), (80, 240)]`` (the second covers
    120/160 = 75 %: kept); 180 frames -> ``[(0, 160)]`` (``(80, 240)`` covers 100/160: dropped);
    100 frames -> ``[(0, 160)]`` (the only window, kept).

    Args:
        n_frames: number of frames of the utterance (>= 1).
        partials_n_frames: window length in frames.
        overlap: overlap of consecutive windows in [0, 1).
        min_coverage: minimum real-frame fraction of the last window in (0, 1].

    Returns:
        list of ``(start, stop)`` frame ranges.
    """
    return partial_ranges(n_frames, n_frames, 1, partials_n_frames, overlap, min_coverage)


def ge2e_eer(scores: np.ndarray) -> float:
    """Equal error rate of a GE2E similarity matrix (numpy), as RTVC computes it.

    Labels are the flattened one-hot speaker identities, scores the flattened (scaled) similarity matrix;
    ``sklearn.metrics.roc_curve`` gives the ROC, and ``scipy.optimize.brentq`` finds where ``1 - fpr = tpr``
    on its linear interpolation (``scipy.interpolate.interp1d``).

    Args:
        scores: ``(speakers, utterances, speakers)`` or ``(speakers * utterances, speakers)``.

    Returns:
        the EER as a float.
    """
    from scipy.interpolate import interp1d
    from scipy.optimize import brentq
    from sklearn.metrics import roc_curve

    scores = np.asarray(scores)
    n_spk = scores.shape[-1]
    scores = scores.reshape(-1, n_spk)
    n_utt = scores.shape[0] // n_spk
    labels = np.repeat(np.eye(n_spk, dtype=np.int32), n_utt, axis=0)
    fpr, tpr, _ = roc_curve(labels.reshape(-1), scores.reshape(-1))
    curve = interp1d(fpr, tpr)
    return float(brentq(lambda v: 1.0 - v - curve(v), 0.0, 1.0))
