import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_layers
from speechblocks import resolve_hparams, tf1_variable_shapes
from tf_layers import Tacotron2, tacotron2_loss

SMALL = dict(embedding_dim=16, enc_conv_channels=16, encoder_lstm_units=8, attention_dim=8, attention_filters=4,
             attention_kernel=(5,), prenet_layers=[8, 8], decoder_layers=2, decoder_lstm_units=16, postnet_channels=16,
             postnet_num_layers=3, num_mels=6, speaker_embedding_size=4, max_iters=9, tacotron_dropout_rate=0.0)


def _model(preset="rtvc", seed=0, **kw):
    cfg = {**SMALL, **kw}
    if preset == "rayhane":
        cfg.setdefault("num_freq", 9)
        cfg["speaker_embedding_size"] = kw.get("speaker_embedding_size")
    model = Tacotron2(preset, **cfg)
    g = np.random.default_rng(seed)
    model.load_tf1_weights({k: (0.4 * g.standard_normal(v.shape)).astype(np.float32) if "moving_variance" not in k
                            else g.uniform(0.5, 1.5, v.shape).astype(np.float32)
                            for k, v in model.tf1_weights().items()})
    return model


def _batch(model, b=2, t_in=5, t_out=8, seed=1):
    g = np.random.default_rng(seed)
    hp = model.hparams
    ids = g.integers(2, hp.n_symbols, (b, t_in)).astype(np.int32)
    lens = np.maximum(1, t_in - 2 * np.arange(b)).astype(np.int32)
    spk = g.standard_normal((b, hp.speaker_embedding_size)).astype(np.float32) if hp.speaker_embedding_size else None
    mel = g.standard_normal((b, t_out, hp.num_mels)).astype(np.float32)
    return ids, lens, spk, mel


def _close(a, b, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol, rtol=0)


# -- names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_tf1_names_are_the_original_graphs(preset):
    model = Tacotron2(preset)
    assert {k: tuple(v.shape) for k, v in model.tf1_weights().items()} == tf1_variable_shapes(model.hparams)
    assert "memory_layer/kernel" in model.tf1_weights()
    assert "decoder/Location_Sensitive_Attention/query_layer/kernel" in model.tf1_weights()


# -- the decoder loop against the blocks stepped by hand ------------------------------------------------
def _by_hand(model, ids, lens, spk, mel=None, max_iters=None, prenet_masks=None):
    """The decoder of the spec, one block call per step (Prenet, DecoderRNN, attention, projections)."""
    hp, dec = model.hparams, model.decoder
    x = model.embedding(ids)
    enc = model.encoder_lstm(model.encoder_convolutions(x), lens)
    memory = tf.concat([enc, tf.tile(spk[:, None], [1, ids.shape[1], 1])], -1) if spk is not None else enc
    b, t_in = ids.shape
    r, m = hp.outputs_per_step, hp.num_mels
    frame = tf.zeros((b, m))
    context = tf.zeros((b, memory.shape[-1]))
    att_state = tf.zeros((b, t_in))
    states = dec.decoder_lstm.get_initial_state(b)
    frames, stops, aligns = [], [], []
    steps = mel.shape[1] // r if mel is not None else max_iters
    for t in range(steps):
        masks = None if prenet_masks is None else [pm[:, t] for pm in prenet_masks]
        p = dec.prenet(frame, dropout_masks=masks)
        out, states = dec.decoder_lstm(tf.concat([p, context], -1), states)
        context, a, att_state = dec.attention(out, att_state, memory, lens)
        proj_in = tf.concat([out, context], -1)
        f, s = dec.frame_projection(proj_in), dec.stop_projection(proj_in)
        frames.append(f), stops.append(s), aligns.append(a)
        if mel is not None:
            frame = mel[:, r * (t + 1) - 1]
        else:
            frame = f[:, -m:]
            done = np.all(np.round(np.asarray(s)) == 1, axis=0)
            if (done.any() if hp.stop_at_any else done.all()):
                break
    dec_out = tf.reshape(tf.stack(frames, 1), (b, -1, m))
    mel_out = dec_out + model.postnet_projection(model.postnet(dec_out))
    return dec_out, mel_out, tf.reshape(tf.stack(stops, 1), (b, -1)), tf.stack(aligns, -1)


