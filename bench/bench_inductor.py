"""``torch.compile`` with inductor (C++ kernels) against torch eager: one Tacotron-2 decoder step at RTVC sizes.

The graph is ``Tacotron2.decoder_step_module()`` compiled with ``torch.compile(backend="inductor", dynamic=True)``
(the memory length dynamic from the start, so one compilation serves every ``T_in``). Before timing: 20 steps of a
loop over the compiled step at two input lengths must give the eager step's frames, stop logits and alignments
(within ``TOL``), the second length with no new compilation (counted by dynamo). Baseline in the same process and run:
the eager :class:`~torch_layers.tacotron2_decoder.DecoderStep`, under ``torch.inference_mode``. One thread and every
core; interleaved rounds, medians; the ratio is inductor / eager (below 1: inductor faster). The compilation time (cold
cache: C++ compiled by gcc) is printed too.
"""
from __future__ import annotations

import os
import time

from bench.results import record

#: the rows of bench/results.json this bench records: 1 thread and (more than one core) every core
ROWS = ("decoder step", "decoder step default threads")
THREAD_COUNTS = sorted({1, os.cpu_count() or 1})
BATCH = 1
LENGTHS = (60, 100)  # input symbols; the timed length is the last
STEPS = 20
REPEATS = 15
WARMUP = 5
TOL = 1e-4


def _loop(step, state, values, keys, score_bias, num_mels):
    """``STEPS`` free-running steps (the frame fed back), outputs stacked."""
    import torch

    frames, stops, aligns = [], [], []
    frame, *rest = state
    for _ in range(STEPS):
        out, stop, alignments, *rest = step(frame, *rest, values, keys, score_bias)
        frame = out[:, -num_mels:].contiguous()
        frames.append(out)
        stops.append(stop)
        aligns.append(alignments)
    return torch.stack(frames, 1), torch.stack(stops, 1), torch.stack(aligns, 2)


def main() -> None:
    import torch
    from torch._dynamo.testing import CompileCounterWithBackend

    from bench._timing import compare_times
    from torch_layers import Tacotron2

    torch.manual_seed(0)
    model = Tacotron2("rtvc", tacotron_dropout_rate=0.0).eval()
    hp = model.hparams
    step = model.decoder_step_module()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(step, backend=counter, dynamic=True)
    print(f"RTVC sizes, batch {BATCH}; torch {torch.__version__}")
    g = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    counts = []
    for n in LENGTHS:
        ids = torch.randint(2, hp.n_symbols, (BATCH, n), generator=g)
        lengths = torch.full((BATCH,), n, dtype=torch.long)
        spk = torch.nn.functional.normalize(torch.randn(BATCH, hp.speaker_embedding_size, generator=g), dim=1)
        with torch.inference_mode():
            values, keys, score_bias = step.attention_memory(model._memory(ids, lengths, spk, None, None), lengths)
            state = step.initial_state(values)
            want = _loop(step, state, values, keys, score_bias, hp.num_mels)
            got = _loop(compiled, state, values, keys, score_bias, hp.num_mels)
        diff = max(float((a - b).abs().max()) for a, b in zip(got, want))
        print(f"equality at T_in={n}: {STEPS} steps (frames, stop, alignments) max |diff| {diff:.2e} "
              f"(tolerance {TOL:g}); compilations so far: {counter.frame_count}")
        if diff > TOL:
            raise SystemExit("inductor differs from eager: not timing")
        counts.append(counter.frame_count)
    print(f"compilation and the equality loops: {time.perf_counter() - t0:.1f} s")
    if counts[-1] != counts[0]:
        raise SystemExit(f"a new input length compiled again (compilations per length: {counts})")

    args = (*state, values, keys, score_bias)

    def run(fn):
        def call():
            with torch.inference_mode():
                fn(*args)
        return call

    for threads in THREAD_COUNTS:
        torch.set_num_threads(threads)
        times = compare_times({"eager": run(step), "inductor": run(compiled)}, repeats=REPEATS, warmup=WARMUP)
        r = times["inductor"] / times["eager"]
        verdict = "inductor faster" if r < 1 else "eager faster"
        print(f"-- {threads} thread(s): decoder step (T_in={LENGTHS[-1]}): inductor {times['inductor'] * 1e3:.2f} ms "
              f"vs eager DecoderStep {times['eager'] * 1e3:.2f} ms -> {r:.2f}x ({verdict})")
        record_result(times, threads)


def record_result(times: dict, threads: int) -> None:
    """One thread count's row from the medians (``inductor``, ``eager``: seconds of one step)."""
    shown = "1 thread" if threads == 1 else f"{threads} threads (every core)"
    record("inductor", "decoder step" + ("" if threads == 1 else " default threads"),
           times["inductor"] / times["eager"], unit="x", fmt=".2f", seconds=times["inductor"], baseline=times["eager"],
           label="inductor decoder step vs eager" + ("" if threads == 1 else ", every core"),
           setup=f"`torch.compile(backend=\"inductor\", dynamic=True)` of `Tacotron2.decoder_step_module()` vs the "
           f"eager `DecoderStep`, RTVC sizes, B={BATCH}, T_in={LENGTHS[-1]}, outputs equal before timing, median of "
           f"{REPEATS} interleaved rounds (`bench/bench_inductor.py`)", what=f"one decoder step, {shown}",
           notes=f"{times['inductor'] * 1e3:.2f} ms vs {times['eager'] * 1e3:.2f} ms.")


if __name__ == "__main__":
    main()
