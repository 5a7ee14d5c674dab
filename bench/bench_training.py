"""``speechblocks train``: steps/s and mel frames/s of the training loop, per framework, and where a step's time goes.

Each row runs the command's own loop, :func:`speechblocks.training.run.train` (reading the ``.npy`` files and
``prepare_batch``, the learning rate, the framework trainer's step: forward teacher forced, the loss of
``add_loss``, backward, global-norm clipping, TF1's Adam; the summaries), on a synthetic preprocessed folder, and
reports over the measured steps (``TrainResult.timings``): steps/s, real (unpadded) mel frames/s, and the split of a
step's wall time into **data** (reading and padding the batch) and **step** (the optimizer step). Warm-up steps
come first and are left out (the Keras step is traced once there); the checkpoints at the start and the end fall
outside the timed steps.

Sizes:

* ``demo``: ``make train-demo``'s model (``bench/train_demo.py``'s ``SMALL`` over the RTVC preset: encoder 128,
  decoder 2 x 192 ... r = 5) at its batch of 16;
* ``rtvc``: the RTVC preset as the originals trained it (decoder 2 x 1024, postnet 512, r = 2) at a batch of 4.

The utterances have the train-demo corpus's lengths (flite sentences of 4-12 words at 16 kHz: 150-300 mel frames,
30-90 characters), 80 mels and 256-d speaker embeddings. Every (framework, size, threads) runs in its own process,
one after the other (the two frameworks' thread pools never share the cores), with 1 thread (torch
``set_num_threads(1)``; TensorFlow 1 intra-op and 1 inter-op thread) and with the frameworks' defaults (every core).
On a machine where other processes hold the cores, the default threads can be many times slower than one
(measured here, 2 cores at load 4-5: a torch step at the demo size 14 s with 2 threads, 1.6 s with 1).

Environment: ``BENCH_TRAINING_STEPS`` measured steps (default 10), ``BENCH_TRAINING_WARMUP`` (default 2),
``BENCH_TRAINING_SIZES`` (default ``demo,rtvc``), ``BENCH_TRAINING_FRAMEWORKS`` (default ``torch,keras``),
``BENCH_TRAINING_THREADS`` (default ``1,all``).
``python -m bench.bench_training`` prints the rows.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from bench.results import record

#: the rows of bench/results.json this bench records: (framework, size, threads) with threads 1 or the default (every
#: core); another BENCH_TRAINING_THREADS count is printed, not recorded
ROWS = ("torch demo 1 thread", "torch demo default threads", "keras demo 1 thread", "keras demo default threads",
        "torch rtvc 1 thread", "torch rtvc default threads", "keras rtvc 1 thread", "keras rtvc default threads")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = {"demo": 16, "rtvc": 4}
UTTERANCES = 192
FRAMES = (150, 300)
CHARACTERS = (30, 90)


def _settings(size: str) -> dict:
    from bench.train_demo import SMALL

    out = dict(SMALL) if size == "demo" else {}
    out.update(tacotron_batch_size=BATCH[size], tacotron_checkpoint_interval=10 ** 9,
               tacotron_eval_interval=10 ** 9, tacotron_summary_interval=100)
    return out


def write_data(root: str, seed: int = 0) -> str:
    """A preprocessed folder (``train.txt``, ``mels/``, ``embeds/``) of :data:`UTTERANCES` synthetic utterances."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, "mels"), exist_ok=True)
    os.makedirs(os.path.join(root, "embeds"), exist_ok=True)
    words = ["the", "license", "software", "program", "copy", "terms", "work", "any", "source", "code", "this",
             "under", "distribute", "modify", "permission", "notice", "version", "public", "general", "free"]
    lines = []
    for i in range(UTTERANCES):
        frames = int(rng.integers(FRAMES[0], FRAMES[1] + 1))
        text = ""
        target = int(rng.integers(CHARACTERS[0], CHARACTERS[1] + 1))
        while len(text) < target:
            text += ("" if not text else " ") + words[int(rng.integers(len(words)))]
        np.save(os.path.join(root, "mels", f"mel-{i:04d}.npy"),
                rng.uniform(-4, 4, size=(frames, 80)).astype(np.float32))
        embed = rng.normal(size=256).astype(np.float32)
        np.save(os.path.join(root, "embeds", f"embed-{i:04d}.npy"), embed / np.linalg.norm(embed))
        lines.append(f"audio-{i:04d}.npy|mel-{i:04d}.npy|embed-{i:04d}.npy|{frames * 200}|{frames}|{text}.")
    with open(os.path.join(root, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return root


def measure(framework: str, size: str, data: str, run: str, steps: int, warmup: int, threads: str = "all") -> dict:
    """One row, in this process: ``warmup + steps`` steps of the ``speechblocks train`` loop."""
    from speechblocks.cli import _trainer_class
    from speechblocks.training.run import TrainOptions, train

    if threads != "all":  # before the framework starts its thread pools
        if framework == "torch":
            import torch

            torch.set_num_threads(int(threads))
        else:
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(int(threads))
            tf.config.threading.set_inter_op_parallelism_threads(int(threads))
    backend = _trainer_class(framework)
    result = train(backend, TrainOptions(data, run, "rtvc", _settings(size), steps=warmup + steps, progress=False))
    timed = result.timings[warmup:]
    load = sum(t[0] for t in timed)
    step = sum(t[1] for t in timed)
    frames = sum(t[2] for t in timed)
    return {"framework": framework, "size": size, "batch": BATCH[size], "steps": len(timed), "threads": threads,
            "warmup_s": sum(t[0] + t[1] for t in result.timings[:warmup]), "load_s": load, "step_s": step,
            "frames": frames, "loss": result.losses[-1]["loss"]}


def _row(r: dict) -> str:
    total = r["load_s"] + r["step_s"]
    return (f"train {r['framework']:5s} {r['size']:4s} B={r['batch']:2d} threads {r['threads']:>3s}: "
            f"{r['steps'] / total:6.3f} steps/s, "
            f"{r['frames'] / total:7.0f} mel frames/s; per step {1000 * total / r['steps']:7.0f} ms = data "
            f"{1000 * r['load_s'] / r['steps']:5.1f} ms ({100 * r['load_s'] / total:4.1f} %) + step "
            f"{1000 * r['step_s'] / r['steps']:7.0f} ms; warm-up {r['warmup_s']:.1f} s")


def main() -> None:
    steps = int(os.environ.get("BENCH_TRAINING_STEPS", "10"))
    warmup = int(os.environ.get("BENCH_TRAINING_WARMUP", "2"))
    sizes = os.environ.get("BENCH_TRAINING_SIZES", "demo,rtvc").split(",")
    frameworks = os.environ.get("BENCH_TRAINING_FRAMEWORKS", "torch,keras").split(",")
    thread_counts = os.environ.get("BENCH_TRAINING_THREADS", "1,all").split(",")
    print(f"speechblocks train loop: {steps} steps timed after {warmup} warm-up, synthetic utterances of "
          f"{FRAMES[0]}-{FRAMES[1]} frames; data = reading + padding, step = forward + backward + clip + Adam",
          flush=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(os.path.join(tmp, "data"))
        for size in sizes:
            for framework in frameworks:
                for threads in thread_counts:
                    run = os.path.join(tmp, f"run-{framework}-{size}-{threads}")
                    code = (f"import json, bench.bench_training as m; print(json.dumps(m.measure({framework!r}, "
                            f"{size!r}, {data!r}, {run!r}, {steps}, {warmup}, {threads!r})))")
                    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
                    if proc.returncode != 0:
                        print(f"train {framework} {size} threads {threads}: FAILED\n{proc.stderr[-2000:]}", flush=True)
                        continue
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    print(_row(r), flush=True)
                    record_row(r)


def record_row(r: dict) -> None:
    """One :func:`measure` result as its row (threads ``1`` or ``all``; another count is not recorded)."""
    if r["threads"] not in ("1", "all"):
        return
    threads = "1 thread" if r["threads"] == "1" else "default threads"
    shown = "1 thread" if r["threads"] == "1" else f"default threads ({os.cpu_count()})"
    total = r["load_s"] + r["step_s"]
    per_step = total / r["steps"]
    sizes = ("the train-demo sizes (encoder 128, decoder 2×192, r = 5, B=16)" if r["size"] == "demo" else
             "the RTVC sizes (decoder 2×1024, postnet 512, r = 2, B=4)")
    name = "Keras" if r["framework"] == "keras" else "torch"
    demo = r["size"] == "demo"
    record("training", f"{r['framework']} {r['size']} {threads}", per_step * 1e3 if demo else per_step,
           unit=" ms" if demo else " s", fmt=".0f" if demo else ".2f",
           label=f"train step, {name}, {'demo' if demo else 'RTVC'} sizes, {shown}",
           setup=f"`speechblocks train` loop (the command's own loop, synthetic utterances of {FRAMES[0]}–{FRAMES[1]} "
           f"frames and {CHARACTERS[0]}–{CHARACTERS[1]} symbols, {r['steps']} steps after the warm-up, each "
           "(framework, size, threads) in its own process): a step (data + forward + backward + clip + Adam) "
           "(`bench/bench_training.py`)", what=f"{name}, {sizes}, {shown}",
           notes=f"{r['frames'] / total:.0f} mel frames/s; data {100 * r['load_s'] / total:.1f} % of a step.")


if __name__ == "__main__":
    main()
