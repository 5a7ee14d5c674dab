"""Batched synthesis with each sentence stopping at its own step: the workload, the stop design and the timing
server of :mod:`bench.bench_batch_synthesis` (one side a process: ``keras``, ``torch`` or ``legacy``).

``python -m bench._batch_timing SIDE JSON_CONFIG THREADS`` (``legacy`` with ``TF_USE_LEGACY_KERAS=1``; no side
imports another side's framework). ``JSON_CONFIG`` holds ``sizes`` (hparam overrides of the RTVC preset: ``{}`` for
RTVC sizes), ``lengths`` (each sentence's symbol count; the ids are :func:`sentences`), ``weights`` (an ``.npz`` of
the TF1 variables relative to ``Tacotron_model/inference/``, stop design included), ``speakers`` (an ``.npz`` with
``spk``, one embedding a sentence), ``checkpoint`` (the TF1 checkpoint prefix the legacy side writes) and, for
Keras and torch, ``check`` (where the side writes each sentence's dropout-0 batched outputs, ``.npz``).

* ``legacy`` builds the TF1 graph (``parity_tests.legacy.tf1_tacotron2.tacotron2`` under
  ``Tacotron_model/inference``, placeholders for ids, lengths and speaker embeddings as the original synthesizer
  feeds them), assigns the weights, writes them with ``tf.compat.v1.train.Saver`` -- a real TF1 checkpoint -- and
  prints ``saved``; then restores that checkpoint into the timed session (``Saver.restore``, as the original
  synthesizer loads a model) and times ``session.run`` of the 16 sentences padded into one batch (the original
  stop rule: every entry runs until the whole batch stops);
* ``keras`` / ``torch`` load the checkpoint with ``Tacotron2.from_tf1_checkpoint`` (torch in ``eval()``) and time
  the 16 sentences through ``synthesize_batch`` in batches of 1 (16 calls), 4 (4 calls) and 16 (1 call), and
  one at a time through ``synthesize`` (16 calls, the original rule at batch 1).

Before timing every side checks (with the timed model, prenet dropout on) that sentence ``i`` stops at its
designed step; Keras and torch also build a ``tacotron_dropout_rate=0`` twin from the same checkpoint and compare
each sentence of one ``synthesize_batch`` of all 16 with that sentence synthesized alone (through the same loop, and
through the native step). The server then prints
``ready`` and a JSON of its check results, and runs stdin lines ``NAME N`` (N repetitions of workload NAME),
printing the seconds.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from bench._timing import native_code, serve

SCOPE = "Tacotron_model/inference"
STOP = "decoder/stop_token_projection/projection_stop_token_projection/"
SATURATE = 30.0  # sigmoid(30) rounds to 1.0 in float32: a gate held open
# the stop logit's scale, logit = STOP_GAIN * (counter - threshold): steep enough that float rounding cannot move a
# stop (at RTVC sizes the logit margin is 0.045, the rounding noise of the logit ~1e-5), gentle enough that the stop
# probabilities of a sentence in a batch and alone stay well within 1e-5 of each other (the counter's rounding, a
# few 1e-7, times the gain: 1.5e-5 at a gain of 2000, 3.6e-6 at 100, 2.2e-6 at 50)
STOP_GAIN = 50.0
KEYS = ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments")


# -- the workload -----------------------------------------------------------------------------------------------------
def sentences(lengths, n_symbols: int, seed: int = 0) -> list[np.ndarray]:
    """One int32 id sequence of each length (ids 1 .. n_symbols - 1: never the pad id), seed-fixed draws."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, n_symbols, int(n)).astype(np.int32) for n in lengths]


def counter(hp, horizon: int) -> tuple[float, np.ndarray]:
    """``(a, m)``: the counter unit's ``tanh(j)`` increment ``a`` and its output ``m[t - 1]`` at decoder steps
    ``t = 1 .. horizon``, simulated in float32 with the cell's own formulas (LSTM with its gates saturated open,
    inference zoneout ``c = (1 - z)·c' + z·c``). ``a`` puts the counter's cell at 1.0 at step ``horizon``:
    ``m`` rises from ~0 to ``tanh(1)`` in distinct steps, never near tanh's flat ends."""
    z = np.float32(hp.tacotron_zoneout_rate)
    a = np.float32(np.tanh(np.arctanh(1.0 / ((horizon - 1) * (1.0 - float(z)) + 1.0))))
    c = np.float32(0.0)
    m = np.empty(horizon, np.float32)
    for t in range(horizon):
        c_new = np.float32(c + a)
        m[t] = np.tanh(c_new)
        c = np.float32((np.float32(1.0) - z) * c_new + z * c)
    return float(a), m


