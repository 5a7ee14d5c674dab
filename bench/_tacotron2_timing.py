"""Timing server for the whole Tacotron-2 (one side a process: ``keras``, ``torch`` or ``legacy``).

``python -m bench._tacotron2_timing SIDE JSON_CONFIG THREADS`` (``legacy`` with ``TF_USE_LEGACY_KERAS=1``;
no side imports another side's framework). ``JSON_CONFIG`` holds ``weights`` (an ``.npz`` of the TF1 variables
by name relative to ``Tacotron_model/inference/``), ``check`` (where to write the deterministic outputs),
``synth`` and ``train`` (the sizes of :func:`bench_inputs`), ``checkpoints`` (``synth``/``train``: TF1
checkpoint prefixes the legacy side writes from the weights and the other sides load). The server

1. builds the model the way a user of that side runs it, with THREADS intra-op and inter-op threads:

   * ``keras``: ``tf_layers.Tacotron2.from_tf1_checkpoint(CKPT)`` (what a user with a TF1 checkpoint calls),
     free-running synthesis through its documented path ``model.synthesize(ids, lengths, speaker_embeddings,
     max_iters=...)`` (at batch 1 the decoder runs the native step, :mod:`tf_layers._native`; else one
     ``tf.function``); training a second model,
     ``compile(Adam(..., epsilon=1e-6, global_clipnorm=1.0))`` + ``train_on_batch`` (the ``tf.function`` train step
     ``fit`` runs). Should that fail with ``AlreadyExistsError`` (TF grappler's AddN -> TemporaryVariable rewrite
     in the decoder loop's gradient, tensorflow#23780/#38906: at RTVC sizes the 2nd step fails), the server notes
     it and times the same call with grappler off around the training step only (``disable_meta_optimizer``);
   * ``torch``: ``torch_layers.Tacotron2.from_tf1_checkpoint(CKPT).eval()`` called under ``torch.inference_mode()``
     (at batch 1 the decoder runs the native step, :mod:`torch_layers._native`, built on first use; else the
     module's TorchScript loop); training a second model,
     the ordinary loop step (``zero_grad``, forward in ``train()``, ``tacotron2_loss``, ``backward``,
     ``clip_grad_norm_(1.0)``, ``Adam.step``);
   * ``legacy``: the TF1 graph ``parity_tests.legacy.tf1_tacotron2.tacotron2`` under ``Tacotron_model/inference``
     (inputs held in graph variables: no feed cost; the step cap a ``placeholder_with_default``, fed only for the
     one-step run), ``session.run`` of every output; training a second graph,
     ``tacotron2_loss`` + ``AdamOptimizer.apply_gradients(clip_by_global_norm(grads, 1.0))`` after the batch-norm
     ``UPDATE_OPS`` (the original ``add_optimizer``), ``session.run([train_op, loss])``; it writes the two TF1
     checkpoints (``tf.compat.v1.train.Saver``) the other sides then load;

   prenet dropout on (what users run); synthesis with the stop-token bias at -1e3 (decoding never stops early),
   training with it at 0;
2. runs the same synthesis once with ``tacotron_dropout_rate=0`` (a deterministic twin with the same weights) and
   saves its outputs, plus the shape of the timed synthesis' ``mel_outputs``, to ``check`` (``.npz``);
3. warms the timed calls up and prints ``ready`` (and a JSON of notes: ``train_note`` when the documented
   training path fails and a workaround is timed; ``profile``: the ops of largest self time in a
   ``PROFILE_STEPS``-step synthesis, from ``torch.profiler`` (and the native step's own phase clock,
   :func:`speechblocks.native.phase_profile`), TensorFlow's profiler trace (Keras) or the TF1
   session's step stats); then each stdin line ``synth N`` / ``short N`` (the same
   synthesis with ``max_iters=1``: encoder, one step, postnet) / ``train N`` runs that call N times and prints
   the seconds.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from bench._timing import serve

SCOPE = "Tacotron_model/inference"
STOP_BIAS = "decoder/stop_token_projection/projection_stop_token_projection/bias"
PROFILE_STEPS = 30  # the free-running steps of the per-op profile (encoder and postnet included, spread over them)


def bench_inputs(synth: dict, train: dict, n_symbols: int, num_mels: int, speaker_size: int) -> dict:
    """The benchmark's inputs as numpy (identical on every side): seed-0 draws.

    Synthesis: ``synth["batch"]`` rows of ``synth["symbols"]`` ids, full lengths, unit-norm speaker embeddings
    (as the RTVC encoder gives). Training: ``train["batch"]`` rows of ``train["symbols"]`` ids with decreasing
    lengths, ``train["frames"]`` mel frames in [-4, 4] padded with -4 past decreasing target lengths, stop
    targets 1 from each row's last real frame on (the RTVC feeder's convention).
    """
    rng = np.random.default_rng(0)

    def speakers(b):
        e = rng.standard_normal((b, speaker_size)).astype(np.float32)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    b, t = synth["batch"], synth["symbols"]
    out = {"ids": rng.integers(1, n_symbols, (b, t)).astype(np.int32), "lengths": np.full((b,), t, np.int32),
           "spk": speakers(b)}
    b, t, f = train["batch"], train["symbols"], train["frames"]
    lengths = np.array([t - (7 * i) % (t // 2) for i in range(b)], np.int32)
    t_lens = np.array([f - (11 * i) % (f // 2) for i in range(b)], np.int32)
    mel = np.full((b, f, num_mels), -4.0, np.float32)
    stop = np.ones((b, f), np.float32)
    for i in range(b):
        mel[i, :t_lens[i]] = rng.uniform(-4.0, 4.0, (t_lens[i], num_mels))
        stop[i, :t_lens[i] - 1] = 0.0
    out.update(t_ids=rng.integers(1, n_symbols, (b, t)).astype(np.int32), t_lengths=lengths, t_spk=speakers(b),
               t_mel=mel, t_stop=stop, t_mel_lengths=t_lens)
    return out


def _save_check(path: str, out: dict, timed_shape) -> None:
    np.savez(path, timed_shape=np.array(timed_shape, np.int64),
             **{k: np.asarray(out[k], np.float32) for k in ("decoder_outputs", "mel_outputs", "stop_token_prediction",
                                                           "alignments")})


# -- Keras ------------------------------------------------------------------------------------------------------------
def _keras(cfg: dict, weights: dict, train_weights: dict, data: dict, threads: int):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import keras

    import tf_layers
    from speechblocks import native

    steps = cfg["synth"]["steps"]
    ckpt = cfg["checkpoints"]
    model = tf_layers.Tacotron2.from_tf1_checkpoint(ckpt["synth"])
    deterministic = tf_layers.Tacotron2.from_tf1_checkpoint(ckpt["synth"], tacotron_dropout_rate=0.0)
    timed = model.synthesize(data["ids"], data["lengths"], data["spk"], max_iters=steps)
    _save_check(cfg["check"], deterministic.synthesize(data["ids"], data["lengths"], data["spk"], max_iters=steps),
                timed["mel_outputs"].shape)
    del deterministic

    trainee = tf_layers.Tacotron2.from_tf1_checkpoint(ckpt["train"])
    hp = trainee.hparams
    trainee.compile(optimizer=keras.optimizers.Adam(hp.tacotron_initial_learning_rate, beta_1=hp.tacotron_adam_beta1,
                                                    beta_2=hp.tacotron_adam_beta2, epsilon=hp.tacotron_adam_epsilon,
                                                    global_clipnorm=1.0))
    x = dict(inputs=data["t_ids"], input_lengths=data["t_lengths"], speaker_embeddings=data["t_spk"],
             mel_targets=data["t_mel"])
    y = dict(mel_targets=data["t_mel"], stop_token_targets=data["t_stop"], targets_lengths=data["t_mel_lengths"])

    def train():
        return trainee.train_on_batch(x, y)

    info = {}
    try:
        for _ in range(2):  # traced on the first call, reused by the second (where the grappler bug bites)
            train()
    except tf.errors.AlreadyExistsError as e:
        # TF grappler's memory optimizer turns a large AddN of the decoder loop's gradient into a per-step
        # TemporaryVariable that a later run finds still there (tensorflow#23780, #38906); grappler off for the
        # training function only (the synthesis function keeps its optimised instance)
        node = str(e).split("Detected at node ", 1)[-1].split(" ", 1)[0]
        info["train_note"] = (f"the documented train_on_batch (= fit's step) fails at its 2nd call with "
                              f"AlreadyExistsError at {node.rsplit('/', 3)[-2]} of the decoder while-loop gradient; "
                              f"timed with grappler off for the training step (workaround)")

        def train():
            tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
            try:
                return trainee.train_on_batch(x, y)
            finally:
                tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})

    runs = {"synth": lambda: model.synthesize(data["ids"], data["lengths"], data["spk"], max_iters=steps),
            "short": lambda: model.synthesize(data["ids"], data["lengths"], data["spk"], max_iters=1),
            # the call a Keras user makes as often as synthesize: the model called eagerly
            "call": lambda: model(data["ids"], data["lengths"], data["spk"], max_iters=steps),
            "train": train}
    model.synthesize(data["ids"], data["lengths"], data["spk"], max_iters=PROFILE_STEPS)
    with native.phase_profile() as phases:
        ops = _keras_op_times(
            lambda: model.synthesize(data["ids"], data["lengths"], data["spk"], max_iters=PROFILE_STEPS))
    info["profile"] = _top_ops({**ops, **_native_phase_ms(phases)}, PROFILE_STEPS)
    return runs, {"synth": 2, "short": 2, "call": 2, "train": 1 if "train_note" in info else 0}, info


def _keras_op_times(run) -> dict:
    """Milliseconds of kernel time by op type over one call of ``run``, from TensorFlow's profiler trace (the
    executor's op events on its compute threads: the XPlane events named ``node:OpType``)."""
    import glob
    import shutil
    import tempfile

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="keras-profile-")
    try:
        tf.profiler.experimental.start(logdir)
        try:
            run()
        finally:
            tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    ops: dict = {}
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                if meta.display_name and ":" in meta.name:
                    ops[meta.display_name] = ops.get(meta.display_name, 0.0) + event.duration_ps / 1e9
    return ops


