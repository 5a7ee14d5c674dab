"""Data-parallel training of the Keras layers under ``tf.distribute`` equals training on the global batch.

What is proven (every figure a max |difference| of all the weights -- trainable and batch-norm moving statistics --
after one step of plain SGD with a large rate, ``LR = 0.5``, so that the step moves the weights by O(0.1-0.5)):

* ``MirroredStrategy`` over two logical CPU devices (in a subprocess: logical devices must be configured before
  TensorFlow initialises its devices) and ``MultiWorkerMirroredStrategy`` with two worker processes on 127.0.0.1
  (``TF_CONFIG``, free ports, every process and every collective bounded by ``DEADLINE``): one step on a global
  batch of 4 split 2 + 2 over the replicas gives the weights of one single-process step on the whole batch
  (<= 1e-5; measured ~2e-7), for

  (a) a small model made of ``EncoderConvolutions``, ``Postnet`` and ``CBHG`` (every batch-norm block of the
      library, the CBHG GRU) trained with ``MaskedMSE``, ``MaskedSigmoidCrossEntropy`` (``pos_weight``) and
      ``MaskedLinearLoss`` on packed lengths -- the replicas hold 13 and 5 valid frames, and the second replica's
      longest length (3) is shorter than the padded time axis (8);
  (b) a small RTVC ``Tacotron2`` (``mask_decoder=True``, dropout and zoneout 0) with its own ``compute_loss`` (the
      original ``add_loss``: masked mel terms, stop token, L1 term, L2 regularization) on the dict targets,

  with ``sync_batch_norm=True`` and the default ``reduction="global"``. Mirrored runs Keras ``fit`` (the small
  model traced, Tacotron2 eagerly); multi-worker runs Keras' own ``Model.train_step`` through ``strategy.run`` (the
  small model traced, Tacotron2 eagerly), because Keras 3's ``fit`` fails under ``MultiWorkerMirroredStrategy``
  before its first step (keras-team/keras#20585). Eager and traced steps run the same Keras code (loss shares,
  replica gradients summed by the optimizer, all-reduced batch statistics); tracing Tacotron2's training step costs
  ~20-40 s of CPU, so only the small model is traced.
* The losses themselves, run per replica on the two halves (Mirrored, eagerly): the replicas' values summed
  (``strategy.reduce("SUM")``) equal the single-process loss of the global batch (``"global"``) or the mean of the
  halves' losses (``"per_replica"``) -- ``masked_mse``, ``masked_sigmoid_cross_entropy`` (seed's non-zero count, with
  losses that underflow to 0, and ``count="mask"``), ``masked_linear_loss`` (both ``low_band_norm``), and every
  term of ``tacotron2_loss`` with ``mask_decoder`` True (masked) and False (plain means, regularization shared out);
  relative differences <= 1e-5 (measured <= 1.5e-7). A replica's time axis that is not a multiple of ``r`` is refused.
* The test is sensitive: per-replica batch statistics with the global loss, global statistics with per-replica
  means, or both, move the weights 0.2-0.4 away from the single-process step (simulated in one process; each must
  differ by > 100x the tolerance).
* The original's multi-tower training stays available: ``sync_batch_norm=False`` with ``reduction="per_replica"``
  (Mirrored ``fit``) equals its simulation in one process -- one pass per half (its own batch statistics and masked
  means), gradients averaged, moving statistics averaged.
* In one process ``sync_batch_norm=True`` is bit-identical to ``False``, both reductions give the single-process
  values bit for bit, and the options are checked and round-trip through ``get_config``.

The worker code is this module run as a script (``python tests/test_distribute_keras.py mirrored`` or
``... worker INDEX PORT0 PORT1``); each prints one JSON line of figures.
"""
from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