@pytest.mark.parametrize("mode", ["teacher_forced", "free_running"])
def test_model_equals_blocks_stepped_by_hand(mode):
    model = _model(tacotron_dropout_rate=0.5)
    ids, lens, spk, mel = _batch(model)
    g = np.random.default_rng(3)
    steps = 4 if mode == "teacher_forced" else 9
    masks = [(g.random((2, steps, 8)) > 0.5).astype(np.float32) for _ in range(2)]
    kw = dict(mel_targets=mel) if mode == "teacher_forced" else dict(max_iters=steps)
    out = model(ids, lens, spk, noise_masks={"prenet": masks}, **kw)
    want = _by_hand(model, ids, lens, spk, mel if mode == "teacher_forced" else None, steps, masks)
    for key, w in zip(("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments"), want):
        _close(out[key], w, 2e-5)


def _stop_model(bias, r=2, stop_at_any=True, max_iters=6):
    model = _model(outputs_per_step=r, stop_at_any=stop_at_any, max_iters=max_iters)
    proj = model.decoder.stop_projection.dense
    proj.kernel.assign(np.zeros(proj.kernel.shape, np.float32))
    proj.bias.assign(np.asarray(bias, np.float32))
    return model


@pytest.mark.parametrize("bias, stop_at_any, steps", [
    ([10.0, 10.0], True, 1), ([10.0, -10.0], True, 1), ([10.0, -10.0], False, 6), ([-10.0, -10.0], True, 6),
    ([0.0, 0.0], True, 6),  # p = 0.5 rounds to 0 (half to even): never stops
])
def test_stop_rule(bias, stop_at_any, steps):
    model = _stop_model(bias, stop_at_any=stop_at_any)
    ids, lens, spk, _ = _batch(model)
    out = model(ids, lens, spk)
    assert out["alignments"].shape[-1] == steps
    assert out["mel_outputs"].shape[1] == 2 * steps


def test_teacher_forcing_steps_and_gta_cap():
    model = _model(outputs_per_step=2, max_iters=3)
    ids, lens, spk, mel = _batch(model, t_out=9)
    assert model(ids, lens, spk, mel_targets=mel, training=True)["alignments"].shape[-1] == 4  # floor(9 / 2)
    assert model(ids, lens, spk, mel_targets=mel)["alignments"].shape[-1] == 3  # GTA: max_iters caps
    out = model(ids, lens, spk, mel_targets=mel[:, :2])
    assert out["alignments"].shape[-1] == 1


def test_unknown_batch_and_time_in_one_trace():
    model = _model()
    fn = tf.function(lambda i, n, s: model(i, n, s, max_iters=4),
                     input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                                      tf.TensorSpec([None, 4])])
    for b, t in ((2, 5), (1, 3), (3, 7)):
        ids, lens, spk, _ = _batch(model, b, t)
        got, want = fn(ids, lens, spk), model(ids, lens, spk, max_iters=4)
        _close(got["mel_outputs"], want["mel_outputs"], 1e-6)
    assert len(fn._list_all_concrete_functions()) == 1


# -- loss ---------------------------------------------------------------------------------------
def _numpy_reg(model):
    total = 0.0
    for name, v in model.tf1_weights().items():
        full = "Tacotron_model/inference/" + name
        if "moving_" in name or any(s in full
                                    for s in ("bias", "Bias", "_projection", "inputs_embedding", "RNN", "LSTM")):
            continue
        total += float(np.sum(np.asarray(v, np.float64) ** 2) / 2)
    return total * model.hparams.reg_weight


def _sigmoid_xent(z, y):
    return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))


@pytest.mark.parametrize("preset, mask_decoder",
                         [("rtvc", False), ("rtvc", True), ("rayhane", False), ("rayhane", True)])
