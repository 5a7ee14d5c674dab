"""bf16 learning on the CPU: ``speechblocks train``'s loop at the train-demo sizes in fp32 and in bf16, side by side.

The corpus is made here (no ``flite`` needed): ``--utterances`` sentences of 8-20 random letters; each letter
speaks 3 mel frames of its own fixed random 80-channel spectrum (a learnable text-to-mel map), one random GE2E-size
speaker embedding per utterance. Both runs use the train-demo model (:data:`bench.train_demo.SMALL`), the original
loss, Adam and schedule, the guided-attention term of the demo (1.0), the same seed and data order; the only
difference is ``--precision`` (``trainer_class("torch", device="cpu", precision=...)``, what ``speechblocks train
--precision`` builds). Writes the loss of every step of both runs as CSV and a JSON summary.

``python -m bench.precision_train_demo [--steps 300] [--batch-size 16] [--out docs/data/precision-train-demo]``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import time

import numpy as np


def make_corpus(root: str, n: int, seed: int = 0) -> None:
    """``train.txt`` + ``mels/`` + ``embeds/`` of the learnable synthetic corpus (module docstring)."""
    rng = np.random.default_rng(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    book = rng.uniform(-4.0, 0.0, size=(len(letters), 80)).astype(np.float32)
    os.makedirs(os.path.join(root, "mels"), exist_ok=True)
    os.makedirs(os.path.join(root, "embeds"), exist_ok=True)
    lines = []
    for i in range(n):
        text = "".join(rng.choice(list(letters), size=int(rng.integers(8, 21))))
        mel = np.repeat(book[[letters.index(c) for c in text]], 3, axis=0)
        embed = rng.normal(size=256).astype(np.float32)
        np.save(os.path.join(root, "mels", f"mel-{i}.npy"), mel)
        np.save(os.path.join(root, "embeds", f"embed-{i}.npy"), embed / np.linalg.norm(embed))
        lines.append(f"audio-{i}.npy|mel-{i}.npy|embed-{i}.npy|{len(mel) * 200}|{len(mel)}|{text}")
    with open(os.path.join(root, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def run(precision: str, data: str, run_dir: str, steps: int, batch_size: int) -> tuple[list[float], float]:
    from bench.train_demo import SMALL
    from speechblocks.commands._common import trainer_class
    from speechblocks.training.run import TrainOptions, train

    overrides = dict(SMALL, tacotron_batch_size=batch_size, tacotron_test_size=8, tacotron_eval_interval=10 ** 6,
                     tacotron_checkpoint_interval=10 ** 6)
    options = TrainOptions(data, run_dir, "rtvc", overrides, steps=steps, progress=False, guided_attention=1.0,
                           precision=precision)
    t0 = time.perf_counter()
    result = train(trainer_class("torch", device="cpu", precision=precision), options)
    return [float(x["loss"]) for x in result.losses], time.perf_counter() - t0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.precision_train_demo", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--utterances", type=int, default=128)
    p.add_argument("--out", default="docs/data/precision-train-demo")
    args = p.parse_args(argv)
    curves, seconds = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        make_corpus(os.path.join(tmp, "data"), args.utterances)
        for precision in ("fp32", "bf16"):
            curves[precision], seconds[precision] = run(precision, os.path.join(tmp, "data"),
                                                        os.path.join(tmp, precision), args.steps, args.batch_size)
            print(f"{precision}: {args.steps} steps in {seconds[precision]:.0f} s, loss {curves[precision][0]:.3f} "
                  f"-> mean of the last 20 {np.mean(curves[precision][-20:]):.3f}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "losses.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "fp32", "bf16"])
        for i, (a, b) in enumerate(zip(curves["fp32"], curves["bf16"])):
            w.writerow([i + 1, f"{a:.5f}", f"{b:.5f}"])
    summary = {"steps": args.steps, "batch_size": args.batch_size, "utterances": args.utterances,
               "seconds": seconds, "load_average": os.getloadavg(),
               "first": {k: v[0] for k, v in curves.items()},
               "last20_mean": {k: float(np.mean(v[-20:])) for k, v in curves.items()},
               "max_abs_gap_last20": float(np.max(np.abs(np.subtract(curves["fp32"][-20:], curves["bf16"][-20:]))))}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
