"""The TF1 legacy reference of the whole Tacotron-2 (``parity_tests/legacy/tf1_tacotron2.py``).

Checked against an independent float64 numpy model written here from the spec (/work/tacotron2_spec.md): the
graphs run in the legacy subprocess (``run_legacy``) with injected keep-masks where they would draw noise,
and the numpy model recomputes every output from the checkpoint the subprocess saved. Checks: the attention
block (masking, smoothing, cumulation, even kernels), the variable names and shapes against
``speechblocks.tf1_variable_shapes`` (RTVC, Rayhane with post-CBHG, RTVC with ``predict_linear``), free running
(stop rule with ``stop_at_any`` on and off, ``max_iters``), teacher forcing (``floor(T / r)`` steps, GTA capped by
``max_iters``), training-mode outputs, every loss term (both ``mask_decoder`` branches, RTVC and Rayhane linear
terms, scaled regularisation), the gradient table and gradients by finite differences of the numpy loss.

Each test function makes one ``run_legacy`` call, so pytest-xdist never runs a group twice.
"""
from __future__ import annotations

import numpy as np

from parity_tests.reference import LegacySpec, run_legacy
from speechblocks import resolve_hparams, tacotron2_hparams, tf1_variable_shapes
from tf_layers.checkpoint import read_tf1_checkpoint

ATT = "decoder/Location_Sensitive_Attention/"
EXCLUDED = ("bias", "Bias", "_projection", "inputs_embedding", "RNN", "LSTM")
N_SYMBOLS = 10
B, T_IN = 2, 7
LENGTHS = np.array([7, 4], np.int32)

SMALL = dict(num_mels=8, embedding_dim=6, enc_conv_num_layers=2, enc_conv_kernel_size=(3,), enc_conv_channels=5,
             encoder_lstm_units=4, attention_dim=5, attention_filters=3, attention_kernel=(5,), prenet_layers=[6, 4],
             decoder_layers=2, decoder_lstm_units=7, postnet_num_layers=3, postnet_kernel_size=(3,),
             postnet_channels=5, tacotron_zoneout_rate=0.3, tacotron_reg_weight=1e-2)
RTVC = dict(tacotron2_hparams("rtvc"), **SMALL, speaker_embedding_size=3)
RAYHANE = dict(tacotron2_hparams("rayhane"), **SMALL, num_freq=25, cbhg_kernels=3, cbhg_conv_channels=4,
               cbhg_projection=5, cbhg_projection_kernel_size=3, cbhg_highwaynet_layers=2, cbhg_highway_units=6,
               cbhg_rnn_units=3, max_abs_value=0.5)


# -- numpy model ----------------------------------------------------------------------------------------------
def sigmoid(x):
    """Logistic function."""
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    """max(x, 0)."""
    return np.maximum(x, 0.0)


def ident(x):
    """Identity activation."""
    return x


def conv_same(x, kernel, bias):
    """TF 'same' conv1d (cross-correlation; even kernels pad (k-1)//2 before)."""
    k, t = kernel.shape[0], x.shape[1]
    left = (k - 1) // 2
    xp = np.pad(x, ((0, 0), (left, k - 1 - left), (0, 0)))
    return sum(xp[:, j:j + t] @ kernel[j] for j in range(k)) + bias


def conv_block(x, w, scope, act, hp, training, keep=None):
    """The TF1 conv1d block: conv -> BN -> act (or conv -> act -> BN) -> injected dropout mask."""
    y = conv_same(x, w[f"{scope}/conv1d/kernel"], w[f"{scope}/conv1d/bias"])

    def bn(z):
        p = f"{scope}/batch_normalization/"
        if training:
            mean, var = z.mean((0, 1)), z.var((0, 1))
        else:
            mean, var = w[p + "moving_mean"], w[p + "moving_variance"]
        return (z - mean) / np.sqrt(var + 1e-3) * w[p + "gamma"] + w[p + "beta"]

    y = act(bn(y)) if hp.batch_norm_position == "before" else bn(act(y))
    return y if keep is None else y / (1.0 - hp.tacotron_dropout_rate) * keep