def stop_design(weights: dict, hp, steps, horizon: int, seed: int = 0) -> tuple[dict, np.ndarray, float]:
    """Weights and speaker embeddings that make sentence ``i`` stop exactly at decoder step ``steps[i]`` in every
    framework and in the TF1 graph, alone or in any batch, with the prenet dropout on or off.

    * A counter: unit 0 of the last decoder LSTM layer gets all-zero kernel columns (its four gates see nothing)
      and biases ``i = f = o = 30`` (gates open: sigmoid rounds to 1) and ``j = atanh(a)``: its cell adds
      ``(1 - z)·a`` per step (``z`` the zoneout rate), its output ``m_t = tanh(c_{t-1} + a)`` rises strictly with
      the step ``t`` whatever the inputs, the attention or the dropout draw (:func:`counter`).
    * A threshold per sentence: the stop projection reads the decoder output and the attention context, whose
      last ``speaker_embedding_size`` columns are the speaker embedding times the alignment's sum (1: the memory is
      the encoder outputs with the embedding tiled on, positions past the length masked out). Its kernel is zero
      but for ``+STOP_GAIN`` (50) on the counter's row and ``-STOP_GAIN`` on the context row of the speaker
      embedding's first dimension (both ``r`` columns), bias 0: ``logit_t = 50·(m_t - s_i)``, ``s_i`` the first
      dimension of sentence ``i``'s embedding. ``s_i`` is the midpoint of ``m_{steps_i - 1}`` and ``m_{steps_i}``, so
      the stop probability crosses 0.5 between those steps and stays above (``m`` rises): sentence ``i`` stops at
      ``steps_i`` (``stop_at_any`` or not: the ``r`` frames agree). The other dimensions of the embedding are
      random with unit norm overall, as the RTVC speaker encoder gives.

    Returns ``(weights, speaker_embeddings (n, e) float32, margin)``, ``margin`` the smallest ``|m_t - s_i|`` over
    the sentences at ``t = steps_i - 1`` and ``steps_i`` (float32 rounding of the counter on any side is far below).
    """
    steps = np.asarray(steps)
    if steps.min() < 2 or steps.max() > horizon:
        raise ValueError(f"stop steps must lie in [2, horizon={horizon}]; got {steps.min()}..{steps.max()}")
    layers, units = hp.decoder_layers, hp.decoder_lstm_units
    cell = f"decoder/decoder_LSTM/multi_rnn_cell/cell_{layers - 1}/decoder_LSTM_{layers}/"
    a, m = counter(hp, horizon)
    w = {k: np.array(v, np.float32) for k, v in weights.items()}
    kernel, bias = w[cell + "kernel"], w[cell + "bias"]
    gates = [g * units for g in range(4)]  # unit 0 of the gate blocks i, j, f, o
    kernel[:, gates] = 0.0
    bias[gates] = [SATURATE, np.arctanh(a), SATURATE, SATURATE]
    stop_kernel = np.zeros_like(w[STOP + "kernel"])
    spk_row = stop_kernel.shape[0] - hp.speaker_embedding_size  # the context's speaker-embedding columns
    stop_kernel[0] = STOP_GAIN
    stop_kernel[spk_row] = -STOP_GAIN
    w[STOP + "kernel"] = stop_kernel
    w[STOP + "bias"] = np.zeros_like(w[STOP + "bias"])
    s = (m[steps - 2].astype(np.float64) + m[steps - 1]) / 2
    margin = float(np.min(np.minimum(m[steps - 1] - s, s - m[steps - 2])))
    rng = np.random.default_rng(seed)
    rest = rng.standard_normal((len(steps), hp.speaker_embedding_size - 1))
    rest *= np.sqrt(1.0 - s ** 2)[:, None] / np.linalg.norm(rest, axis=1, keepdims=True)
    spk = np.concatenate([s[:, None], rest], 1).astype(np.float32)
    return w, spk, margin


