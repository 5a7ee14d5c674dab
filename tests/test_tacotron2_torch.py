import io

import numpy as np
import pytest
import torch

from speechblocks import resolve_hparams, tf1_variable_shapes
from tests.helpers.torch_module_test import Fails, RecompilesPerLength, Skip, run_torch_module_test
from torch_layers import CBHG, Tacotron2, Tacotron2Decoder, TF1WeightsError, tacotron2_hparams, tacotron2_loss
from torch_layers._lstm_layout import torch_weight_to_tf1

SMALL = dict(embedding_dim=16, enc_conv_channels=16, enc_conv_kernel_size=3, encoder_lstm_units=8, attention_dim=8,
             attention_filters=4, attention_kernel=5, prenet_layers=[8, 8], decoder_layers=1, decoder_lstm_units=16,
             postnet_channels=16, postnet_num_layers=2, num_mels=6, outputs_per_step=2, max_iters=10)
RTVC = dict(SMALL, speaker_embedding_size=4)
RAYHANE = dict(SMALL, num_freq=9, cbhg_kernels=3, cbhg_conv_channels=4, cbhg_projection=8, cbhg_highwaynet_layers=1,
               cbhg_highway_units=8, cbhg_rnn_units=4)
N_SYM = 10


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models: one intra-op thread (more only contend), restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(preset, dtype=None, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(RTVC if preset == "rtvc" else RAYHANE)
    cfg.update(kw)
    return Tacotron2(preset, n_symbols=N_SYM, dtype=dtype, **cfg)


def _batch(preset, b=2, t_in=7, t_out=8, dtype=torch.float32, seed=1):
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, N_SYM, (b, t_in), generator=g)
    lengths = torch.tensor([t_in, max(1, t_in - 3), 2, 1][:b])
    spk = torch.randn(b, 4, generator=g, dtype=dtype) if preset == "rtvc" else None
    mel = torch.randn(b, t_out, 6, generator=g, dtype=dtype)
    return inputs, lengths, spk, mel


def _keep(shape, rate, g, dtype=torch.float64):
    return (torch.rand(shape, generator=g) >= rate).to(dtype)


def _noise(hp, b, t_in, steps, g, dtype=torch.float64):
    """Nested keep-masks as the spec lays them out."""
    r, rate, z = hp.outputs_per_step, 0.5, 0.3
    u, du = hp.encoder_lstm_units, hp.decoder_lstm_units
    return {
        "prenet": [_keep((b, steps, s), rate, g, dtype) for s in hp.prenet_layers],
        "encoder_convolutions": [_keep((b, t_in, hp.enc_conv_channels), rate, g, dtype)
                                 for _ in range(hp.enc_conv_num_layers)],
        "encoder_LSTM": tuple(tuple(_keep((b, t_in, u), z, g, dtype) for _ in range(2)) for _ in range(2)),
        "decoder_LSTM": [tuple(_keep((b, steps, du), z, g, dtype) for _ in range(2)) for _ in range(hp.decoder_layers)],
        "postnet_convolutions": [_keep((b, steps * r, hp.postnet_channels), rate, g, dtype)
                                 for _ in range(hp.postnet_num_layers)],
    }


# -- the decoder loop against the blocks stepped by hand --------------------------------------------------