TOL = 1e-5
DEADLINE = 420  # seconds: the subprocesses of a test are killed after this, and a collective waiting for a dead peer
#                gives up after it (the runs take 20-50 s of CPU each; the margin is for a loaded 2-core machine)
LR = 0.5  # one SGD step with a large rate: the weights move by O(0.1), so a wrong gradient shows
BATCH, TIME, R = 4, 8, 2
LENGTHS = np.array([8, 5, 3, 2], np.int32)  # replica 0: [8, 5] (13 frames), replica 1: [3, 2] (5 frames, longest 3 < 8)
HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


# -- the models and data (imported lazily: the subprocess configures its devices first) ------------------------------
def _small_model_class():
    import keras
    import tensorflow as tf

    from tf_layers import CBHG, EncoderConvolutions, Postnet

    class Small(keras.Model):
        """conv stack -> mel (+ postnet residual), stop logits, CBHG -> linear: every BN block of the library."""

        def __init__(self, sync_batch_norm=False, **kwargs):
            super().__init__(**kwargs)
            sync = dict(sync_batch_norm=sync_batch_norm)
            self.enc = EncoderConvolutions(3, 6, 2, drop_rate=0.0, **sync)
            self.mel = keras.layers.Dense(4)
            self.stop = keras.layers.Dense(1)
            self.post = Postnet(3, 6, 2, drop_rate=0.0, **sync)
            self.post_proj = keras.layers.Dense(4)
            self.cbhg = CBHG(2, 4, 2, [6, 4], 3, 1, 4, 3, **sync)
            self.linear = keras.layers.Dense(5)

        def call(self, x, training=None):
            h = self.enc(x, training=training)
            mel = self.mel(h)
            mel = mel + self.post_proj(self.post(mel, training=training))
            return {"mel": mel, "stop": tf.squeeze(self.stop(h), -1),
                    "linear": self.linear(self.cbhg(mel, training=training))}

    return Small


def _small_data():
    from tf_layers import MaskedLinearLoss, MaskedMSE, MaskedSigmoidCrossEntropy

    g = np.random.default_rng(0)
    x = g.standard_normal((BATCH, TIME, 3)).astype(np.float32)
    mel = g.standard_normal((BATCH, TIME, 4)).astype(np.float32)
    stop = (g.uniform(size=(BATCH, TIME)) < 0.3).astype(np.float32)
    lin = g.standard_normal((BATCH, TIME, 5)).astype(np.float32)
    y = {"mel": np.asarray(MaskedMSE.pack(mel, LENGTHS)),
         "stop": np.asarray(MaskedSigmoidCrossEntropy.pack(stop, LENGTHS)),
         "linear": np.asarray(MaskedLinearLoss.pack(lin, LENGTHS))}
    return x, y, (mel, stop, lin)


def _small_losses(reduction):
    from tf_layers import MaskedLinearLoss, MaskedMSE, MaskedSigmoidCrossEntropy

    return {"mel": MaskedMSE(R, packed=True, reduction=reduction),
            "stop": MaskedSigmoidCrossEntropy(R, pos_weight=3.0, packed=True, reduction=reduction),
            "linear": MaskedLinearLoss(R, sample_rate=8000, packed=True, reduction=reduction)}


def _initial_weights(model, seed):
    g = np.random.default_rng(seed)
    return [np.abs(g.standard_normal(w.shape)).astype(np.float32) + 0.5 if "moving_variance" in w.path
            else (0.4 * g.standard_normal(w.shape)).astype(np.float32) for w in model.weights]


TACO = dict(embedding_dim=8, enc_conv_channels=8, enc_conv_num_layers=2, encoder_lstm_units=4, attention_dim=4,
            attention_filters=2, attention_kernel=(3,), prenet_layers=[4], decoder_layers=1, decoder_lstm_units=8,
            postnet_channels=8, postnet_num_layers=2, num_mels=3, speaker_embedding_size=2, outputs_per_step=R,
            tacotron_dropout_rate=0.0, tacotron_zoneout_rate=0.0, mask_decoder=True)


