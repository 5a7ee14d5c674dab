"""Property tests of ``SpeakerEncoder`` (Keras, torch, twins) and of its partial windows (torch's
``embed_utterance``, RTVC's whole-utterance rule).

``forward``/``call`` takes fixed-length utterances (no lengths): batch permutation, rows one by one, float64,
mixed precision and twin agreement hold. ``embed_utterance`` cuts a mel into :func:`partial_windows`: frames that
no kept window covers (past a dropped last window) change nothing; the last window's padding frames
(``pad_value``) are read, as in RTVC (documented), so they change the embedding exactly when the last window runs
past the utterance; the windows are embedded in one batch that equals the windows run one by one.
"""
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import ROW, TorchStateBlock, property_tests
from tests.helpers.strategies import normal, value_seeds, weight_seeds

SIZES = dict(mel_n_channels=3, model_hidden_size=4, model_num_layers=2, model_embedding_size=3)


class SpeakerEncoderProperties(TorchStateBlock):
    name = "SpeakerEncoder"
    keras_cls, torch_cls = tf_layers.SpeakerEncoder, torch_layers.SpeakerEncoder
    kwargs = SIZES
    arguments = ("utterances",)
    properties = ("permutation", "rows", "float64", "mixed", "twin")
    outputs = {"embeds": ROW}
    # found by ``mixed``: torch's ``nn.LSTM`` under CPU autocast raised ``RuntimeError: could not create a
    # primitive descriptor for the LSTM`` (oneDNN, CPUs without native bfloat16; any input); the module now runs
    # its LSTM outside autocast (``torch_layers/speaker_encoder.py``)
    # thorough profile, twin: 3.0e-05 apart for seed 565 -- not a bug: the raw embedding (relu of the linear layer)
    # had norm 6e-5, close to the +1e-5 of the normalisation, so float32 rounding of the cancelling linear layer
    # was amplified ~1000x. The drawn weights keep the linear bias >= 1 (``weights``): outputs well-conditioned.
    examples = {"mixed": [dict(case={"utterances": np.full((1, 1, 3), 0.5, np.float32)}, seed=0)],
                "twin": [dict(case={"utterances": np.array([[[0.676, 0.032, 0.072], [-0.741, -0.454, -0.035]]],
                                                             np.float32)}, seed=565)]}

    def weights(self, instance, seed):
        out = super().weights(instance, seed)
        out["linear.bias"] = 1.0 + np.abs(out["linear.bias"])
        return out

    def cases(self):
        @st.composite
        def case(draw):
            batch, frames = draw(st.integers(1, 4)), draw(st.integers(1, 8))
            rng = np.random.default_rng(draw(value_seeds))
            return {"utterances": normal(rng, (batch, frames, SIZES["mel_n_channels"]))}
        return case()


BLOCK = SpeakerEncoderProperties()
globals().update(property_tests(BLOCK))


@given(n_frames=st.integers(1, 20), window=st.integers(1, 8), overlap=st.sampled_from([0.0, 0.25, 0.5, 0.75]),
       min_coverage=st.sampled_from([0.25, 0.5, 0.75, 1.0]), seed=weight_seeds, value_seed=value_seeds)
def test_partial_windows_read_only_their_frames_torch(n_frames, window, overlap, min_coverage, seed, value_seed):
    BLOCK.run("torch", {"utterances": np.zeros((1, 1, 3), np.float32)}, seed)  # loads the drawn weights
    model = BLOCK._instances[("torch", "float32")][0]
    rng = np.random.default_rng(value_seed)
    mel = torch.from_numpy(normal(rng, (n_frames, SIZES["mel_n_channels"])))
    kw = dict(partials_n_frames=window, overlap=overlap, min_coverage=min_coverage)
    with torch.no_grad():
        embed, partials, windows = model.embed_utterance(mel, **kw, return_partials=True)
        if not partials.any():  # every partial embedding relu'd to 0: RTVC's mean / ||mean|| (no epsilon) is NaN
            assert torch.isnan(embed).all()
            return
        # the rule, hand-derived: equal windows every `step` frames from 0; the last one covers enough real
        # frames (or is the only one); the next start would have run past the rule's last start
        step = max(round(window * (1 - overlap)), 1)
        assert windows == [(i * step, i * step + window) for i in range(len(windows))]
        last_start, last_stop = windows[-1]
        assert len(windows) == 1 or (n_frames - last_start) / window >= min_coverage
        # frames past the last kept window are never read
        covered = min(last_stop, n_frames)
        moved = mel.clone()
        moved[covered:] = 100.0 * torch.randn(n_frames - covered, SIZES["mel_n_channels"])
        torch.testing.assert_close(model.embed_utterance(moved, **kw), embed, atol=1e-6, rtol=0)
        # the batch of windows equals the windows run one by one, over the mel padded with `pad_value` frames
        # (RTVC pads the last window: its padding is read); the mean is normalised
        for pad_value in (0.0, 3.0):
            if pad_value:
                embed, partials, _ = model.embed_utterance(mel, **kw, pad_value=pad_value, return_partials=True)
            pad = torch.full((max(last_stop - n_frames, 0), SIZES["mel_n_channels"]), pad_value)
            padded = torch.cat([mel, pad])
            for (a, b), partial in zip(windows, partials):
                torch.testing.assert_close(model(padded[a:b][None])[0], partial, atol=1e-6, rtol=0)
            mean = partials.mean(0)
            torch.testing.assert_close(embed, mean / mean.norm(), atol=1e-6, rtol=0, equal_nan=True)