# -- torch ------------------------------------------------------------------------------------------------------------
def _torch(cfg: dict, weights: dict, train_weights: dict, data: dict, threads: int):
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    import torch_layers
    from speechblocks import native

    steps = cfg["synth"]["steps"]
    ckpt = cfg["checkpoints"]
    t = {k: torch.from_numpy(v) for k, v in data.items()}
    model = torch_layers.Tacotron2.from_tf1_checkpoint(ckpt["synth"]).eval()
    deterministic = torch_layers.Tacotron2.from_tf1_checkpoint(ckpt["synth"], tacotron_dropout_rate=0.0).eval()

    def synth(max_iters: int = steps):
        with torch.inference_mode():
            return model(t["ids"], t["lengths"], t["spk"], max_iters=max_iters)

    with torch.inference_mode():
        out = deterministic(t["ids"], t["lengths"], t["spk"], max_iters=steps)
    _save_check(cfg["check"], {k: v.numpy() for k, v in out.items()}, tuple(synth()["mel_outputs"].shape))
    del deterministic

    trainee = torch_layers.Tacotron2.from_tf1_checkpoint(ckpt["train"])
    trainee.train()
    hp = trainee.hparams
    opt = torch.optim.Adam(trainee.parameters(), lr=hp.tacotron_initial_learning_rate,
                           betas=(hp.tacotron_adam_beta1, hp.tacotron_adam_beta2), eps=hp.tacotron_adam_epsilon)

    def train():
        opt.zero_grad()
        out = trainee(t["t_ids"], t["t_lengths"], t["t_spk"], t["t_mel"])
        loss = torch_layers.tacotron2_loss(trainee, out, t["t_mel"], t["t_stop"], t["t_mel_lengths"])["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainee.parameters(), 1.0)
        opt.step()
        return float(loss)

    synth(PROFILE_STEPS)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, \
            native.phase_profile() as phases:
        synth(PROFILE_STEPS)
    ops = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}  # ms
    info = {"profile": _top_ops({**ops, **_native_phase_ms(phases)}, PROFILE_STEPS)}
    return {"synth": synth, "short": lambda: synth(1), "train": train}, {"synth": 2, "short": 2, "train": 1}, info