def groups(n: int, batch: int) -> list[slice]:
    return [slice(i, min(i + batch, n)) for i in range(0, n, batch)]


def padded(seqs) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(s) for s in seqs], np.int32)
    ids = np.zeros((len(seqs), lengths.max()), np.int32)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
    return ids, lengths


# -- the check of the Keras and torch sides ---------------------------------------------------------------------------
def compare_alone(batched: list[dict], alone: list[dict]) -> tuple[float, list[str]]:
    """Max |batched - alone| over the sentences and ``KEYS``; shape mismatches listed."""
    worst, bad = 0.0, []
    for i, (b, a) in enumerate(zip(batched, alone)):
        for k in KEYS:
            x, y = np.asarray(b[k], np.float32), np.asarray(a[k], np.float32)
            if x.shape != y.shape:
                bad.append(f"sentence {i} {k}: batched {x.shape} vs alone {y.shape}")
            else:
                worst = max(worst, float(np.max(np.abs(x - y))))
    return worst, bad


def _save_check(path: str, batched: list[dict]) -> None:
    """Each sentence's outputs (``"<i>/<key>"``) for the comparison of the sides."""
    arrays = {}
    for i, out in enumerate(batched):
        for k in KEYS:
            arrays[f"{i}/{k}"] = np.asarray(out[k], np.float32)
    np.savez(path, **arrays)


# -- Keras ------------------------------------------------------------------------------------------------------------
def _keras(cfg, seqs, spk, threads):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    from tf_layers import Tacotron2

    model = Tacotron2.from_tf1_checkpoint(cfg["checkpoint"])
    deterministic = Tacotron2.from_tf1_checkpoint(cfg["checkpoint"], tacotron_dropout_rate=0.0)

    def batched(m, part):
        return m.synthesize_batch([seqs[i] for i in range(len(seqs))[part]], spk[part])

    def alone(m, i):
        return m.synthesize(seqs[i][None], np.array([len(seqs[i])], np.int32), spk[i:i + 1])

    return model, deterministic, batched, alone, lambda out: {k: v[0] for k, v in out.items()}


# -- torch ------------------------------------------------------------------------------------------------------------
def _torch(cfg, seqs, spk, threads):
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    from torch_layers import Tacotron2

    model = Tacotron2.from_tf1_checkpoint(cfg["checkpoint"]).eval()
    deterministic = Tacotron2.from_tf1_checkpoint(cfg["checkpoint"], tacotron_dropout_rate=0.0).eval()
    t_seqs = [torch.from_numpy(s.astype(np.int64)) for s in seqs]
    t_spk = torch.from_numpy(spk)

    def batched(m, part):
        return m.synthesize_batch([seqs[i] for i in range(len(seqs))[part]], spk[part])

    def alone(m, i):
        return m.synthesize(t_seqs[i][None], torch.tensor([len(seqs[i])]), t_spk[i:i + 1])

    return model, deterministic, batched, alone, lambda out: {k: v[0].numpy() for k, v in out.items()}


def _framework(build, cfg, seqs, spk, threads):
    model, deterministic, batched, alone, first = build(cfg, seqs, spk, threads)
    n = len(seqs)
    every = slice(0, n)
    # the check: each sentence of one batch of all equals it alone (dropout off); the timed model's stop steps
    with native_code(False):  # the batching's exactness: batch and alone through the same loops (no native code)
        det = batched(deterministic, every)
        worst, bad = compare_alone(det, [first(alone(deterministic, i)) for i in range(n)])
    # what synthesize runs at batch 1: the native step (another summation order; reported)
    native_worst, native_bad = compare_alone(det, [first(alone(deterministic, i)) for i in range(n)])
    # what synthesize_batch runs: the native batched step, against the batch through the framework's loop
    batch_worst, batch_bad = compare_alone(batched(deterministic, every), det)
    timed = batched(model, every)
    info = {"alone_max_diff": worst, "alone_shape_mismatches": bad, "native_alone_max_diff": native_worst,
            "native_alone_shape_mismatches": native_bad, "native_batch_max_diff": batch_worst,
            "native_batch_shape_mismatches": batch_bad,
            "steps": [int(o["alignments"].shape[1]) for o in timed], "stopped": [bool(o["stopped"]) for o in timed]}
    del deterministic
    _save_check(cfg["check"], det)
    runs = {f"b{b}": (lambda b=b: [batched(model, g) for g in groups(n, b)]) for b in (1, 4, 16)}
    runs["alone"] = lambda: [alone(model, i) for i in range(n)]
    return runs, info