def _taco_data(hp):
    g = np.random.default_rng(1)
    t_in = 5
    ids = g.integers(2, hp.n_symbols, (BATCH, t_in)).astype(np.int32)
    in_lens = np.array([5, 4, 3, 5], np.int32)
    mel = np.full((BATCH, TIME, hp.num_mels), -hp.max_abs_value, np.float32)
    stop = np.ones((BATCH, TIME), np.float32)
    for i, n in enumerate(LENGTHS):
        mel[i, :n] = g.standard_normal((n, hp.num_mels))
        stop[i, :n - 1] = 0
    spk = g.standard_normal((BATCH, hp.speaker_embedding_size)).astype(np.float32)
    x = dict(inputs=ids, input_lengths=in_lens, speaker_embeddings=spk, mel_targets=mel)
    y = dict(mel_targets=mel, stop_token_targets=stop, targets_lengths=LENGTHS)
    return x, y


def _fit_one_step(model, x, y, losses=None, eager=False):
    """One Keras ``fit`` step of plain SGD on the global batch; ``eager`` runs the train step eagerly (the same code
    path -- loss scaling, replica gradients summed by the optimizer -- without the tracing time)."""
    import keras

    model.compile(optimizer=keras.optimizers.SGD(LR), loss=losses, jit_compile=False, run_eagerly=eager)
    if losses is not None:  # builds the per-output loss metrics now, so fit traces its step once, not twice
        model.compute_loss(x, y, model(x), training=True)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return [np.asarray(w) for w in model.weights]


def _train_step_per_replica(strategy, model, x, y, losses=None, eager=False):
    """The same step as :func:`_fit_one_step` through Keras' own ``Model.train_step`` run by ``strategy.run`` on each
    replica's half of the batch (replica ``i`` gets ``HALVES[i]``). For ``MultiWorkerMirroredStrategy``: Keras 3's
    ``fit`` stops there before the first step (``_maybe_symbolic_build`` reduces the (x, y) batch with the strategy,
    which fails for nested per-replica values: keras-team/keras#20585)."""
    import keras
    import tensorflow as tf

    model.compile(optimizer=keras.optimizers.SGD(LR), loss=losses, jit_compile=False)
    model.optimizer.build(model.trainable_variables)
    if losses is not None:
        model.compute_loss(x, y, model(x), training=True)

    def shard(ctx):
        part = HALVES[ctx.replica_id_in_sync_group]
        return tf.nest.map_structure(lambda a: tf.constant(a[part]), (x, y))

    data = strategy.experimental_distribute_values_from_function(shard)

    def step(batch):
        return strategy.run(model.train_step, args=(batch,))

    (step if eager else tf.function(step))(data)
    return [np.asarray(w) for w in model.weights]


def _sgd_step(model, grads, moving):
    """``w - LR * g`` on the trainable weights; the moving statistics set to ``moving`` (or left)."""
    import tensorflow as tf

    for w, g in zip(model.trainable_weights, grads):
        w.assign(np.asarray(w) - LR * np.asarray(tf.convert_to_tensor(g)))  # (the embedding's IndexedSlices)
    for w in model.non_trainable_weights:
        if moving is not None:
            w.assign(np.mean([m[w.path] for m in moving], axis=0))
    return [np.asarray(w) for w in model.weights]


def _maxdiff(a, b):
    return float(max(np.max(np.abs(u.astype(np.float64) - v.astype(np.float64))) for u, v in zip(a, b)))


