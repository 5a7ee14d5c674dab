"""Framework-free pieces of ``tests/test_nonfinite_{keras,torch}.py``: poisoned inputs, the batch-isolation
assertion, the docstring sentence per block and numpy references of the masked losses (written from the TF1
formulas, docs/ARCHITECTURE.md, semantics, on inputs whose padding is zeroed)."""
from __future__ import annotations

import numpy as np
import pytest

from speechblocks.validation_messages import (
    NONFINITE_ATTENTION,
    NONFINITE_MASKED_LOSS,
    NONFINITE_TF1,
    NONFINITE_TORCH_NATIVE,
)

TF1_BLOCKS = ("Conv1DBlock", "EncoderConvolutions", "EncoderRNN", "Prenet", "DecoderRNN", "ZoneoutLSTMCell",
              "FrameProjection", "StopProjection", "Postnet", "HighwayNet", "CBHG", "TF1GRUCell")
ATTENTION_BLOCKS = ("LocationSensitiveAttention", "Tacotron2Decoder", "Tacotron2")
TORCH_NATIVE = ("GaussianEmbedding", "ContrastiveLoss", "TAC", "SpeakerEncoder", "GumbelVectorQuantizer")
LOSSES = ("MaskedMSE", "MaskedSigmoidCrossEntropy", "MaskedLinearLoss")
#: block class name -> the sentence its class docstring must hold
SENTENCE = {**{n: NONFINITE_TF1 for n in TF1_BLOCKS}, **{n: NONFINITE_ATTENTION for n in ATTENTION_BLOCKS},
            **{n: NONFINITE_TORCH_NATIVE for n in TORCH_NATIVE},
            **{n: NONFINITE_MASKED_LOSS for n in LOSSES}}


def states_policy(cls) -> bool:
    """Whether the class docstring holds its block's non-finite sentence (line breaks ignored)."""
    return " ".join(SENTENCE[cls.__name__].split()) in " ".join((cls.__doc__ or "").split())


def poisoned(x: np.ndarray, index=2) -> np.ndarray:
    """A copy of ``x`` (batch >= 3) with a NaN in example 0 and +inf / -inf in example 1 at frame ``index``
    (channel 0 / 1); example 2 stays clean."""
    x = np.array(x, copy=True)
    x[(0, index, 0) + (0,) * (x.ndim - 3)] = np.nan
    x[(1, index, 0) + (0,) * (x.ndim - 3)] = np.inf
    x[(1, index - 1, 1) + (0,) * (x.ndim - 3)] = -np.inf
    return x


def assert_isolated(clean: list, dirty: list, expect_nan: bool = True) -> None:
    """Batch independence of a non-finite input: example 0 of some output is NaN, every output of example 2
    equals the clean run's (to float32 rounding: the batch shape may change the GEMM blocking).

    ``expect_nan=False``: the GumbelVectorQuantizer in inference, whose argmax picks a (finite) code vector for NaN
    logits, as ``torch.argmax`` of the original does (NaN counts as the maximum; the Keras twin picks the same)."""
    assert not expect_nan or any(np.isnan(np.asarray(d)[0]).any() for d in dirty), "the NaN of example 0 vanished"
    for c, d in zip(clean, dirty):
        np.testing.assert_allclose(np.asarray(d)[2], np.asarray(c)[2], rtol=1e-5, atol=1e-6)


def loss_inputs(loss: str, seed: int = 0):
    """``(targets, outputs, lengths, padding)`` float32 with lengths [5, 2, 6] over 6 frames (r = 2)."""
    g = np.random.default_rng(seed)
    lengths = np.array([5, 2, 6], np.int32)
    shape = (3, 6) if loss == "MaskedSigmoidCrossEntropy" else (3, 6, 9)
    if loss == "MaskedSigmoidCrossEntropy":
        targets = (g.uniform(size=shape) < 0.4).astype(np.float32)
        outputs = (2.0 * g.standard_normal(shape)).astype(np.float32)
    else:
        targets = g.standard_normal(shape).astype(np.float32)
        outputs = (targets + g.standard_normal(shape)).astype(np.float32)
    pad = np.arange(6)[None] >= lengths[:, None]
    pad = np.broadcast_to(pad.reshape(pad.shape + (1,) * (len(shape) - 2)), shape).copy()
    return targets, outputs, lengths, pad


def with_nonfinite(a: np.ndarray, pad: np.ndarray, shift: int = 0) -> np.ndarray:
    """``a`` with NaN, +inf, -inf cycling through its padding."""
    a = a.copy()
    a[pad] = np.array([np.nan, np.inf, -np.inf], np.float32)[(np.arange(pad.sum()) + shift) % 3]
    return a


