"""Batched synthesis with each sentence stopping at its own step (RTVC sizes): utterances per second.

The workload: 16 sentences of mixed lengths (20..150 symbols, in a seed-shuffled order) whose decoders stop at
their own steps (60..250, rising with the length as speech does), one speaker embedding each. The model is a real
TF1 checkpoint, written by ``tf.compat.v1.train.Saver`` from the TF1 graph, and loaded the way a user loads it:
``Tacotron2.from_tf1_checkpoint(path)`` in Keras and torch (``eval()``), ``Saver.restore`` in the TF1 graph. Each
side runs in its own clean timing subprocess (``bench._batch_timing``) with the same intra-op and inter-op thread
counts, prenet dropout on (what users run). Timed, per round, in rotating order:

* Keras and torch: ``synthesize_batch`` of the 16 sentences in batches of 1 (16 calls), 4 (4 calls, the sentences
  in their order) and 16 (1 call), and ``synthesize`` one sentence at a time (16 calls: the plain call of batch 1);
* the TF1 graph: the 16 sentences padded into one batch, one ``session.run`` (the original stop rule: the loop runs
  every entry until the whole batch stops, here at the longest sentence's step).

How the sentences stop (random weights never stop by themselves): see :func:`bench._batch_timing.stop_design`.
Unit 0 of the last decoder LSTM layer is made a counter (zero kernel columns, gates saturated open, ``tanh(j)`` a
small constant): its output rises strictly with the step, identically on every side and whatever the inputs,
attention or dropout draw. The stop projection compares it with the first dimension of the sentence's speaker
embedding, which reaches the stop projection through the attention context (memory = encoder outputs ⊕ the
tiled embedding; alignments sum to 1). That dimension is set to the midpoint of the counter's values at the
designed step and the one before, so sentence ``i`` stops exactly at its step -- alone, in any batch, in Keras,
torch and the TF1 graph -- with a margin it prints (far above float32 rounding). The rest of the model is
random (glorot) weights; every step computes what a trained model's step computes.

Checks before timing: every side's timed model must stop each sentence at its designed step (the TF1 graph's batch
at the longest), else the bench stops there. With ``tacotron_dropout_rate=0`` (a twin from the same checkpoint),
each sentence of one ``synthesize_batch`` of all 16 is compared with that sentence synthesized alone
(``synthesize``, batch 1), both through the frameworks' own loops (``SPEECHBLOCKS_NATIVE=0``: no native decoder step or
encoder scan; the batching's exactness) on every output
(decoder and mel outputs, stop probabilities, alignments), in Keras and in torch: max |diff| <= 1e-5 is the
equality target (PASS/FAIL, MET/MISSED); against the sentence alone through the native step (what ``synthesize``
runs at batch 1, and torch's native encoder scan: the same maths in another summation order), the batch through the
native batched step (what ``synthesize_batch`` runs, timed below) against the batch through the loops, and Keras
against torch are reported.

Note: ``synthesize_batch`` drops each entry from the decoder loop at its own stop, so at B = 16 the loop runs the
longest sentence's steps with fewer and fewer rows (the sum of the steps over the rows, not 16 times the longest);
the TF1 graph runs every entry until the whole batch stops (the longest sentence's step).

Targets (issue #23): ``synthesize_batch`` at B = 16 >= 6x the utterances/s of B = 1 one after the other (the faster
of ``synthesize_batch`` and ``synthesize`` at batch 1) and >= 1.3x the TF1 graph at B = 16.

The work bound printed beside the 6x target: whatever the batching, the 16 sentences need the products of
:func:`product_macs` (a lower bound of the work); at the machine's float32 product peak (:func:`sgemm_peak`) B = 16
cannot take less than their FLOP / peak, so B = 16 / B = 1 cannot exceed B = 1's time x peak / FLOP. Batching
amortizes the weight reads of B = 1's bandwidth-bound decoder steps; it cannot amortize the compute-bound postnet and
encoder, nor the decoder's products once they are compute-bound.

``python -m bench.bench_batch_synthesis [--quick]``; ``--quick`` (or ``BENCH_QUICK=1``): small model, short
sentences, 1 round, 1 thread -- a smoke run, not a measurement.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from bench._batch_timing import STOP_GAIN, stop_design
from bench._timing import TimingServer
from bench.bench_tacotron2 import random_weights
from bench.results import record

#: the rows of bench/results.json this bench records (not in a --quick smoke run)
ROWS = ("b16 vs b1 keras", "b16 vs b1 torch", "b16 vs tf1 keras", "b16 vs tf1 torch", "equal alone keras",
        "equal alone torch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 16
TOL_ALONE = 1e-5
FULL = dict(sizes={}, lengths=(20, 150), steps=(60, 250), horizon=300, rounds=3, threads=os.cpu_count() or 1)
QUICK = dict(sizes=dict(embedding_dim=64, enc_conv_channels=64, encoder_lstm_units=32, attention_dim=32,
                        attention_filters=8, prenet_layers=[64, 64], decoder_lstm_units=128, postnet_channels=64,
                        speaker_embedding_size=16),
             lengths=(8, 40), steps=(10, 40), horizon=50, rounds=1, threads=1)
LABEL = {"keras": "Keras", "torch": "torch", "legacy": "TF1 graph"}
WORKLOADS = {"keras": ("b1", "alone", "b4", "b16"), "torch": ("b1", "alone", "b4", "b16"), "legacy": ("b16",)}
WHAT = {"b1": "synthesize_batch B=1 (16 calls)", "alone": "synthesize B=1 (16 calls)",
        "b4": "synthesize_batch B=4 (4 calls)", "b16": "synthesize_batch B=16 (1 call)"}


def workload(setting: dict) -> tuple[list[int], list[int]]:
    """``(lengths, stop steps)`` of the 16 sentences: lengths evenly over the range in a seed-shuffled order, each
    stop step the length mapped linearly onto the step range."""
    (l0, l1), (s0, s1) = setting["lengths"], setting["steps"]
    lengths = np.round(np.linspace(l0, l1, N)).astype(int)[np.random.default_rng(1).permutation(N)]
    steps = np.round(s0 + (lengths - l0) * (s1 - s0) / (l1 - l0)).astype(int)
    return lengths.tolist(), steps.tolist()


def product_macs(hp, lengths: list[int], steps: list[int]) -> dict[str, float]:
    """Multiply-accumulates of the products the 16 sentences need whatever the batching (no padding, each sentence
    its own steps): the encoder (convolutions, both LSTM directions), every decoder step (pre-net, the LSTM stack,
    attention query, location features and energies over the sentence's length, context, frame and stop
    projections) and the postnet over the sentence's frames. Element-wise maths, the CBHG of ``predict_linear`` and
    the batching's padding are left out: a lower bound of the work."""
    r, m, u, a = hp.outputs_per_step, hp.num_mels, hp.decoder_lstm_units, hp.attention_dim
    memory, k = hp.memory_size, hp.postnet_kernel_size
    enc = (hp.enc_conv_num_layers * hp.enc_conv_channels ** 2 * hp.enc_conv_kernel_size  # (embedding = channels)
           + 2 * (hp.enc_conv_channels + hp.encoder_lstm_units) * 4 * hp.encoder_lstm_units)
    sizes = [m] + list(hp.prenet_layers)
    prenet = sum(i * o for i, o in zip(sizes, sizes[1:]))
    lstm = (sizes[-1] + memory + u) * 4 * u + (hp.decoder_layers - 1) * 2 * u * 4 * u
    step = prenet + lstm + u * a + (u + memory) * (m * r + r)
    per_position = hp.attention_filters * (hp.attention_kernel + a) + a + memory  # location conv + dense, v, context
    channels = [m] + [hp.postnet_channels] * (hp.postnet_num_layers - 1) + [m]
    post = sum(i * o * k for i, o in zip(channels, channels[1:]))
    return {"encoder": enc * sum(lengths),
            "decoder": sum(s * (step + per_position * n) for n, s in zip(lengths, steps)),
            "postnet": post * r * sum(steps)}


