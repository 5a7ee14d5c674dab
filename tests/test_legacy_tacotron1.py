"""The TF1 legacy reference of the Tacotron-1 family (``parity_tests/legacy/tf1_tacotron1.py``).

Checked against an independent float64 numpy model written here from the originals' semantics: the
graphs run in the legacy subprocess (``run_legacy``) with injected pre-net keep-masks, and the numpy model
recomputes every output from the checkpoint the subprocess saved. Small sizes; the CBHG banks keep the
originals' fixed K = 16 (encoder) and K = 8 (post), 128 channels. Checks: both attention block builders (with and
without ``mask_memory``), the variable names and shapes of all three layouts against
``speechblocks.tacotron1_schema.tf1_variable_shapes``, teacher forcing in training and eval mode, free running
(the all-zero stop after one step, the ``max_iters`` cap, eval without masks = no dropout), the loss terms, the
gradient table and gradients by finite differences of the numpy loss.

Each test function makes one ``run_legacy`` call.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

from parity_tests.reference import LegacySpec, run_legacy
from speechblocks import resolve_tacotron1_hparams, tacotron1_hparams
from speechblocks.tacotron1_schema import attention_cell_scopes, tf1_variable_shapes
from speechblocks.tf1_checkpoint import read_tf1_checkpoint

SCOPE = "model/inference"
B, T_IN, N_SYMBOLS = 2, 5, 10
LENGTHS = np.array([5, 3], np.int32)
SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, embed_depth=5, prenet_depths=[6, 4], encoder_depth=6,
             attention_depth=5, decoder_depth=7, postnet_depth=6, n_symbols=N_SYMBOLS)
HPARAMS = {
    "keithito-20170720": dict(tacotron1_hparams("keithito"), **SMALL),
    "keithito-20180906": dict(tacotron1_hparams("keithito"), **SMALL),
    # encoder half depth = prenet width (no encoder_cbhg/dense), r = 3, a location kernel of even width
    "mimic2": dict(tacotron1_hparams("mimic2"), **dict(SMALL, encoder_depth=8, outputs_per_step=3),
                   location_filters=3, location_kernel_size=4),
}
DEC = "decoder/output_projection_wrapper/"
CELL = DEC + "multi_rnn_cell/"


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """The numpy model's matmuls are tiny: OpenBLAS's thread hand-off costs ~20x the work on a busy 2-core machine
    (a [12, 6144] @ [6144, 128] product: 97 ms with 2 threads, 5 ms with one)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: only the speed depends on it
        threadpool_limits = contextlib.nullcontext
    with threadpool_limits(1):
        yield


# -- numpy model ----------------------------------------------------------------------------------------------
def sigmoid(x):
    """Logistic function."""
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    """max(x, 0)."""
    return np.maximum(x, 0.0)


def conv_same(x, kernel, bias=0.0):
    """TF 'same' conv1d (cross-correlation; even kernels pad (k-1)//2 before)."""
    k, t = kernel.shape[0], x.shape[1]
    left = (k - 1) // 2
    xp = np.pad(x, ((0, 0), (left, k - 1 - left), (0, 0)))
    cols = np.concatenate([xp[:, j:j + t] for j in range(k)], -1).reshape(-1, k * x.shape[2])  # one 2-D matmul
    return (cols @ kernel.reshape(k * x.shape[2], -1)).reshape(x.shape[0], t, -1) + bias


def dense(x, w, prefix):
    """x @ kernel + bias."""
    return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]


def conv_block(x, w, scope, act, training):
    """keithito's conv1d: conv -> activation -> batch norm (batch statistics in training)."""
    z = act(conv_same(x, w[f"{scope}/conv1d/kernel"], w[f"{scope}/conv1d/bias"]))
    p = f"{scope}/batch_normalization/"
    mean, var = (z.mean((0, 1)), z.var((0, 1))) if training else (w[p + "moving_mean"], w[p + "moving_variance"])
    return (z - mean) / np.sqrt(var + 1e-3) * w[p + "gamma"] + w[p + "beta"]


def gru(x, h, w, prefix):
    """TF1 GRUCell (gates r, u; reset before the candidate matmul)."""
    g = sigmoid(np.concatenate([x, h], -1) @ w[prefix + "/gates/kernel"] + w[prefix + "/gates/bias"])
    r, u = np.split(g, 2, axis=-1)
    c = np.tanh(np.concatenate([x, r * h], -1) @ w[prefix + "/candidate/kernel"] + w[prefix + "/candidate/bias"])
    return u * h + (1 - u) * c


