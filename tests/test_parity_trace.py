"""``compare(..., trace=True)``: the built-in match of the project's Tacotron-2 (every block, each decoder step) on a
tiny model whose weights moved Keras -> torch through ``tf1_weights()`` / ``load_tf1_weights()``, a single weight
of one block perturbed on the torch side named by the trace, and the instrumentation left as it was found."""
from __future__ import annotations

import numpy as np
import pytest

from speechblocks import tacotron2_hparams
from speechblocks.parity import compare

TINY = dict(embedding_dim=8, enc_conv_channels=8, enc_conv_num_layers=1, encoder_lstm_units=4, attention_dim=4,
            attention_filters=2, attention_kernel=3, prenet_layers=[8, 8], decoder_layers=1, decoder_lstm_units=16,
            postnet_channels=8, postnet_num_layers=2, num_mels=8, outputs_per_step=2, tacotron_dropout_rate=0.0,
            predict_linear=False)
#: the blocks the built-in match pairs (TF1 scopes), per decoder step for the decoder's
BLOCKS = ["inputs_embedding", "encoder_convolutions", "encoder_LSTM", "decoder/decoder_prenet", "decoder/decoder_LSTM",
          "decoder/Location_Sensitive_Attention", "decoder/linear_transform_projection",
          "decoder/stop_token_projection", "postnet_convolutions", "postnet_projection"]
STEPS = 3


@pytest.fixture(scope="module")
def tacotron():
    import tf_layers
    import torch_layers

    hp = dict(tacotron2_hparams("rayhane"), **TINY)
    keras_model = tf_layers.Tacotron2(hp, seed=0)
    rng = np.random.default_rng(0)
    inputs = {"inputs": np.array([[3, 5, 7, 9, 11, 2], [4, 6, 8, 10, 0, 0]], np.int32),
              "input_lengths": np.array([6, 4], np.int32),
              "mel_targets": rng.standard_normal((2, 2 * STEPS, 8)).astype(np.float32)}

    def torch_model(weights):
        model = torch_layers.Tacotron2(hp).eval()
        model.load_tf1_weights(weights)
        return model

    return keras_model, torch_model, inputs


def test_tacotron2_trace_pairs_every_block_per_decoder_step(tacotron):
    keras_model, torch_model, inputs = tacotron
    report = compare(keras_model, torch_model(keras_model.tf1_weights()), inputs, trace=True)
    assert report.ok and report.first_divergence is None
    assert not [n for n in report.notes if "replay" in n]  # the block-by-block runs equal the calls
    calls = {}
    for r in report.trace_rows:
        calls.setdefault(r.block, []).append(r.call)
    assert set(BLOCKS) <= set(calls)
    for block in BLOCKS:
        assert calls[block] == (list(range(1, STEPS + 1)) if block.startswith("decoder/") else [1]), block
    assert all(r.inputs_agree and r.outputs_agree for r in report.trace_rows)
    assert max(r.outputs_max_abs for r in report.trace_rows) <= 1e-6
    order = [r.block for r in report.trace_rows if r.block in BLOCKS]
    assert order[:3] == BLOCKS[:3] and order[-2:] == BLOCKS[-2:]  # encoder first, post-net last: execution order
    assert order[3:8] == BLOCKS[3:8]  # one decoder step: pre-net, LSTM, attention, projections


@pytest.mark.parametrize("weight,block", [
    ("encoder_convolutions/conv_layer_1_encoder_convolutions/conv1d/bias",
     "encoder_convolutions/conv_layer_1_encoder_convolutions"),
    ("decoder/decoder_LSTM/multi_rnn_cell/cell_0/decoder_LSTM_1/bias", "decoder/decoder_LSTM"),
    ("decoder/Location_Sensitive_Attention/attention_bias", "decoder/Location_Sensitive_Attention"),
    ("postnet_projection/projection_postnet_projection/bias", "postnet_projection")])
def test_a_perturbed_weight_is_named(tacotron, weight, block):
    keras_model, torch_model, inputs = tacotron
    weights = dict(keras_model.tf1_weights())
    weights[weight] = weights[weight].copy()
    weights[weight].flat[0] += 0.5
    report = compare(keras_model, torch_model(weights), inputs, trace=True)
    assert not report.ok and report.first_divergence == block
    row = next(r for r in report.trace_rows if r.diverges)
    assert row.block == block and row.inputs_agree
    assert report.table().splitlines()[-1].startswith(f"first divergence: {block} (call ")
    if block == "postnet_projection":  # a bias moved by 0.5: its channel moves by exactly 0.5, as the mel outputs
        assert row.outputs_max_abs == pytest.approx(0.5, abs=1e-6)
        mel = next(r for r in report.rows if r.output == "mel_outputs")
        assert mel.max_abs == pytest.approx(0.5, abs=1e-6)


