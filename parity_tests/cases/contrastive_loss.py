"""Parity of ``ContrastiveLoss``: Keras <-> torch with the same weights, negatives and Gumbel noise.

No TF1 graph exists for this block (it is a PyTorch module of NeMo), so there is no legacy spec. The torch
module draws the negatives (and, in training, the Gumbel noise is drawn here); the Keras layer loads the
torch state dict and receives the same indices and noise. Every configuration is compared twice: the
per-target losses (``reduce="none"``, ``multiplier = batch`` so the values are plain cross entropies,
absolute 1e-5) and the default-reduction loss (relative to its magnitude, as it sums hundreds of terms).
Also compared: the torch module against a step-by-step re-statement of the seed drawing from the same
torch RNG state (``bench/_seed_reference_contrastive.py``), on inputs without duplicated frames (the seed's
equality test on projected duplicates depends on BLAS blocking; ours decides before the projection).
"""
from __future__ import annotations

import numpy as np

from ..report import compare, stat_row
from ._common import FLOAT32_TOL, to_numpy, torch_tensor

BLOCK = "ContrastiveLoss"

B, D, T_DEC, PROJ, N = 3, 5, 12, 8, 6

# (label, config, masked steps per utterance)
CASES = [
    ("same utt, masked", dict(), 8),
    ("same utt, non-masked", dict(sample_from_non_masked=True), 5),
    ("batch, masked", dict(sample_from_same_utterance_only=False), 7),
    ("batch, non-masked", dict(sample_from_same_utterance_only=False, sample_from_non_masked=True), 4),
    ("batch, non-masked, N=2 (gathered)", dict(sample_from_same_utterance_only=False, sample_from_non_masked=True,
                                                num_negatives=2), 4),
    ("quantized same utt", dict(quantized_targets=True, codebook_size=6), 8),
    ("quantized batch", dict(quantized_targets=True, codebook_size=6, sample_from_same_utterance_only=False), 7),
    ("group_loss G=2", dict(quantized_targets=True, codebook_size=6, sample_from_same_utterance_only=False,
                            group_loss=True), 6),
    ("group_loss G=1", dict(quantized_targets=True, codebook_size=6, num_groups=1,
                            sample_from_same_utterance_only=False, group_loss=True), 6),
    ("codebook negatives", dict(quantized_targets=True, codebook_size=6, sample_from_same_utterance_only=False,
                                sample_from_codebook=True), 5),
    ("combine_time_steps=3", dict(combine_time_steps=3), 8),
    ("combine 2, quantized batch", dict(combine_time_steps=2, quantized_targets=True, codebook_size=6,
                                        sample_from_same_utterance_only=False, sample_from_non_masked=True), 6),
]


def legacy_specs():
    return []


def _inputs(config, per, seed, duplicate=True):
    k = config.get("combine_time_steps", 1)
    rng = np.random.default_rng(seed)
    steps = T_DEC * k - (k - 1)  # not a multiple of k: exercises the end padding
    spec = rng.standard_normal((B, D, steps)).astype(np.float32)
    if duplicate:
        spec[:, :, 4] = spec[:, :, 6]  # equal frames -> equal targets -> -inf logits
    masks = np.zeros((B, D, T_DEC * k), np.float32)
    for b in range(B):
        for t in rng.permutation(T_DEC - 1)[:per]:  # the last (padded) step stays unmasked
            masks[b, :, t * k:(t + 1) * k] = 1.0
    dec = rng.standard_normal((B, T_DEC, PROJ)).astype(np.float32)
    return spec, masks[:, :, :steps], dec


