"""GE2E loss and TAC: the vectorised modules against step-by-step upstream references (same run).

- GE2E similarity matrix + loss, forward and backward, 64 speakers x 10 utterances x 256: vectorised
  ``torch_layers.SpeakerEncoder.loss`` vs the upstream speaker loop (target >= 10x, equal within 1e-6).
- TAC forward, B=16, 6 mics, 64 features, chunk 100, 20 chunks, mixed ``valid_mics``, default hidden 384
  (and 128 for context): ``torch_layers.TAC`` vs the upstream per-example loop (target >= 3x, equal within
  1e-6). Equality is reported in float64 (the maths) and float32 (max |Δ| and the output scale).
"""
from __future__ import annotations

import torch

from bench._seed_references_ge2e_tac import ge2e_loss_loop, ge2e_similarity_matrix_loop, tac_loop
from bench._timing import compare_times


def _ge2e():
    from torch_layers import SpeakerEncoder

    enc = SpeakerEncoder()
    g = torch.Generator().manual_seed(0)
    e = torch.randn(64, 10, 256, generator=g) + 1.5 * torch.randn(64, 1, 256, generator=g)
    e = torch.nn.functional.normalize(e, dim=2)

    def run(fn):
        x = e.clone().requires_grad_(True)
        enc.zero_grad()
        loss = fn(x)
        loss.backward()
        return loss.detach(), x.grad, enc.similarity_weight.grad.clone(), enc.similarity_bias.grad.clone()

    def ours():
        return run(lambda x: enc.loss(x, compute_eer=False)[0])

    def loop():
        return run(lambda x: ge2e_loss_loop(x, enc.similarity_weight, enc.similarity_bias))

    a, b = ours(), loop()
    diff = max(float((u - v).abs().max()) for u, v in zip(a, b))
    with torch.no_grad():
        sim_diff = float((enc.similarity_matrix(e) - ge2e_similarity_matrix_loop(e, enc.similarity_weight,
                                                                                  enc.similarity_bias)).abs().max())
    t = compare_times({"vectorised": ours, "loop": loop}, repeats=5, warmup=1)
    ratio = t["loop"] / t["vectorised"]
    print(f"GE2E sim+loss fwd+bwd 64x10x256: vectorised {t['vectorised'] * 1e3:.1f} ms, speaker loop "
          f"{t['loop'] * 1e3:.1f} ms, speed-up {ratio:.1f}x (target >= 10x: {'OK' if ratio >= 10 else 'MISSED'})")
    print(f"  max |Δ| loss/grads {diff:.3e}, similarity matrix {sim_diff:.3e} (target <= 1e-6: "
          f"{'OK' if max(diff, sim_diff) <= 1e-6 else 'MISSED'})")


def _tac(hidden: int):
    from torch_layers import TAC

    torch.manual_seed(0)
    m = TAC(64, hidden).eval()
    x = torch.randn(16, 6, 64, 100, 20)
    vm = torch.tensor([6, 5, 4, 3, 2, 1, 6, 4, 2, 6, 3, 5, 6, 1, 4, 6])
    state = {k: v.detach() for k, v in m.state_dict().items()}
    with torch.no_grad():
        y, r = m(x, vm), tac_loop(state, x, vm)
        d32 = float((y - r).abs().max())
        scale = float(r.abs().max())
        m64 = TAC(64, hidden, dtype=torch.float64).eval()
        m64.load_state_dict({k: v.double() for k, v in state.items()})
        d64 = float((m64(x.double(), vm) - tac_loop({k: v.double() for k, v in state.items()}, x.double(), vm))
                    .abs().max())
        del y, r, m64
        t = compare_times({"vectorised": lambda: m(x, vm), "loop": lambda: tac_loop(state, x, vm)}, repeats=5, warmup=1)
    ratio = t["loop"] / t["vectorised"]
    print(f"TAC fwd B16 x 6 mics x 64 x 100 x 20, hidden {hidden}: vectorised {t['vectorised'] * 1e3:.0f} ms, "
          f"per-example loop {t['loop'] * 1e3:.0f} ms, speed-up {ratio:.2f}x (target >= 3x: "
          f"{'OK' if ratio >= 3 else 'MISSED'})")
    print(f"  max |Δ| float64 {d64:.3e} (target <= 1e-6: {'OK' if d64 <= 1e-6 else 'MISSED'}); float32 {d32:.3e} "
          f"at output scale {scale:.2f} ({d32 / scale:.1e} relative)")


def main():
    torch.set_grad_enabled(True)
    _ge2e()
    for hidden in (384, 128):
        _tac(hidden)


if __name__ == "__main__":
    main()