def sgemm_peak(threads: int, size: int = 2048, repeats: int = 5) -> float:
    """The machine's float32 matrix-product rate (FLOP/s): the best of ``repeats`` numpy (OpenBLAS) products of two
    ``size`` x ``size`` matrices, ``threads`` threads (OpenBLAS's own count without ``threadpoolctl``)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a dependency of scikit-learn (librosa), not of speechblocks
        threadpool_limits = contextlib.nullcontext
    g = np.random.default_rng(0)
    a, b = (g.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    best = float("inf")
    with threadpool_limits(threads):
        a @ b
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    return 2 * size ** 3 / best


def check(info: dict, steps: list[int], checks: dict) -> list[str]:
    """The checks (raises when one fails); returns the report lines."""
    lines, failed = [], []
    for side, got in info.items():
        if got["steps"] != steps or not all(got["stopped"]):
            failed.append(f"{LABEL[side]} stop steps {got['steps']} (stopped {got['stopped']}) != designed {steps}")
    if info["legacy"]["batch_steps"] != max(steps):
        failed.append(f"TF1 graph batch ran {info['legacy']['batch_steps']} steps, not {max(steps)}")
    lines.append(f"check: every side stops each sentence at its designed step (timed models, prenet dropout on); "
                 f"the TF1 graph's batch ran {info['legacy']['batch_steps']} steps")
    verdict = "MET"
    for side in ("keras", "torch"):
        worst, bad = info[side]["alone_max_diff"], info[side]["alone_shape_mismatches"]
        ok = not bad and worst <= TOL_ALONE
        verdict = verdict if ok else "MISSED"
        lines.append(f"check {LABEL[side]}: each sentence of synthesize_batch(16) vs synthesize alone, both through "
                     f"the same loops (SPEECHBLOCKS_NATIVE=0; dropout 0): max |diff| {worst:.2e} over decoder/mel "
                     f"outputs, stop, alignments (<= {TOL_ALONE:g}) -> {'PASS' if ok else 'FAIL'}"
                     + (f"; {bad[:3]}" if bad else ""))
        native_bad = info[side]["native_alone_shape_mismatches"]
        lines.append(f"  alone through the native step (what synthesize runs at batch 1, another summation order): "
                     f"max |diff| {info[side]['native_alone_max_diff']:.2e}"
                     + (f"; {native_bad[:3]}" if native_bad else " (same shapes: the same stop steps)")
                     + " (reported)")
        batch_bad = info[side]["native_batch_shape_mismatches"]
        lines.append(f"  synthesize_batch(16) through the native batched step (what is timed) vs through the loops: "
                     f"max |diff| {info[side]['native_batch_max_diff']:.2e}"
                     + (f"; {batch_bad[:3]}" if batch_bad else " (same shapes: the same stop steps)")
                     + " (reported)")
    keras, torch_ = (dict(np.load(checks[s])) for s in ("keras", "torch"))
    cross = max(float(np.max(np.abs(keras[k] - torch_[k]))) for k in keras)
    lines.append(f"check: Keras vs torch, the same 16 batched sentences (dropout 0): max |diff| {cross:.2e}")
    lines.append(f"target outputs of each sentence equal running it alone (<= {TOL_ALONE:g}): {verdict}")
    if failed:
        raise RuntimeError("; ".join(failed))
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv or os.environ.get("BENCH_QUICK") == "1"
    setting = QUICK if quick else FULL
    from speechblocks import resolve_hparams, tf1_variable_shapes

    hp = resolve_hparams("rtvc", **setting["sizes"])
    lengths, steps = workload(setting)
    weights, spk, margin = stop_design(random_weights(tf1_variable_shapes(hp)), hp, steps, setting["horizon"])
    rounds, threads = setting["rounds"], setting["threads"]
    print(("QUICK SMOKE RUN (small model, short sentences, 1 round, 1 thread): not a measurement\n" if quick else "")
          + f"method: each side in its own clean subprocess, {threads} intra-op + {threads} inter-op threads; one TF1 "
          f"checkpoint (tf.compat.v1.train.Saver) loaded by Tacotron2.from_tf1_checkpoint (Keras; torch in eval()) "
          f"and Saver.restore (TF1 graph, TF_USE_LEGACY_KERAS=1, placeholders fed); prenet dropout on; every "
          f"workload once as warm-up, then {rounds} rounds of each workload on each side in rotating order; median",
          flush=True)
    print(f"workload: {N} sentences, lengths {lengths}; designed stop steps {steps} (sum {sum(steps)}, longest "
          f"{max(steps)}); stop design: a counter unit in the last decoder LSTM layer against the first speaker-"
          f"embedding dimension (read through the attention context), counter margin at the stop steps "
          f"{margin:.1e} (stop logit margin {margin * STOP_GAIN:.2f})", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench_batch_synthesis_") as tmp:
        np.savez(os.path.join(tmp, "weights.npz"), **weights)
        np.savez(os.path.join(tmp, "speakers.npz"), spk=spk)
        checks = {side: os.path.join(tmp, f"check_{side}.npz") for side in ("keras", "torch")}
        base = dict(sizes=setting["sizes"], lengths=lengths, steps=steps, weights=os.path.join(tmp, "weights.npz"),
                    speakers=os.path.join(tmp, "speakers.npz"), checkpoint=os.path.join(tmp, "model.ckpt-100"))
        servers = {}
        try:
            t0 = time.perf_counter()
            servers["legacy"] = TimingServer("bench._batch_timing", "legacy", base, threads,
                                             os.path.join(tmp, "legacy.log"))
            servers["legacy"].expect("saved")  # the checkpoint exists: the other sides may load it
            for side in ("keras", "torch"):
                servers[side] = TimingServer("bench._batch_timing", side, dict(base, check=checks[side]), threads,
                                             os.path.join(tmp, f"{side}.log"))
            info = {side: servers[side].expect("ready") for side in ("legacy", "keras", "torch")}
            print(f"(three sides built, checked and warmed up in {time.perf_counter() - t0:.0f} s)", flush=True)
            for line in check(info, steps, checks):
                print(line, flush=True)
            pairs = [(side, name) for side, names in WORKLOADS.items() for name in names]
            samples = {p: [] for p in pairs}
            for r in range(rounds):
                for side, name in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:
                    samples[(side, name)].append(servers[side].time(name))
        finally:
            for srv in servers.values():
                srv.close()

    t = {p: statistics.median(v) for p, v in samples.items()}
    macs = product_macs(hp, lengths, steps)
    flop, peak = 2 * sum(macs.values()), sgemm_peak(threads)
    legacy = N / t[("legacy", "b16")]
    print(f"work bound: the 16 sentences need >= {flop / 1e9:.1f} GFLOP of products whatever the batching "
          f"(encoder {2 * macs['encoder'] / 1e9:.1f}, decoder steps {2 * macs['decoder'] / 1e9:.1f}, postnet "
          f"{2 * macs['postnet'] / 1e9:.1f}; no padding, no element-wise maths); this machine's float32 product peak "
          f"(numpy/OpenBLAS sgemm 2048^2, {threads} threads, best of 5) {peak / 1e9:.0f} GFLOP/s -> B=16 takes >= "
          f"{flop / peak:.2f} s ({N * peak / flop:.1f} utt/s at most)", flush=True)
    print(f"TF1 graph B=16 (1 session.run, runs every entry until the whole batch stops: {max(steps)} steps): "
          f"{legacy:.2f} utt/s ({t[('legacy', 'b16')]:.2f} s)", flush=True)
    for side in ("keras", "torch"):
        ups = {name: N / t[(side, name)] for name in WORKLOADS[side]}
        print(f"{LABEL[side]}: " + "; ".join(f"{WHAT[n]} {ups[n]:.2f} utt/s ({t[(side, n)]:.2f} s)"
                                                for n in WORKLOADS[side]), flush=True)
        b1 = max(ups["b1"], ups["alone"])
        vs_b1, vs_tf1 = ups["b16"] / b1, ups["b16"] / legacy
        print(f"target {LABEL[side]} B=16 >= 6x B=1 one after the other (the faster B=1 form, {b1:.2f} utt/s): "
              f"{vs_b1:.2f}x -> {'MET' if vs_b1 >= 6 else 'MISSED'}; the most B=16 can be at the sgemm peak: "
              f"{N / b1 * peak / flop:.1f}x (B=16 ran at {flop / t[(side, 'b16')] / peak:.0%} of it)", flush=True)
        print(f"target {LABEL[side]} B=16 >= 1.3x TF1 graph B=16: {vs_tf1:.2f}x -> "
              f"{'MET' if vs_tf1 >= 1.3 else 'MISSED'}", flush=True)
    if quick:
        print("(quick smoke run: nothing recorded)", flush=True)
    else:
        record_results(t, info, flop, peak, threads)


def record_results(t: dict, info: dict, flop: float, peak: float, threads: int) -> None:
    """The rows from the medians ``t[(side, workload)]`` (seconds for the 16 sentences), the sides' check info, the
    work bound's FLOP and the machine's sgemm peak (FLOP/s)."""
    setup = (f"`synthesize_batch`, {N} sentences of 20–150 symbols stopping at steps 60–250 (each at its own step), "
             f"RTVC sizes, one TF1 checkpoint, each side in its own clean subprocess, {threads} threads, "
             f"{FULL['rounds']} rotating rounds, median (`bench/bench_batch_synthesis.py`). The work bound: the "
             f"sentences need {flop / 1e9:.1f} GFLOP of matrix products whatever the batching; at this machine's sgemm "
             f"peak (numpy/OpenBLAS 2048², {peak / 1e9:.0f} GFLOP/s) B=16 cannot take less than {flop / peak:.2f} s")
    legacy = N / t[("legacy", "b16")]
    for side in ("keras", "torch"):
        ups = {name: N / t[(side, name)] for name in WORKLOADS[side]}
        b1 = max(ups["b1"], ups["alone"])
        bound = N / b1 * peak / flop
        record("batch_synthesis", f"b16 vs b1 {side}", ups["b16"] / b1, unit="x", fmt=".2f", target=">= 6",
               seconds=t[(side, "b16")], baseline=N / b1, label=f"B=16 vs B=1, {LABEL[side]}", setup=setup,
               what=f"B=16 vs B=1 one after the other (the faster of `synthesize_batch` and `synthesize` at B=1, both "
               f"the native step), {LABEL[side]}",
               notes=f"{ups['b16']:.2f} utt/s at B=16, {ups['b4']:.2f} at B=4, {b1:.2f} at B=1; at the sgemm peak "
               f"B=16 / B=1 cannot exceed {bound:.1f}× (B=16 ran at {flop / t[(side, 'b16')] / peak:.0%} of it).")
        record("batch_synthesis", f"b16 vs tf1 {side}", ups["b16"] / legacy, unit="x", fmt=".2f", target=">= 1.3",
               seconds=t[(side, "b16")], baseline=t[("legacy", "b16")],
               label=f"B=16 throughput vs TF1 at B=16, {LABEL[side]}", setup=setup,
               what="throughput vs the TF1 graph at B=16 (every entry runs until the whole batch stops), "
               f"{LABEL[side]}", notes=f"{ups['b16']:.2f} utt/s vs the TF1 graph's {legacy:.2f} utt/s.")
    for side in ("keras", "torch"):
        got = info[side]
        bad = got["alone_shape_mismatches"]
        record("batch_synthesis", f"equal alone {side}", got["alone_max_diff"], fmt=".1e", target=f"<= {TOL_ALONE:g}",
               verdict="MISSED (shapes differ)" if bad else None, label=f"each sentence vs it alone, {LABEL[side]}",
               setup="each sentence of the batch vs it alone, max |difference|, batch and alone both through the "
               "frameworks' own loops (`SPEECHBLOCKS_NATIVE=0`: the batching's exactness)", what=LABEL[side],
               notes=f"Reported: alone through the native step {got['native_alone_max_diff']:.1e}, the batch through "
               f"the native batched step against the batch through the loops {got['native_batch_max_diff']:.1e}.")


if __name__ == "__main__":
    main()