HALVES = (slice(0, BATCH // 2), slice(BATCH // 2, BATCH))  # the two replicas' slices of the global batch


def _simulated_small(w0, x, targets, bn="global", loss="global"):
    """One SGD step of the small model in one process, eagerly, for every combination of

    * ``bn``: ``"global"`` -- one pass over the whole batch (the single-process step, = synchronized statistics);
      ``"per_replica"`` -- one pass per half (each its own batch statistics; moving statistics: the mean of the two
      halves' updates from the same start, Keras' MEAN aggregation);
    * ``loss``: ``"global"`` -- the masked losses of the whole batch; ``"per_replica"`` -- the mean of the halves'
      masked losses (the original towers).

    ``bn="global", loss="global"`` is the plain single-process step on the global batch: the reference.
    """
    import tensorflow as tf

    from tf_layers import masked_linear_loss, masked_mse, masked_sigmoid_cross_entropy

    mel, stop, lin = targets
    model = _small_model_class()()
    model(x[:1])
    model.set_weights(w0)
    start = {w.path: np.asarray(w) for w in model.non_trainable_weights}
    mask = tf.sequence_mask(LENGTHS, TIME, tf.float32)  # = the lengths' mask: the global time is the padded max

    def total(out, part):
        return (masked_mse(mel[part], out["mel"][part], mask=mask[part], outputs_per_step=R)
                + masked_sigmoid_cross_entropy(stop[part], out["stop"][part], mask=mask[part], outputs_per_step=R,
                                               pos_weight=3.0)
                + masked_linear_loss(lin[part], out["linear"][part], mask=mask[part], outputs_per_step=R,
                                     sample_rate=8000))

    with tf.GradientTape() as tape:
        if bn == "global":
            out = model(x, training=True)
            moving = [{w.path: np.asarray(w) for w in model.non_trainable_weights}]
        else:
            outs, moving = [], []
            for part in HALVES:
                for w in model.non_trainable_weights:
                    w.assign(start[w.path])
                outs.append(model(x[part], training=True))
                moving.append({w.path: np.asarray(w) for w in model.non_trainable_weights})
            out = {k: tf.concat([o[k] for o in outs], 0) for k in outs[0]}
        value = total(out, slice(None)) if loss == "global" else sum(total(out, p) for p in HALVES) / len(HALVES)
    return _sgd_step(model, tape.gradient(value, model.trainable_weights), moving)


def _distributed_small(strategy, w0, x, y, sync, reduction, eager, fit=True):
    with strategy.scope():
        model = _small_model_class()(sync_batch_norm=sync)
        model(x[:1])
        model.set_weights(w0)
        run = _fit_one_step if fit else functools.partial(_train_step_per_replica, strategy)
        return run(model, x, y, _small_losses(reduction), eager=eager)


def _taco_reference(w0, x, y):
    """One single-process SGD step of Tacotron2 on the global batch (eager; what ``fit`` computes)."""
    import tensorflow as tf

    from tf_layers import Tacotron2, tacotron2_loss

    model = Tacotron2("rtvc", **TACO)
    model.set_weights(w0)
    with tf.GradientTape() as tape:
        out = model(x, training=True)
        value = tacotron2_loss(model, out, y["mel_targets"], y["stop_token_targets"], y["targets_lengths"])["loss"]
    return _sgd_step(model, tape.gradient(value, model.trainable_weights), None)


def _taco_distributed(strategy, w0, x, y, eager, fit=True):
    from tf_layers import Tacotron2

    with strategy.scope():
        model = Tacotron2("rtvc", sync_batch_norm=True, **TACO)
        model.set_weights(w0)
        run = _fit_one_step if fit else functools.partial(_train_step_per_replica, strategy)
        return run(model, x, y, eager=eager)


def _loss_shares(strategy):
    """The loss functions themselves, run per replica (eagerly) on the halves: the replicas' values summed equal the
    loss of the global batch (``"global"``) or the mean of the halves' losses (``"per_replica"``); relative
    differences. Also: a replica's time axis that is not a multiple of ``r`` is refused with a ``ValueError``."""
    import tensorflow as tf

    from tf_layers import masked_linear_loss, masked_mse, masked_sigmoid_cross_entropy

    g = np.random.default_rng(5)
    t, o = g.standard_normal((2, BATCH, TIME, 6)).astype(np.float32)
    z = (g.uniform(size=(BATCH, TIME)) < 0.3).astype(np.float32)
    logits = (60 * g.standard_normal((BATCH, TIME))).astype(np.float32)
    zeros = tf.nn.weighted_cross_entropy_with_logits(z, logits, 2.0).numpy() == 0
    # the seed's count ("nonzero_loss") differs from the mask
    assert np.any(zeros & (np.arange(TIME) < LENGTHS[:, None]))
    cases = {"masked_mse": (masked_mse, t, o, {}),
             "masked_sigmoid_cross_entropy": (masked_sigmoid_cross_entropy, z, logits, {"pos_weight": 2.0}),
             "masked_sigmoid_cross_entropy count=mask": (masked_sigmoid_cross_entropy, z, logits, {"count": "mask"}),
             "masked_linear_loss": (masked_linear_loss, t, o, {"sample_rate": 8000}),
             "masked_linear_loss low_band_mask": (masked_linear_loss, t, o, {"sample_rate": 8000,
                                                                            "low_band_norm": "low_band_mask"})}
    out = {}
    for name, (fn, a, b, kw) in cases.items():
        for reduction in ("global", "per_replica"):
            def shard(ctx, arrays=(a, b, LENGTHS)):
                return tuple(tf.constant(v[HALVES[ctx.replica_id_in_sync_group]]) for v in arrays)

            args = strategy.experimental_distribute_values_from_function(shard)
            values = strategy.run(functools.partial(fn, outputs_per_step=R, reduction=reduction, **kw), args=args)
            got = float(strategy.reduce("SUM", values, axis=None))
            if reduction == "global":
                want = float(fn(a, b, LENGTHS, outputs_per_step=R, **kw))
            else:
                want = float(np.mean([fn(a[p][:, :4 if p.start else TIME], b[p][:, :4 if p.start else TIME],
                                         LENGTHS[p], outputs_per_step=R, **kw) for p in HALVES]))
            out[f"loss shares: {name} {reduction} (rel.)"] = abs(got - want) / abs(want)
    # tacotron2_loss: every term (masked, or plain means over all frames, L1, the L2 regularization shared out)
    from tf_layers import Tacotron2, tacotron2_loss

    stop = (g.uniform(size=(BATCH, TIME)) < 0.3).astype(np.float32)
    for mask_decoder in (True, False):
        model = Tacotron2("rtvc", **{**TACO, "mask_decoder": mask_decoder})
        mel, dec, post = g.standard_normal((3, BATCH, TIME, model.hparams.num_mels)).astype(np.float32)
        arrays = (mel, dec, post, logits, stop, LENGTHS)

        def terms(mel, dec, post, logits, stop, lengths, reduction="global", model=model):
            outputs = dict(decoder_outputs=dec, mel_outputs=post, stop_token_prediction=logits)
            return tacotron2_loss(model, outputs, mel, stop, lengths, reduction=reduction)

        for reduction in ("global", "per_replica"):
            def shard(ctx, arrays=arrays):
                return tuple(tf.constant(v[HALVES[ctx.replica_id_in_sync_group]]) for v in arrays)

            values = strategy.run(functools.partial(terms, reduction=reduction),
                                  args=strategy.experimental_distribute_values_from_function(shard))
            got = {k: float(strategy.reduce("SUM", v, axis=None)) for k, v in values.items()}
            if reduction == "global":
                want = {k: float(v) for k, v in terms(*arrays).items()}
            else:  # a tower: masked terms see its own padded length (TF1 cropped each tower), plain means all frames
                crop = [TIME, 4] if mask_decoder else [TIME, TIME]
                halves = [terms(*(v[p][:, :c] if v.ndim > 1 else v[p] for v in arrays)) for p, c in zip(HALVES, crop)]
                want = {k: float(np.mean([h[k] for h in halves])) for k in got}
            worst = max(abs(got[k] - want[k]) / max(abs(want[k]), 1e-30) for k in got if want[k] != 0)
            out[f"loss shares: tacotron2_loss mask_decoder={mask_decoder} {reduction}, every term (rel.)"] = worst
    try:
        strategy.run(lambda: masked_mse(t[:2, :7], o[:2, :7], [3, 2], outputs_per_step=R))
        out["loss shares: time 7 with r=2 in a replica refused"] = 1.0
    except ValueError as err:
        out["loss shares: time 7 with r=2 in a replica refused"] = 0.0 if "multiple of outputs_per_step=2" in str(err) \
            else 1.0
    return out


def _cases(strategy, mirrored):
    """The figures of one strategy. ``fit`` traces its step (graph) or runs it eagerly: the same Keras code path
    (loss shares, gradients summed over replicas by the optimizer, synchronized batch norm), without the ~10-20 s of
    tracing per model; each strategy traces one of the two models. Mirrored adds the towers and the sensitivity
    checks."""
    from tf_layers import Tacotron2

    out = _loss_shares(strategy) if mirrored else {}
    x, y, targets = _small_data()
    w0 = _initial_weights(_built_small(x), 0)
    ref = _simulated_small(w0, x, targets)
    mode = "graph fit" if mirrored else "graph train_step"
    out[f"small: sync BN, global loss ({mode}) vs one process"] = _maxdiff(
        _distributed_small(strategy, w0, x, y, True, "global", eager=False, fit=mirrored), ref)
    if mirrored:
        towers = _simulated_small(w0, x, targets, "per_replica", "per_replica")
        out["small: towers (per-replica BN and loss, eager fit) vs their simulation"] = _maxdiff(
            _distributed_small(strategy, w0, x, y, False, "per_replica", eager=True), towers)
        out["small: towers vs one process (must differ)"] = _maxdiff(towers, ref)
        out["small: per-replica BN, global loss vs one process (must differ)"] = _maxdiff(
            _simulated_small(w0, x, targets, "per_replica", "global"), ref)
        out["small: global BN, per-replica loss vs one process (must differ)"] = _maxdiff(
            _simulated_small(w0, x, targets, "global", "per_replica"), ref)
    taco = Tacotron2("rtvc", **TACO)
    tw0 = _initial_weights(taco, 2)
    tx, ty = _taco_data(taco.hparams)
    tref = _taco_reference(tw0, tx, ty)
    mode = "eager fit" if mirrored else "eager train_step"
    out[f"Tacotron2: sync BN, global loss ({mode}) vs one process"] = _maxdiff(
        _taco_distributed(strategy, tw0, tx, ty, eager=True, fit=mirrored), tref)
    out["Tacotron2: weights moved by the step"] = _maxdiff(tref, tw0)
    return out


def _built_small(x):
    model = _small_model_class()()
    model(x[:1])
    return model


# -- subprocess entry points -----------------------------------------------------------------------------------------
def _quiet_env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT)
    env.pop("TF_CONFIG", None)
    return env


def _main_mirrored():
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    print(json.dumps(_cases(strategy, mirrored=True)), flush=True)


def _main_worker(index, ports):
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                          "task": {"type": "worker", "index": index}})
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=DEADLINE)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    assert strategy.num_replicas_in_sync == 2
    print(json.dumps(_cases(strategy, mirrored=False)), flush=True)


