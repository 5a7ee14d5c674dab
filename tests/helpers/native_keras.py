"""What the Keras native-step tests share (``tests/test_native_decoder_step_keras.py``,
``tests/test_native_decoder_batch.py``): a spy counting the calls that ran in C, and decoders whose loops are
sensitive (weights scaled up: an attention that moves, stops that vary) with their float64 twins."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.helpers.call_counter import count_calls
from tf_layers import _native
from tf_layers.tacotron2_decoder import Tacotron2Decoder

SMALL = dict(num_mels=6, prenet_layers=(12, 10), decoder_layers=2, decoder_lstm_units=20, attention_dim=8,
             attention_filters=3, attention_kernel=5, max_iters=40)


def count_native_calls(monkeypatch) -> list:
    """Counts the calls that ran in the native step: the list grows by one per such call."""
    return count_calls(monkeypatch, _native, "free_running", lambda out: out is not None)


def sensitive_decoders(stop_bias: float, seed: int, batch: int, memory_seed, **overrides):
    """A built float32 decoder with its weights scaled by 2.5 and every stop bias at ``stop_bias``, its float64 twin
    (the same weights) and a ``(batch, 9, 11)`` memory drawn with ``memory_seed``."""
    cfg = dict(SMALL, **overrides)
    tf.keras.utils.set_random_seed(seed)
    dec, d64 = Tacotron2Decoder(**cfg), Tacotron2Decoder(**cfg, dtype="float64")
    memory = tf.random.stateless_normal((batch, 9, 11), seed=memory_seed)
    dec(memory[:1])
    d64(tf.cast(memory[:1], tf.float64))
    for v in dec.weights:
        if "seed" not in v.path:
            v.assign(v * 2.5)
    dec.stop_projection.dense.bias.assign(np.full(dec.stop_projection.dense.bias.shape, stop_bias, np.float32))
    d64.set_weights(dec.get_weights())
    return dec, d64, memory
