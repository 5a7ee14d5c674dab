"""A training loop's LSTM weight gradients from one product after the loop (tf_layers/_loop_weight_gradient.py)
equal TensorFlow's own per-step gradient of the plain loop."""
import numpy as np
import tensorflow as tf

from tf_layers import Tacotron2Decoder
from tf_layers._loop_weight_gradient import StepInputs, weight_gradient_tap


def _loop(x, w, b, tapped: bool):
    """``h_t = tanh(concat([x_t, h_{t-1}]) @ W + b)`` over ``x`` ``(steps, batch, n)``; returns every ``h_t``."""
    steps, batch = x.shape[0], x.shape[1]
    units = w.shape[1]
    holder = StepInputs(1)
    if tapped:
        base = weight_gradient_tap(tf.broadcast_to(b, [steps, batch, units]), w, holder, 0)
        kernel = tf.stop_gradient(w)
    recorded = tf.TensorArray(x.dtype, size=steps)
    outs = tf.TensorArray(x.dtype, size=steps)
    h = tf.zeros([batch, units], x.dtype)
    for t in range(steps):  # a Python loop inside tf.function: the same per-step ops as a while loop
        xin = tf.concat([x[t], h], -1)
        if tapped:
            recorded = recorded.write(t, tf.stop_gradient(xin))
            h = tf.tanh(tf.matmul(xin, kernel) + base[t])
        else:
            h = tf.tanh(tf.matmul(xin, w) + b)
        outs = outs.write(t, h)
    holder.inputs[0] = recorded.stack()
    return outs.stack()


def test_tap_gives_the_per_step_gradient_of_a_recurrent_loop():
    g = np.random.default_rng(0)
    x = tf.constant(g.standard_normal((5, 3, 4)))
    w = tf.Variable(g.standard_normal((4 + 6, 6)) * 0.5)
    b = tf.Variable(g.standard_normal(6) * 0.1)
    probe = tf.constant(g.standard_normal((5, 3, 6)))

    @tf.function
    def grads(tapped):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(_loop(x, w, b, tapped) * probe)
        return tape.gradient(loss, [w, b, x])

    ref = [v.numpy() for v in grads(False)]
    got = [v.numpy() for v in grads(True)]
    for r, a in zip(ref, got):
        assert np.abs(r).max() > 0.1
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12)


def test_tap_without_recorded_inputs_says_so():
    holder = StepInputs(1)
    w = tf.Variable(tf.ones((2, 3)))
    with tf.GradientTape() as tape:
        y = weight_gradient_tap(tf.zeros((1, 1, 3)), w, holder, 0)
    try:
        tape.gradient(y, w)
    except RuntimeError as e:
        assert "did not record the inputs of product 0" in str(e)
    else:
        raise AssertionError("no error")


def test_decoder_training_gradients_equal_the_plain_loop():
    # training=True runs the tapped loop; training=False the plain one; with every keep-mask injected both compute the
    # same function of the weights, so every decoder variable's gradient must agree
    config = dict(num_mels=4, outputs_per_step=2, prenet_layers=(8, 8), drop_rate=0.5, decoder_layers=2,
                  decoder_lstm_units=16, zoneout=0.1, attention_dim=6, attention_filters=3, attention_kernel=5,
                  max_iters=100, stop_at_any=False)
    g = np.random.default_rng(1)
    batch, t_in, steps = 3, 7, 6
    memory = g.standard_normal((batch, t_in, 10)).astype(np.float32)
    lengths = np.array([7, 5, 6], np.int32)
    mel = g.standard_normal((batch, 2 * steps, 4)).astype(np.float32)
    masks = {"prenet": [(g.random((batch, steps, 8)) > 0.5).astype(np.float32) for _ in range(2)],
             "decoder_LSTM": [tuple((g.random((batch, steps, 16)) > 0.1).astype(np.float32) for _ in range(2))
                              for _ in range(2)]}
    dec = Tacotron2Decoder(**config)
    dec(memory, lengths, mel_targets=mel, noise_masks=masks)
    probes = [g.standard_normal(s).astype(np.float32) for s in ((batch, steps, 8), (batch, t_in, steps))]

    def grads(training):
        with tf.GradientTape() as tape:
            frames, _, alignments = dec(memory, lengths, mel_targets=mel, training=training, noise_masks=masks)
            loss = tf.reduce_sum(frames * probes[0]) + tf.reduce_sum(alignments * probes[1])
        return loss, tape.gradient(loss, dec.trainable_variables)

    loss_plain, ref = grads(False)
    loss_tap, got = grads(True)
    np.testing.assert_allclose(loss_tap.numpy(), loss_plain.numpy(), rtol=1e-6)
    lstm = {id(c.kernel) for c in dec.decoder_lstm.cells}
    checked = 0
    for v, r, a in zip(dec.trainable_variables, ref, got):
        # the stop projection is not in the loss: None here, zeros through the compiled inference loop
        r = np.zeros(v.shape, np.float32) if r is None else np.asarray(r)
        a = np.zeros(v.shape, np.float32) if a is None else np.asarray(a)
        scale = max(float(np.abs(r).max()), 1e-6)
        assert float(np.abs(a - r).max()) <= 1e-5 * scale, v.path
        checked += id(v) in lstm and scale > 1e-3
    assert checked == 2  # both LSTM kernels have real gradients