# -- the tests -------------------------------------------------------------------------------------------------------
def _figures(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def _check(figures):
    for name, value in figures.items():
        if "must differ" in name:
            assert value > 100 * TOL, (name, value)
        elif "moved" in name:
            assert value > 1e-3, (name, value)
        else:
            assert value <= TOL, (name, value)


def test_mirrored_strategy_two_replicas_equal_one_process():
    run = subprocess.run([sys.executable, HERE, "mirrored"], capture_output=True, text=True, timeout=DEADLINE,
                         env=_quiet_env(), cwd=ROOT)
    assert run.returncode == 0, run.stderr[-4000:]
    figures = _figures(run.stdout)
    print(json.dumps(figures, indent=1))
    _check(figures)
    assert len(figures) == 22 and sum("must differ" in k for k in figures) == 3


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_multi_worker_mirrored_strategy_two_processes_equal_one_process():
    ports = _free_ports(2)
    with tempfile.TemporaryDirectory() as d:
        logs = [open(os.path.join(d, f"worker{i}.err"), "w+") for i in range(2)]
        procs = [subprocess.Popen([sys.executable, HERE, "worker", str(i), *map(str, ports)], stdout=subprocess.PIPE,
                                  stderr=logs[i], text=True, env=_quiet_env(), cwd=ROOT) for i in range(2)]
        outs, start = [], time.monotonic()
        try:
            for p in procs:
                outs.append(p.communicate(timeout=max(1.0, DEADLINE - (time.monotonic() - start)))[0])
        finally:
            for p in procs:  # only ours, by their handles
                if p.poll() is None:
                    p.kill()
                    p.wait()
        errors = []
        for i, (p, log) in enumerate(zip(procs, logs)):
            log.seek(0)
            if p.returncode != 0:
                errors.append(f"worker {i} exit {p.returncode}: {log.read()[-3000:]}")
            log.close()
        assert not errors, "\n".join(errors)
    for out in outs:
        figures = _figures(out)
        print(json.dumps(figures, indent=1))
        _check(figures)


# -- one process -----------------------------------------------------------------------------------------------------
def test_one_process_sync_batch_norm_and_reductions_are_bit_identical():
    import keras

    from tf_layers import (
        MaskedMSE,
        Tacotron2,
        masked_linear_loss,
        masked_mse,
        masked_sigmoid_cross_entropy,
        tacotron2_loss,
    )

    x, y, (mel, stop, lin) = _small_data()
    w0 = _initial_weights(_built_small(x), 0)
    steps = []
    for sync in (False, True):
        model = _small_model_class()(sync_batch_norm=sync)
        model(x[:1])
        model.set_weights(w0)
        steps.append(_fit_one_step(model, x, y, _small_losses("per_replica" if sync else "global"), eager=True))
    assert _maxdiff(*steps) == 0.0
    o = mel + 0.5
    for fn, args, kw in ((masked_mse, (mel, o), {}), (masked_linear_loss, (lin, lin * 0.5), {"sample_rate": 8000}),
                         (masked_sigmoid_cross_entropy, (stop, mel[:, :, 0]), {"pos_weight": 2.0})):
        values = [float(fn(*args, LENGTHS, outputs_per_step=R, reduction=red, **kw))
                  for red in ("global", "per_replica")]
        assert values[0] == values[1] == float(fn(*args, LENGTHS, outputs_per_step=R, **kw))
    taco = Tacotron2("rtvc", **TACO)
    tx, ty = _taco_data(taco.hparams)
    out = taco(tx, training=True)
    a = tacotron2_loss(taco, out, ty["mel_targets"], ty["stop_token_targets"], ty["targets_lengths"])
    b = tacotron2_loss(taco, out, ty["mel_targets"], ty["stop_token_targets"], ty["targets_lengths"],
                       reduction="per_replica")
    assert {k: float(v) for k, v in a.items()} == {k: float(v) for k, v in b.items()}
    # options: validation and config round trips
    with pytest.raises(ValueError, match="`reduction`"):
        masked_mse(mel, o, LENGTHS, outputs_per_step=R, reduction="mean")
    with pytest.raises(ValueError, match="`sync_batch_norm`"):
        _small_model_class()(sync_batch_norm="yes")
    loss = MaskedMSE(R, reduction="per_replica")
    assert MaskedMSE.from_config(loss.get_config()).reduction == "per_replica"
    assert MaskedMSE.from_config({**loss.get_config(), "reduction": "sum_over_batch_size"}).reduction == "global"
    cfg = Tacotron2("rtvc", sync_batch_norm=True, loss_reduction="per_replica", **TACO).get_config()
    again = Tacotron2.from_config(cfg)
    assert again.sync_batch_norm and again.loss_reduction == "per_replica"
    assert again.postnet.blocks[0].batch_norm.synchronized and again.encoder_convolutions.blocks[1].sync_batch_norm
    names = set(again.tf1_weights())
    assert names == set(Tacotron2("rtvc", **TACO).tf1_weights())
    assert keras.layers.deserialize(keras.layers.serialize(again.postnet)).sync_batch_norm


if __name__ == "__main__":
    if sys.argv[1] == "mirrored":
        _main_mirrored()
    elif sys.argv[1] == "worker":
        _main_worker(int(sys.argv[2]), [int(p) for p in sys.argv[3:5]])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]!r}")
