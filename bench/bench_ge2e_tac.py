"""GE2E loss and TAC: the vectorised modules against step-by-step upstream references (same run).

- GE2E similarity matrix + loss, forward and backward, 64 speakers x 10 utterances x 256: vectorised
  ``torch_layers.SpeakerEncoder.loss`` vs the upstream speaker loop (target >= 10x, equal within 1e-6).
- TAC forward, B=16, 6 mics, 64 features, chunk 100, 20 chunks, mixed ``valid_mics``, default hidden 384
  (and 128 for context): ``torch_layers.TAC`` vs the upstream per-example loop (target >= 3x, equal within
  1e-6). Equality is reported in float64 (the maths) and float32 (max |Δ| and the output scale).
  Then where the time goes: a ``torch.profiler`` run of each (the reference's named stages, the library's
  ops by kind), and the GEMM floor: the multiply-adds each must do (library: ``input_tf`` on every mic
  slot, ``avg_tf`` once per position, ``concat_tf``'s own half per mic slot and its averaged half once
  per position; reference: ``concat_tf`` on the full concatenation for every mic slot), the time of those
  GEMMs alone on preallocated buffers, and the speed-up the library would reach if only its GEMMs remained.
"""
from __future__ import annotations

import torch

from bench._seed_references_ge2e_tac import ge2e_loss_loop, ge2e_similarity_matrix_loop, tac_loop
from bench._timing import compare_times
from bench.results import record

#: the rows of bench/results.json this bench records
ROWS = ("ge2e loss", "tac hidden 384", "tac hidden 128")


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
    record("ge2e_tac", "ge2e loss", ratio, unit="x faster", seconds=t["vectorised"], baseline=t["loop"], fmt=".1f",
           target=">= 10", what="GE2E similarity + loss fwd+bwd, 64 speakers × 10 utterances × 256, vs the seed's "
           "speaker loop", notes=f"Δ {diff:.0e}.")
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
        t = compare_times({"vectorised": lambda: m(x, vm), "loop": lambda: tac_loop(state, x, vm)}, repeats=7, warmup=1)
    ratio = t["loop"] / t["vectorised"]
    print(f"TAC fwd B16 x 6 mics x 64 x 100 x 20, hidden {hidden}: vectorised {t['vectorised'] * 1e3:.0f} ms, "
          f"per-example loop {t['loop'] * 1e3:.0f} ms, speed-up {ratio:.2f}x (target >= 3x: "
          f"{'OK' if ratio >= 3 else 'MISSED'})")
    record("ge2e_tac", f"tac hidden {hidden}", ratio, unit="x faster", seconds=t["vectorised"], baseline=t["loop"],
           target=">= 3", what=f"TAC forward B=16, 6 mics, 64 × 100 × 20, hidden {hidden}, vs the seed's per-example "
           "loop", notes=f"Δ {d64:.0e} in float64.")
    print(f"  max |Δ| float64 {d64:.3e} (target <= 1e-6: {'OK' if d64 <= 1e-6 else 'MISSED'}); float32 {d32:.3e} "
          f"at output scale {scale:.2f} ({d32 / scale:.1e} relative)")
    _tac_analysis(m, state, x, vm, t["vectorised"], t["loop"])


_GEMM_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm")
_LIB_KINDS = {
    "GEMMs (baddbmm/bmm/addmm)": _GEMM_OPS,
    "bias broadcast into GEMM outputs (copy_/fill_)": ("aten::copy_", "aten::fill_"),
    "activations in place": ("aten::leaky_relu_", "aten::_prelu_kernel", "aten::relu_"),
    "valid-mic mean (mask, sum, divide)": ("aten::masked_fill_", "aten::sum", "aten::div_", "aten::ge", "aten::arange"),
    "gLN stats + scale/shift + residual": ("aten::var_mean", "aten::addcmul", "aten::add_", "aten::rsqrt", "aten::mul",
                                           "aten::sub", "aten::add"),
}


def _profiles(fns: dict, rounds: int = 3) -> dict:
    """Per callable: ``{op or range name: (self us, total us)}``, the median over interleaved profiled runs."""
    import statistics

    from torch.profiler import ProfilerActivity, profile

    runs = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                fn()
            runs[k].append({e.key: (e.self_cpu_time_total, e.cpu_time_total) for e in prof.key_averages()})
    out = {}
    for k, rs in runs.items():
        keys = dict.fromkeys(key for r in rs for key in r)  # first-seen order: the stages in order
        out[k] = {key: tuple(statistics.median(r.get(key, (0, 0))[i] for r in rs) for i in (0, 1)) for key in keys}
    return out