def bigru(x, lengths, w, scope):
    """bidirectional_dynamic_rnn of two GRUs: zeros past a length, the backward pass reversed within it."""
    units = w[f"{scope}/bidirectional_rnn/fw/gru_cell/candidate/bias"].shape[0]
    out = np.zeros(x.shape[:2] + (2 * units,))
    for b, n in enumerate(lengths):
        for d, steps in (("fw", range(n)), ("bw", range(n - 1, -1, -1))):
            h = np.zeros(units)
            for t in steps:
                h = gru(x[b, t], h, w, f"{scope}/bidirectional_rnn/{d}/gru_cell")
                off = 0 if d == "fw" else units
                out[b, t, off:off + units] = h
    return out


def cbhg(x, lengths, w, scope, bank_size, training):
    """keithito's CBHG (lengths None: full length)."""
    bank = np.concatenate([conv_block(x, w, f"{scope}/conv_bank/conv1d_{k}", relu, training)
                           for k in range(1, bank_size + 1)], -1)
    pooled = np.maximum(bank, np.concatenate([bank[:, 1:], bank[:, -1:]], 1))  # max-pool 2, stride 1, 'same'
    y = conv_block(conv_block(pooled, w, f"{scope}/proj_1", relu, training), w, f"{scope}/proj_2",
                   lambda z: z, training) + x
    if f"{scope}/dense/kernel" in w:
        y = dense(y, w, f"{scope}/dense")
    for n in range(1, 5):
        hh = relu(dense(y, w, f"{scope}/highway_{n}/H"))
        tt = sigmoid(dense(y, w, f"{scope}/highway_{n}/T"))
        y = hh * tt + y * (1 - tt)
    return bigru(y, [x.shape[1]] * x.shape[0] if lengths is None else lengths, w, scope)


def prenet(x, w, scope, n_layers, masks):
    """relu dense layers; an injected keep-mask as x / 0.5 * mask (None: no dropout)."""
    for i in range(n_layers):
        x = relu(dense(x, w, f"{scope}/dense_{i + 1}"))
        if masks is not None:
            x = x / 0.5 * masks[i]
    return x