def test_loss_against_numpy(preset, mask_decoder):
    model = _model(preset, mask_decoder=mask_decoder, tacotron_reg_weight=1e-3, tacotron_scale_regularization=True,
                   cross_entropy_pos_weight=3.0)
    ids, lens, spk, mel = _batch(model, t_out=8)
    r = model.hparams.outputs_per_step
    stop_t = (np.arange(8)[None] >= np.array([[7], [5]])).astype(np.float32)
    t_lens = np.array([8, 6], np.int32)
    lin_t = np.random.default_rng(5).standard_normal((2, 8, 9)).astype(np.float32) if preset == "rayhane" else None
    out = model(ids, lens, spk, mel_targets=mel, training=True)
    got = {k: float(v) for k, v in tacotron2_loss(model, out, mel, stop_t, t_lens, lin_t).items()}
    d, m_, z = (np.asarray(out[k], np.float64) for k in ("decoder_outputs", "mel_outputs", "stop_token_prediction"))
    if mask_decoder:
        w = (np.arange(8)[None] < t_lens[:, None]).astype(np.float64)
        before = np.sum(w[..., None] * (d - mel) ** 2) / (w.sum() * 6)
        after = np.sum(w[..., None] * (m_ - mel) ** 2) / (w.sum() * 6)
        xe = (1 - stop_t) * z + (1 + 2.0 * stop_t) * (np.log1p(np.exp(-np.abs(z))) + np.maximum(-z, 0))
        stop = np.sum(xe * w) / np.count_nonzero(xe * w)
    else:
        before, after = np.mean((d - mel) ** 2), np.mean((m_ - mel) ** 2)
        stop = np.mean(_sigmoid_xent(z, stop_t))
    if preset == "rtvc":
        linear = 0.0 if mask_decoder else np.mean(np.abs(mel - d))
    else:
        lin = np.asarray(out["linear_outputs"], np.float64)
        l1 = np.abs(lin_t - lin)
        n = int(2000 / (model.hparams.sample_rate * 0.5) * 9)
        if mask_decoder:
            w3 = w[..., None]
            linear = 0.5 * np.sum(w3 * l1) / (w.sum() * 9) + 0.5 * np.sum(w3 * l1[..., :n]) / (w.sum() * 9)
        else:
            linear = 0.5 * np.mean(l1) + 0.5 * np.mean(l1[..., :n])
    reg = _numpy_reg(model)
    want = dict(before_loss=before, after_loss=after, stop_token_loss=stop, linear_loss=linear,
                regularization_loss=reg, loss=before + after + stop + linear + reg)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=2e-5, atol=1e-6, err_msg=k)
    assert r == model.hparams.outputs_per_step


def test_loss_and_gradients_keyed_by_tf1_name():
    model = _model(tacotron_zoneout_rate=0.0)  # deterministic training pass (no zoneout, no dropout)
    ids, lens, spk, mel = _batch(model)
    stop_t = np.zeros((2, 8), np.float32)
    losses, grads = model.tf1_loss_and_gradients(ids, lens, mel, stop_t, np.array([8, 6]), speaker_embeddings=spk)
    trainable = {k for k in tf1_variable_shapes(model.hparams) if "moving_" not in k}
    assert set(grads) == trainable
    assert all(grads[k].shape == tf1_variable_shapes(model.hparams)[k] for k in grads)
    assert np.abs(grads["inputs_embedding"]).sum() > 0 and np.abs(grads["memory_layer/kernel"]).sum() > 0
    # a finite-difference check of one attention weight
    name = "decoder/Location_Sensitive_Attention/attention_bias"
    var = model.tf1_trainable_variables()[name]
    base = var.numpy().copy()
    eps = 1e-2
    vals = []
    for sign in (1, -1):
        var.assign(base + sign * eps * np.eye(len(base), dtype=np.float32)[0])
        vals.append(model.tf1_loss_and_gradients(ids, lens, mel, stop_t, np.array([8, 6]),
                                                 speaker_embeddings=spk)[0]["loss"])
    var.assign(base)
    np.testing.assert_allclose((vals[0] - vals[1]) / (2 * eps), grads[name][0], rtol=2e-2, atol=1e-4)
    assert losses["loss"] > 0