def test_free_running_is_traced_for_the_steps_the_call_ran(tacotron):
    keras_model, torch_model, inputs = tacotron
    free = {"inputs": inputs["inputs"], "input_lengths": inputs["input_lengths"], "max_iters": 2}
    report = compare(keras_model, torch_model(keras_model.tf1_weights()), free, trace=True)
    steps = next(r for r in report.rows if r.output == "alignments")
    assert report.ok and not [n for n in report.notes if "replay" in n]
    n = len([r for r in report.trace_rows if r.block == "decoder/decoder_prenet"])
    assert 1 <= n <= 2 and n == max(r.calls[0] for r in report.trace_rows if r.block.startswith("decoder/"))
    assert steps.passed


T1_SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, embed_depth=5, prenet_depths=[6, 4], encoder_depth=6,
                attention_depth=5, decoder_depth=7, postnet_depth=6, n_symbols=10, max_iters=5)
#: Tacotron-1's decoder blocks (Keras paths), each paired with its torch module per step by the built-in match
T1_DECODER = ["decoder/decoder_prenet", "decoder/attention_gru", "decoder/bahdanau_attention",
              "decoder/cell_0_projection", "decoder/cell_1", "decoder/cell_2", "decoder/output_projection"]


def test_tacotron1_decoder_steps_are_traced_and_a_perturbed_gru_named():
    """keithito's layout: Keras' decoder step calls its layers (run eagerly), torch's TorchScript loop is replaced
    for the trace by the same step over its modules; a +0.5 on the first decoder GRU's candidate bias (torch side)
    is named."""
    import tf_layers
    import torch_layers

    km = tf_layers.Tacotron1("keithito", "keithito-20180906", **T1_SMALL)

    def torch_model(weights):
        model = torch_layers.Tacotron1("keithito", "keithito-20180906", **T1_SMALL).eval()
        model.load_tf1_weights(weights)
        return model

    inputs = {"inputs": np.array([[1, 2, 3, 4, 5, 6, 7]] * 2, np.int32), "input_lengths": np.array([7, 5], np.int32),
              "mel_targets": np.random.default_rng(0).standard_normal((2, 6, 6)).astype(np.float32)}
    report = compare(km, torch_model(km.tf1_weights()), inputs, trace=True)
    assert report.ok and report.first_divergence is None and report.notes == []
    for block in T1_DECODER:
        assert [r.call for r in report.trace_rows if r.block == block] == [1, 2, 3], block
    assert {"embedding", "encoder_cbhg", "post_cbhg"} <= {r.block for r in report.trace_rows}
    weights = dict(km.tf1_weights())
    name = next(n for n in weights if "cell_1/gru_cell/candidate/bias" in n)
    weights[name] = weights[name] + np.where(np.arange(weights[name].size) == 0, 0.5, 0.0).astype(np.float32)
    broken = compare(km, torch_model(weights), inputs, trace=True)
    assert not broken.ok and broken.first_divergence == "decoder/cell_1"


def test_instrumentation_is_removed_even_when_a_side_raises():
    import keras
    import torch

    class Boom(keras.layers.Layer):
        budget = None  # calls left before it raises

        def call(self, x):
            if self.budget is not None:
                if self.budget == 0:
                    raise RuntimeError("boom")
                self.budget -= 1
            return x

    inp = keras.Input((3,))
    boom = Boom(name="boom")
    km = keras.Model(inp, boom(keras.layers.Dense(3, name="dense")(inp)))
    tm = torch.nn.Sequential()
    tm.add_module("dense", torch.nn.Linear(3, 3))
    tm.add_module("boom", torch.nn.Identity())
    ok = compare(km, tm, np.ones((1, 3), np.float32), trace=True)
    assert {r.block for r in ok.trace_rows} == {"dense", "boom"}
    boom.budget = 1  # the compared call passes, the traced run raises inside the wrapped call
    with pytest.raises(RuntimeError, match="boom"):
        compare(km, tm, np.ones((1, 3), np.float32), trace=True)
    assert all("call" not in layer.__dict__ for layer in km._flatten_layers())
    assert all(not m._forward_hooks for m in tm.modules())
