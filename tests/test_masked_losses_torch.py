"""Torch masked losses against hand-derived values and an independent numpy reference (written from the
TF1 semantics, textbook cross-entropy formula); the TF1 graph is compared in the parity suite."""
import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import (
    MaskedLinearLoss,
    MaskedMSE,
    MaskedSigmoidCrossEntropy,
    masked_linear_loss,
    masked_mse,
    masked_sigmoid_cross_entropy,
)

G = np.random.default_rng(7)


def _np_mask(lengths, time):
    return (np.arange(time)[None] < np.asarray(lengths)[:, None]).astype(np.float64)


def np_mse(t, o, w):
    w = np.broadcast_to(w, t.shape)
    return np.sum(w * (o.astype(np.float64) - t) ** 2) / np.count_nonzero(w)


def np_ce(z, x, m, pos_weight=1.0, count="nonzero_loss"):
    x = x.astype(np.float64)
    losses = pos_weight * z * np.logaddexp(0.0, -x) + (1 - z) * np.logaddexp(0.0, x)
    masked = losses * m
    return masked.sum() / np.count_nonzero(masked if count == "nonzero_loss" else m)


def np_linear(t, o, w, sample_rate, num_freq, low_band_norm="full_mask"):
    w = np.broadcast_to(w, t.shape)
    n = int(2000 / (sample_rate * 0.5) * num_freq)
    l1 = np.abs(t.astype(np.float64) - o) * w
    low_den = w.sum() if low_band_norm == "full_mask" else w[:, :, :n].sum()
    return 0.5 * l1.sum() / w.sum() + 0.5 * l1[:, :, :n].sum() / low_den


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def _lengths(b, t):
    return torch.tensor([t] + [max(t - 1 - i, 0) for i in range(b - 1)])


def _spec_inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    targets = torch.randn(b, t, 6, generator=g, dtype=dtype)
    return [targets, targets + torch.randn(b, t, 6, generator=g, dtype=dtype), _lengths(b, t)]


def _stop_inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [(torch.rand(b, t, generator=g) < 0.3).to(dtype), 3 * torch.randn(b, t, generator=g, dtype=dtype),
            _lengths(b, t)]


_BAD_SPEC = [
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 6), torch.tensor([5, 1])], "`targets_lengths` holds a length longer"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 6), torch.tensor([4, -1])], "`targets_lengths` must hold lengths >= 0"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 6), torch.tensor([3, 1, 1])], "`targets_lengths` must have shape (2,)"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 6), torch.tensor([4.0, 1.0])], "`targets_lengths`"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 6)], "`targets_lengths`"),
    ([torch.zeros(2, 4), torch.ones(2, 4), torch.tensor([4, 1])], "`targets` must have rank 3"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 3, 6), torch.tensor([4, 1])], "`outputs` must have the shape of `targets`"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 1), torch.tensor([4, 1])], "no broadcasting"),
    ([torch.zeros(2, 4, 6), torch.ones(2, 4, 6), None, torch.ones(2, 3)], "`mask`"),
    ([torch.zeros(2, 4, 6, dtype=torch.long), torch.ones(2, 4, 6), torch.tensor([4, 1])], "floating"),
]


@pytest.mark.parametrize("cls,kwargs", [
    (MaskedMSE, dict(outputs_per_step=1)),
    (MaskedLinearLoss, dict(outputs_per_step=1, sample_rate=16000, low_band_norm="low_band_mask")),
])
def test_module_contract_spectrogram_losses(cls, kwargs):
    run_torch_module_test(cls, (), kwargs, make_inputs=_spec_inputs, expected_output_shape=lambda b, t: (),
                          bad_inputs=_BAD_SPEC)


def test_module_contract_cross_entropy():
    bad = [([torch.zeros(2, 4), torch.ones(2, 4), torch.tensor([5, 1])], "`targets_lengths` holds a length longer"),
           ([torch.zeros(2, 4, 1), torch.ones(2, 4, 1), torch.tensor([4, 1])], "`targets` must have rank 2"),
           ([torch.zeros(2, 4), torch.ones(2, 4), None, torch.ones(2, 4, 1)], "`mask`")]
    run_torch_module_test(MaskedSigmoidCrossEntropy, (), dict(outputs_per_step=1, pos_weight=3.0),
                          make_inputs=_stop_inputs, expected_output_shape=lambda b, t: (), bad_inputs=bad)