def _decoder(layers=2, r=2, dtype=torch.float64, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(num_mels=3, outputs_per_step=r, prenet_layers=(5, 4), drop_rate=0.5, attention_dim=6,
               attention_filters=3, attention_kernel=4, decoder_layers=layers, decoder_lstm_units=7, zoneout=0.3,
               max_iters=6)
    cfg.update(kw)
    return Tacotron2Decoder(9, dtype=dtype, **cfg)


def _by_hand(dec, memory, lengths, mel_targets, n_steps, prenet_masks, lstm_masks):
    """TacotronDecoderCell stepped with the public blocks: Prenet, DecoderRNN (one step), attention.step,
    projections."""
    att, r, m = dec.attention, dec.outputs_per_step, dec.num_mels
    values, keys = att.process_memory(memory, lengths)
    b, t_in = memory.shape[:2]
    ctx = memory.new_zeros(b, memory.shape[2])
    state, states = att.initial_state(b, t_in), dec.decoder_lstm.get_initial_state(b)
    prev = memory.new_zeros(b, m)
    frames, stops, aligns = [], [], []
    for t in range(n_steps):
        if mel_targets is not None and t > 0:
            prev = mel_targets[:, r * t - 1]
        x = dec.prenet(prev, [p[:, t] for p in prenet_masks])
        zm = None if lstm_masks is None else [(c[:, t], h[:, t]) for c, h in lstm_masks]
        out, states = dec.decoder_lstm(torch.cat([x, ctx], 1), states, zm)
        ctx, align, state = att.step(out, state, values, keys, lengths)
        proj_in = torch.cat([out, ctx], 1)
        frame = dec.frame_projection(proj_in)
        frames.append(frame)
        stops.append(dec.stop_projection(proj_in))
        aligns.append(align)
        prev = frame[:, -m:]
    return torch.stack(frames, 1), torch.stack(stops, 1), torch.stack(aligns, 2)


@pytest.mark.parametrize("mode,free,att_cfg", [
    ("eval", False, {}), ("train", False, {}), ("eval", True, {}),
    ("eval", False, dict(mask_encoder=False, smoothing=True, cumulative_weights=False, attention_kernel=5)),
])
@torch.no_grad()
def test_decoder_loop_equals_stepping_the_blocks(mode, free, att_cfg):
    dec = getattr(_decoder(**att_cfg), mode)()
    if free:  # never stops: the run length is max_iters
        dec.stop_projection.dense.bias.fill_(-50.0)
    g = torch.Generator().manual_seed(3)
    memory, lengths = torch.randn(2, 5, 9, dtype=torch.float64, generator=g), torch.tensor([5, 2])
    mel = None if free else torch.randn(2, 11, 3, dtype=torch.float64, generator=g)
    steps = 6 if free else 5  # floor(11 / 2)
    pm = [_keep((2, steps, s), 0.5, g) for s in (5, 4)]
    lm = [(_keep((2, steps, 7), 0.3, g), _keep((2, steps, 7), 0.3, g)) for _ in range(2)] if mode == "train" else None
    noise = {"prenet": pm} if lm is None else {"prenet": pm, "decoder_LSTM": lm}
    frames, stop, align = dec(memory, lengths, mel, None, noise)
    want = _by_hand(dec, memory, lengths, mel, steps, pm, lm)
    assert frames.shape == (2, steps, 6) and stop.shape == (2, steps, 2) and align.shape == (2, 5, steps)
    for got, ref in zip((frames, stop, align), want):
        torch.testing.assert_close(got, ref, atol=1e-10, rtol=0)
    if mode == "eval":
        assert stop.min() >= 0 and stop.max() <= 1  # probabilities in eval
    if att_cfg.get("mask_encoder", True):
        assert torch.all(align[1, 2:] == 0)


def test_decoder_scripted_and_flat_masks_and_module_contract():
    dec = _decoder(dtype=torch.float32, drop_rate=0.0).eval()
    g = torch.Generator().manual_seed(0)
    memory, lengths = torch.randn(2, 5, 9, generator=g), torch.tensor([5, 3])
    mel = torch.randn(2, 8, 3, generator=g)
    scripted = torch.jit.script(dec)
    dec.train()
    scripted.train()
    lm = [(_keep((2, 4, 7), 0.3, g, torch.float32), _keep((2, 4, 7), 0.3, g, torch.float32)) for _ in range(2)]
    flat = {"decoder_LSTM": [m for pair in lm for m in pair]}
    a = dec(memory, lengths, mel, None, {"decoder_LSTM": lm})
    for b in (dec(memory, lengths, mel, None, flat), scripted(memory, lengths, mel, None, flat)):
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y, atol=1e-6, rtol=0)
    run_torch_module_test(
        Tacotron2Decoder, (9,), dict(num_mels=3, outputs_per_step=2, prenet_layers=(5,), drop_rate=0.0,
                                     attention_dim=6, attention_filters=3, attention_kernel=3, decoder_layers=2,
                                     decoder_lstm_units=7, max_iters=4),
        make_inputs=lambda b, t, dt: [torch.randn(b, t, 9, dtype=dt), torch.tensor([t, max(1, t - 2), 1][:b]),
                                      torch.randn(b, 7, 3, dtype=dt)],
        expected_output_shape=lambda b, t: [(b, 3, 6), (b, 3, 2), (b, t, 3)], changes_in_training=True,
        export=Fails("the memory lengths are checked by value and the loop runs a data-dependent number of steps; "
                     "Tacotron2Decoder.step_module() is the exportable step", match="data-dependent"),
        bad_inputs=[([memory[..., :8], lengths], "memory"), ([memory, torch.tensor([6, 3])], "memory_lengths"),
                    ([memory, lengths, mel[:, :1]], "mel_targets"), ([memory, lengths, mel[..., :2]], "mel_targets"),
                    ([memory, lengths, None, 0], "max_iters")],
    )


def test_decoder_tf1_names_and_from_hparams():
    dec = Tacotron2Decoder.from_hparams(resolve_hparams("rtvc", **RTVC))
    shapes = {k: v.shape for k, v in dec.tf1_weights().items()}
    model_shapes = tf1_variable_shapes(resolve_hparams("rtvc", N_SYM, **RTVC))
    want = {("../memory_layer/kernel" if k == "memory_layer/kernel" else k[len("decoder/"):]): tuple(v)
            for k, v in model_shapes.items() if k.startswith("decoder/") or k == "memory_layer/kernel"}
    assert shapes == want
    assert dec.tf1_scope == "decoder" and dec.outputs_per_step == 2 and dec.max_iters == 10
    assert dec.attention.units == 8 and dec.attention.kernel_size == 5 and dec.prenet.layers_sizes == [8, 8]


