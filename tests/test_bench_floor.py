"""The Tacotron-2 bench's floor multiplies exactly the weights one decoder step reads (``bench/bench_tacotron2.py``)."""
import numpy as np

from bench.bench_tacotron2 import decoder_step_bytes, gemv_floor, gemv_operands
from speechblocks import resolve_hparams, tf1_variable_shapes


def _small_shapes():
    return tf1_variable_shapes(resolve_hparams("rtvc", decoder_lstm_units=32, prenet_layers=[16, 16],
                                               attention_dim=8, attention_filters=4, encoder_lstm_units=8,
                                               enc_conv_channels=16, embedding_dim=16, speaker_embedding_size=4,
                                               postnet_num_layers=2, postnet_channels=8))


def test_operands_are_every_decoder_weight_once():
    shapes = _small_shapes()
    pairs = gemv_operands(shapes)
    decoder = {k: s for k, s in shapes.items() if k.startswith("decoder/")}
    assert len(pairs) == len(decoder) > 5
    assert sum(m.nbytes for _, m in pairs) == decoder_step_bytes(shapes)
    for (v, m), shape in zip(pairs, decoder.values()):
        assert m.shape == (int(np.prod(shape)) // int(shape[-1]), int(shape[-1]))  # rank > 2: flattened
        assert v.shape == (1, m.shape[0]) and v.dtype == m.dtype == np.float32
    assert any(len(s) == 1 for s in decoder.values()) and any(len(s) == 3 for s in decoder.values())


def test_floor_is_a_positive_time():
    pairs = gemv_operands(_small_shapes())
    t = gemv_floor(pairs, passes=2, repeats=2)
    assert 0.0 < t < 1.0
