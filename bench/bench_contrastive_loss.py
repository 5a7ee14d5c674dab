"""``torch_layers.ContrastiveLoss`` against a step-by-step re-statement of the seed (same sizes, same run).

B=8 utterances, 500 spectrogram frames of 256 channels, decoder outputs of 256 channels, 250 masked
steps per utterance, 100 negatives. Prints seconds per call (median, interleaved), the speed-up
``seed reference / library`` (> 1 means the library is faster) and the largest difference of the losses
when both receive the same negative indices (and Gumbel noise).
"""
from __future__ import annotations

from ._timing import compare_times
from .results import record

B, T, C, N, MASKED = 8, 500, 256, 100, 250

CONFIGS = [
    ("same utterance, masked (default)", dict()),
    ("batch-wide, masked", dict(sample_from_same_utterance_only=False)),
    ("same utterance, quantized (G=2, V=320)", dict(quantized_targets=True)),
]
#: the rows of bench/results.json this bench records, one per configuration
ROWS = ("same-utterance", "batch-wide", "quantized")
_ROW_OF = {label: row for (label, _), row in zip(CONFIGS, ROWS)}


def _inputs(seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    spec = torch.randn(B, C, T, generator=g)
    masks = torch.zeros(B, C, T)
    for b in range(B):
        masks[b, :, torch.randperm(T, generator=g)[:MASKED]] = 1.0
    dec = torch.randn(B, T, C, generator=g)
    return spec, masks, dec


def main():
    import torch

    import torch_layers

    from ._seed_reference_contrastive import SeedReferenceContrastiveLoss

    torch.manual_seed(0)
    spec, masks, dec = _inputs()
    print(f"B={B}, frames={T}, channels={C}, masked steps/utterance={MASKED}, negatives={N}, "
          f"torch threads={torch.get_num_threads()}")
    for label, cfg in CONFIGS:
        lib = torch_layers.ContrastiveLoss(C, proj_dim=C, num_negatives=N, **cfg).eval()
        ref = SeedReferenceContrastiveLoss(C, proj_dim=C, num_negatives=N, **cfg).eval()
        ref.load_state_dict(lib.state_dict())
        with torch.no_grad():
            got = lib(spec, masks, dec, generator=torch.Generator().manual_seed(1))
            want = ref(spec, masks, dec, negative_indices=lib.negative_indices)
            times = compare_times({
                "seed reference": lambda ref=ref: ref(spec, masks, dec),
                "library": lambda lib=lib: lib(spec, masks, dec),
            }, repeats=5, warmup=1)
        diff = float((got - want).abs().max())
        print(f"{label}: seed reference {times['seed reference'] * 1e3:.1f} ms, library "
              f"{times['library'] * 1e3:.1f} ms, speed-up x{times['seed reference'] / times['library']:.2f}; "
              f"loss {float(want):.3f}, max |diff| with injected negatives {diff:.3e} "
              f"(relative {diff / max(1.0, abs(float(want))):.1e})")
        record("contrastive_loss", _ROW_OF[label], times["seed reference"] / times["library"], unit="x faster",
               fmt=".1f", seconds=times["library"], baseline=times["seed reference"], target=">= 1",
               setup=f"`ContrastiveLoss` B={B}, {T} frames, {C} channels, {N} negatives vs the seed",
               what=_ROW_OF[label])
        if cfg.get("quantized_targets"):
            lib.train()
            ref.train()
            noise = -torch.empty(B, T, 2, 320).exponential_().log()
            with torch.no_grad():
                got = lib(spec, masks, dec, gumbel_noise=noise)
                want = ref(spec, masks, dec, negative_indices=lib.negative_indices, gumbel_noise=noise)
            print(f"  training, injected negatives and Gumbel noise: max |diff| {float((got - want).abs().max()):.3e}")


if __name__ == "__main__":
    main()
