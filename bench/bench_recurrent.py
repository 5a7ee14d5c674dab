"""Speed of the recurrent blocks: Keras vs the TF1 legacy graph, torch vs the fused ``torch.nn.LSTM``.

Measured side by side in one run, interleaved (the TF1 graph runs in a ``TF_USE_LEGACY_KERAS=1``
subprocess that answers timing requests between the Keras timings). Targets (issue #3): Keras <= 1.0x the
TF1 graph; torch <= 2x the fused ``nn.LSTM`` of the same size.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from bench._timing import compare_times

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENCODER = dict(batch=16, time=200, input=512, size=256)
DECODER = dict(batch=32, input=768, size=1024, layers=2)
REPEATS = 7


class LegacyTimer:
    """The TF1 graph in a subprocess: ``time(n)`` runs the op n times there and returns seconds."""

    def __init__(self, kind: str, sizes: dict):
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "bench._legacy_timing", kind, json.dumps(sizes)], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.close()
            raise RuntimeError(f"legacy timing subprocess failed to start ({line!r})")

    def time(self, n: int) -> float:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def _interleaved(keras_fn, legacy: LegacyTimer, n: int, repeats: int = REPEATS) -> tuple[float, float]:
    """Median seconds per call of ``keras_fn`` and of the legacy op, requests interleaved."""
    for _ in range(2):
        keras_fn()
    legacy.time(2)
    ks, ls = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            keras_fn()
        ks.append((time.perf_counter() - t0) / n)
        ls.append(legacy.time(n) / n)
    return statistics.median(ks), statistics.median(ls)


def _lengths(batch, time_steps):
    return [time_steps - (7 * i) % (time_steps // 2) for i in range(batch)]


def bench_keras_encoder():
    import tensorflow as tf

    import tf_layers

    s = ENCODER
    enc = tf_layers.EncoderRNN(size=s["size"], zoneout=0.1)
    x = tf.constant(np.random.default_rng(0).standard_normal((s["batch"], s["time"], s["input"])).astype(np.float32))
    fn = tf.function(lambda a, b: enc(a, b, training=False))
    for label, lengths in (("mixed lengths", _lengths(s["batch"], s["time"])), ("full lengths", [s["time"]] * s["batch"])):
        lens = tf.constant(lengths, tf.int32)
        legacy = LegacyTimer("encoder", {**s, "lengths": lengths})
        try:
            tk, tl = _interleaved(lambda lens=lens: fn(x, lens).numpy(), legacy, n=3)
        finally:
            legacy.close()
        print(f"encoder B={s['batch']} T={s['time']} {s['input']}->2x{s['size']} inference, {label} "
              f"(mean {np.mean(lengths):.0f}): Keras EncoderRNN (tf.function) {tk * 1e3:.1f} ms, TF1 graph (session) "
              f"{tl * 1e3:.1f} ms -> ratio {tk / tl:.2f}x (target <= 1.0x)")


def bench_keras_decoder_step():
    import tensorflow as tf

    import tf_layers

    s = DECODER
    g = np.random.default_rng(0)
    dec = tf_layers.DecoderRNN(layers=s["layers"], size=s["size"], zoneout=0.1)
    x = tf.constant(g.standard_normal((s["batch"], s["input"])).astype(np.float32))
    states = tuple((tf.constant(g.standard_normal((s["batch"], s["size"])).astype(np.float32)),
                    tf.constant(g.standard_normal((s["batch"], s["size"])).astype(np.float32))) for _ in range(s["layers"]))
    fn = tf.function(lambda a, st: dec(a, st, training=False))
    legacy = LegacyTimer("decoder_step", s)
    try:
        tk, tl = _interleaved(lambda: fn(x, states)[0].numpy(), legacy, n=20)
    finally:
        legacy.close()
    print(f"decoder one step B={s['batch']} {s['input']}->{s['layers']}x{s['size']} inference: Keras DecoderRNN (tf.function) "
          f"{tk * 1e3:.2f} ms, TF1 graph (session) {tl * 1e3:.2f} ms -> ratio {tk / tl:.2f}x (target <= 1.0x)")


def bench_torch():
    import torch

    import torch_layers

    s = ENCODER
    torch.manual_seed(0)
    x = torch.randn(s["batch"], s["time"], s["input"])
    lens = torch.tensor(_lengths(s["batch"], s["time"]))
    enc = torch_layers.EncoderRNN(s["input"], size=s["size"], zoneout=0.1).eval()
    scripted = torch.jit.script(enc)
    ref = torch.nn.LSTM(s["input"], s["size"], batch_first=True, bidirectional=True).eval()
    with torch.inference_mode():
        t = compare_times({"eager": lambda: enc(x, lens), "script": lambda: scripted(x, lens), "lstm": lambda: ref(x)},
                          repeats=REPEATS)
    print(f"encoder B={s['batch']} T={s['time']} {s['input']}->2x{s['size']} inference: torch EncoderRNN eager "
          f"{t['eager'] * 1e3:.1f} ms ({t['eager'] / t['lstm']:.2f}x), jit.script {t['script'] * 1e3:.1f} ms "
          f"({t['script'] / t['lstm']:.2f}x) vs nn.LSTM(bidirectional) {t['lstm'] * 1e3:.1f} ms (target <= 2x)")

    d = DECODER
    dec = torch_layers.DecoderRNN(d["input"], layers=d["layers"], size=d["size"], zoneout=0.1).eval()
    sdec = torch.jit.script(dec)
    ref = torch.nn.LSTM(d["input"], d["size"], num_layers=d["layers"]).eval()
    xs = torch.randn(d["batch"], d["input"])
    states = [(torch.randn(d["batch"], d["size"]), torch.randn(d["batch"], d["size"])) for _ in range(d["layers"])]
    h0 = torch.stack([h for _, h in states])
    c0 = torch.stack([c for c, _ in states])
    with torch.inference_mode():
        t = compare_times({"eager": lambda: dec(xs, states), "script": lambda: sdec(xs, states),
                           "lstm": lambda: ref(xs.unsqueeze(0), (h0, c0))}, repeats=REPEATS * 3)
    print(f"decoder one step B={d['batch']} {d['input']}->{d['layers']}x{d['size']} inference: torch DecoderRNN eager "
          f"{t['eager'] * 1e3:.2f} ms ({t['eager'] / t['lstm']:.2f}x), jit.script {t['script'] * 1e3:.2f} ms "
          f"({t['script'] / t['lstm']:.2f}x) vs nn.LSTM(num_layers={d['layers']}) {t['lstm'] * 1e3:.2f} ms (target <= 2x)")


def main():
    bench_keras_encoder()
    bench_keras_decoder_step()
    bench_torch()


if __name__ == "__main__":
    main()