def attention(query, prev, keys, memory, lengths, w, scope, mask_memory):
    """(context, alignments): Bahdanau, plus location features when the scope has them."""
    pq = query @ w[scope + "/query_layer/kernel"]
    energy = keys + pq[:, None]
    if scope + "/location_conv/kernel" in w:
        energy = energy + conv_same(prev[..., None], w[scope + "/location_conv/kernel"]) @ w[
            scope + "/location_layer/kernel"]
    score = (w[scope + "/attention_v"] * np.tanh(energy)).sum(-1)
    if mask_memory:
        score = np.where(np.arange(score.shape[1])[None, :] < lengths[:, None], score, -np.inf)
    a = np.exp(score - score.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    return np.einsum("bj,bje->be", a, memory), a


def masked_memory(memory, lengths, mask_memory):
    """The memory the attention sees (zeroed past the lengths with mask_memory)."""
    if not mask_memory:
        return memory
    return memory * (np.arange(memory.shape[1])[None, :] < lengths[:, None])[..., None]


def forward(w, hp, layout, ins, training, max_iters, mask_memory=False):
    """The spec's model in numpy; ``ins`` holds the spec inputs (keep-masks where given)."""
    n_pre = len(hp.prenet_depths)
    enc_masks = [ins[f"noise/encoder_prenet/{i}"] for i in range(n_pre)] if "noise/encoder_prenet/0" in ins else None
    dec_masks = [ins[f"noise/decoder_prenet/{i}"] for i in range(n_pre)] if "noise/decoder_prenet/0" in ins else None
    lengths = ins["input_lengths"]
    x = prenet(w["embedding"][ins["inputs"]], w, "prenet", n_pre, enc_masks)
    memory = masked_memory(cbhg(x, lengths, w, "encoder_cbhg", 16, training), lengths, mask_memory)
    keys = memory @ w["memory_layer/kernel"]
    scopes = attention_cell_scopes(layout)
    bsz, m, r = memory.shape[0], hp.num_mels, hp.outputs_per_step
    targets = ins.get("mel_targets")
    steps = max_iters if targets is None else min(targets.shape[1] // r, max_iters)
    inp, ctx, align = np.zeros((bsz, m)), np.zeros((bsz, memory.shape[2])), np.zeros(memory.shape[:2])
    h_att, h1, h2 = np.zeros((bsz, hp.attention_depth)), np.zeros((bsz, hp.decoder_depth)), np.zeros(
        (bsz, hp.decoder_depth))
    finished = np.zeros(bsz, bool)
    frames, aligns = [], []
    for t in range(steps):
        masks = None if dec_masks is None else [mk[:, t] for mk in dec_masks]
        if layout == "keithito-20180906":
            cell_in = np.concatenate([prenet(inp, w, scopes["prenet"], n_pre, masks), ctx], -1)
        else:
            cell_in = prenet(np.concatenate([inp, ctx], -1), w, scopes["prenet"], n_pre, masks)
        h_att = gru(cell_in, h_att, w, scopes["gru"])
        ctx, align = attention(h_att, align, keys, memory, lengths, w, scopes["attention"], mask_memory)
        out0 = dense(np.concatenate([h_att, ctx], -1), w, CELL + "cell_0/output_projection_wrapper")
        h1 = gru(out0, h1, w, CELL + "cell_1/gru_cell")
        out1 = out0 + h1
        h2 = gru(out1, h2, w, CELL + "cell_2/gru_cell")
        step_frames = dense(out1 + h2, w, DEC[:-1])
        frames.append(step_frames)
        aligns.append(align)
        if targets is None:
            finished |= (step_frames == 0.0).all(-1)
            if finished.all():
                break
            inp = step_frames[:, -m:]
        elif t + 1 < steps:
            inp = targets[:, r * (t + 1) - 1]
    dec = np.stack(frames, 1)
    mel = dec.reshape(bsz, -1, m)
    linear = dense(cbhg(mel, None, w, "post_cbhg", 8, training), w, "dense")
    return {"decoder_outputs": dec, "mel_outputs": mel, "linear_outputs": linear, "alignments": np.stack(aligns, -1)}


def losses(out, hp, ins):
    """keithito's add_loss."""
    mel_loss = np.abs(ins["mel_targets"] - out["mel_outputs"]).mean()
    l1 = np.abs(ins["linear_targets"] - out["linear_outputs"])
    linear_loss = 0.5 * l1.mean() + 0.5 * l1[..., :hp.n_priority_freq].mean()
    return {"mel_loss": mel_loss, "linear_loss": linear_loss, "loss": mel_loss + linear_loss}


# -- helpers ----------------------------------------------------------------------------------------------------
def keep(rng, shape):
    """0/1 keep-mask ~ Bernoulli(0.5)."""
    return (rng.random(shape) >= 0.5).astype(np.float32)


def model_inputs(hp, seed, t_out=None, steps=None, masks=True, linear=False):
    """Spec inputs; keep-masks for both pre-nets when ``masks``."""
    rng = np.random.default_rng(seed)
    ins = {"inputs": rng.integers(0, N_SYMBOLS, (B, T_IN)).astype(np.int32), "input_lengths": LENGTHS}
    if t_out is not None:
        ins["mel_targets"] = rng.uniform(-0.5, 0.5, (B, t_out, hp.num_mels)).astype(np.float32)
        steps = t_out // hp.outputs_per_step if steps is None else steps
    if linear:
        ins["linear_targets"] = rng.uniform(-0.5, 0.5, (B, t_out, hp.num_freq)).astype(np.float32)
    if masks:
        for i, n in enumerate(hp.prenet_depths):
            ins[f"noise/encoder_prenet/{i}"] = keep(rng, (B, T_IN, n))
            ins[f"noise/decoder_prenet/{i}"] = keep(rng, (B, steps, n))
    return ins


def spec(layout, ins, training=False, seed=0, mask_memory=False, **options):
    """A Tacotron1 legacy spec under model/inference."""
    return LegacySpec("Tacotron1", {"hparams": HPARAMS[layout], "layout": layout, "mask_memory": mask_memory}, ins,
                      scope=SCOPE, training=training, seed=seed, options=options)


def weights(result):
    """The checkpoint's variables relative to the result's scope, as float64."""
    return {k: v.astype(np.float64) for k, v in read_tf1_checkpoint(result.checkpoint, result.block_scope).items()}


def f64(ins):
    """Float inputs as float64 (ints untouched)."""
    return {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in ins.items()}


def assert_close(name, got, want, tol=1e-4):
    """Same shape and allclose (rtol = atol = tol)."""
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def trainable(name):
    """Every variable but the batch-norm moving statistics."""
    return not name.endswith(("moving_mean", "moving_variance"))


# -- tests ------------------------------------------------------------------------------------------------------
def test_attention_blocks():
    rng = np.random.default_rng(3)
    cases = [("BahdanauAttention", dict(units=4, mask_memory=False)),
             ("BahdanauAttention", dict(units=3, mask_memory=True)),
             ("Mimic2LocationAttention", dict(units=4, filters=3, kernel_size=5, mask_memory=False)),
             ("Mimic2LocationAttention", dict(units=4, filters=2, kernel_size=4, mask_memory=True))]
    specs = [LegacySpec(block, cfg, {"memory": rng.standard_normal((B, 6, 5)).astype(np.float32),
                                     "memory_lengths": np.array([6, 4], np.int32),
                                     "queries": rng.standard_normal((B, 4, 3)).astype(np.float32)},
                        scope=SCOPE, seed=i) for i, (block, cfg) in enumerate(cases)]
    for s, res in zip(specs, run_legacy(specs)):
        w, ins, cfg = weights(res), f64(s.inputs), s.config
        located = s.block == "Mimic2LocationAttention"
        scope = "decoder/" + ("location_sensitive_attention" if located else "bahdanau_attention")
        want_names = {"memory_layer/kernel": (5, cfg["units"]), scope + "/query_layer/kernel": (3, cfg["units"]),
                      scope + "/attention_v": (cfg["units"],)}
        if located:
            want_names[scope + "/location_conv/kernel"] = (cfg["kernel_size"], 1, cfg["filters"])
            want_names[scope + "/location_layer/kernel"] = (cfg["filters"], cfg["units"])
        assert {k: v.shape for k, v in w.items()} == want_names
        lengths = ins["memory_lengths"]
        memory = masked_memory(ins["memory"], lengths, cfg["mask_memory"])
        keys = memory @ w["memory_layer/kernel"]
        align = np.zeros(memory.shape[:2])
        aligns, contexts = [], []
        for t in range(ins["queries"].shape[1]):
            ctx, align = attention(ins["queries"][:, t], align, keys, memory, lengths, w, scope, cfg["mask_memory"])
            aligns.append(align)
            contexts.append(ctx)
        assert_close(f"{s.block} alignments", res.outputs["alignments"], np.stack(aligns, -1), 1e-5)
        assert_close(f"{s.block} contexts", res.outputs["contexts"], np.stack(contexts, 1), 1e-5)
        past = np.arange(6)[None, :] >= lengths[:, None]
        got_past = res.outputs["alignments"].transpose(0, 2, 1)[np.broadcast_to(past[:, None], (B, 4, 6))]
        assert (got_past == 0).all() if cfg["mask_memory"] else (got_past > 0).all()


def test_inference_teacher_forced_and_free_running():
    hps = {k: resolve_tacotron1_hparams(v) for k, v in HPARAMS.items()}
    zero_projection = {DEC + "kernel": 0.0, DEC + "bias": 0.0}
    cases = {  # name: (layout, inputs, max_iters, options, mask_memory)
        "20170720 teacher-forced eval, masks, capped": ("keithito-20170720",
                                                       model_inputs(hps["keithito-20170720"], 11, t_out=7, steps=2),
                                                       2, {}, False),
        "20180906 free running, capped, no masks": ("keithito-20180906",
                                                    model_inputs(hps["keithito-20180906"], 12, masks=False), 3,
                                                    {}, False),
        "mimic2 free running, zero frames stop, mask_memory": ("mimic2", model_inputs(hps["mimic2"], 13, steps=4), 4,
                                                               {"assign": zero_projection}, True),
    }
    specs = {k: spec(layout, ins, seed=20 + i, mask_memory=mm, max_iters=mi, **opts)
             for i, (k, (layout, ins, mi, opts, mm)) in enumerate(cases.items())}
    results = dict(zip(specs, run_legacy(list(specs.values()))))
    steps_seen = {}
    for name, res in results.items():
        layout, ins, max_iters, _, mask_memory = cases[name]
        hp = hps[layout]
        out = res.outputs
        steps = steps_seen[name] = out["alignments"].shape[-1]
        assert out["decoder_outputs"].shape == (B, steps, hp.num_mels * hp.outputs_per_step)
        want = forward(weights(res), hp, layout, f64(ins), training=False, max_iters=max_iters,
                       mask_memory=mask_memory)
        assert sorted(want) == sorted(out)
        for k in want:
            assert_close(f"{name}: {k}", out[k], want[k])
    assert steps_seen == {"20170720 teacher-forced eval, masks, capped": 2,  # floor(7 / 2) = 3 steps, capped at 2
                          "20180906 free running, capped, no masks": 3,
                          "mimic2 free running, zero frames stop, mask_memory": 1}
    stopped = results["mimic2 free running, zero frames stop, mask_memory"].outputs
    assert not stopped["mel_outputs"].any()
    assert not stopped["alignments"][1, 3:].any()  # the masked memory: no weight past the length


def _finite_difference(w, hp, layout, ins, name, index, eps=1e-6):
    def loss_at(delta):
        ww = dict(w)
        ww[name] = w[name].copy()
        ww[name][index] += delta
        return losses(forward(ww, hp, layout, ins, training=True, max_iters=hp.max_iters), hp, ins)["loss"]

    return (loss_at(eps) - loss_at(-eps)) / (2 * eps)


def fd_names(layout):
    """Variables whose gradients are checked by finite differences."""
    scopes = attention_cell_scopes(layout)
    names = ["embedding", "prenet/dense_2/kernel", "encoder_cbhg/conv_bank/conv1d_3/conv1d/kernel",
             "encoder_cbhg/proj_2/batch_normalization/gamma", "encoder_cbhg/highway_4/T/bias",
             "encoder_cbhg/bidirectional_rnn/bw/gru_cell/gates/kernel", "memory_layer/kernel",
             scopes["attention"] + "/attention_v", scopes["attention"] + "/query_layer/kernel",
             scopes["prenet"] + "/dense_1/kernel", scopes["gru"] + "/candidate/kernel",
             CELL + "cell_0/output_projection_wrapper/kernel", CELL + "cell_2/gru_cell/gates/bias", DEC + "bias",
             "post_cbhg/conv_bank/conv1d_8/conv1d/kernel", "post_cbhg/bidirectional_rnn/fw/gru_cell/candidate/bias",
             "dense/kernel"]
    if layout == "mimic2":
        names += [scopes["attention"] + "/location_conv/kernel", scopes["attention"] + "/location_layer/kernel"]
    else:
        names += ["encoder_cbhg/dense/kernel"]
    return names


def test_training_schema_losses_and_gradients():
    hps = {k: resolve_tacotron1_hparams(v) for k, v in HPARAMS.items()}
    t_out = {"keithito-20170720": 6, "keithito-20180906": 8, "mimic2": 6}
    ins = {layout: model_inputs(hps[layout], 30 + i, t_out=t_out[layout], linear=True)
           for i, layout in enumerate(HPARAMS)}
    # the gradient table of the two distinct nestings (pre-net outside / inside the AttentionWrapper); 20170720's
    # training outputs and losses only (its cells are mimic2's with Bahdanau attention)
    grads = {"keithito-20170720": False, "keithito-20180906": True, "mimic2": True}
    specs = [spec(layout, ins[layout], training=True, seed=40 + i, loss=True, gradients=grads[layout])
             for i, layout in enumerate(HPARAMS)]
    for s, res in zip(specs, run_legacy(specs)):
        layout = s.config["layout"]
        hp, x, w, out = hps[layout], f64(ins[layout]), weights(res), res.outputs
        assert {k: v.shape for k, v in w.items()} == tf1_variable_shapes(hp, layout)
        want = forward(w, hp, layout, x, training=True, max_iters=hp.max_iters)
        assert want["alignments"].shape == (B, T_IN, t_out[layout] // hp.outputs_per_step)
        for k in want:
            assert_close(f"{layout}: {k}", out[k], want[k])
        for k, v in losses(want, hp, x).items():
            assert_close(f"{layout}: loss/{k}", out[f"loss/{k}"], np.asarray(v), 1e-5)
        if not grads[layout]:
            assert not any(k.startswith("grad/") for k in out)
            continue
        assert {k[len("grad/"):] for k in out if k.startswith("grad/")} == {k for k in w if trainable(k)}
        for k in w:
            if trainable(k):
                assert out["grad/" + k].shape == w[k].shape, k
        rng = np.random.default_rng(5)
        for n in fd_names(layout):
            g = out["grad/" + n]
            idx = [tuple(x["inputs"][0, 0:1]) + (0,)] if n == "embedding" else []
            idx += [tuple(int(rng.integers(0, d)) for d in w[n].shape) for _ in range(2)]
            for ix in idx:
                fd = _finite_difference(w, hp, layout, x, n, ix)
                scale = max(1.0, float(np.abs(g).max()))
                assert abs(g[ix] - fd) <= 2e-5 * scale + 1e-3 * abs(fd), (
                    f"{layout}: d loss / d {n}{list(ix)}: graph {g[ix]}, numpy {fd}")
