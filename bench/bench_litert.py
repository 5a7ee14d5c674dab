"""The builtin-ops-only LiteRT Tacotron-2 (``Tacotron2.export_litert`` + ``speechblocks.litert.LiteRTTacotron2``)
against the in-process Keras model's ``Tacotron2.synthesize`` (RTVC sizes).

Same weights (random TF1 variables, the stop bias at -1e3 so every run decodes ``max_iters`` steps),
``tacotron_dropout_rate=0`` (deterministic: the two must agree within ``TOL`` before timing), batch 1, ``SYMBOLS``
symbols, ``STEPS`` decoder steps. The LiteRT side is the numpy host loop: the encoder model once, the decoder-step
model per step, the postnet model; the Keras side ``synthesize`` (at batch 1 its decoder in the native step,
:mod:`tf_layers._native`). Interleaved
rounds, medians; the ratio is LiteRT / Keras (below 1: LiteRT faster). ``main(steps=..., rounds=...)`` for a quick
check at small sizes.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from bench._timing import compare_times
from bench.bench_tacotron2 import random_weights
from bench.results import record

#: the row of bench/results.json this bench records (at its own sizes only: a quick check at others records nothing)
ROWS = ("vs keras",)
BATCH, SYMBOLS, STEPS = 1, 100, 200
ROUNDS = 5
TOL = 1e-4


def main(steps: int = STEPS, rounds: int = ROUNDS, symbols: int = SYMBOLS) -> None:
    import tensorflow as tf

    from speechblocks.litert import LiteRTTacotron2
    from tf_layers import Tacotron2

    threads = os.cpu_count() or 1
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    root = tempfile.mkdtemp(prefix="bench_litert_")
    try:
        model = Tacotron2("rtvc", n_symbols=66, tacotron_dropout_rate=0.0)
        model.load_tf1_weights(random_weights({k: v.shape for k, v in model.tf1_weights().items()}))
        rng = np.random.default_rng(0)
        ids = rng.integers(1, 66, (BATCH, symbols)).astype(np.int32)
        lengths = np.full((BATCH,), symbols, np.int32)
        spk = rng.standard_normal((BATCH, model.hparams.speaker_embedding_size)).astype(np.float32)
        spk /= np.linalg.norm(spk, axis=1, keepdims=True)
        model.export_litert(root)
        lite = LiteRTTacotron2(root, num_threads=threads)

        def call_lite():
            return lite.synthesize(ids, lengths, spk, max_iters=steps)["mel_outputs"]

        def call_model():
            return model.synthesize(ids, lengths, spk, max_iters=steps)["mel_outputs"]

        got, want = call_lite(), call_model()
        assert got.shape == want.shape == (BATCH, steps * model.hparams.outputs_per_step, 80), (got.shape, want.shape)
        diff = float(np.max(np.abs(got - want)))
        assert diff <= TOL, f"LiteRT differs from the in-process model by {diff:.2e}"
        print(f"LiteRT == in-process synthesis before timing: max |mel diff| {diff:.1e} (tolerance {TOL:g})")
        t = compare_times({"lite": call_lite, "model": call_model}, repeats=rounds, warmup=1)
        print(f"threads {threads}, B={BATCH}, {symbols} symbols, {steps} steps, medians of {rounds} interleaved rounds")
        print(f"synthesis: LiteRT {t['lite'] * 1e3:.0f} ms, Keras synthesize {t['model'] * 1e3:.0f} ms, "
              f"ratio {t['lite'] / t['model']:.2f}x; per step: LiteRT {t['lite'] / steps * 1e3:.2f} ms, "
              f"Keras {t['model'] / steps * 1e3:.2f} ms")
        if (steps, symbols) == (STEPS, SYMBOLS):
            record_result(t, threads, rounds, diff)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def record_result(t: dict, threads: int, rounds: int, diff: float) -> None:
    """The row from the medians (``lite``, ``model``: seconds of a synthesis)."""
    record("litert", "vs keras", t["lite"] / t["model"], unit="x", fmt=".2f", seconds=t["lite"], baseline=t["model"],
           label="LiteRT Tacotron-2 vs Keras `synthesize`",
           what=f"LiteRT Tacotron-2 (`export_litert`, builtins only, XNNPACK) in `speechblocks.litert` vs Keras "
           f"`synthesize` (the native step at batch 1), B={BATCH}, {SYMBOLS} symbols, {STEPS} steps, {threads} "
           f"threads, outputs equal before timing (≤ {diff:.1e}), median of {rounds} interleaved rounds",
           notes=f"{t['lite'] * 1e3:.0f} ms vs {t['model'] * 1e3:.0f} ms; {t['lite'] / STEPS * 1e3:.2f} ms a step "
           f"vs {t['model'] / STEPS * 1e3:.2f}.")


if __name__ == "__main__":
    main()