# -- training with fit, saving mid-training ---------------------------------------------------------
def _dataset(model, n=8, batch=4, seed=0):
    g = np.random.default_rng(seed)
    hp = model.hparams
    r = hp.outputs_per_step
    t_in, t_out = 6, 8
    ids = g.integers(2, hp.n_symbols, (n, t_in)).astype(np.int32)
    lens = g.integers(3, t_in + 1, n).astype(np.int32)
    t_lens = g.integers(4, t_out + 1, n).astype(np.int32)
    mel = np.full((n, t_out, hp.num_mels), -hp.max_abs_value, np.float32)
    stop = np.ones((n, t_out), np.float32)
    for i in range(n):  # the RTVC feeder: padding -max_abs_value, stop target 1 from the last real frame on
        mel[i, :t_lens[i]] = np.sin(np.arange(t_lens[i])[:, None] * (1 + ids[i, :hp.num_mels % t_in + 1].mean() / 60)
                                    + np.arange(hp.num_mels)[None])
        stop[i, :t_lens[i] - 1] = 0
    spk = g.standard_normal((n, hp.speaker_embedding_size)).astype(np.float32)
    assert t_out % r == 0
    x = dict(inputs=ids, input_lengths=lens, speaker_embeddings=spk, mel_targets=mel)
    y = dict(mel_targets=mel, stop_token_targets=stop, targets_lengths=t_lens)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def _compile(model):
    hp = model.hparams
    model.compile(optimizer=keras.optimizers.Adam(1e-2, beta_1=hp.tacotron_adam_beta1, beta_2=hp.tacotron_adam_beta2,
                                                  epsilon=hp.tacotron_adam_epsilon, global_clipnorm=1.0))


def test_fit_loss_falls_and_keras_round_trip_mid_training():
    keras.utils.set_random_seed(0)
    model = Tacotron2("rtvc", **SMALL, tacotron_zoneout_rate=0.0)  # deterministic steps: resumed runs must agree
    _compile(model)
    data = _dataset(model)
    hist = model.fit(data, epochs=10, verbose=0).history["loss"]  # the traced train step, as users run it
    assert hist[-1] < 0.7 * hist[0], hist
    # the rest runs Keras' steps eagerly (the same code path; each trace of a Tacotron2 step costs ~15 s of CPU),
    # except the resumed step of `model` below, which reuses the traced train function
    model.run_eagerly = True
    # evaluate: the GTA pass scored with the original loss (dropout and zoneout are 0: it equals the training loss
    # up to batch statistics vs moving statistics, so compare with the loss computed by hand in inference mode)
    xb, yb = next(iter(data))
    out = model(xb)
    p = np.clip(np.asarray(out["stop_token_prediction"], np.float64), 1e-7, 1 - 1e-7)
    logits = (np.log(p) - np.log1p(-p)).astype(np.float32)
    by_hand = tacotron2_loss(model, dict(out, stop_token_prediction=logits), yb["mel_targets"],
                             yb["stop_token_targets"], yb["targets_lengths"])["loss"]
    np.testing.assert_allclose(model.evaluate(data.take(1), verbose=0), float(by_hand), rtol=1e-4)
    x, _ = next(iter(data))
    ref = model(x, max_iters=4)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "taco.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    got = loaded(x, max_iters=4)
    for k in ref:
        _close(got[k], ref[k], 0.0)
    assert loaded.hparams == model.hparams
    # training resumes identically from the saved optimizer state: the traced step of `model`, an eager step of `loaded`
    model.run_eagerly = False
    loaded.run_eagerly = True
    model.fit(data.take(1), epochs=1, verbose=0)
    loaded.fit(data.take(1), epochs=1, verbose=0)
    for a, b in zip(model.weights, loaded.weights):
        _close(a, b, 1e-5)  # graph vs eager: float-noise gradients through one Adam step (seen: 2.6e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_close_to_float32(policy):
    ref = _model(tacotron_dropout_rate=0.0)
    ref_w = ref.tf1_weights()
    mp = Tacotron2("rtvc", **SMALL, dtype=policy)
    mp.load_tf1_weights(ref_w)
    assert all(v.dtype == "float32" for v in mp.weights)
    ids, lens, spk, mel = _batch(ref)
    for kw in (dict(mel_targets=mel), dict(max_iters=5)):
        a, b = ref(ids, lens, spk, **kw), mp(ids, lens, spk, **kw)
        assert b["mel_outputs"].dtype == ("float16" if policy == "mixed_float16" else "bfloat16")
        out = np.asarray(tf.cast(b["mel_outputs"], tf.float32))
        assert np.all(np.isfinite(out))
        scale = max(1.0, float(np.max(np.abs(a["mel_outputs"]))))
        tol = 1e-2 if policy == "mixed_float16" else 5e-2  # bfloat16 keeps 8 bits of mantissa
        assert np.max(np.abs(out - np.asarray(a["mel_outputs"]))) / scale < tol


