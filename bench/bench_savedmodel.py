"""The exported SavedModel's free-running synthesis against the in-process Keras model (RTVC sizes).

``Tacotron2.export_serving`` writes the whole synthesis (encoder, the decoder ``tf.while_loop`` with the stop rule,
postnet) as a SavedModel; a server reloads it with ``tf.saved_model.load`` and calls ``serve``. The baseline, in the
same process and run: the in-process model's documented fast path ``Tacotron2.synthesize`` (at batch 1 the decoder
in the native step, :mod:`tf_layers._native`, between the cached encoder and post-net functions). Same weights
(random TF1 variables, the stop bias at -1e3 so every run decodes ``max_iters`` steps), ``tacotron_dropout_rate=0``
(deterministic: the two must agree within ``TOL`` before timing), batch 1, 100 symbols, ``STEPS`` decoder steps and
``max_iters=1`` (so the cost of one step is ``(T(STEPS) - T(1)) / (STEPS - 1)``). Interleaved rounds, medians;
ratios are SavedModel / in-process (below 1: the SavedModel faster).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from bench._timing import compare_times
from bench.bench_tacotron2 import random_weights
from bench.results import record

#: the rows of bench/results.json this bench records
ROWS = ("vs synthesize", "one step", "max_iters 1")
BATCH, SYMBOLS, STEPS = 1, 100, 200
ROUNDS = 7
TOL = 1e-4


def main() -> None:
    import tensorflow as tf

    from tf_layers import Tacotron2

    threads = os.cpu_count() or 1
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    root = tempfile.mkdtemp(prefix="bench_savedmodel_")
    try:
        models = {}
        for steps in (STEPS, 1):
            model = Tacotron2("rtvc", n_symbols=66, tacotron_dropout_rate=0.0, max_iters=steps)
            model.load_tf1_weights(random_weights({k: v.shape for k, v in model.tf1_weights().items()}))
            models[steps] = model
        rng = np.random.default_rng(0)
        ids = rng.integers(1, 66, (BATCH, SYMBOLS)).astype(np.int32)
        lengths = np.full((BATCH,), SYMBOLS, np.int32)
        spk = rng.standard_normal((BATCH, models[STEPS].hparams.speaker_embedding_size)).astype(np.float32)
        spk /= np.linalg.norm(spk, axis=1, keepdims=True)

        served = {}
        for steps, model in models.items():
            directory = model.export_serving(os.path.join(root, f"steps{steps}"))
            served[steps] = tf.saved_model.load(directory)  # the object must stay alive: it owns the variables

        def call_served(steps):
            out = served[steps].serve(inputs=ids, input_lengths=lengths, speaker_embeddings=spk)
            return out["mel_outputs"].numpy()

        def call_model(steps):
            return models[steps].synthesize(ids, lengths, spk, max_iters=steps)["mel_outputs"]

        worst = 0.0
        for steps in (STEPS, 1):
            got, want = call_served(steps), call_model(steps)
            r = models[steps].hparams.outputs_per_step
            assert got.shape == want.shape == (BATCH, steps * r, 80), (got.shape, want.shape)
            diff = float(np.max(np.abs(got - want)))
            assert diff <= TOL, f"the SavedModel differs from the in-process model by {diff:.2e} ({steps} steps)"
            worst = max(worst, diff)
        print(f"SavedModel == in-process synthesis before timing: max |mel diff| {worst:.1e} ({STEPS} and 1 steps, "
              f"tolerance {TOL:g})")

        t = compare_times({"served": lambda: call_served(STEPS), "model": lambda: call_model(STEPS),
                           "served1": lambda: call_served(1), "model1": lambda: call_model(1)},
                          repeats=ROUNDS, warmup=2)
        step_served = (t["served"] - t["served1"]) / (STEPS - 1)
        step_model = (t["model"] - t["model1"]) / (STEPS - 1)
        print(f"threads {threads}, B={BATCH}, {SYMBOLS} symbols, medians of {ROUNDS} interleaved rounds")
        print(f"synthesis, {STEPS} steps: SavedModel {t['served']:.3f} s, in-process synthesize {t['model']:.3f} s, "
              f"ratio {t['served'] / t['model']:.2f}x")
        print(f"max_iters=1 (encoder, one step, postnet): SavedModel {t['served1'] * 1e3:.1f} ms, "
              f"in-process {t['model1'] * 1e3:.1f} ms, ratio {t['served1'] / t['model1']:.2f}x")
        print(f"one decoder step: SavedModel {step_served * 1e3:.2f} ms, in-process {step_model * 1e3:.2f} ms, "
              f"ratio {step_served / step_model:.2f}x")
        record_results(t, threads, worst)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def record_results(t: dict, threads: int, diff: float) -> None:
    """The rows from the medians (``served``, ``model``: ``STEPS`` steps; ``served1``, ``model1``: ``max_iters=1``)."""
    setup = (f"`Tacotron2.export_serving` SavedModel (reloaded with `tf.saved_model.load`) vs the in-process "
             f"`synthesize` (the native step at batch 1), RTVC sizes, B={BATCH}, {SYMBOLS} symbols, {threads} threads, "
             f"outputs equal before timing (≤ {diff:.1e}), median of {ROUNDS} interleaved rounds "
             "(`bench/bench_savedmodel.py`)")
    step_served = (t["served"] - t["served1"]) / (STEPS - 1)
    step_model = (t["model"] - t["model1"]) / (STEPS - 1)
    for row, label, what, served, model in (
            ("vs synthesize", "SavedModel `export_serving` vs `synthesize`", f"free-running synthesis, {STEPS} steps",
             t["served"], t["model"]),
            ("one step", "SavedModel decoder step vs `synthesize`'s",
             f"one decoder step, (T({STEPS}) − T(1)) / {STEPS - 1}", step_served, step_model),
            ("max_iters 1", "SavedModel `max_iters=1` vs `synthesize`", "`max_iters=1` (encoder, one step, postnet)",
             t["served1"], t["model1"])):
        record("savedmodel", row, served / model, unit="x", fmt=".2f", seconds=served, baseline=model, label=label,
               setup=setup, what=what, notes=f"{served * 1e3:.1f} ms vs {model * 1e3:.1f} ms.")


if __name__ == "__main__":
    main()
