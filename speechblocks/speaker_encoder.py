"""The framework-free part of the GE2E ``SpeakerEncoder`` (Keras and torch twins): constructor checks and
the equal error rate, computed from numpy scores as Real-Time-Voice-Cloning does. Imports no framework
(scikit-learn and scipy only inside :func:`ge2e_eer`)."""
from __future__ import annotations

import numpy as np

__all__ = ["check_speaker_encoder_arguments", "ge2e_eer"]


def check_speaker_encoder_arguments(mel_n_channels, model_hidden_size, model_num_layers, model_embedding_size) -> None:
    """Every size must be >= 1."""
    for arg, value in (("mel_n_channels", mel_n_channels), ("model_hidden_size", model_hidden_size),
                       ("model_num_layers", model_num_layers), ("model_embedding_size", model_embedding_size)):
        if int(value) < 1:
            raise ValueError(f"SpeakerEncoder: `{arg}` must be >= 1; got {value}.")


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