def _native_phase_ms(phases: dict) -> dict:
    """Milliseconds by phase of the native decoder steps timed by ``speechblocks.native.phase_profile`` (one C call
    a step, which neither TensorFlow's profiler nor ``torch.profiler`` sees), named ``native step: PHASE``."""
    from speechblocks import native

    return {"native step: " + name: phases[name] * 1e3 for name in native.PHASES if phases["steps"]}


def _top_ops(ms_by_op: dict, steps: int, n: int = 6) -> list:
    """The ``n`` ops of largest self time: ``(name, ms per decoder step, share of the total)``."""
    total = sum(ms_by_op.values()) or 1.0
    top = sorted(ms_by_op.items(), key=lambda kv: -kv[1])[:n]
    return [(name, ms / steps, ms / total) for name, ms in top]


# -- the TF1 graph ----------------------------------------------------------------------------------------------------
def _legacy(cfg: dict, weights: dict, train_weights: dict, data: dict, threads: int):
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "run the legacy side with TF_USE_LEGACY_KERAS=1"
    import tensorflow as tf

    from parity_tests.legacy.tf1_tacotron2 import tacotron2, tacotron2_loss
    from speechblocks import resolve_hparams

    v1 = tf.compat.v1
    steps = cfg["synth"]["steps"]
    config = v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)

    def held(name, value):
        return v1.get_variable(name, initializer=tf.constant(value), trainable=False)

    def session(graph, init, weights):
        sess = v1.Session(graph=graph, config=config)
        sess.run(init)
        prefix = SCOPE + "/"
        model_vars = {v.op.name[len(prefix):]: v for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)
                      if v.op.name.startswith(prefix) and v.op.name[len(prefix):] in weights}
        missing = sorted(set(weights) - set(model_vars))
        if missing:
            raise RuntimeError(f"the TF1 graph lacks variables of the weights: {missing[:10]}")
        with graph.as_default():
            for name, var in model_vars.items():
                var.load(weights[name], sess)
        return sess, model_vars

    def save(sess, graph, model_vars, prefix):
        """A real TF1 checkpoint of the model's variables (what the Keras and torch sides load)."""
        with graph.as_default():
            v1.train.Saver(list(model_vars.values())).save(sess, prefix, write_meta_graph=False, write_state=False)

    def synthesis_graph(rate):
        hp = resolve_hparams("rtvc", tacotron_dropout_rate=rate)
        graph = tf.Graph()
        with graph.as_default():
            with v1.variable_scope("bench_inputs"):
                ids, lengths, spk = (held(k, data[k]) for k in ("ids", "lengths", "spk"))
                # the step cap: `steps` unless fed (the one-step run of the per-step estimate)
                cap = v1.placeholder_with_default(tf.constant(steps, tf.int32), [], name="max_iters")
            with v1.variable_scope(SCOPE):
                out = tacotron2(hp, ids, lengths, False, speaker_embeddings=spk, max_iters=cap)
            init = v1.global_variables_initializer()
        sess, model_vars = session(graph, init, weights)
        return sess, out, cap, graph, model_vars

    sess0, out0, _, _, _ = synthesis_graph(0.0)
    sess, out, cap, synth_graph, synth_vars = synthesis_graph(resolve_hparams("rtvc").tacotron_dropout_rate)
    save(sess, synth_graph, synth_vars, cfg["checkpoints"]["synth"])
    _save_check(cfg["check"], sess0.run(out0), sess.run(out)["mel_outputs"].shape)
    sess0.close()

    hp = resolve_hparams("rtvc")
    graph = tf.Graph()
    with graph.as_default():
        with v1.variable_scope("bench_inputs"):
            ids, lengths, spk, mel, stop, mel_lengths = (
                held(k, data[k]) for k in ("t_ids", "t_lengths", "t_spk", "t_mel", "t_stop", "t_mel_lengths"))
        with v1.variable_scope(SCOPE):
            outputs = tacotron2(hp, ids, lengths, True, speaker_embeddings=spk, mel_targets=mel)
        variables = v1.trainable_variables()
        loss = tacotron2_loss(hp, outputs, mel, stop, mel_lengths, variables)["loss"]
        with v1.variable_scope("optimizer"):
            optimizer = v1.train.AdamOptimizer(hp.tacotron_initial_learning_rate, hp.tacotron_adam_beta1,
                                               hp.tacotron_adam_beta2, hp.tacotron_adam_epsilon)
            gradients, variables = zip(*optimizer.compute_gradients(loss))
            clipped, _ = tf.clip_by_global_norm(gradients, 1.0)
            with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
                train_op = optimizer.apply_gradients(zip(clipped, variables))
        init = v1.global_variables_initializer()
    train_sess, train_vars = session(graph, init, train_weights)
    save(train_sess, graph, train_vars, cfg["checkpoints"]["train"])
    fetches = [train_op, loss]
    runs = {"synth": lambda: sess.run(out), "short": lambda: sess.run(out, {cap: 1}),
            "call": lambda: sess.run(out), "train": lambda: train_sess.run(fetches)}
    # per-op profile: the kernels' times of one run from the session's step stats, by op type
    for _ in range(2):
        sess.run(out, {cap: PROFILE_STEPS})
    meta = v1.RunMetadata()
    sess.run(out, {cap: PROFILE_STEPS}, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
             run_metadata=meta)
    ops: dict = {}
    for device in meta.step_stats.dev_stats:
        for node in device.node_stats:
            kind = node.timeline_label.split("(", 1)[0].split(" = ", 1)[-1].strip() or node.node_name
            ops[kind] = ops.get(kind, 0.0) + (node.op_end_rel_micros - node.op_start_rel_micros) / 1e3
    return runs, {"synth": 2, "short": 2, "call": 2, "train": 1}, {"profile": _top_ops(ops, PROFILE_STEPS)}


def main(argv=None) -> int:
    args = argv or sys.argv[1:]
    side, cfg = args[0], json.loads(args[1])
    threads = int(args[2]) if len(args) > 2 else 0
    from speechblocks import resolve_hparams

    hp = resolve_hparams("rtvc")
    with np.load(cfg["weights"]) as f:
        weights = {k: f[k] for k in f.files}
    train_weights = dict(weights)  # training: the stop-token bias as initialised (synthesis: -1e3, never stops)
    train_weights[STOP_BIAS] = np.zeros_like(weights[STOP_BIAS])
    data = bench_inputs(cfg["synth"], cfg["train"], hp.n_symbols, hp.num_mels, hp.speaker_embedding_size)
    build = {"keras": _keras, "torch": _torch, "legacy": _legacy}[side]
    protocol, sys.stdout = sys.stdout, sys.stderr  # whatever the libraries print must not mix with the protocol
    return serve(*build(cfg, weights, train_weights, data, threads), protocol)


if __name__ == "__main__":
    sys.exit(main())