def test_decoder_rnn_sequence_training_gradients_equal_the_plain_loop():
    from tf_layers import DecoderRNN

    g = np.random.default_rng(2)
    batch, steps, n_in, units = 3, 9, 5, 12
    rnn = DecoderRNN(layers=3, size=units, zoneout=0.1)
    x = tf.constant(g.standard_normal((batch, steps, n_in)).astype(np.float32))
    masks = [tuple((g.random((batch, steps, units)) > 0.1).astype(np.float32) for _ in range(2)) for _ in range(3)]
    rnn(x, zoneout_masks=masks)
    probe = g.standard_normal((batch, steps, units)).astype(np.float32)

    def grads(training):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out, states = rnn(x, training=training, zoneout_masks=masks)
            loss = tf.reduce_sum(out * probe) + tf.reduce_sum(states[-1][0])
        return loss, tape.gradient(loss, rnn.trainable_variables + [x])

    loss_plain, ref = grads(False)
    loss_tap, got = grads(True)
    np.testing.assert_allclose(loss_tap.numpy(), loss_plain.numpy(), rtol=1e-6)
    assert len(ref) == 7  # 3 kernels, 3 biases, the input
    for r, a in zip(ref, got):
        r, a = np.asarray(r), np.asarray(a)
        scale = float(np.abs(r).max())
        assert scale > 1e-3
        assert float(np.abs(a - r).max()) <= 1e-5 * scale


def test_decoder_rnn_tapped_gradients_under_mixed_precision():
    # float16 compute: the taps' products run in the compute dtype, the variables' gradients arrive in float32
    from tf_layers import DecoderRNN

    g = np.random.default_rng(3)
    x = g.standard_normal((2, 6, 5)).astype(np.float32)
    ref = DecoderRNN(layers=2, size=8, zoneout=0.0)
    mp = DecoderRNN(layers=2, size=8, zoneout=0.0, dtype="mixed_float16")
    ref(x), mp(x)
    mp.set_weights(ref.get_weights())

    def grads(rnn):
        with tf.GradientTape() as tape:
            out, _ = rnn(x, training=True)
            loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
        return tape.gradient(loss, rnn.trainable_variables)

    for r, a in zip(grads(ref), grads(mp)):
        assert a.dtype == tf.float32
        r, a = r.numpy(), a.numpy()
        assert np.all(np.isfinite(a))
        assert np.abs(a - r).max() <= 1e-2 * max(1.0, np.abs(r).max())


def test_decoder_rnn_sequence_of_no_steps():
    # as the torch twin: outputs (batch, 0, u), the final states the initial ones, zero gradients in training
    from tf_layers import DecoderRNN

    rnn = DecoderRNN(layers=2, size=8, zoneout=0.1)
    rnn(np.zeros((2, 3, 5), np.float32))
    h0 = [(tf.ones((2, 8)) * 0.5, tf.ones((2, 8)) * 0.25)] * 2
    for training in (False, True):
        with tf.GradientTape() as tape:
            out, states = rnn(np.zeros((2, 0, 5), np.float32), h0, training=training)
            loss = tf.reduce_sum(out) + tf.reduce_sum(states[1][1])
        assert tuple(out.shape) == (2, 0, 8)
        np.testing.assert_array_equal(states[1][1].numpy(), h0[1][1].numpy())
        for g in tape.gradient(loss, rnn.trainable_variables):
            assert g is None or not np.any(np.asarray(tf.convert_to_tensor(g)))