def lstm(x, c, h, w, prefix):
    """TF1 LSTMCell (gates i, j, f, o; forget bias 1.0 at run time) -> (c_new, h_new)."""
    z = np.concatenate([x, h], -1) @ w[prefix + "/kernel"] + w[prefix + "/bias"]
    i, j, f, o = np.split(z, 4, axis=-1)
    c_new = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
    return c_new, sigmoid(o) * np.tanh(c_new)


def zoneout(new, prev, z, training, keep):
    """Zoneout with an injected keep-mask in training, the deterministic mix otherwise."""
    return prev + keep * (new - prev) if training else (1 - z) * new + z * prev


def encoder_lstm(x, lengths, w, hp, training, masks):
    """Bidirectional zoneout LSTM with lengths (backward pass reversed within each length, zeros past it)."""
    u = hp.encoder_lstm_units
    out = np.zeros(x.shape[:2] + (2 * u,))
    for b, n in enumerate(lengths):
        for d, steps in (("fw", range(n)), ("bw", range(n - 1, -1, -1))):
            c = h = np.zeros(u)
            for t in steps:
                c_new, h_new = lstm(x[b, t], c, h, w, f"encoder_LSTM/bidirectional_rnn/{d}/encoder_{d}_LSTM")
                off = 0 if d == "fw" else u
                out[b, t, off:off + u] = h_new
                kc, kh = (None, None) if masks is None else (masks[f"{d}_c"][b, t], masks[f"{d}_h"][b, t])
                c = zoneout(c_new, c, hp.tacotron_zoneout_rate, training, kc)
                h = zoneout(h_new, h, hp.tacotron_zoneout_rate, training, kh)
    return out


def attention_process(memory, lengths, w, mask_encoder):
    """(values, keys) of the memory."""
    values = memory * (np.arange(memory.shape[1])[None, :] < lengths[:, None])[..., None] if mask_encoder else memory
    return values, values @ w["memory_layer/kernel"]