# -- checkpoints --------------------------------------------------------------------------------
def _write_tf1_checkpoint(path, weights):
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.Variable(v, name="Tacotron_model/inference/" + k) for k, v in weights.items()]
        step = tf.compat.v1.Variable(7, name="global_step")
        adam = [tf.compat.v1.Variable(np.zeros_like(v), name="Tacotron_model/inference/" + k + "/Adam")
                for k, v in list(weights.items())[:3]]
        saver = tf.compat.v1.train.Saver(variables + [step] + adam)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return saver.save(sess, path)


def test_from_tf1_checkpoint_infers_hparams_and_loads_everything():
    src = _model("rtvc", outputs_per_step=3)
    ids, lens, spk, _ = _batch(src)
    with tempfile.TemporaryDirectory() as d:
        ckpt = _write_tf1_checkpoint(os.path.join(d, "model.ckpt"), src.tf1_weights())
        model = Tacotron2.from_tf1_checkpoint(ckpt, tacotron_dropout_rate=0.0, max_iters=9)
        assert model.hparams.outputs_per_step == 3 and model.hparams.speaker_embedding_size == 4
        assert model.hparams.num_mels == 6 and model.hparams.decoder_lstm_units == 16
        for k, v in src.tf1_weights().items():
            np.testing.assert_array_equal(model.tf1_weights()[k], v)
        _close(model(ids, lens, spk)["mel_outputs"], src(ids, lens, spk)["mel_outputs"], 0.0)
        with pytest.raises(ValueError) as err:
            Tacotron2.from_tf1_checkpoint(ckpt, hparams="rtvc")  # full-size hparams against a small model
        # one short line naming the cause first; every mismatch in .problems
        message = str(err.value)
        assert "\n" not in message and len(message.replace(str(ckpt), "")) < 300 and "mismatching" in message
        assert message.index("the hparams say") < message.index("mismatching variables")
        assert len(err.value.problems) > 5 and any("memory_layer/kernel" in p for p in err.value.problems)
        with pytest.raises(ValueError, match="outputs_per_step=2 where the shapes say 3") as err:  # an override
            Tacotron2.from_tf1_checkpoint(ckpt, outputs_per_step=2)
        assert any("stop_token_projection" in p for p in err.value.problems)