def test_masked_mse_numpy_and_weighted_mask():
    t = G.standard_normal((3, 6, 5)).astype(np.float32)
    o = (t + G.standard_normal((3, 6, 5))).astype(np.float32)
    lengths = [5, 3, 2]
    got = masked_mse(_t(t), _t(o), torch.tensor(lengths), outputs_per_step=2)
    assert got.dtype == torch.float32 and got.shape == ()
    np.testing.assert_allclose(float(got), np_mse(t, o, _np_mask(lengths, 6)[:, :, None]), rtol=1e-6)
    w = G.choice([0.0, 0.5, 1.0], size=(3, 6)).astype(np.float32)
    for mask in (w, w[:, :, None], np.repeat(w[:, :, None], 5, axis=2)):
        np.testing.assert_allclose(float(masked_mse(_t(t), _t(o), None, outputs_per_step=2, mask=_t(mask))),
                                   np_mse(t, o, w[:, :, None]), rtol=1e-6)
    with pytest.raises(ValueError, match="rounded up to a multiple of outputs_per_step=4"):
        masked_mse(_t(t), _t(o), torch.tensor(lengths), outputs_per_step=4)
    with pytest.raises(ValueError, match="`outputs_per_step`"):
        MaskedMSE(outputs_per_step=0)


def test_cross_entropy_numpy_count_quirk_and_flush_to_zero():
    z = (G.uniform(size=(3, 9)) < 0.4).astype(np.float32)
    x = (2.0 * G.standard_normal((3, 9))).astype(np.float32)
    lengths = [9, 4, 7]
    for pw in (1.0, 20.0):
        for count in ("nonzero_loss", "mask"):
            got = masked_sigmoid_cross_entropy(_t(z), _t(x), torch.tensor(lengths), outputs_per_step=3,
                                               pos_weight=pw, count=count)
            np.testing.assert_allclose(float(got), np_ce(z, x, _np_mask(lengths, 9), pw, count), rtol=1e-6)
    # a loss that is exactly 0 leaves the seed's divisor; so does one whose exp(-|x|) is subnormal in float32,
    # which TensorFlow flushes to 0 (logit 90: exp(-90) ~ 8e-40), even once scaled by pos_weight 20
    z1 = torch.tensor([[1.0, 1.0, 1.0]])
    x1 = torch.tensor([[120.0, 90.0, 0.0]])
    lens = torch.tensor([3])
    seed = masked_sigmoid_cross_entropy(z1, x1, lens, outputs_per_step=1, pos_weight=20.0)
    fixed = masked_sigmoid_cross_entropy(z1, x1, lens, outputs_per_step=1, pos_weight=20.0, count="mask")
    np.testing.assert_allclose([float(seed), float(fixed)], [20 * np.log(2.0), 20 * np.log(2.0) / 3], rtol=1e-6)
    with pytest.raises(ValueError, match="`count`"):
        MaskedSigmoidCrossEntropy(outputs_per_step=1, count="all")
    with pytest.raises(ValueError, match="`pos_weight`"):
        MaskedSigmoidCrossEntropy(outputs_per_step=1, pos_weight=float("nan"))


def test_zero_counts_give_zero_not_nan_with_finite_gradients():
    x = torch.tensor([[120.0, 3.0]], requires_grad=True)
    value = masked_sigmoid_cross_entropy(torch.tensor([[1.0, 0.0]]), x, None, outputs_per_step=1,
                                         mask=torch.tensor([[1.0, 0.0]]))
    (grad,) = torch.autograd.grad(value, x)
    assert value.item() == 0.0 and torch.equal(grad, torch.zeros_like(grad))
    o = torch.ones(2, 2, 3, requires_grad=True)
    empty = torch.zeros(2, 2)
    for value in (masked_mse(torch.zeros(2, 2, 3), o, None, outputs_per_step=2, mask=empty),
                  masked_linear_loss(torch.zeros(2, 2, 3), o, None, outputs_per_step=2, sample_rate=8000, mask=empty)):
        (grad,) = torch.autograd.grad(value, o)
        assert value.item() == 0.0 and torch.equal(grad, torch.zeros_like(grad))