def attention_step(query, state, values, keys, lengths, w, mask_encoder, smoothing, cumulate):
    """One location-sensitive attention step -> (context, alignments, next_state)."""
    pq = query @ w[ATT + "query_layer/kernel"]
    f = conv_same(state[..., None], w[ATT + "location_features_convolution/kernel"],
                  w[ATT + "location_features_convolution/bias"])
    pf = f @ w[ATT + "location_features_layer/kernel"]
    e = (w[ATT + "attention_variable_projection"]
         * np.tanh(keys + pq[:, None] + pf + w[ATT + "attention_bias"])).sum(-1)
    if mask_encoder:
        e = np.where(np.arange(e.shape[1])[None, :] < lengths[:, None], e, -np.inf)
    if smoothing:
        a = sigmoid(e) / sigmoid(e).sum(-1, keepdims=True)
    else:
        a = np.exp(e - e.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
    return (a[..., None] * values).sum(1), a, (a + state if cumulate else a)


def gru(x, h, w, prefix):
    """TF1 GRUCell (gates r, u; reset before the candidate matmul)."""
    g = sigmoid(np.concatenate([x, h], -1) @ w[prefix + "/gates/kernel"] + w[prefix + "/gates/bias"])
    r, u = np.split(g, 2, axis=-1)
    c = np.tanh(np.concatenate([x, r * h], -1) @ w[prefix + "/candidate/kernel"] + w[prefix + "/candidate/bias"])
    return u * h + (1 - u) * c


def cbhg(x, w, hp, training):
    """The post-CBHG over full-length sequences."""
    s = "CBHG_postnet"
    bank = np.concatenate([conv_block(x, w, f"{s}/conv_bank/conv1d_{k}", relu, hp, training)
                           for k in range(1, hp.cbhg_kernels + 1)], -1)
    p, t = hp.cbhg_pool_size, x.shape[1]
    padded = np.pad(bank, ((0, 0), ((p - 1) // 2, p - 1 - (p - 1) // 2), (0, 0)), constant_values=-np.inf)
    pooled = np.max([padded[:, j:j + t] for j in range(p)], axis=0)
    y = conv_block(conv_block(pooled, w, f"{s}/proj1", relu, hp, training), w, f"{s}/proj2", ident, hp, training) + x
    if y.shape[-1] != hp.cbhg_highway_units:
        y = y @ w[f"{s}/dense/kernel"] + w[f"{s}/dense/bias"]
    for n in range(1, hp.cbhg_highwaynet_layers + 1):
        p_ = f"{s}/{s}_highwaynet_{n}/"
        hh = relu(y @ w[p_ + "H/kernel"] + w[p_ + "H/bias"])
        tt = sigmoid(y @ w[p_ + "T/kernel"] + w[p_ + "T/bias"])
        y = hh * tt + y * (1 - tt)
    out = np.zeros(y.shape[:2] + (2 * hp.cbhg_rnn_units,))
    u = hp.cbhg_rnn_units
    for d, name, steps in (("fw", "forward", range(t)), ("bw", "backward", range(t - 1, -1, -1))):
        h = np.zeros((y.shape[0], u))
        off = 0 if d == "fw" else u
        for i in steps:
            h = gru(y[:, i], h, w, f"{s}/bidirectional_rnn/{d}/{s}_{name}_RNN")
            out[:, i, off:off + u] = h
    return out


def clip(x, hp):
    """Rayhane's clip_outputs (identity when off)."""
    lo, hi = (-hp.max_abs_value, hp.max_abs_value) if hp.symmetric_mels else (0.0, hp.max_abs_value)
    return np.minimum(np.maximum(x, lo - hp.lower_bound_decay), hi) if hp.clip_outputs else x


def forward(w, hp, ins, training, max_iters=None):
    """The spec's model in numpy; ``ins`` holds the spec inputs (noise masks always injected where drawn)."""
    def noise(key):
        return ins.get(f"noise/{key}")

    x = w["inputs_embedding"][ins["inputs"]]
    for i in range(hp.enc_conv_num_layers):
        x = conv_block(x, w, f"encoder_convolutions/conv_layer_{i + 1}_encoder_convolutions", relu, hp, training,
                       noise(f"encoder_convolutions/{i}"))
    lengths = ins["input_lengths"]
    enc_masks = {k: noise(f"encoder_LSTM/{k}") for k in ("fw_c", "fw_h", "bw_c", "bw_h")} if training else None
    memory = encoder_lstm(x, lengths, w, hp, training, enc_masks)
    if hp.speaker_embedding_size:
        memory = np.concatenate([memory, np.repeat(ins["speaker_embeddings"][:, None], memory.shape[1], 1)], -1)
    values, keys = attention_process(memory, lengths, w, hp.mask_encoder)
    bsz, m, r, du = memory.shape[0], hp.num_mels, hp.outputs_per_step, hp.decoder_lstm_units
    targets = ins.get("mel_targets")
    n_steps = None if targets is None else targets.shape[1] // r
    if not training:
        n_steps = max_iters if n_steps is None else min(n_steps, max_iters)
    inp, ctx, att_state = np.zeros((bsz, m)), np.zeros((bsz, memory.shape[2])), np.zeros(memory.shape[:2])
    states = [(np.zeros((bsz, du)), np.zeros((bsz, du))) for _ in range(hp.decoder_layers)]
    frames, stops, aligns = [], [], []
    t = 0
    while True:
        h = inp
        for i in range(len(hp.prenet_layers)):
            h = relu(h @ w[f"decoder/decoder_prenet/dense_{i + 1}/kernel"]
                     + w[f"decoder/decoder_prenet/dense_{i + 1}/bias"])
            h = h / (1 - hp.tacotron_dropout_rate) * noise(f"prenet/{i}")[:, t]
        h = np.concatenate([h, ctx], -1)
        for k in range(hp.decoder_layers):
            c_new, h_new = lstm(h, *states[k], w, f"decoder/decoder_LSTM/multi_rnn_cell/cell_{k}/decoder_LSTM_{k + 1}")
            keep = (noise(f"decoder_LSTM/{k}/c")[:, t], noise(f"decoder_LSTM/{k}/h")[:, t]) if training else (0, 0)
            states[k] = (zoneout(c_new, states[k][0], hp.tacotron_zoneout_rate, training, keep[0]),
                         zoneout(h_new, states[k][1], hp.tacotron_zoneout_rate, training, keep[1]))
            h = h_new
        ctx, a, att_state = attention_step(h, att_state, values, keys, lengths, w, hp.mask_encoder, hp.smoothing,
                                           hp.cumulative_weights)
        proj = np.concatenate([h, ctx], -1)
        p = "decoder/linear_transform_projection/projection_linear_transform_projection/"
        frames.append(proj @ w[p + "kernel"] + w[p + "bias"])
        p = "decoder/stop_token_projection/projection_stop_token_projection/"
        logits = proj @ w[p + "kernel"] + w[p + "bias"]
        stops.append(logits if training else sigmoid(logits))
        aligns.append(a)
        t += 1
        if targets is None:
            done = np.round(stops[-1]).astype(bool).all(0)
            if (done.any() if hp.stop_at_any else done.all()) or t >= max_iters:
                break
            inp = frames[-1][:, -m:]
        else:
            if t >= n_steps:
                break
            inp = targets[:, r * t - 1]
    dec = clip(np.stack(frames, 1).reshape(bsz, -1, m), hp)
    y = dec
    n_post = hp.postnet_num_layers
    for i in range(n_post):
        last = i == n_post - 1
        y = conv_block(y, w, f"postnet_convolutions/conv_layer_{5 if last else i + 1}_postnet_convolutions",
                       ident if last else np.tanh, hp, training, noise(f"postnet_convolutions/{i}"))
    p = "postnet_projection/projection_postnet_projection/"
    mel = clip(dec + y @ w[p + "kernel"] + w[p + "bias"], hp)
    out = {"decoder_outputs": dec, "mel_outputs": mel, "stop_token_prediction": np.stack(stops, 1).reshape(bsz, -1),
           "alignments": np.stack(aligns, -1)}
    if hp.predict_linear:
        p = "cbhg_linear_specs_projection/projection_cbhg_linear_specs_projection/"
        out["linear_outputs"] = clip(cbhg(mel, w, hp, training) @ w[p + "kernel"] + w[p + "bias"], hp)
    return out


def seq_mask(lengths, r):
    """sequence_mask over max(lengths) rounded up to a multiple of r."""
    longest = -(-lengths.max() // r) * r
    return (np.arange(longest)[None, :] < lengths[:, None]).astype(np.float64)


def losses(out, w, hp, ins):
    """The spec's ``tacotron2_loss`` in numpy."""
    tgt, stop_t, lens, r = ins["mel_targets"], ins["stop_token_targets"], ins["targets_lengths"], hp.outputs_per_step
    dec, mel, logits, lin = (out["decoder_outputs"], out["mel_outputs"], out["stop_token_prediction"],
                             out.get("linear_outputs"))
    rtvc = bool(hp.speaker_embedding_size)
    n_priority = int(2000 / (hp.sample_rate * 0.5) * hp.num_freq) if hp.num_freq else 0
    xent = np.maximum(logits, 0) - logits * stop_t + np.log1p(np.exp(-np.abs(logits)))
    res = {}
    if hp.mask_decoder:
        mask = seq_mask(lens, r)
        res["before_loss"] = ((tgt - dec) ** 2 * mask[..., None]).sum() / (mask.sum() * tgt.shape[-1])
        res["after_loss"] = ((tgt - mel) ** 2 * mask[..., None]).sum() / (mask.sum() * tgt.shape[-1])
        q = hp.cross_entropy_pos_weight
        weighted = ((1 - stop_t) * logits + (1 + (q - 1) * stop_t) * (np.log1p(np.exp(-np.abs(logits)))
                                                                      + np.maximum(-logits, 0))) * mask
        res["stop_token_loss"] = weighted.sum() / np.count_nonzero(weighted)
        res["linear_loss"] = 0.0
        if not rtvc and hp.predict_linear:
            l1 = np.abs(ins["linear_targets"] - lin) * mask[..., None]
            full = mask.sum() * lin.shape[-1]
            res["linear_loss"] = 0.5 * l1.sum() / full + 0.5 * l1[..., :n_priority].sum() / full
    else:
        res["before_loss"] = ((tgt - dec) ** 2).mean()
        res["after_loss"] = ((tgt - mel) ** 2).mean()
        res["stop_token_loss"] = xent.mean()
        res["linear_loss"] = 0.0
        if rtvc:
            res["linear_loss"] = np.abs(tgt - dec).mean()
        elif hp.predict_linear:
            l1 = np.abs(ins["linear_targets"] - lin)
            res["linear_loss"] = 0.5 * l1.mean() + 0.5 * l1[..., :n_priority].mean()
    scale = 1.0
    if hp.tacotron_scale_regularization:
        scale = 1 / (2 * hp.max_abs_value) if hp.symmetric_mels else 1 / hp.max_abs_value
    res["regularization_loss"] = hp.tacotron_reg_weight * scale * sum(
        (v ** 2).sum() / 2 for k, v in w.items() if trainable(k) and not any(s in "Tacotron_model/inference/" + k
                                                                             for s in EXCLUDED))
    res["loss"] = sum(res[k] for k in ("before_loss", "after_loss", "stop_token_loss", "regularization_loss",
                                       "linear_loss"))
    return res


def trainable(name):
    """Every variable but the batch-norm moving statistics."""
    return not name.endswith(("moving_mean", "moving_variance"))


# -- inputs -----------------------------------------------------------------------------------------------------
def keep(rng, shape, rate):
    """0/1 keep-mask ~ Bernoulli(1 - rate)."""
    return (rng.random(shape) >= rate).astype(np.float32)


def model_inputs(hp, seed, t_out=None, steps=None, training=False, linear=False):
    """Spec inputs; every keep-mask the mode draws is injected (prenet always, the rest in training)."""
    rng = np.random.default_rng(seed)
    ins = {"inputs": rng.integers(0, N_SYMBOLS, (B, T_IN)).astype(np.int32), "input_lengths": LENGTHS}
    if hp.speaker_embedding_size:
        ins["speaker_embeddings"] = rng.standard_normal((B, hp.speaker_embedding_size)).astype(np.float32)
    if t_out is not None:
        ins["mel_targets"] = np.clip(rng.standard_normal((B, t_out, hp.num_mels)), -0.6, 0.5).astype(np.float32)
        steps = t_out // hp.outputs_per_step if steps is None else steps
    for i, n in enumerate(hp.prenet_layers):
        ins[f"noise/prenet/{i}"] = keep(rng, (B, steps, n), hp.tacotron_dropout_rate)
    if training:
        lens = np.array([t_out, t_out - 3], np.int32)
        ins["targets_lengths"] = lens
        ins["stop_token_targets"] = (np.arange(t_out)[None, :] >= lens[:, None] - 1).astype(np.float32)
        if linear:
            ins["linear_targets"] = rng.uniform(-0.6, 0.5, (B, t_out, hp.num_freq)).astype(np.float32)
        z, d = hp.tacotron_zoneout_rate, hp.tacotron_dropout_rate
        for i in range(hp.enc_conv_num_layers):
            ins[f"noise/encoder_convolutions/{i}"] = keep(rng, (B, T_IN, hp.enc_conv_channels), d)
        for k in ("fw_c", "fw_h", "bw_c", "bw_h"):
            ins[f"noise/encoder_LSTM/{k}"] = keep(rng, (B, T_IN, hp.encoder_lstm_units), z)
        for k in range(hp.decoder_layers):
            for s in ("c", "h"):
                ins[f"noise/decoder_LSTM/{k}/{s}"] = keep(rng, (B, steps, hp.decoder_lstm_units), z)
        for i in range(hp.postnet_num_layers):
            ins[f"noise/postnet_convolutions/{i}"] = keep(rng, (B, steps * hp.outputs_per_step, hp.postnet_channels), d)
    return ins


def weights(result):
    """The checkpoint's variables relative to Tacotron_model/inference, as float64."""
    return {k: v.astype(np.float64) for k, v in read_tf1_checkpoint(result.checkpoint, result.block_scope).items()}


def f64(ins):
    """Float inputs as float64 (ints untouched)."""
    return {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in ins.items()}


def assert_close(name, got, want, tol=1e-4):
    """Same shape and allclose (rtol = atol = tol)."""
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def assert_schema(result, hparams):
    """The checkpoint holds exactly the schema's variables with its shapes."""
    ckpt = read_tf1_checkpoint(result.checkpoint, result.block_scope)
    expected = tf1_variable_shapes(resolve_hparams(hparams, N_SYMBOLS))
    assert sorted(ckpt) == sorted(expected)
    assert {k: tuple(v.shape) for k, v in ckpt.items()} == expected


def spec(hparams, ins, training=False, seed=0, **options):
    """A Tacotron2 legacy spec."""
    return LegacySpec("Tacotron2", {"hparams": hparams, "n_symbols": N_SYMBOLS}, ins, training=training, seed=seed,
                      options=options)


# -- tests ------------------------------------------------------------------------------------------------------
ATT_CASES = [  # (config, lengths)
    (dict(units=4, filters=3, kernel_size=5, mask_encoder=True, smoothing=False, cumulate_weights=True), [7, 4]),
    (dict(units=4, filters=2, kernel_size=4, mask_encoder=False, smoothing=True, cumulate_weights=False), [7, 4]),
    (dict(units=3, filters=2, kernel_size=3, mask_encoder=True, smoothing=True, cumulate_weights=True), [2, 6]),
]


def test_location_sensitive_attention_block():
    rng = np.random.default_rng(3)
    specs = [LegacySpec("LocationSensitiveAttention", cfg,
                        {"memory": rng.standard_normal((B, T_IN, 6)).astype(np.float32),
                         "memory_lengths": np.array(lens, np.int32),
                         "queries": rng.standard_normal((B, 5, 3)).astype(np.float32)}, seed=i)
             for i, (cfg, lens) in enumerate(ATT_CASES)]
    for s, res in zip(specs, run_legacy(specs)):
        w = weights(res)
        assert sorted(w) == sorted(["memory_layer/kernel"] + [ATT + n for n in (
            "query_layer/kernel", "location_features_convolution/kernel", "location_features_convolution/bias",
            "location_features_layer/kernel", "attention_variable_projection", "attention_bias")])
        cfg, ins = s.config, f64(s.inputs)
        values, keys = attention_process(ins["memory"], ins["memory_lengths"], w, cfg["mask_encoder"])
        state = np.zeros((B, T_IN))
        alignments, contexts, states = [], [], []
        for t in range(ins["queries"].shape[1]):
            ctx, a, state = attention_step(ins["queries"][:, t], state, values, keys, ins["memory_lengths"], w,
                                           cfg["mask_encoder"], cfg["smoothing"], cfg["cumulate_weights"])
            alignments.append(a)
            contexts.append(ctx)
            states.append(state)
        assert_close("alignments", res.outputs["alignments"], np.stack(alignments, -1), 1e-5)
        assert_close("contexts", res.outputs["contexts"], np.stack(contexts, 1), 1e-5)
        assert_close("states", res.outputs["states"], np.stack(states, 1), 1e-5)
        if cfg["mask_encoder"]:
            past = np.arange(T_IN)[None, :, None] >= ins["memory_lengths"][:, None, None]
            assert np.all(res.outputs["alignments"][np.broadcast_to(past, res.outputs["alignments"].shape)] == 0)


def _check_stop_rule(stop, steps, r, stop_at_any, max_iters):
    """The helper's rule on the graph's own stop probabilities: only the last step may satisfy it."""
    done = np.round(stop.reshape(B, steps, r)).astype(bool).all(0)  # [steps, r]
    rule = done.any(-1) if stop_at_any else done.all(-1)
    assert not rule[:-1].any()
    assert rule[-1] or steps == max_iters


def test_inference_free_running_and_gta():
    rayhane_any = dict(RAYHANE, stop_at_any=True)
    rtvc_ins = model_inputs(resolve_hparams(RTVC, N_SYMBOLS), 206, steps=8)
    cases = {  # name: (hparams, inputs, max_iters, seed of the weights)
        # same weights and inputs: at step 2 one frame rounds to 1 in every row, the other does not
        "rtvc any": (RTVC, rtvc_ins, 8, 26),
        "rtvc all": (dict(RTVC, stop_at_any=False), rtvc_ins, 8, 26),
        "rayhane": (rayhane_any, model_inputs(resolve_hparams(RAYHANE, N_SYMBOLS), 12, steps=8), 8, 2),
        "rtvc gta floor": (RTVC, model_inputs(resolve_hparams(RTVC, N_SYMBOLS), 13, t_out=9), 100, 3),
        "rayhane gta capped": (rayhane_any, model_inputs(resolve_hparams(RAYHANE, N_SYMBOLS), 14, t_out=6, steps=6), 4,
                               4),
    }
    specs = {k: spec(hp, ins, seed=seed, max_iters=mi) for k, (hp, ins, mi, seed) in cases.items()}
    results = dict(zip(specs, run_legacy(list(specs.values()))))
    assert_schema(results["rtvc any"], RTVC)
    assert_schema(results["rayhane"], RAYHANE)
    steps_seen = {}
    for name, res in results.items():
        hparams, ins, max_iters, _ = cases[name]
        hp = resolve_hparams(hparams, N_SYMBOLS)
        out = res.outputs
        steps = out["alignments"].shape[-1]
        steps_seen[name] = steps
        r = hp.outputs_per_step
        assert out["decoder_outputs"].shape == (B, steps * r, hp.num_mels)
        assert out["stop_token_prediction"].shape == (B, steps * r)
        if "mel_targets" not in ins:
            _check_stop_rule(out["stop_token_prediction"], steps, r, hp.stop_at_any, max_iters)
        want = forward(weights(res), hp, f64(ins), training=False, max_iters=max_iters)
        assert sorted(want) == sorted(out)
        for k in want:
            assert_close(f"{name}: {k}", out[k], want[k])
    assert steps_seen["rtvc gta floor"] == 9 // 2
    assert steps_seen["rayhane gta capped"] == 4
    # both endings of free running: the stop rule (stop_at_any on) and the max_iters cap (off)
    assert 1 < steps_seen["rtvc any"] < steps_seen["rtvc all"] == 8, steps_seen
    np.testing.assert_array_equal(results["rtvc any"].outputs["decoder_outputs"],
                                  results["rtvc all"].outputs["decoder_outputs"][:, :2 * steps_seen["rtvc any"]])


def _finite_difference(w, hp, ins, name, index, eps=1e-6):
    def loss_at(delta):
        ww = dict(w)
        ww[name] = w[name].copy()
        ww[name][index] += delta
        return losses(forward(ww, hp, ins, training=True), ww, hp, ins)["loss"]

    return (loss_at(eps) - loss_at(-eps)) / (2 * eps)


FD_NAMES = ["inputs_embedding", "encoder_convolutions/conv_layer_1_encoder_convolutions/conv1d/kernel",
            "encoder_convolutions/conv_layer_2_encoder_convolutions/batch_normalization/gamma",
            "encoder_LSTM/bidirectional_rnn/bw/encoder_bw_LSTM/kernel", "memory_layer/kernel",
            ATT + "attention_variable_projection", ATT + "location_features_convolution/kernel",
            "decoder/decoder_prenet/dense_1/kernel", "decoder/decoder_LSTM/multi_rnn_cell/cell_1/decoder_LSTM_2/bias",
            "decoder/stop_token_projection/projection_stop_token_projection/bias",
            "postnet_convolutions/conv_layer_5_postnet_convolutions/conv1d/kernel",
            "postnet_projection/projection_postnet_projection/bias"]
FD_CBHG = ["CBHG_postnet/conv_bank/conv1d_2/conv1d/kernel", "CBHG_postnet/dense/kernel",
           "CBHG_postnet/bidirectional_rnn/bw/CBHG_postnet_backward_RNN/gates/kernel",
           "cbhg_linear_specs_projection/projection_cbhg_linear_specs_projection/kernel"]


def test_training_outputs_losses_and_gradients():
    rtvc_lin = dict(RTVC, predict_linear=True, num_freq=9, cbhg_kernels=2, cbhg_conv_channels=3, cbhg_projection=4,
                    cbhg_highwaynet_layers=1, cbhg_highway_units=8, cbhg_rnn_units=2)
    rayhane_masked = dict(RAYHANE, mask_decoder=True, tacotron_scale_regularization=True)
    rayhane_random = dict(RAYHANE, mask_decoder=False)
    cases = {  # name: (hparams, inputs) -- T_out a multiple of r, as the feeder gives
        "rtvc unmasked + linear": (rtvc_lin, model_inputs(resolve_hparams(rtvc_lin, N_SYMBOLS), 20, t_out=8,
                                                          training=True, linear=True)),
        "rayhane masked": (rayhane_masked, model_inputs(resolve_hparams(rayhane_masked, N_SYMBOLS), 21, t_out=6,
                                                        training=True, linear=True)),
        "rayhane unmasked, random noise": (rayhane_random, {k: v for k, v in model_inputs(
            resolve_hparams(rayhane_random, N_SYMBOLS), 22, t_out=6, training=True, linear=True).items()
            if not k.startswith("noise/")}),
    }
    specs = {k: spec(hp, ins, training=True, seed=30 + i, loss=True, gradients=not k.endswith("random noise"))
             for i, (k, (hp, ins)) in enumerate(cases.items())}
    results = dict(zip(specs, run_legacy(list(specs.values()))))
    assert_schema(results["rtvc unmasked + linear"], rtvc_lin)
    for name, res in results.items():
        hparams, ins = cases[name]
        hp = resolve_hparams(hparams, N_SYMBOLS)
        w, x = weights(res), f64(ins)
        out = res.outputs
        if specs[name].options["gradients"]:
            assert {k[len("grad/"):] for k in out if k.startswith("grad/")} == {k for k in w if trainable(k)}
            for k in w:
                if trainable(k):
                    assert out["grad/" + k].shape == w[k].shape, k
        steps = ins["mel_targets"].shape[1] // hp.outputs_per_step
        assert out["alignments"].shape == (B, T_IN, steps)
        if name.endswith("random noise"):  # loss terms from the graph's own outputs
            got = {k: out[k].astype(np.float64) for k in ("decoder_outputs", "mel_outputs", "stop_token_prediction",
                                                           "linear_outputs")}
            want_losses = losses(got, w, hp, x)
        else:
            want = forward(w, hp, x, training=True)
            for k in want:
                assert_close(f"{name}: {k}", out[k], want[k])
            want_losses = losses(want, w, hp, x)
        for k, v in want_losses.items():
            assert_close(f"{name}: loss/{k}", out[f"loss/{k}"], np.asarray(v), 1e-4)
        if name.endswith("random noise"):
            continue
        rng = np.random.default_rng(5)
        names = [n for n in FD_NAMES + FD_CBHG if n in w]
        for n in names:
            g = out["grad/" + n]
            idx = [tuple(ins["inputs"][0, 0:1]) + (0,)] if n == "inputs_embedding" else []
            idx += [tuple(int(rng.integers(0, s)) for s in w[n].shape) for _ in range(2)]
            for ix in idx:
                fd = _finite_difference(w, hp, x, n, ix)
                scale = max(1.0, float(np.abs(g).max()))
                assert abs(g[ix] - fd) <= 2e-5 * scale + 1e-3 * abs(fd), (
                    f"{name}: d loss / d {n}{list(ix)}: graph {g[ix]}, numpy {fd}")
        if name.startswith("rtvc"):  # RTVC's loss ignores the linear outputs: only the L2 term reaches the CBHG
            assert not out["grad/CBHG_postnet/bidirectional_rnn/fw/CBHG_postnet_forward_RNN/gates/kernel"].any()
            k = "CBHG_postnet/proj1/conv1d/kernel"
            assert_close("rtvc CBHG grad = L2 only", out["grad/" + k], hp.tacotron_reg_weight * w[k], 1e-6)