# -- the TF1 graph ----------------------------------------------------------------------------------------------------
def _legacy(cfg, seqs, spk, threads, protocol):
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "run the legacy side with TF_USE_LEGACY_KERAS=1"
    import tensorflow as tf

    from parity_tests.legacy.tf1_tacotron2 import tacotron2
    from speechblocks import resolve_hparams
    from speechblocks.synthesis_batch import stop_steps

    v1 = tf.compat.v1
    hp = resolve_hparams("rtvc", **cfg["sizes"])
    with np.load(cfg["weights"]) as f:
        weights = {k: f[k] for k in f.files}
    graph = tf.Graph()
    with graph.as_default():
        ids_ph = v1.placeholder(tf.int32, [None, None], "inputs")
        lengths_ph = v1.placeholder(tf.int32, [None], "input_lengths")
        spk_ph = v1.placeholder(tf.float32, [None, hp.speaker_embedding_size], "speaker_embeddings")
        with v1.variable_scope(SCOPE):
            out = tacotron2(hp, ids_ph, lengths_ph, False, speaker_embeddings=spk_ph, max_iters=hp.max_iters)
        prefix = SCOPE + "/"
        model_vars = {v.op.name: v for v in v1.global_variables() if v.op.name.startswith(prefix)}
        names = {k[len(prefix):] for k in model_vars}
        if names != set(weights):
            raise RuntimeError(f"the TF1 graph's variables differ from the weights: only in the graph "
                               f"{sorted(names - set(weights))[:5]}, only in the weights "
                               f"{sorted(set(weights) - names)[:5]}")
        saver = v1.train.Saver(model_vars)
        init = v1.global_variables_initializer()
    config = v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    with v1.Session(graph=graph, config=config) as writer:  # the "trained" model, saved as training would
        writer.run(init)
        with graph.as_default():
            for name, var in model_vars.items():
                var.load(weights[name[len(prefix):]], writer)
            saver.save(writer, cfg["checkpoint"], write_meta_graph=False, write_state=False)
    protocol.write("saved\n")
    protocol.flush()
    sess = v1.Session(graph=graph, config=config)
    with graph.as_default():
        saver.restore(sess, cfg["checkpoint"])  # the original synthesizer's load
    ids, lengths = padded(seqs)
    feed = {ids_ph: ids, lengths_ph: lengths, spk_ph: spk}
    got = sess.run(out, feed)
    stop = got["stop_token_prediction"].reshape(len(seqs), -1, hp.outputs_per_step)
    own, stopped = stop_steps(stop, hp.stop_at_any)
    info = {"steps": [int(s) for s in own], "stopped": [bool(s) for s in stopped],
            "batch_steps": int(got["alignments"].shape[-1])}
    return {"b16": lambda: sess.run(out, feed)}, info


def main(argv=None) -> int:
    args = argv or sys.argv[1:]
    side, cfg = args[0], json.loads(args[1])
    threads = int(args[2]) if len(args) > 2 else 0
    from speechblocks import resolve_hparams

    hp = resolve_hparams("rtvc", **cfg["sizes"])
    seqs = sentences(cfg["lengths"], hp.n_symbols)
    with np.load(cfg["speakers"]) as f:
        spk = f["spk"]
    protocol, sys.stdout = sys.stdout, sys.stderr  # whatever the libraries print must not mix with the protocol
    if side == "legacy":
        runs, info = _legacy(cfg, seqs, spk, threads, protocol)
    else:
        runs, info = _framework({"keras": _keras, "torch": _torch}[side], cfg, seqs, spk, threads)
    return serve(runs, {}, info, protocol)  # warm-up: every workload once (traces, TorchScript profiling runs)


if __name__ == "__main__":
    sys.exit(main())
