"""Guided attention (Tachibana et al. 2017, "Efficiently trainable text-to-speech ... guided attention"): an
optional loss term that pulls the attention towards the diagonal while a model learns to align.

Not part of the original Tacotron-2 recipe: ``speechblocks train`` adds it only with ``--guided-attention WEIGHT``
(off by default). The term of one batch is

    ``weight * sum_{b, n < N_b, t < S_b} A[b, n, t] * W[b, n, t] / sum_b S_b``,
    ``W[b, n, t] = 1 - exp(-(n / N_b - t / S_b) ** 2 / (2 * sigma ** 2))``,

with ``A`` the model's alignments ``(batch, T_in, steps)``, ``N_b`` the input length and
``S_b = ceil(targets_lengths_b / outputs_per_step)`` the decoder steps of example ``b``: the mean over the valid
decoder steps of the penalty the step's attention distribution expects, in ``[0, 1)`` whatever the lengths (about
0.5 for a uniform attention, 0 on the diagonal). (ESPnet's ``GuidedAttentionLoss`` divides by the number of valid
cells ``sum_b N_b * S_b`` instead, a term ``N`` times smaller, too weak next to the MSE of RTVC's [-4, 4] mels.)
This module builds ``W`` (numpy, zero outside the valid cells); the trainers of both frameworks add the term to the
loss as ``guided_attention_loss``.
"""
from __future__ import annotations

import numpy as np

#: the width of the diagonal band (ESPnet's default; Tachibana et al. used 0.2)
DEFAULT_SIGMA = 0.4
#: the key of the weights in a training batch (:func:`speechblocks.training.prepare_batch`'s dict)
BATCH_KEY = "guided_attention_weights"


def guided_attention_weights(input_lengths, targets_lengths, outputs_per_step: int, t_in: int, steps: int,
                             sigma: float = DEFAULT_SIGMA) -> np.ndarray:
    """The penalty ``W`` of every (input symbol, decoder step) cell of a batch.

    Args:
        input_lengths (array-like): ``(B,)`` symbols of each example (``1 <= N_b <= t_in``).
        targets_lengths (array-like): ``(B,)`` real mel frames of each example.
        outputs_per_step (int): frames a decoder step emits (``r``).
        t_in (int): the batch's padded input length.
        steps (int): the batch's decoder steps (its padded frames ``/ r``).
        sigma (float): the band's width (``> 0``). (Default: :data:`DEFAULT_SIGMA`)

    Returns:
        numpy.ndarray: float32 ``(B, t_in, steps)``; 0 in the padding.

    Raises:
        ValueError: naming the argument (lengths out of range, ``sigma <= 0``).
    """
    n = np.asarray(input_lengths, dtype=np.int64).reshape(-1)
    frames = np.asarray(targets_lengths, dtype=np.int64).reshape(-1)
    if n.shape != frames.shape:
        raise ValueError(f"guided_attention_weights: `input_lengths` {n.shape} and `targets_lengths` "
                         f"{frames.shape} must both be (batch,)")
    if not sigma > 0:
        raise ValueError(f"guided_attention_weights: `sigma` must be > 0; got {sigma}")
    r = int(outputs_per_step)
    s = -(-frames // r)
    if n.size and (n.min() < 1 or n.max() > t_in):
        raise ValueError(f"guided_attention_weights: `input_lengths` must be in [1, t_in={t_in}]; got {n.tolist()}")
    if s.size and (s.min() < 1 or s.max() > steps):
        raise ValueError(f"guided_attention_weights: `targets_lengths` / r must be in [1, steps={steps}]; got "
                         f"{frames.tolist()} frames at r={r}")
    out = np.zeros((n.size, t_in, steps), np.float32)
    for b in range(n.size):
        pos_in = np.arange(n[b])[:, None] / n[b]
        pos_out = np.arange(s[b])[None, :] / s[b]
        out[b, : n[b], : s[b]] = 1.0 - np.exp(-((pos_in - pos_out) ** 2) / (2.0 * sigma ** 2))
    return out


def add_guided_attention_weights(batch: dict, outputs_per_step: int, weight: float,
                                  sigma: float = DEFAULT_SIGMA) -> dict:
    """``batch`` (:func:`~speechblocks.training.prepare_batch`'s dict) with :data:`BATCH_KEY` set to ``weight`` times
    :func:`guided_attention_weights` of its lengths (a new dict): the trainers of both frameworks add the term of
    these weights to the loss (as ``guided_attention_loss``) when a batch carries them."""
    steps = batch["mel_targets"].shape[1] // int(outputs_per_step)
    out = dict(batch)
    w = guided_attention_weights(batch["input_lengths"], batch["targets_lengths"], outputs_per_step,
                                 batch["inputs"].shape[1], steps, sigma)
    out[BATCH_KEY] = (w * np.float32(weight)).astype(np.float32)
    return out