# -- the stop rule and the step counts ----------------------------------------------------------------------

def _stop_rule_reference(logits, stop_at_any, max_iters):
    """TacoTestHelper on the stop logits of an unstopped run: steps until round(p) == 1 for every batch entry
    (at any / all of the r frames); np.round is half to even like tf.round."""
    probs = 1.0 / (1.0 + np.exp(-logits))  # (batch, steps, r)
    for t in range(max_iters):
        done = (np.round(probs[:, t]) == 1).all(0)
        if (done.any() if stop_at_any else done.all()):
            return t + 1
    return max_iters


@pytest.mark.parametrize("stop_at_any", [True, False])
@torch.no_grad()
def test_free_running_stop_rule_matches_the_helper(stop_at_any):
    counts = set()
    for seed in range(20):  # until the stop biases below give early, mid-run and late stops
        dec = _decoder(drop_rate=0.0, stop_at_any=stop_at_any, max_iters=12, seed=seed).eval()
        memory, lengths = torch.randn(3, 5, 9, dtype=torch.float64), torch.tensor([5, 4, 2])
        bias = dec.stop_projection.dense.bias
        bias.fill_(-100.0)  # stop outputs never feed back: one unstopped run gives every step's stop logits
        frames, probs, _ = dec(memory, lengths)
        assert frames.shape[1] == 12
        logits = (torch.logit(probs) + 100.0).numpy()  # the logits without the bias
        per_step = logits.min(0)  # (steps, r): a frame is done when every batch entry's logit is > 0
        score = per_step.max(1) if stop_at_any else per_step.min(1)
        for shift in np.linspace(score.min() - 0.01, score.max() + 0.01, 9):
            bias.fill_(float(-shift))
            want = _stop_rule_reference(logits - shift, stop_at_any, 12)
            got_frames, got_probs, got_align = dec(memory, lengths)
            assert got_frames.shape[1] == got_probs.shape[1] == got_align.shape[2] == want
            torch.testing.assert_close(got_frames, frames[:, :want])  # the stopping step's outputs are kept
            counts.add(want)
        if len(counts) >= 3 and any(1 < c < 12 for c in counts) and 12 in counts and 1 in counts:
            break
    assert len(counts) >= 3 and any(1 < c < 12 for c in counts) and 12 in counts and 1 in counts, counts


@torch.no_grad()
def test_stop_rule_edge_cases():
    dec = _decoder(drop_rate=0.0, max_iters=7).eval()
    memory, lengths = torch.randn(2, 5, 9, dtype=torch.float64), torch.tensor([5, 5])
    w, b = dec.stop_projection.dense.weight, dec.stop_projection.dense.bias
    w.zero_()
    b.zero_()  # p = sigmoid(0) = 0.5 exactly: tf.round(0.5) = 0, never stops
    frames, stop, _ = dec(memory, lengths)
    assert frames.shape[1] == 7 and torch.all(stop == 0.5)
    assert dec(memory, lengths, max_iters=3)[0].shape[1] == 3  # max_iters argument
    b.copy_(torch.tensor([1e-3, -5.0]))  # frame 0 done for every entry: stop_at_any stops at once
    assert dec(memory, lengths)[0].shape[1] == 1
    dec.stop_at_any = False  # all r frames must be done
    assert dec(memory, lengths)[0].shape[1] == 7
    b.fill_(1e-3)
    assert dec(memory, lengths)[0].shape[1] == 1
    # every batch entry must be done: make entry 1's stop logit negative through the context (channel 0)
    dec.stop_at_any = True
    memory[0, :, 0], memory[1, :, 0] = 1.0, -1.0  # context channel 0 = +1 / -1 (a convex mix of constant values)
    w.zero_()
    w[:, 7] = 10.0  # projection input = [lstm_out (7), context (9)]: column 7 is context channel 0
    b.zero_()
    assert dec(memory, lengths)[0].shape[1] == 7
    memory[1, :, 0] = 1.0
    assert dec(memory, lengths)[0].shape[1] == 1


@torch.no_grad()
def test_teacher_forced_step_counts_and_max_iters():
    dec = _decoder(drop_rate=0.0, max_iters=3)
    memory, lengths = torch.randn(2, 5, 9, dtype=torch.float64), torch.tensor([5, 5])
    mel = torch.randn(2, 11, 3, dtype=torch.float64)
    dec.train()
    assert dec(memory, lengths, mel)[0].shape[1] == 5  # floor(11 / 2); no cap in training
    assert dec(memory, lengths, mel, 2)[0].shape[1] == 5
    dec.eval()
    assert dec(memory, lengths, mel)[0].shape[1] == 3  # GTA: max_iters caps
    assert dec(memory, lengths, mel, 4)[0].shape[1] == 4
    assert dec(memory, lengths, mel[:, :2])[0].shape[1] == 1
    with pytest.raises(ValueError, match="mel_targets"):
        dec(memory, lengths, mel[:, :1])
    with pytest.raises(ValueError, match="noise_masks"):  # masks must cover the steps
        dec(memory, lengths, mel, 4, {"prenet": [torch.ones(2, 3, 5), torch.ones(2, 3, 4)]})
    with pytest.raises(ValueError, match="noise_masks"):  # free running past the masks
        dec.stop_projection.dense.bias.fill_(-50.0)
        dec(memory, lengths, None, 6, {"prenet": [torch.ones(2, 4, 5), torch.ones(2, 4, 4)]})
    with pytest.raises(ValueError, match="unknown"):
        dec(memory, lengths, mel, None, {"Prenet": []})
    with pytest.raises(ValueError, match="mel_targets"):  # the original trains teacher-forced only
        dec.train()(memory, lengths)