def _tac_analysis(m, state, x, vm, t_ours: float, t_loop: float):
    """Stage times (profiler wall time of each op / named range on the calling thread) and the GEMM floor."""
    b, mics, feats, k, n = x.shape
    hid = m.hidden_dim
    pos, slots = b * k * n, b * mics * k * n
    macs_lib = slots * feats * hid + pos * hid * hid + slots * hid * feats + pos * hid * feats
    macs_ref = slots * feats * hid + pos * hid * hid + slots * 2 * hid * feats
    with torch.no_grad():
        p = _profiles({"lib": lambda: m(x, vm), "ref": lambda: tac_loop(state, x, vm)})
        lib, ref = p["lib"], p["ref"]
        # the GEMMs alone, each layout as its implementation uses it, outputs preallocated
        w_in, w_avg, w_cat = (state[f"{p}.0.weight"] for p in ("input_tf", "avg_tf", "concat_tf"))
        xs = x.reshape(b * mics, feats, k * n)
        h = torch.randn(b * mics, hid, k * n)
        mean = torch.randn(b, hid, k * n)
        o_h, o_y = torch.empty_like(h), torch.empty(b * mics, feats, k * n)
        o_avg, o_sh = torch.empty_like(mean), torch.empty(b, feats, k * n)
        rows_x, rows_m, rows_cat = torch.randn(slots, feats), torch.randn(pos, hid), torch.randn(slots, 2 * hid)
        r_h, r_a, r_y = o_h.view(slots, hid), torch.empty(pos, hid), torch.empty(slots, feats)

        def lib_gemms():
            torch.bmm(w_in.expand(b * mics, hid, feats), xs, out=o_h)
            torch.bmm(w_avg.expand(b, hid, hid), mean, out=o_avg)
            torch.bmm(w_cat[:, :hid].expand(b * mics, feats, hid), h, out=o_y)
            torch.bmm(w_cat[:, hid:].expand(b, feats, hid), mean, out=o_sh)

        def ref_gemms():
            torch.mm(rows_x, w_in.t(), out=r_h)
            torch.mm(rows_m, w_avg.t(), out=r_a)
            torch.mm(rows_cat, w_cat.t(), out=r_y)

        g = compare_times({"lib": lib_gemms, "ref": ref_gemms}, repeats=5, warmup=1)
    ms = 1e-3  # profiler times are in microseconds
    ref_total = sum(v[1] for key, v in ref.items() if key.startswith("ref: "))
    ref_gemm = sum(ref.get(op, (0, 0))[0] for op in _GEMM_OPS)
    print(f"  where the time goes (median of 3 interleaved profiled runs, ms): reference {ref_total * ms:.0f} of which "
          f"GEMMs {ref_gemm * ms:.0f}:")
    print("    " + ", ".join(f"{key[5:]} {v[1] * ms:.0f}" for key, v in ref.items() if key.startswith("ref: ")))
    lib_total = sum(v[0] for key, v in lib.items() if key.startswith("aten::"))
    kinds = {name: sum(lib.get(op, (0, 0))[0] for op in ops) for name, ops in _LIB_KINDS.items()}
    other = lib_total - sum(kinds.values())
    print(f"    library {lib_total * ms:.0f}: " + ", ".join(f"{name} {v * ms:.0f}" for name, v in kinds.items())
          + f", other {other * ms:.0f}")
    print(f"  GEMM floor: {macs_lib / 1e9:.2f} G multiply-adds (library) vs {macs_ref / 1e9:.2f} G (reference, "
          f"{macs_ref / macs_lib:.2f}x); GEMMs alone on preallocated buffers: library {g['lib'] * 1e3:.0f} ms, "
          f"reference {g['ref'] * 1e3:.0f} ms")
    print(f"  if only the library's GEMMs remained: {t_loop / g['lib']:.1f}x over the measured reference; measured "
          f"library time is {t_ours / g['lib']:.1f}x its GEMM floor")


def main():
    torch.set_grad_enabled(True)
    _ge2e()
    for hidden in (384, 128):
        _tac(hidden)


if __name__ == "__main__":
    main()
