"""Property tests of ``GaussianEmbedding`` (Keras, torch, twins).

Padding of ``(text, durs)`` is tokens of duration 0 (upstream pads with ``pad``; here any id): a duration-0 token
has ``sigma = 1e-6`` and its centre at the utterance's end, so its weight on every valid frame (``t + 0.5``
before the end) underflows to exactly 0. Appended and replaced padding tokens (ids arbitrary, durations 0)
change no valid frame (the frames before ``sum(durs)``); a row alone, cut to its own tokens, gives the batch's
valid frames. Both the seed's blank-free layout and standard TalkNet are tested.
"""
import numpy as np
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import TorchStateBlock, property_tests
from tests.helpers.strategies import value_seeds

NUM_LABELS = 7


class GaussianEmbeddingProperties(TorchStateBlock):
    name = "GaussianEmbedding"
    keras_cls, torch_cls = tf_layers.GaussianEmbedding, torch_layers.GaussianEmbedding
    kwargs = dict(num_labels=NUM_LABELS, d_emb=3, pad=0)
    arguments = ("text", "durs")
    padded = {"text": "tokens", "durs": "tokens"}
    outputs = {"outputs": "frames"}

    def cases(self):
        @st.composite
        def case(draw):
            rng = np.random.default_rng(draw(value_seeds))
            batch = draw(st.integers(1, 3))
            tokens = 2 * rng.integers(0, 4, size=batch) + 1  # (blank, tok, ..., blank): odd lengths
            if draw(st.booleans()):  # one long utterance among short ones
                tokens[:] = 1
                tokens[rng.integers(batch)] = 7
            width = int(tokens.max())
            text = np.zeros((batch, width), np.int64)
            durs = np.zeros((batch, width), np.int64)
            for b, n in enumerate(tokens):
                text[b, :n] = rng.integers(1, NUM_LABELS, size=n)
                durs[b, :n] = rng.integers(0, 4, size=n)
            return {"text": text, "durs": durs, "tokens": tokens.astype(np.int32),
                    "frames": durs.sum(1).astype(np.int32)}
        return case()

    def fill(self, name, rng, shape, dtype):
        if name == "durs":
            return np.zeros(shape, dtype)  # padding is what has duration 0
        return rng.integers(0, NUM_LABELS, size=shape).astype(dtype)

    def pad(self, case, extra, seed):
        return super().pad(case, 2 * (extra // 2), seed)  # the interleaved layout keeps an odd length


class StandardTalkNetProperties(GaussianEmbeddingProperties):
    name = "GaussianEmbedding(blank_free=False)"
    kwargs = dict(GaussianEmbeddingProperties.kwargs, blank_free=False)


for _block in (GaussianEmbeddingProperties(), StandardTalkNetProperties()):
    _suffix = "" if _block.kwargs.get("blank_free", True) else "__standard_talknet"
    globals().update({k + _suffix: v for k, v in property_tests(_block).items()})