def _seed_reference_class():
    """``bench/_seed_reference_contrastive.py`` of the repository checkout (``bench`` is not installed);
    None outside a checkout, and the seed-reference rows are left out."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "_seed_reference_contrastive.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_speechblocks_seed_reference_contrastive", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SeedReferenceContrastiveLoss


def _torch_loss(config, **over):
    import torch_layers

    return torch_layers.ContrastiveLoss(D, proj_dim=PROJ, **{"num_negatives": N, **config, **over})


def _keras_loss(config, **over):
    import tf_layers

    return tf_layers.ContrastiveLoss(D, proj_dim=PROJ, **{"num_negatives": N, **config, **over})


def rows(legacy):
    import torch

    seed_reference = _seed_reference_class()

    out = []
    for i, (label, config, per) in enumerate(CASES):
        spec, masks, dec = _inputs(config, per, seed=20 + i)
        s_t, m_t, d_t = torch_tensor(spec), torch_tensor(masks), torch_tensor(dec)
        torch.manual_seed(i)
        groups = config.get("num_groups", 2)
        for training in (False, True) if config.get("quantized_targets") else (False,):
            mode = " train" if training else ""
            noise = None
            if training:
                noise = -np.log(np.random.default_rng(i).exponential(
                    size=(B, T_DEC, groups, config["codebook_size"]))).astype(np.float32)
            for reduce, mult, rel in (("none", float(B), False), ("sum", 16.0, True)):
                tl = _torch_loss(config, reduce=reduce, multiplier=mult,
                                 generator=torch.Generator().manual_seed(100 + i)).train(training)
                with torch.no_grad():
                    yt = tl(s_t, m_t, d_t, gumbel_noise=None if noise is None else torch_tensor(noise))
                kl = _keras_loss(config, reduce=reduce, multiplier=mult)
                kl.load_torch_state_dict(tl.state_dict())
                idx = None if tl.negative_indices is None else to_numpy(tl.negative_indices)
                yk = kl(spec, masks, dec, training=training, negative_indices=idx, gumbel_noise=noise)
                what = "per-target losses" if reduce == "none" else "loss (sum x 16/B)"
                out.append(compare(BLOCK, "Keras<->torch" + mode, f"{label}: {what}", yk, to_numpy(yt), FLOAT32_TOL,
                                   relative=rel))
                if reduce == "sum" and config.get("quantized_targets") and config.get("store_ids", True):
                    out.append(compare(BLOCK, "Keras<->torch" + mode, f"{label}: target_ids",
                                       np.asarray(kl.target_ids), to_numpy(tl.target_ids), 0.5))

        # torch against the seed's step-by-step computation, same torch RNG draws (group_loss G=2 cannot
        # run in the seed and codebook sampling draws differently: both skipped)
        if seed_reference is None or (config.get("num_groups", 2) == 2
                                      and (config.get("group_loss") or config.get("sample_from_codebook"))):
            continue
        # without duplicated frames: whether the seed finds two projected duplicates equal depends on the
        # BLAS kernel's blocking (see torch_layers.ContrastiveLoss); self-picks still give -inf
        spec, masks, dec = _inputs(config, per, seed=20 + i, duplicate=False)
        s_t, m_t, d_t = torch_tensor(spec), torch_tensor(masks), torch_tensor(dec)
        ref_cfg = {k: v for k, v in config.items() if k != "sample_from_codebook"}
        tl = _torch_loss(config, reduce="none", multiplier=float(B)).eval()
        ref = seed_reference(D, proj_dim=PROJ, reduce="none", multiplier=float(B),
                                           **{"num_negatives": N, **ref_cfg}).eval()
        ref.load_state_dict(tl.state_dict())
        torch.manual_seed(7)
        with torch.no_grad():
            yt = tl(s_t, m_t, d_t)
        torch.manual_seed(7)
        with torch.no_grad():
            yr = ref(s_t, m_t, d_t)
        out.append(compare(BLOCK, "torch<->seed reference", f"{label}: per-target losses", to_numpy(yt),
                           to_numpy(yr), FLOAT32_TOL))

    # sampling statistics of both frameworks' own draws: without replacement, uniform over the candidates
    rng = np.random.default_rng(3)
    spec = rng.standard_normal((2, D, 400)).astype(np.float32)
    masks = np.zeros((2, D, 400), np.float32)
    masks[:, :, :300] = 1.0
    dec = rng.standard_normal((2, 400, PROJ)).astype(np.float32)
    cfg = dict(sample_from_same_utterance_only=False, sample_from_non_masked=True)
    tl = _torch_loss(cfg, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        tl(torch_tensor(spec), torch_tensor(masks), torch_tensor(dec))
    kl = _keras_loss(cfg, seed=3)
    kl(spec, masks, dec)
    for name, idx in (("torch", to_numpy(tl.negative_indices)), ("Keras", np.asarray(kl.negative_indices))):
        distinct = np.mean([len(set(r)) == N for r in idx.tolist()])
        out.append(stat_row(BLOCK, f"{name} negative sampling", "rows without repeats", distinct, 1.0, 0.0))
        out.append(stat_row(BLOCK, f"{name} negative sampling", "mean index / (candidates - 1)",
                            float(idx.mean()) / 799, 0.5, 0.02))
    return out