def test_masked_linear_loss_hand_derived_and_numpy():
    t = torch.zeros(1, 2, 4)
    o = torch.tensor([[[1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 3.0, 3.0]]])  # n = int(2000 / 4000 * 4) = 2 bins
    assert float(masked_linear_loss(t, o, torch.tensor([2]), outputs_per_step=1,
                                    sample_rate=8000)) == pytest.approx(1.25)
    assert float(masked_linear_loss(t, o, torch.tensor([2]), outputs_per_step=1, sample_rate=8000,
                                    low_band_norm="low_band_mask")) == pytest.approx(1.5)
    tn = G.standard_normal((3, 8, 33)).astype(np.float32)
    on = (tn + G.standard_normal((3, 8, 33))).astype(np.float32)
    lengths = [8, 3, 6]
    for sr, nf, norm in ((22050, None, "full_mask"), (8000, None, "low_band_mask"), (22050, 1025, "full_mask")):
        got = MaskedLinearLoss(4, sr, nf, norm)(_t(tn), _t(on), torch.tensor(lengths))
        np.testing.assert_allclose(float(got), np_linear(tn, on, _np_mask(lengths, 8)[:, :, None], sr, nf or 33, norm),
                                   rtol=1e-6)
    with pytest.raises(ValueError, match="`sample_rate`"):
        MaskedLinearLoss(1, sample_rate=-1)
    with pytest.raises(ValueError, match="`low_band_norm`"):
        MaskedLinearLoss(1, sample_rate=8000, low_band_norm="low")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_and_autocast_compute_in_float32_long_sequence(dtype):
    b, time, c = 2, 2000, 1025
    g = torch.Generator().manual_seed(3)
    t32 = torch.randn(b, time, c, generator=g)
    o32 = t32 + torch.randn(b, time, c, generator=g)
    lengths = torch.tensor([2000, 1234])
    z32 = (torch.rand(b, time, generator=g) < 0.1).float()
    x32 = 3 * torch.randn(b, time, generator=g)
    if dtype == torch.float16:  # a float16 computation overflows at this size
        assert not torch.isfinite(((o32.half() - t32.half()) ** 2).sum())
    losses = [
        (MaskedMSE(2), (t32, o32)),
        (MaskedLinearLoss(2, sample_rate=22050), (t32, o32)),
        (MaskedSigmoidCrossEntropy(2, pos_weight=5.0), (z32, x32)),
    ]
    for loss, (t, o) in losses:
        low_t, low_o = t.to(dtype), o.to(dtype)
        got = loss(low_t, low_o, lengths)
        assert got.dtype == torch.float32 and torch.isfinite(got), type(loss).__name__
        np.testing.assert_allclose(float(got), float(loss(low_t.float(), low_o.float(), lengths)), rtol=1e-6)
        np.testing.assert_allclose(float(got), float(loss(t, o, lengths)), rtol=1e-3, err_msg=type(loss).__name__)
    if dtype == torch.bfloat16:  # autocast: a bfloat16 model output inside the autocast region
        proj = torch.nn.Linear(c, c, bias=False)
        with torch.no_grad():
            proj.weight.copy_(torch.eye(c))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = proj(o32)
            assert out.dtype == torch.bfloat16
            got = MaskedMSE(2)(t32, out, lengths)
        assert got.dtype == torch.float32 and torch.isfinite(got)
        np.testing.assert_allclose(float(got.detach()), float(MaskedMSE(2)(t32, o32, lengths)), rtol=1e-3)


def test_float64_and_gradients_match_numpy():
    t = G.standard_normal((2, 4, 3))
    o = torch.tensor(G.standard_normal((2, 4, 3)), requires_grad=True)
    w = _np_mask([4, 2], 4)[:, :, None]
    value = masked_mse(torch.tensor(t), o, torch.tensor([4, 2]), outputs_per_step=2)
    assert value.dtype == torch.float64
    (grad,) = torch.autograd.grad(value, o)
    np.testing.assert_allclose(value.item(), np_mse(t, o.detach().numpy(), w), rtol=1e-12)
    want = 2 * (o.detach().numpy() - t) * np.broadcast_to(w, t.shape) / np.count_nonzero(np.broadcast_to(w, t.shape))
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-12)