def numpy_loss(loss: str, targets, outputs, lengths, pos_weight: float = 1.0, sample_rate: float = 8000):
    """TF1's masked losses in float64 (``sum(loss * mask) / count``), for finite inputs."""
    t, o = targets.astype(np.float64), outputs.astype(np.float64)
    mask = (np.arange(t.shape[1])[None] < lengths[:, None]).astype(np.float64)
    if loss == "MaskedSigmoidCrossEntropy":
        per = pos_weight * t * np.logaddexp(0.0, -o) + (1 - t) * np.logaddexp(0.0, o)
        masked = per * mask
        return masked.sum() / np.count_nonzero(masked)
    w = np.broadcast_to(mask[:, :, None], t.shape)
    if loss == "MaskedMSE":
        return np.sum(w * (o - t) ** 2) / np.count_nonzero(w)
    n = int(2000 / (sample_rate * 0.5) * t.shape[-1])
    l1 = np.abs(t - o) * w
    return 0.5 * l1.sum() / w.sum() + 0.5 * l1[:, :, :n].sum() / w.sum()


def loss_kwargs(loss: str) -> dict:
    return {"MaskedMSE": {}, "MaskedSigmoidCrossEntropy": {"pos_weight": 3.0},
            "MaskedLinearLoss": {"sample_rate": 8000}}[loss]


#: extreme finite logits and their hand-derived per-element losses (pos_weight 2): log1p(exp(-1e4)) == 0
EXTREME_TARGETS = np.array([[1.0, 0.0, 1.0, 0.0]], np.float32)
EXTREME_LOGITS = np.array([[1e4, 1e4, -1e4, -1e4]], np.float32)
EXTREME_PER_ELEMENT = np.array([0.0, 1e4, 2e4, 0.0])  # z=1 right, z=0 wrong, z=1 wrong (x pos_weight), z=0 right


def check_selection(loss: str, value_and_grads, class_value) -> None:
    """The masked-loss selection claims for one framework: NaN/+inf/-inf in the padding of ``outputs`` (and of
    ``targets``, but for the 0/1 stop labels) give the float64 reference value of the zeroed padding, finite
    gradients that are exactly 0 on the padding and equal the clean gradients elsewhere; the loss class too.

    Args:
        value_and_grads: ``(loss, targets, outputs, lengths, **kw) -> (value, d/d targets, d/d outputs)`` (numpy).
        class_value: ``(loss, targets, outputs, lengths, **kw) -> value`` of the loss class.
    """
    targets, outputs, lengths, pad = loss_inputs(loss)
    kw = loss_kwargs(loss)
    ref = numpy_loss(loss, np.where(pad, 0, targets), np.where(pad, 0, outputs), lengths, **kw)
    dirty_t = with_nonfinite(targets, pad) if loss != "MaskedSigmoidCrossEntropy" else targets
    dirty_o = with_nonfinite(outputs, pad, 1)
    value, *grads = value_and_grads(loss, dirty_t, dirty_o, lengths, **kw)
    assert float(value) == pytest.approx(ref, rel=1e-6)
    _, *clean = value_and_grads(loss, targets, outputs, lengths, **kw)
    for got, want in zip(grads, clean):
        assert np.isfinite(got).all()
        assert not got[pad].any()  # exactly 0 on the padding
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)  # and the clean gradients elsewhere
    assert float(class_value(loss, dirty_t, dirty_o, lengths, **kw)) == pytest.approx(ref, rel=1e-6)


#: a small RTVC model whose loss masks the decoder (``tacotron2_loss`` tests)
LOSS_MODEL = dict(embedding_dim=8, enc_conv_channels=8, enc_conv_kernel_size=3, encoder_lstm_units=4, attention_dim=4,
                  attention_filters=2, attention_kernel=3, prenet_layers=[4, 4], decoder_layers=1, decoder_lstm_units=6,
                  postnet_channels=4, postnet_num_layers=2, num_mels=3, outputs_per_step=2, speaker_embedding_size=2,
                  mask_decoder=True)


def loss_batch():
    """``(zeroed, dirty, pads)`` for ``tacotron2_loss``: batch 2, 6 frames, lengths [6, 3]; ``dirty`` holds
    NaN/+inf/-inf in the padding of every target and output (0/1 stop targets: NaN-free), ``zeroed`` 0 there;
    ``pads`` the boolean padding of each output."""
    g = np.random.default_rng(3)
    lengths = np.array([6, 3], np.int32)
    pad2 = np.arange(6)[None] >= lengths[:, None]
    pad3 = np.broadcast_to(pad2[:, :, None], (2, 6, 3)).copy()
    zeroed = {"mel_targets": g.standard_normal((2, 6, 3)).astype(np.float32),
              "decoder_outputs": g.standard_normal((2, 6, 3)).astype(np.float32),
              "mel_outputs": g.standard_normal((2, 6, 3)).astype(np.float32),
              "stop_token_prediction": g.standard_normal((2, 6)).astype(np.float32),
              "stop_token_targets": (g.uniform(size=(2, 6)) < 0.3).astype(np.float32), "lengths": lengths}
    pads = {k: (pad2 if zeroed[k].ndim == 2 else pad3) for k in zeroed if k != "lengths"}
    dirty = dict(zeroed)
    for i, k in enumerate(("mel_targets", "decoder_outputs", "mel_outputs", "stop_token_prediction")):
        zeroed[k] = np.where(pads[k], 0, zeroed[k]).astype(np.float32)
        dirty[k] = with_nonfinite(zeroed[k], pads[k], i)
    return zeroed, dirty, pads
