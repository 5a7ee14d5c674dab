"""Step-by-step reference implementations of the upstream algorithms (GE2E seed 001, TAC seed 004),
written for the benchmarks as baselines: they follow the upstream control flow (a Python loop over
speakers with numpy index masks for the GE2E similarity matrix, numpy ground truth for the loss; a
Python loop over the batch for TAC's valid-mic mean, concatenation of the expanded average) so the
vectorised library versions can be timed and checked against them.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def ge2e_similarity_matrix_loop(embeds: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GE2E similarity matrix ``(S, U, S)`` built column by column in a loop over speakers."""
    n_spk, n_utt = embeds.shape[:2]
    incl = embeds.mean(dim=1, keepdim=True)
    incl = incl.clone() / (incl.norm(dim=2, keepdim=True) + 1e-5)
    excl = (embeds.sum(dim=1, keepdim=True) - embeds) / (n_utt - 1)
    excl = excl.clone() / (excl.norm(dim=2, keepdim=True) + 1e-5)
    sim = torch.zeros(n_spk, n_utt, n_spk, dtype=embeds.dtype)
    others = 1 - np.eye(n_spk, dtype=np.int32)
    for j in range(n_spk):
        idx = np.where(others[j])[0]
        sim[idx, :, j] = (embeds[idx] * incl[j]).sum(dim=2)
        sim[j, :, j] = (embeds[j] * excl[j]).sum(dim=1)
    return sim * weight + bias


def ge2e_loss_loop(embeds: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GE2E softmax loss from the loop similarity matrix, with numpy-built targets."""
    n_spk, n_utt = embeds.shape[:2]
    sim = ge2e_similarity_matrix_loop(embeds, weight, bias).reshape(n_spk * n_utt, n_spk)
    target = torch.from_numpy(np.repeat(np.arange(n_spk), n_utt)).long()
    return F.cross_entropy(sim, target)


def ge2e_eer_reference(sim_flat: np.ndarray, n_spk: int, n_utt: int) -> float:
    """EER as upstream: one-hot labels from a per-row identity, ROC, brentq on the interpolated curve."""
    from scipy.interpolate import interp1d
    from scipy.optimize import brentq
    from sklearn.metrics import roc_curve

    truth = np.repeat(np.arange(n_spk), n_utt)
    labels = np.array([np.eye(1, n_spk, i, dtype=np.int32)[0] for i in truth])
    fpr, tpr, _ = roc_curve(labels.flatten(), sim_flat.flatten())
    return brentq(lambda v: 1.0 - v - interp1d(fpr, tpr)(v), 0.0, 1.0)


def _glob_ln(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    dims = list(range(1, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = (x - mean).pow(2).mean(dim=dims, keepdim=True)
    normed = (x - mean) / (var + 1e-8).sqrt()
    return (gamma * normed.transpose(1, -1) + beta).transpose(1, -1)


def _stage(name: str):
    """Profiling hook: a named ``torch.profiler`` range (no effect on the values; near-free when not profiling)."""
    return torch.profiler.record_function(name)


def tac_loop(state: dict, x: torch.Tensor, valid_mics: torch.Tensor | None = None) -> torch.Tensor:
    """TAC forward in the upstream layout (features last, flattened rows), gLN + PReLU, with the valid-mic
    mean taken example by example in a Python loop and ``concat_tf`` applied to the expanded concat.

    ``state`` holds asteroid's keys (``input_tf.0.weight`` ...). Unlike upstream, an all-zero
    ``valid_mics`` is not special-cased (the benchmark never passes one).
    """
    b, m, c, k, n = x.shape
    hid = state["avg_tf.0.weight"].shape[0]
    if valid_mics is None:
        valid_mics = torch.full((b,), m, dtype=torch.long)

    def tf(prefix, v):
        return F.prelu(F.linear(v, state[prefix + ".0.weight"], state[prefix + ".0.bias"]), state[prefix + ".1.weight"])

    with _stage("ref: input_tf (permute + Linear + PReLU)"):
        out = tf("input_tf", x.permute(0, 3, 4, 1, 2).reshape(b * m * k * n, c)).reshape(b, k, n, m, hid)
    with _stage("ref: valid-mic mean (loop over batch)"):
        means = torch.cat([out[i, :, :, : int(valid_mics[i])].mean(2).unsqueeze(0) for i in range(b)], 0)
    with _stage("ref: avg_tf (Linear + PReLU)"):
        means = tf("avg_tf", means.reshape(b * k * n, hid)).reshape(b, k, n, hid).unsqueeze(3).expand_as(out)
    with _stage("ref: concatenate"):
        out = torch.cat([out, means], -1)
    with _stage("ref: concat_tf (Linear + PReLU)"):
        out = tf("concat_tf", out.reshape(b * k * n * m, -1)).reshape(b, k, n, m, -1)
    with _stage("ref: permute + gLN"):
        out = _glob_ln(out.permute(0, 3, 4, 1, 2).reshape(b * m, -1, k, n), state["norm.gamma"], state["norm.beta"])
    with _stage("ref: residual"):
        return out.reshape(b, m, -1, k, n) + x