# -- the model ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_tf1_names_are_the_schema_and_round_trip(preset):
    m = _model(preset)
    w = m.tf1_weights()
    expected = tf1_variable_shapes(m.hparams)
    assert list(w) == list(expected) or set(w) == set(expected)
    assert {k: v.shape for k, v in w.items()} == {k: tuple(s) for k, s in expected.items()}
    rng = np.random.default_rng(0)
    new = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in w.items()}
    m.load_tf1_weights(new)
    for k, v in m.tf1_weights().items():
        np.testing.assert_array_equal(v, new[k])
    assert m.decoder.attention.memory_layer.weight[0, 1] == new["memory_layer/kernel"][1, 0]
    bad = dict(new)
    bad.pop("inputs_embedding")
    bad["decoder/Location_Sensitive_Attention/attention_bias"] = np.zeros(3, np.float32)
    bad["extra"] = np.zeros(1, np.float32)
    with pytest.raises(TF1WeightsError) as err:
        m.load_tf1_weights(bad)
    assert len(err.value.problems) == 3


@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_forward_equals_the_blocks_composed_by_hand_with_injected_noise(preset):
    m = _model(preset, dtype=torch.float64, tacotron_reg_weight=0.0).train()
    hp = m.hparams
    inputs, lengths, spk, mel = _batch(preset, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    noise = _noise(hp, 2, 7, 4, g)
    out = m(inputs, lengths, spk, mel, None, noise)
    with torch.no_grad():
        x = m.embedding.weight[inputs]
        x = m.encoder_convolutions(x, noise["encoder_convolutions"])
        enc = m.encoder_lstm(x, lengths, noise["encoder_LSTM"])
        memory = torch.cat([enc, spk[:, None].expand(2, 7, 4)], 2) if spk is not None else enc
        frames, stop, align = m.decoder(memory, lengths, mel, None, {k: noise[k] for k in ("prenet", "decoder_LSTM")})
        dec_out = frames.reshape(2, 8, 6)
        lo, hi = -hp.max_abs_value - hp.lower_bound_decay, hp.max_abs_value
        if preset == "rayhane":
            dec_out = dec_out.clamp(lo, hi)
        mel_out = dec_out + m.postnet_projection(m.postnet(dec_out, noise["postnet_convolutions"]))
        if preset == "rayhane":
            mel_out = mel_out.clamp(lo, hi)
    want = {"decoder_outputs": dec_out, "mel_outputs": mel_out, "stop_token_prediction": stop.reshape(2, 8),
            "alignments": align}
    if preset == "rayhane":
        want["linear_outputs"] = m.linear_projection(m.post_cbhg(mel_out)).clamp(lo, hi)
    assert sorted(out) == sorted(want)
    for k in want:
        torch.testing.assert_close(out[k], want[k], atol=1e-10, rtol=0, msg=k)
    # the flat form (what a scripted model takes) gives the same numbers, scripted too
    flat = {k: [t for item in v for t in (item if isinstance(item, tuple) else (item,))] for k, v in noise.items()}
    scripted = torch.jit.script(m)
    for other in (m(inputs, lengths, spk, mel, None, flat), scripted(inputs, lengths, spk, mel, None, flat)):
        for k in want:
            torch.testing.assert_close(other[k], out[k], atol=1e-10, rtol=0, msg=k)


@torch.no_grad()
def test_input_lengths_none_is_full_length():
    m = _model("rtvc", tacotron_dropout_rate=0.0).eval()
    inputs, _, spk, mel = _batch("rtvc")
    full = m(inputs, torch.tensor([7, 7]), spk, mel)
    for k, v in m(inputs, None, spk, mel).items():
        torch.testing.assert_close(v, full[k], atol=0, rtol=0, msg=k)
    with pytest.raises(ValueError, match="mel_targets"):  # training is teacher-forced only
        m.train()(inputs, None, spk)


def _small_contract_inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 10 + t)
    return [torch.randint(0, N_SYM, (b, t), generator=g), torch.tensor([t, max(1, t // 2), 1][:b]),
            torch.randn(b, 4, generator=g, dtype=dtype), torch.randn(b, 6, 6, generator=g, dtype=dtype)]


def test_module_contract_rtvc():
    inputs, lengths, spk, mel = _small_contract_inputs(2, 7, torch.float32)
    run_torch_module_test(
        Tacotron2, ("rtvc",), dict(n_symbols=N_SYM, tacotron_dropout_rate=0.0, **RTVC),
        make_inputs=_small_contract_inputs,
        expected_output_shape=lambda b, t: [(b, t, 3), (b, 6, 6), (b, 6, 6), (b, 6)], changes_in_training=True,
        sizes=((2, 7), (1, 1), (3, 4)),
        export=Fails("the symbol ids and lengths are checked by value (int(inputs.min())); encoder_module() and "
                     "decoder_step_module() are the exportable parts", match="data-dependent"),
        compile=Skip("Tacotron2 compiles in test_module_contract_rayhane_free_running (inference); teacher forced it "
                     "compiles without recompiling per length too (measured, ~20 s)"),
        bad_inputs=[([inputs.float(), lengths, spk, mel], "inputs"), ([inputs + N_SYM, lengths, spk, mel], "inputs"),
                    ([inputs - N_SYM, lengths, spk, mel], "inputs"),
                    ([inputs, torch.tensor([0, 3]), spk, mel], "input_lengths"),
                    ([inputs, torch.tensor([8, 3]), spk, mel], "input_lengths"),
                    ([inputs, lengths, spk[:, :3], mel], "speaker_embeddings"),
                    ([inputs, lengths, None, mel], "speaker_embeddings"),
                    ([inputs, lengths, spk, mel[..., :5]], "mel_targets"),
                    ([inputs, lengths, spk, mel[:, :1]], "mel_targets"),
                    ([inputs, lengths, spk, None, 0], "max_iters"),
                    ([inputs, lengths, spk, mel.double()[..., :0]], "mel_targets"),
                    ([inputs, lengths, spk, mel, None, {"bogus": []}], "noise_masks")],
    )


def test_module_contract_rayhane_free_running():
    # free running with a stop bias that never fires: fixed step counts for the shared checks
    class NeverStops(Tacotron2):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            with torch.no_grad():
                self.decoder.stop_projection.dense.bias.fill_(-30.0)

    inputs = torch.randint(0, N_SYM, (2, 5))
    run_torch_module_test(
        NeverStops, ("rayhane",), dict(n_symbols=N_SYM, tacotron_dropout_rate=0.0, **dict(RAYHANE, max_iters=3)),
        make_inputs=lambda b, t, dt: [torch.randint(0, N_SYM, (b, t)), torch.tensor([t, max(1, t // 2), 1][:b])],
        expected_output_shape=lambda b, t: [(b, t, 3), (b, 6, 6), (b, 6, 9), (b, 6, 6), (b, 6)],
        sizes=((2, 5), (1, 2)),  # (free running is eval-only: the teacher-forced RTVC contract checks train())
        export=Fails("the symbol ids and lengths are checked by value (int(inputs.min())); encoder_module() and "
                     "decoder_step_module() are the exportable parts", match="data-dependent"),
        compile=RecompilesPerLength("the stop rule reads each step's stop probabilities (bool()), and the encoder "
                                    "LSTM's loop runs per length"),
        bad_inputs=[([inputs, torch.tensor([5, 2]), torch.zeros(2, 4)], "speaker_embeddings")],
    )


def test_hparams_presets_and_constructor():
    assert tacotron2_hparams("rtvc")["speaker_embedding_size"] == 256
    m = Tacotron2(resolve_hparams("rayhane", 12, **RAYHANE))
    assert m.hparams.n_symbols == 12 and m.post_cbhg is not None and m.post_cbhg.bn_position == "after"
    assert m.encoder_convolutions.bn_position == "after" and m.clip_outputs
    r = _model("rtvc")
    assert r.post_cbhg is None and r.linear_projection is None and r.hparams.variant == "rtvc"
    assert r.decoder.attention.memory_size == 2 * 8 + 4 and r.decoder.decoder_lstm.input_size == 8 + 20
    with pytest.raises(ValueError, match="num_mels"):
        Tacotron2("rtvc", num_mels=0)
    with pytest.raises(ValueError, match="unknown hparam"):
        Tacotron2("rtvc", num_mel=80)


@torch.no_grad()
def test_cbhg_bn_position_after_is_conv_relu_bn():
    torch.manual_seed(0)
    cbhg = CBHG(6, 2, 3, 2, [5, 6], 3, 1, 6, 4, bn_position="after").eval()
    for bn in [c.batch_norm for c in cbhg.conv_bank] + [cbhg.proj1.batch_norm, cbhg.proj2.batch_norm]:
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    x = torch.randn(2, 5, 6)
    block = cbhg.conv_bank[1]  # width 2: TF pads 0 before, 1 after
    conv = torch.nn.functional.conv1d(torch.nn.functional.pad(x.transpose(1, 2), (0, 1)), block.conv.weight,
                                      block.conv.bias).transpose(1, 2)
    bn = block.batch_norm
    want = (torch.relu(conv) - bn.running_mean) / torch.sqrt(bn.running_var + 1e-3) * bn.weight + bn.bias
    torch.testing.assert_close(block(x), want)
    before = CBHG(6, 2, 3, 2, [5, 6], 3, 1, 6, 4)
    before.load_state_dict(cbhg.state_dict())
    assert (before(x) - cbhg(x)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="bn_position"):
        CBHG(6, 2, 3, 2, [5, 6], 3, 1, 6, 4, bn_position="middle")


# -- loss ------------------------------------------------------------------------------------------------------

def _np(x):
    return x.detach().double().numpy()


def _regularization_reference(model):
    excluded = ("bias", "Bias", "_projection", "inputs_embedding", "RNN", "LSTM")
    names = [k for k in tf1_variable_shapes(model.hparams)
             if "moving_" not in k and not any(e in "Tacotron_model/inference/" + k for e in excluded)]
    w = model.tf1_weights()
    return names, sum(0.5 * np.sum(w[k].astype(np.float64) ** 2) for k in names)


def _bce(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


@pytest.mark.parametrize("preset,mask_decoder", [("rtvc", False), ("rtvc", True), ("rayhane", True),
                                                 ("rayhane", False)])
def test_loss_against_numpy_reference(preset, mask_decoder):
    m = _model(preset, mask_decoder=mask_decoder, tacotron_reg_weight=1e-2, cross_entropy_pos_weight=3.0).train()
    hp = m.hparams
    inputs, lengths, spk, mel = _batch(preset)
    targets_lengths = torch.tensor([8, 5])
    stop_t = (torch.arange(8)[None] >= targets_lengths[:, None] - 1).float()
    lin_t = torch.randn(2, 8, 9) if preset == "rayhane" else None
    out = m(inputs, lengths, spk, mel)
    losses = tacotron2_loss(m, out, mel, stop_t, targets_lengths, lin_t)
    t, d, p, s = _np(mel), _np(out["decoder_outputs"]), _np(out["mel_outputs"]), _np(out["stop_token_prediction"])
    z = _np(stop_t)
    if mask_decoder:
        mask = (np.arange(8)[None] < _np(targets_lengths)[:, None]).astype(np.float64)
        m3 = np.broadcast_to(mask[..., None], t.shape)
        before = np.sum(m3 * (t - d) ** 2) / np.count_nonzero(m3)
        after = np.sum(m3 * (t - p) ** 2) / np.count_nonzero(m3)
        lw = 1 + (hp.cross_entropy_pos_weight - 1) * z
        xent = ((1 - z) * s + lw * (np.log1p(np.exp(-np.abs(s))) + np.maximum(-s, 0))) * mask
        stop = xent.sum() / np.count_nonzero(xent)
        linear = 0.0
        if preset == "rayhane":
            n = int(2000 / (hp.sample_rate * 0.5) * hp.num_freq)
            lm = np.broadcast_to(mask[..., None], (2, 8, 9))
            l1 = np.abs(_np(lin_t) - _np(out["linear_outputs"])) * lm
            linear = 0.5 * l1.sum() / lm.sum() + 0.5 * l1[..., :n].sum() / lm.sum()
    else:
        before, after = np.mean((t - d) ** 2), np.mean((t - p) ** 2)
        stop = np.mean(_bce(z, s))
        if preset == "rtvc":
            linear = np.mean(np.abs(t - d))
        else:
            l1 = np.abs(_np(lin_t) - _np(out["linear_outputs"]))
            n = int(2000 / (hp.sample_rate * 0.5) * hp.num_freq)
            linear = 0.5 * np.mean(l1) + 0.5 * np.mean(l1[..., :n])
    names, l2 = _regularization_reference(m)
    reg = 1e-2 * l2
    want = dict(before_loss=before, after_loss=after, stop_token_loss=stop, linear_loss=linear,
                regularization_loss=reg, loss=before + after + stop + reg + linear)
    for k, v in want.items():
        np.testing.assert_allclose(float(losses[k].detach()), v, rtol=1e-5, atol=1e-7, err_msg=k)
    assert sorted(m.regularized_parameters()) == sorted(names)
    assert "memory_layer/kernel" in names and "decoder/Location_Sensitive_Attention/query_layer/kernel" in names
    assert "encoder_convolutions/conv_layer_1_encoder_convolutions/batch_normalization/gamma" in names
    assert "decoder/Location_Sensitive_Attention/attention_variable_projection" not in names
    assert not any("LSTM" in k or "bias" in k or "RNN" in k for k in names)
    if preset == "rayhane":
        assert "CBHG_postnet/proj1/conv1d/kernel" in names and "CBHG_postnet/dense/kernel" in names
    with pytest.raises(ValueError, match="mel_targets"):
        tacotron2_loss(m, out, mel[:, :6], stop_t, targets_lengths, lin_t)
    with pytest.raises(ValueError, match="stop_token_targets"):
        tacotron2_loss(m, out, mel, stop_t[:, :6], targets_lengths, lin_t)
    if preset == "rayhane":
        with pytest.raises(ValueError, match="linear_targets"):
            tacotron2_loss(m, out, mel, stop_t, targets_lengths, None)


def test_tf1_loss_and_gradients_layout_by_finite_differences():
    m = _model("rtvc", dtype=torch.float64, tacotron_reg_weight=1e-3, mask_decoder=True)
    hp = m.hparams
    inputs, lengths, spk, mel = _batch("rtvc", dtype=torch.float64)
    targets_lengths = torch.tensor([8, 6])
    stop_t = (torch.arange(8)[None] >= targets_lengths[:, None] - 1).double()
    noise = _noise(hp, 2, 7, 4, torch.Generator().manual_seed(2))
    m.eval()
    buffers = {k: v.clone() for k, v in m.named_buffers()}
    args = (inputs, lengths, mel, stop_t, targets_lengths, spk, None, noise)
    losses, grads = m.tf1_loss_and_gradients(*args)
    assert not m.training and all(p.grad is None for p in m.parameters())
    assert all(torch.equal(v, buffers[k]) for k, v in m.named_buffers())  # moving statistics untouched
    shapes = tf1_variable_shapes(hp)
    assert set(grads) == {k for k in shapes if "moving_" not in k}
    assert all(grads[k].shape == shapes[k] for k in grads)
    assert set(losses) == {"before_loss", "after_loss", "stop_token_loss", "linear_loss", "regularization_loss", "loss"}
    assert all(isinstance(v, float) for v in losses.values())
    assert losses["linear_loss"] == 0.0  # RTVC's masked loss has no linear term
    # the gradient of one entry in TF1 layout, by central differences through load_tf1_weights
    w0 = {k: v.copy() for k, v in m.tf1_weights().items()}  # tf1_weights() may share memory with the tensors
    probes = [("decoder/decoder_LSTM/multi_rnn_cell/cell_0/decoder_LSTM_1/kernel", (3, 2 * 16 + 5)),  # TF1 'f' block
              ("encoder_LSTM/bidirectional_rnn/bw/encoder_bw_LSTM/bias", (9,)),
              ("encoder_convolutions/conv_layer_2_encoder_convolutions/conv1d/kernel", (2, 5, 7)),
              ("decoder/Location_Sensitive_Attention/location_features_convolution/kernel", (1, 0, 3)),
              ("memory_layer/kernel", (17, 2)), ("inputs_embedding", (int(inputs[0, 0]), 3)),
              ("postnet_convolutions/conv_layer_5_postnet_convolutions/batch_normalization/gamma", (4,))]
    eps = 1e-6
    for name, idx in probes:
        vals = []
        for sign in (1, -1):
            w = {k: v.copy() for k, v in w0.items()}
            w[name][idx] += sign * eps
            m.load_tf1_weights(w)
            vals.append(m.tf1_loss_and_gradients(*args)[0]["loss"])
        m.load_tf1_weights(w0)
        numeric = (vals[0] - vals[1]) / (2 * eps)
        assert abs(numeric - grads[name][idx]) <= 1e-6 + 1e-5 * abs(numeric), name
    # and the autograd gradient converted by hand for the LSTM kernel
    m.train()
    out = m(inputs, lengths, spk, mel, None, noise)
    loss = tacotron2_loss(m, out, mel, stop_t, targets_lengths)["loss"]
    loss.backward()
    w = m.decoder.decoder_lstm.cells[0].weight.grad.numpy()
    np.testing.assert_allclose(grads["decoder/decoder_LSTM/multi_rnn_cell/cell_0/decoder_LSTM_1/kernel"],
                               torch_weight_to_tf1(w), atol=1e-12)


# -- checkpoints ---------------------------------------------------------------------------------------------

def _write_tf1_checkpoint(tf, path, variables):
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=str(path), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(variables[k]) for k in names])


def test_from_tf1_checkpoint_infers_hparams_ema_and_mismatches(tmp_path):
    tf = pytest.importorskip("tensorflow")
    src = _model("rtvc", seed=3)
    w = src.tf1_weights()
    rng = np.random.default_rng(0)
    variables = {f"Tacotron_model/inference/{k}": v for k, v in w.items()}
    ema = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in w.items() if "moving_" not in k}
    variables.update({f"Tacotron_model/inference/{k}/ExponentialMovingAverage": v for k, v in ema.items()})
    variables.update({f"Tacotron_model/inference/{k}/Adam": np.zeros_like(v) for k, v in w.items()})
    variables["global_step"] = np.array(10, np.int64)
    _write_tf1_checkpoint(tf, tmp_path / "model.ckpt-10", variables)

    m = Tacotron2.from_tf1_checkpoint(str(tmp_path / "model.ckpt-10"))
    assert not m.training and m.hparams.variant == "rtvc" and m.hparams.n_symbols == N_SYM
    assert m.hparams.encoder_lstm_units == 8 and m.hparams.speaker_embedding_size == 4
    assert m.hparams.stop_at_any and m.hparams.max_iters == 2000  # from the RTVC preset
    for k, v in m.tf1_weights().items():
        np.testing.assert_array_equal(v, w[k])
    m_ema = Tacotron2.from_tf1_checkpoint(str(tmp_path / "model.ckpt-10"), use_ema=True, max_iters=7,
                                          dtype=torch.float64)
    assert m_ema.hparams.max_iters == 7 and m_ema.embedding.weight.dtype == torch.float64
    for k, v in m_ema.tf1_weights().items():
        np.testing.assert_array_equal(v, ema.get(k, w[k]).astype(np.float64))
    with pytest.raises(ValueError) as err:
        Tacotron2.from_tf1_checkpoint(str(tmp_path / "model.ckpt-10"),
                                      hparams={**tacotron2_hparams("rtvc"), **RTVC, "num_mels": 5,
                                               "decoder_lstm_units": 12})
    message, problems = str(err.value), " ".join(err.value.problems)  # one line naming the cause; the whole list
    assert "num_mels=5 where the shapes say 6, decoder_lstm_units=12 where the shapes say 16" in message
    assert "decoder_LSTM_1/kernel" in problems and "postnet_projection" in problems and "mismatching" in message
    # a checkpoint without a speaker embedding is Rayhane's
    ray = _model("rayhane", seed=4)
    _write_tf1_checkpoint(tf, tmp_path / "r.ckpt", {f"Tacotron_model/inference/{k}": v
                                                    for k, v in ray.tf1_weights().items()})
    r = Tacotron2.from_tf1_checkpoint(str(tmp_path / "r.ckpt"))
    assert r.hparams.variant == "rayhane" and r.hparams.predict_linear and r.hparams.num_freq == 9
    assert r.hparams.batch_norm_position == "after" and r.hparams.clip_outputs
    with pytest.raises(ValueError, match="ExponentialMovingAverage"):
        Tacotron2.from_tf1_checkpoint(str(tmp_path / "r.ckpt"), use_ema=True)


# -- training ---------------------------------------------------------------------------------------------------

def _train_set(b=4):
    g = torch.Generator().manual_seed(7)
    inputs = torch.randint(1, N_SYM, (b, 6), generator=g)
    lengths = torch.tensor([6, 5, 4, 6][:b])
    spk = torch.randn(b, 4, generator=g)
    t = torch.linspace(0, 3, 8)
    mel = torch.sin(t[None, :, None] * torch.arange(1, 7)[None, None, :] * 0.5 + inputs[:, :1, None] * 0.3)
    targets_lengths = torch.tensor([8, 8, 6, 7][:b])
    stop = (torch.arange(8)[None] >= targets_lengths[:, None] - 1).float()
    return inputs, lengths, spk, mel, stop, targets_lengths


def _optimizer(m):
    return torch.optim.Adam(m.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-6)


def _train_steps(m, opt, data, n):
    inputs, lengths, spk, mel, stop, tl = data
    history = []
    for _ in range(n):
        out = m(inputs, lengths, spk, mel)
        loss = tacotron2_loss(m, out, mel, stop, tl)["loss"]
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        history.append(float(loss.detach()))
    return history


def test_training_loop_makes_the_loss_fall():
    m = _model("rtvc").train()
    history = _train_steps(m, _optimizer(m), _train_set(), 40)
    assert np.isfinite(history).all()
    assert np.mean(history[-5:]) < 0.6 * np.mean(history[:5])


def test_state_dict_save_and_reload_mid_training_gives_identical_runs():
    data = _train_set()
    m = _model("rtvc").train()
    opt = _optimizer(m)
    _train_steps(m, opt, data, 3)
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, buf)
    torch.manual_seed(123)
    a = _train_steps(m, opt, data, 3)
    buf.seek(0)
    saved = torch.load(buf)
    m2 = _model("rtvc", seed=99).train()
    opt2 = _optimizer(m2)
    m2.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    torch.manual_seed(123)  # the same dropout / zoneout draws
    b = _train_steps(m2, opt2, data, 3)
    assert a == b
    torch.manual_seed(5)
    out1 = m(*data[:4])
    torch.manual_seed(5)
    out2 = m2(*data[:4])
    for k in out1:
        assert torch.equal(out1[k], out2[k]), k


@torch.no_grad()
def test_autocast_bfloat16_close_to_float32():
    m = _model("rtvc", tacotron_dropout_rate=0.0).eval()
    for p in m.parameters():  # small, well-scaled weights
        p.mul_(0.5)
    inputs, lengths, spk, mel = _batch("rtvc")
    ref = m(inputs, lengths, spk, mel * 0.5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = m(inputs, lengths, spk, mel * 0.5)
    for k in ref:
        assert torch.isfinite(got[k].float()).all(), k
    err = (got["mel_outputs"].float() - ref["mel_outputs"]).abs().max()
    assert err < 1e-2, float(err)
    assert got["mel_outputs"].shape == ref["mel_outputs"].shape
