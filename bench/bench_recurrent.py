"""Speed of the recurrent blocks: Keras vs the TF1 legacy graph, torch vs the fused ``torch.nn.LSTM``.

Keras vs TF1 under identical conditions: each side runs in its own clean timing subprocess
(``bench._keras_timing`` / ``bench._legacy_timing`` with ``TF_USE_LEGACY_KERAS=1``; neither imports torch),
same thread settings and inputs, alternating rounds, medians (see :func:`method_line`). Targets (issue #3): Keras <=
1.0x the TF1 graph; torch <= 2x the fused ``nn.LSTM`` of the same size; issue #23 tightened the encoder's: torch
``EncoderRNN`` <= 1.5x ``nn.LSTM(bidirectional=True)`` (eager inference runs the native encoder scan; the eager call
through the TorchScript loop, ``SPEECHBLOCKS_NATIVE=0``, is printed beside it).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import numpy as np

from bench._timing import compare_times, native_code
from bench.results import record

#: the rows of bench/results.json this bench records
ROWS = ("keras encoder mixed", "keras encoder full", "keras decoder step", "torch encoder", "torch decoder step")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENCODER = dict(batch=16, time=200, input=512, size=256)
DECODER = dict(batch=32, input=768, size=1024, layers=2)
REPEATS = 7
ROUNDS = 15
WARMUP = 2
THREADS = os.cpu_count() or 1  # TF intra-op and inter-op threads of both timing subprocesses


class TimingServer:
    """A timing server subprocess (``bench._legacy_timing`` or ``bench._keras_timing``): ``time(n)`` runs its
    op n times there and returns seconds."""

    def __init__(self, module: str, kind: str, sizes: dict, legacy: bool):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        env.pop("TF_USE_LEGACY_KERAS", None)
        if legacy:
            env["TF_USE_LEGACY_KERAS"] = "1"
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", module, kind, json.dumps(sizes), str(THREADS)], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.close()
            raise RuntimeError(f"{module} timing subprocess failed to start ({line!r})")

    def time(self, n: int) -> float:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def _interleaved(kind: str, sizes: dict, n: int, rounds: int = ROUNDS) -> tuple[float, float]:
    """Median seconds per call of the Keras layer and of the TF1 graph, each in its own clean subprocess.

    Both servers are up at once and answer in alternating order (Keras first in even rounds, TF1 first in
    odd ones); each answer is the mean of ``n`` back-to-back calls, and the result the median over rounds.
    """
    servers = {}
    try:
        servers["keras"] = TimingServer("bench._keras_timing", kind, sizes, legacy=False)
        servers["legacy"] = TimingServer("bench._legacy_timing", kind, sizes, legacy=True)
        for srv in servers.values():  # warm-up, beyond the servers' own 3 calls
            srv.time(WARMUP)
        samples = {k: [] for k in servers}
        for r in range(rounds):
            for k in (("keras", "legacy") if r % 2 == 0 else ("legacy", "keras")):
                samples[k].append(servers[k].time(n) / n)
    finally:
        for srv in servers.values():
            srv.close()
    return statistics.median(samples["keras"]), statistics.median(samples["legacy"])


def _lengths(batch, time_steps):
    return [time_steps - (7 * i) % (time_steps // 2) for i in range(batch)]


def method_line() -> str:
    return (f"method: Keras (tf.function with a static input_signature, called via its concrete function) and the "
            f"TF1 graph (session.run) each run "
            f"in its own clean subprocess (tensorflow + the layer code only; TF1 with TF_USE_LEGACY_KERAS=1), "
            f"{THREADS} intra-op + {THREADS} inter-op TF threads each, identical seed-0 inputs held on the device, "
            f"all outputs fetched as numpy; 3 + {WARMUP} warm-up calls, then {ROUNDS} alternating rounds of n calls "
            f"per side; median per-call time over rounds")


def bench_keras_encoder():
    s = ENCODER
    for label, lengths in (("mixed lengths", _lengths(s["batch"], s["time"])),
                           ("full lengths", [s["time"]] * s["batch"])):
        tk, tl = _interleaved("encoder", {**s, "lengths": lengths}, n=3)
        print(f"encoder B={s['batch']} T={s['time']} {s['input']}->2x{s['size']} inference, {label} "
              f"(mean {np.mean(lengths):.0f}): Keras EncoderRNN (tf.function) {tk * 1e3:.1f} ms, TF1 graph (session) "
              f"{tl * 1e3:.1f} ms -> ratio {tk / tl:.2f}x (target <= 1.0x)", flush=True)
        record_keras_encoder(label.split()[0], tk, tl)


def record_keras_encoder(lengths: str, tk: float, tl: float) -> None:
    """``lengths``: ``mixed`` or ``full``; the medians of the Keras layer and of the TF1 graph."""
    s = ENCODER
    record("recurrent", f"keras encoder {lengths}", tk / tl, unit="x", fmt=".2f", seconds=tk, baseline=tl,
           target="<= 1.0", label=f"Keras `EncoderRNN` vs TF1, {lengths} lengths",
           setup=f"Keras `EncoderRNN` vs the TF1 graph (session), B={s['batch']} T={s['time']} "
           f"{s['input']}→2×{s['size']} inference, each side in its own clean subprocess, {THREADS} + {THREADS} TF "
           f"threads, {ROUNDS} alternating rounds, median (`bench/bench_recurrent.py`)", what=f"{lengths} lengths",
           notes=f"{tk * 1e3:.1f} ms vs {tl * 1e3:.1f} ms.")


def bench_keras_decoder_step():
    s = DECODER
    tk, tl = _interleaved("decoder_step", s, n=20)
    print(f"decoder one step B={s['batch']} {s['input']}->{s['layers']}x{s['size']} inference: Keras DecoderRNN "
          f"(tf.function) {tk * 1e3:.2f} ms, TF1 graph (session) {tl * 1e3:.2f} ms -> ratio {tk / tl:.2f}x "
          "(target <= 1.0x)", flush=True)
    record_keras_decoder_step(tk, tl)


def record_keras_decoder_step(tk: float, tl: float) -> None:
    d = DECODER
    record("recurrent", "keras decoder step", tk / tl, unit="x", fmt=".2f", seconds=tk, baseline=tl, target="<= 1.0",
           label="Keras `DecoderRNN` step vs TF1",
           what=f"Keras `DecoderRNN` one step vs the TF1 graph, B={d['batch']} {d['input']}→{d['layers']}×{d['size']} "
           f"(each side in its own clean subprocess, {ROUNDS} alternating rounds of 20 calls, median)",
           notes=f"{tk * 1e3:.2f} ms vs {tl * 1e3:.2f} ms.")


def record_torch(part: str, t: dict) -> None:
    """``part``: ``encoder`` or ``decoder step``; ``t``: the medians (``eager``, ``script``, ``lstm``, the encoder's
    ``loop``). The row is the faster of eager and ``jit.script`` against the fused ``nn.LSTM``."""
    best = min(t["eager"], t["script"])
    if part == "encoder":
        s = ENCODER
        what = (f"torch `EncoderRNN` (the faster of eager and `jit.script`) vs fused `nn.LSTM(bidirectional=True)`, "
                f"B={s['batch']} T={s['time']} {s['input']}→2×{s['size']}, mixed lengths; eager inference runs the "
                "native encoder scan")
        target, label = "<= 1.5", "torch `EncoderRNN` vs `nn.LSTM`"
        notes = (f"eager {t['eager'] * 1e3:.1f} ms, `jit.script` {t['script'] * 1e3:.1f} ms vs {t['lstm'] * 1e3:.1f} "
                 f"ms; eager through the TorchScript loop (`SPEECHBLOCKS_NATIVE=0`) {t['loop'] / t['lstm']:.2f}×. "
                 "Target from issue #23.")
    else:
        d = DECODER
        what = (f"torch `DecoderRNN` one step vs fused `nn.LSTM(num_layers={d['layers']})`, B={d['batch']} (the faster "
                "of eager and `jit.script`)")
        target, label = "<= 2", "torch `DecoderRNN` step vs `nn.LSTM`"
        notes = (f"eager {t['eager'] * 1e3:.2f} ms, `jit.script` {t['script'] * 1e3:.2f} ms vs {t['lstm'] * 1e3:.2f} "
                 "ms.")
    record("recurrent", f"torch {part}", best / t["lstm"], unit="x", fmt=".2f", seconds=best, baseline=t["lstm"],
           target=target, label=label, what=what, notes=notes)


def bench_torch():
    import torch

    import torch_layers
    from speechblocks.native import library as native_library

    s = ENCODER
    torch.manual_seed(0)
    x = torch.randn(s["batch"], s["time"], s["input"])
    lens = torch.tensor(_lengths(s["batch"], s["time"]))
    enc = torch_layers.EncoderRNN(s["input"], size=s["size"], zoneout=0.1).eval()
    scripted = torch.jit.script(enc)
    ref = torch.nn.LSTM(s["input"], s["size"], batch_first=True, bidirectional=True).eval()
    def loop_only():  # the eager call through the TorchScript loop (SPEECHBLOCKS_NATIVE=0), for comparison
        with native_code(False):
            return enc(x, lens)

    with torch.inference_mode():
        t = compare_times({"eager": lambda: enc(x, lens), "loop": loop_only, "script": lambda: scripted(x, lens),
                           "lstm": lambda: ref(x)}, repeats=REPEATS)
    native = "native encoder scan" if native_library() is not None else "no native library: the TorchScript loop"
    met = min(t["eager"], t["script"]) <= 1.5 * t["lstm"]
    print(f"encoder B={s['batch']} T={s['time']} {s['input']}->2x{s['size']} inference: torch EncoderRNN eager "
          f"({native}) {t['eager'] * 1e3:.1f} ms ({t['eager'] / t['lstm']:.2f}x), eager with SPEECHBLOCKS_NATIVE=0 "
          f"{t['loop'] * 1e3:.1f} ms ({t['loop'] / t['lstm']:.2f}x), jit.script {t['script'] * 1e3:.1f} ms "
          f"({t['script'] / t['lstm']:.2f}x) vs nn.LSTM(bidirectional) {t['lstm'] * 1e3:.1f} ms (target <= 1.5x for "
          f"the faster of eager and jit.script: {'MET' if met else 'MISSED'})")
    record_torch("encoder", t)

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
          f"({t['script'] / t['lstm']:.2f}x) vs nn.LSTM(num_layers={d['layers']}) {t['lstm'] * 1e3:.2f} ms "
          "(target <= 2x)")
    record_torch("decoder step", t)


def main():
    print(method_line())
    bench_keras_encoder()
    bench_keras_decoder_step()
    bench_torch()


if __name__ == "__main__":
    main()
