"""``synthesize --precision bf16`` against float32: the error of bfloat16 inference on a default-size RTVC model.

The model: the RTVC preset at its own sizes (28.4 M parameters), TF1's initializers drawn from seed 0
(``Tacotron2Trainer.new``), the pre-net dropout off (``tacotron_dropout_rate=0``: both runs decode the same
function, the difference is the precision alone). Random weights stop at once or never, so the stop projection's
bias is shifted (the same shift in both runs) to put float32's stop of each sentence past step ``--min-steps``
(the shift is chosen from float32's own stop logits; the bfloat16 run may stop elsewhere -- that is one of the
figures). Both runs go through :func:`speechblocks.synthesis.synthesize` (the command's path): float32 on the native C
step (CPU), bfloat16 under ``torch.autocast`` (the framework's loop); the comparison is
:func:`speechblocks.synthesis.precision_error` (mel max/mean ``|Δ|``, alignment argmax agreement, stop steps).

``python -m bench.bench_precision [--device cpu|cuda] [--max-iters 300] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench.results import record

#: the rows of bench/results.json this bench records (a run on the CPU; another device's is printed, not recorded)
ROWS = ("mel max abs", "mel mean abs", "alignment agreement", "time vs fp32")
SENTENCES = ["The birch canoe slid on the smooth planks.",
             "Glue the sheet to the dark blue background.",
             "It's easy to tell the depth of a well.",
             "These days a chicken leg is a rare dish."]


def measure(device: str = "cpu", max_iters: int = 300, min_steps: int = 100, seed: int = 0,
            sentences=SENTENCES, overrides: dict | None = None) -> dict:
    """The figures of the module docstring as a dict (``overrides``: hparams, e.g. smaller sizes for a test)."""
    import torch

    from speechblocks import synthesis
    from speechblocks.tacotron2_hparams import resolve_hparams
    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    hp = resolve_hparams("rtvc", **dict({"tacotron_dropout_rate": 0.0}, **(overrides or {})))
    model = Tacotron2Trainer.new(hp, seed=seed).model.eval().to(device)
    rng = np.random.default_rng(seed)
    spk = rng.normal(size=(len(sentences), hp.speaker_embedding_size)).astype(np.float32)
    spk /= np.linalg.norm(spk, axis=1, keepdims=True)
    encoded = synthesis.encode_texts(list(sentences))
    bias = model.decoder.stop_projection.dense.bias
    with torch.no_grad():
        bias -= 30.0  # no stop: float32's stop logits of every step, to choose the shift from
    probe = synthesis.synthesize(model, "torch", encoded, spk, max_iters, seed)
    logits = [np.log(r.stop) - np.log1p(-r.stop) for r in probe]
    r = hp.outputs_per_step
    # the shift: every sentence's logits of its first min_steps steps stay below 0 (no stop before min_steps)
    shift = -(max(float(x[: min_steps * r].max()) for x in logits) + 30.0) - 1e-3
    with torch.no_grad():
        bias += 30.0 + shift
    out = {"device": str(torch.device(device)), "parameters": int(sum(p.numel() for p in model.parameters())),
           "sentences": len(sentences), "max_iters": max_iters, "stop_bias_shift": shift, "torch": torch.__version__}
    runs = {}
    for precision in ("fp32", "bf16"):
        t0 = time.perf_counter()
        runs[precision] = synthesis.synthesize(model, "torch", encoded, spk, max_iters, seed, precision=precision)
        out[f"{precision}_seconds"] = time.perf_counter() - t0
        out[f"{precision}_loop"] = synthesis.decoder_loop_line(model, "torch", len(sentences), precision)
    out.update(synthesis.precision_error(runs["fp32"], runs["bf16"]))
    out["mel_range"] = [float(min(x.mel.min() for x in runs["fp32"])), float(max(x.mel.max() for x in runs["fp32"]))]
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.bench_precision", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-iters", type=int, default=300)
    p.add_argument("--min-steps", type=int, default=100)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    got = measure(args.device, args.max_iters, args.min_steps)
    print(f"bf16 vs fp32 synthesis, RTVC default sizes ({got['parameters'] / 1e6:.1f} M parameters, random weights, "
          f"{got['sentences']} sentences, {got['device']}, torch {got['torch']}):")
    print(f"  mel |delta| max {got['mel_max_abs']:.4f}, mean {got['mel_mean_abs']:.4f} (fp32 mel range "
          f"{got['mel_range'][0]:.2f}..{got['mel_range'][1]:.2f}); alignment argmax agreement "
          f"{100 * got['argmax_agreement']:.1f} %; stop steps fp32/bf16 {got['stop_steps']}")
    print(f"  fp32 {got['fp32_seconds']:.1f} s ({got['fp32_loop']}); bf16 {got['bf16_seconds']:.1f} s "
          f"({got['bf16_loop']})")
    if got["device"] == "cpu":
        record_results(got, args.min_steps)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(got, f, indent=1)
            f.write("\n")


def record_results(got: dict, min_steps: int) -> None:
    """The rows from :func:`measure`'s figures."""
    setup = (f"`synthesize --precision bf16` vs float32, the RTVC preset at its own sizes "
             f"({got['parameters'] / 1e6:.1f} M parameters, TF1's initializers from seed 0, dropout off, the stop bias "
             f"shifted so float32 runs past step {min_steps}), {got['sentences']} sentences in one batch, at most "
             f"{got['max_iters']} steps, {got['device']}, torch {got['torch']}: fp32 on the native batched C step, "
             "bf16 under `torch.autocast` (the framework's loop); one synthesis each (`bench/bench_precision.py`)")
    stops = "; stop steps fp32/bf16 " + ", ".join(f"{a}/{b}" for a, b in got["stop_steps"])
    record("precision", "mel max abs", got["mel_max_abs"], fmt=".1e", label="bf16 synthesis, mel max |Δ|",
           setup=setup, what="the largest |bf16 − fp32| of the mel outputs over the frames both kept",
           notes=f"fp32 mel range {got['mel_range'][0]:.2f}..{got['mel_range'][1]:.2f}{stops}.")
    record("precision", "mel mean abs", got["mel_mean_abs"], fmt=".1e", label="bf16 synthesis, mel mean |Δ|",
           setup=setup, what="the mean |bf16 − fp32| of the mel outputs, sentence by sentence, averaged")
    record("precision", "alignment agreement", 100 * got["argmax_agreement"], unit=" %", fmt=".1f",
           label="bf16 synthesis, alignment argmax agreement", setup=setup,
           what="the share of decoder steps whose alignment argmax (the attended symbol) is fp32's")
    record("precision", "time vs fp32", got["bf16_seconds"] / got["fp32_seconds"], unit="x", fmt=".2f",
           seconds=got["bf16_seconds"], baseline=got["fp32_seconds"], label="bf16 synthesis time vs fp32",
           setup=setup, what="seconds of the bf16 synthesis over the fp32 one's (one call each, not interleaved)",
           notes=f"bf16: {got['bf16_loop']}; fp32: {got['fp32_loop']}.")


if __name__ == "__main__":
    main()
