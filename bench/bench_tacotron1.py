"""Speed of the whole Tacotron-1 (keithito/tacotron default hparams): Keras and torch against keithito's TF1 graph.

Each side runs in its own clean timing subprocess (``bench._tacotron1_timing``: Keras ``Tacotron1.synthesize`` and the
model called eagerly, torch ``Tacotron1`` in ``eval()`` under ``inference_mode``, the TF1 ``while_loop`` graph
(``parity_tests.legacy.tf1_tacotron1``, keithito's ``dynamic_decode`` with its exact-zero stop) by ``session.run``
with ``TF_USE_LEGACY_KERAS=1``), with the same weights (random TF1 variables written once to an ``.npz``; the TF1
side loads them into its graph and writes a real TF1 checkpoint with ``Saver``, which the other two load the way
users do, ``Tacotron1.from_tf1_checkpoint``), the same seed-0 inputs, the same intra-op and inter-op thread counts;
rounds alternate the order of the sides; medians over rounds.

Before timing, the outputs of every side's timed call (inference has no dropout: the timed call is deterministic)
must agree within 1e-4 and have the expected shapes: ``steps * r`` mel frames, ``steps`` alignment columns. With
random weights no output frame is ever exactly zero, so the free-running loop runs all ``max_iters`` steps; the
check asserts it (steps == 200 on every side).

Synthesis is also timed with ``max_iters=1`` (encoder, one step, post CBHG), so the cost of one decoder step is
``(T(200) - T(1)) / 199`` on every side (with the post CBHG's ``r`` frames of that step: its BiGRU runs
over all ``steps * r`` frames). ``profile`` lines: the ops of largest self time per decoder step in a
30-step synthesis (torch: ``torch.profiler``; Keras: TensorFlow's profiler trace; TF1: the session's step stats).

Target (issue): synthesis of 100 symbols, 200 steps, batch 1: Keras and torch <= 0.9x the TF1 graph.
``BENCH_TACOTRON1_ROUNDS`` (default 7) sets the rounds; ``BENCH_TACOTRON1_PRESETS`` (default ``keithito``; e.g.
``keithito,mimic2``) the presets, one row each (mimic2: its own layout and location-sensitive attention).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

from bench._tacotron1_timing import OUTPUT_KEYS, PROFILE_STEPS
from bench._timing import TimingServer
from bench.results import record

#: the rows of bench/results.json this bench records (the keithito preset; another preset's rows are printed only)
ROWS = ("synthesis keras", "synthesis keras eager", "synthesis torch")
THREADS = os.cpu_count() or 1  # intra-op and inter-op threads of every side (torch: set_num_threads likewise)
SYNTH = dict(batch=1, symbols=100, steps=200)
ROUNDS = int(os.environ.get("BENCH_TACOTRON1_ROUNDS", "7"))
PRESETS = tuple(p for p in os.environ.get("BENCH_TACOTRON1_PRESETS", "keithito").split(",") if p)
TOL = 1e-4
SIDES = ("keras", "torch", "legacy")
LABEL = {"keras": "Keras", "torch": "torch", "legacy": "TF1 graph"}
TARGET = 0.9  # synthesis time / the TF1 graph's, both frameworks


def random_weights(shapes: dict, seed: int = 0) -> dict:
    """Every TF1 variable: kernels and the embedding glorot-uniform (TF1's default), biases/beta/moving means 0,
    gamma/moving variances 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        leaf = name.rsplit("/", 1)[-1]
        if leaf in ("gamma", "moving_variance"):
            out[name] = np.ones(shape, np.float32)
        elif leaf in ("bias", "beta", "moving_mean"):
            out[name] = np.zeros(shape, np.float32)
        else:
            receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
            fan_in = shape[-2] * receptive if len(shape) > 1 else shape[0]
            fan_out = shape[-1] * receptive
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            out[name] = rng.uniform(-limit, limit, shape).astype(np.float32)
    return out


def interleaved(servers: dict, name: str, rounds: int) -> tuple[dict, dict]:
    """Median seconds per call of each side and every sample: every round calls each side once, the order rotating
    by round."""
    samples = {k: [] for k in servers}
    order = list(servers)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            samples[k].append(servers[k].time(name))
    return {k: statistics.median(v) for k, v in samples.items()}, samples


def check_outputs(paths: dict, hp) -> list[str]:
    """The timed calls' shapes (all ``steps`` steps run) and the sides' agreement; raises when they differ."""
    got = {k: dict(np.load(p)) for k, p in paths.items()}
    got["keras eager"] = {k: got["keras"]["call_" + k] for k in OUTPUT_KEYS}
    b, t, steps, r = SYNTH["batch"], SYNTH["symbols"], SYNTH["steps"], hp.outputs_per_step
    expected = {"mel_outputs": (b, steps * r, hp.num_mels), "linear_outputs": (b, steps * r, hp.num_freq),
                "alignments": (b, t, steps)}
    for side, out in got.items():
        shapes = {k: tuple(out[k].shape) for k in OUTPUT_KEYS}
        if shapes != expected:
            raise RuntimeError(f"{side}: timed synthesis shapes {shapes} != {expected} (stopped early?)")
        if not np.all(np.any(out["mel_outputs"].reshape(b, steps, -1) != 0.0, axis=-1)):
            raise RuntimeError(f"{side}: a step's frames are all exactly zero (the stop condition)")
    diffs = []
    for a, c in (("legacy", "keras"), ("legacy", "keras eager"), ("legacy", "torch"), ("keras", "torch")):
        worst = max(float(np.max(np.abs(got[a][k] - got[c][k]))) for k in OUTPUT_KEYS)
        if not worst <= TOL:
            raise RuntimeError(f"timed outputs differ: {LABEL.get(a, a)} vs {LABEL.get(c, c)} max |diff| "
                               f"{worst:.2e} > {TOL}")
        diffs.append(f"{LABEL.get(a, a)} vs {LABEL.get(c, c)} {worst:.1e}")
    return [f"check: every side ran all {steps} steps (mel {expected['mel_outputs']}, linear "
            f"{expected['linear_outputs']}, alignments {expected['alignments']}, no all-zero frame); the timed "
            f"outputs agree, max |diff| over mel, linear, alignments: " + ", ".join(diffs) + f" (<= {TOL:g})"]


def method_line() -> str:
    return (f"method: each side in its own clean subprocess (Keras Tacotron1.synthesize and model(...) eagerly; "
            f"torch Tacotron1.eval() under inference_mode; TF1 keithito while_loop graph by session.run with "
            f"TF_USE_LEGACY_KERAS=1, the inputs fed to [batch, None] placeholders as keithito's synthesizer.py has "
            f"them), {THREADS} intra-op + {THREADS} inter-op threads each "
            f"(OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}), one TF1 checkpoint "
            f"(Saver) loaded by from_tf1_checkpoint, seed-0 inputs; 2 warm-up calls, then {ROUNDS} "
            f"rounds of one call per side in rotating order; median per call")


def run_preset(preset: str, tmp: str) -> dict:
    """Builds the three sides of ``preset``, checks them and times them; returns the medians, samples and notes."""
    from speechblocks import resolve_tacotron1_hparams
    from speechblocks.tacotron1_schema import tf1_variable_shapes

    hp = resolve_tacotron1_hparams(preset)
    layout = "mimic2" if hp.variant == "mimic2" else "keithito-20180906"
    weights = os.path.join(tmp, f"{preset}_weights.npz")
    np.savez(weights, **random_weights(tf1_variable_shapes(hp, layout)))
    checks = {side: os.path.join(tmp, f"{preset}_check_{side}.npz") for side in SIDES}
    servers, info = {}, {}
    try:
        t0 = time.perf_counter()
        # the TF1 graph first: it writes the TF1 checkpoint the other two load (as users do); those two are built
        # concurrently; each server idles on stdin once it has said ready
        for group in (("legacy",), ("keras", "torch")):
            for side in group:
                servers[side] = TimingServer("bench._tacotron1_timing", side,
                                             dict(weights=weights, check=checks[side], synth=SYNTH, preset=preset,
                                                  layout=layout, checkpoint=os.path.join(tmp, f"{preset}.ckpt")),
                                             THREADS, os.path.join(tmp, f"{preset}_{side}.log"))
            info.update({side: servers[side].wait_ready() for side in group})
        print(f"({preset}, layout {layout}: three sides built, checked and warmed up in "
              f"{time.perf_counter() - t0:.0f} s)", flush=True)
        for line in check_outputs(checks, hp):
            print(line, flush=True)
        synth, synth_samples = interleaved(servers, "synth", ROUNDS)
        short, _ = interleaved(servers, "short", ROUNDS)
        call, call_samples = interleaved({k: servers[k] for k in ("keras", "legacy")}, "call", ROUNDS)
    finally:
        for srv in servers.values():
            srv.close()
    return dict(synth=synth, short=short, call=call, samples=synth_samples, call_samples=call_samples, info=info)


def report(preset: str, res: dict) -> None:
    synth, short, call, steps = res["synth"], res["short"], res["call"], SYNTH["steps"]
    print(f"synthesis {preset} B={SYNTH['batch']} {SYNTH['symbols']} symbols {steps} steps (all steps run): Keras "
          f"synthesize {synth['keras']:.3f} s ({synth['keras'] / synth['legacy']:.2f}x), torch {synth['torch']:.3f} s "
          f"({synth['torch'] / synth['legacy']:.2f}x), TF1 graph {synth['legacy']:.3f} s", flush=True)
    print(f"Keras model(...) called eagerly, the same synthesis: {call['keras']:.3f} s "
          f"({call['keras'] / call['legacy']:.2f}x TF1 graph {call['legacy']:.3f} s)", flush=True)
    for name, key in (("synthesis", "samples"), ("eager call", "call_samples")):
        print(f"samples ({name}, s): " + "; ".join(
            f"{LABEL[k]} " + " ".join(f"{s:.3f}" for s in v) for k, v in res[key].items()), flush=True)
    per_step = {k: (synth[k] - short[k]) / (steps - 1) for k in SIDES}
    print("one-step synthesis (encoder + 1 decoder step + post CBHG): " + ", ".join(
        f"{LABEL[k]} {short[k] * 1e3:.1f} ms" for k in SIDES) + "; per step (T(200) - T(1)) / 199, a decoder step "
        "and its r frames of the post CBHG: " + ", ".join(f"{LABEL[k]} {per_step[k] * 1e3:.3f} ms" for k in SIDES),
        flush=True)
    for side in SIDES:
        rows = res["info"][side].get("profile") or []
        print(f"profile {LABEL[side]} ({PROFILE_STEPS}-step synthesis, self time per decoder step): " + "; ".join(
            f"{name} {ms:.3f} ms ({share:.0%})" for name, ms, share in rows), flush=True)
    ratios = {"Keras synthesize": synth["keras"] / synth["legacy"], "Keras model(...) eager":
              call["keras"] / call["legacy"], "torch": synth["torch"] / synth["legacy"]}
    for what, ratio in ratios.items():
        print(f"target {preset} {what} synthesis <= {TARGET}x TF1 graph: {ratio:.2f}x -> "
              f"{'MET' if ratio <= TARGET else 'MISSED'}", flush=True)
    if preset == "keithito":
        record_results(synth, call, per_step)


def record_results(synth: dict, call: dict, per_step: dict) -> None:
    """The keithito rows from the medians per side: ``synth`` (``synthesize`` / the torch model / the TF1 graph),
    ``call`` (Keras ``model(...)`` eagerly and the TF1 graph), ``per_step`` (seconds per decoder step)."""
    setup = (f"`Tacotron1` (keithito, default hparams) free-running synthesis, B={SYNTH['batch']}, {SYNTH['symbols']} "
             f"symbols, {SYNTH['steps']} steps (all run: checked), each side loaded from the same TF1 checkpoint in "
             f"its own clean subprocess and checked to give the same outputs, vs keithito's TF1 `while_loop` graph "
             f"(session), {THREADS} intra + {THREADS} inter-op threads, {ROUNDS} rotating rounds, median "
             "(`bench/bench_tacotron1.py`). Target from issue #35")
    steps = "per decoder step (with its r frames of the post-CBHG): " + ", ".join(
        f"{LABEL[k]} {per_step[k] * 1e3:.2f} ms" for k in SIDES)
    for row, label, what, ours, theirs in (
            ("synthesis keras", "Tacotron-1 synthesis, Keras `synthesize` vs TF1", "Keras `synthesize`",
             synth["keras"], synth["legacy"]),
            ("synthesis keras eager", "Tacotron-1 synthesis, Keras eager vs TF1", "Keras `model(...)` eagerly",
             call["keras"], call["legacy"]),
            ("synthesis torch", "Tacotron-1 synthesis, torch vs TF1", "torch `eval()` under `inference_mode`",
             synth["torch"], synth["legacy"])):
        record("tacotron1", row, ours / theirs, unit="x", fmt=".2f", seconds=ours, baseline=theirs,
               target=f"<= {TARGET}", label=label, setup=setup, what=what,
               notes=f"{ours:.3f} s vs {theirs:.3f} s; {steps}.")


def main():
    print(method_line(), flush=True)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (record results only from a quiet "
          f"machine: load < 0.5, nothing else running)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_tacotron1_") as tmp:
        for preset in PRESETS:
            report(preset, run_preset(preset, tmp))


if __name__ == "__main__":
    main()