# -- bad input ----------------------------------------------------------------------------------
def test_bad_input_names_the_argument():
    model = _model()
    ids, lens, spk, mel = _batch(model)
    cases = [
        (dict(inputs=ids + 100), "inputs"),
        (dict(inputs=ids.astype(np.float32)), "inputs"),
        (dict(input_lengths=np.array([0, 3])), "input_lengths"),
        (dict(input_lengths=np.array([9, 3])), "input_lengths"),
        (dict(speaker_embeddings=None), "speaker_embeddings"),
        (dict(speaker_embeddings=np.zeros((2, 5), np.float32)), "speaker_embeddings"),
        (dict(mel_targets=np.zeros((2, 8, 7), np.float32)), "mel_targets"),
        (dict(max_iters=0), "max_iters"),
    ]
    for change, name in cases:
        args = dict(inputs=ids, input_lengths=lens, speaker_embeddings=spk)
        args.update(change)
        with pytest.raises(ValueError, match=name):
            model(**args)
    rayhane = _model("rayhane")
    with pytest.raises(ValueError, match="speaker_embeddings"):
        rayhane(ids, lens, spk)
    for bad, name in ((dict(outputs_per_step=0), "outputs_per_step"), (dict(tacotron_zoneout_rate=1.5), "zoneout"),
                      (dict(mask_encoder="yes"), "mask_encoder"), (dict(prenet_layers=[]), "prenet_layers"),
                      (dict(batch_norm_position="middle"), "batch_norm_position"),
                      (dict(no_such_name=1), "no_such_name")):
        with pytest.raises(ValueError, match=name):
            Tacotron2("rtvc", **bad)
    assert resolve_hparams("rayhane").speaker_embedding_size == 0
    assert tf_layers.tacotron2_hparams("rtvc")["outputs_per_step"] == 2


# -- the decoder as a Keras layer ------------------------------------------------------------------
def test_decoder_layer_contract():
    from tests.helpers.keras_layer_test import run_keras_layer_test
    from tf_layers import Tacotron2Decoder

    def inputs(b, t):
        g = np.random.default_rng(10 * b + t)
        return [g.standard_normal((b, t, 10)).astype(np.float32), np.maximum(1, t - np.arange(b)).astype(np.int32)]

    config = dict(num_mels=4, outputs_per_step=2, prenet_layers=(8,), drop_rate=0.0, decoder_layers=2,
                  decoder_lstm_units=8, attention_dim=4, attention_filters=2, attention_kernel=3, max_iters=5,
                  stop_at_any=False)
    run_keras_layer_test(
        Tacotron2Decoder, config, inputs,
        input_specs=[tf.TensorSpec([None, None, 10]), tf.TensorSpec([None], tf.int32)],
        bad_inputs=[([np.zeros((2, 3, 9), np.float32), np.array([3, 3], np.int32)], "memory"),
                    ([np.zeros((2, 3, 10), np.float32), np.array([3.0, 3.0], np.float32)], "memory_lengths")],
    )
    dec = Tacotron2Decoder(**config)
    with pytest.raises(ValueError, match="mel_targets"):
        dec(np.zeros((2, 3, 10), np.float32), np.array([3, 3]), mel_targets=np.zeros((2, 6, 5), np.float32))
    with pytest.raises(ValueError, match="mel_targets"):
        dec(np.zeros((2, 3, 10), np.float32), np.array([3, 3]), training=True)
    with pytest.raises(ValueError, match="max_iters"):
        dec(np.zeros((2, 3, 10), np.float32), np.array([3, 3]), max_iters=0)


def test_training_gradient_has_no_addn_of_three_inputs_in_loops():
    # TensorFlow's memory optimizer rewrites AddNs of >2 inputs into temporary variables, which inside while-loop
    # gradients fail with AlreadyExistsError from the second training step on (seen at real RTVC/Rayhane sizes).
    # The loops route multi-use tensors through fan_out / single-use forms; the structure does not depend on sizes.
    model = _model("rayhane", tacotron_zoneout_rate=0.1)
    ids, lens, _, mel = _batch(model, t_out=6)
    lin = np.zeros((2, 6, 9), np.float32)

    @tf.function
    def grads():
        with tf.GradientTape() as tape:
            out = model(ids, lens, mel_targets=mel, training=True)
            loss = tacotron2_loss(model, out, mel, np.zeros((2, 6), np.float32), np.array([6, 5]), lin)["loss"]
        return tape.gradient(loss, model.trainable_variables)

    library = grads.get_concrete_function().graph._functions
    bodies = [name for name in library if "while_body" in name and "grad" in name]
    assert len(bodies) >= 3  # encoder LSTM loops, decoder loop, CBHG GRU scan
    wide = [(name, n.name) for name in bodies for n in library[name].definition.node_def
            if n.op == "AddN" and n.attr["N"].i > 2]
    assert not wide, wide
