import itertools
import math

import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import Fails, run_torch_module_test
from torch_layers import GumbelVectorQuantizer


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def _np_logits(q, x):
    w = q.weight_proj.weight.detach().numpy().astype(np.float64)
    bias = q.weight_proj.bias.detach().numpy().astype(np.float64)
    return (x.astype(np.float64) @ w.T + bias).reshape(x.shape[0], x.shape[1], q.groups, q.num_vars)


def test_module_contract():
    run_torch_module_test(
        GumbelVectorQuantizer, (6, 5), dict(groups=2, vq_dim=4), make_inputs=_inputs,
        expected_output_shape=lambda b, t: [(b, t, 4), ()], changes_in_training=True, scriptable="",
        onnx=Fails("torch 2.13's ONNX translation fails on the exported program (a float where it expects a value)",
                   match="'float' object has no attribute 'name'"),
        bad_inputs=[([torch.zeros(2, 7)], "`x`"), ([torch.zeros(2, 7, 3)], "(batch, time, 6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
    )


def test_torchscript_quantize_frames_matches_eager():
    q = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4).eval()
    scripted = torch.jit.script(q)
    for b, t in ((2, 7), (1, 1), (3, 4)):
        (x,) = _inputs(b, t, torch.float32)
        for got, want in zip(scripted.quantize_frames(x), q.quantize_frames(x)):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("combine_groups", [True, False])
def test_eval_picks_argmax_entries_and_combines_ids(combine_groups):
    torch.manual_seed(0)
    q = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4, combine_groups=combine_groups).eval()
    assert tuple(q.vars.shape) == (1, 5 if combine_groups else 10, 2)
    (x,) = _inputs(2, 7, torch.float32)
    out, ppl_loss, temp, ids = q(x, return_ids=True)
    k = _np_logits(q, x.numpy()).argmax(-1)  # (b, t, g)
    vars_ = q.vars.detach().numpy()[0]
    rows = k + (0 if combine_groups else np.arange(2) * 5)
    expect = np.concatenate([vars_[rows[..., 0]], vars_[rows[..., 1]]], axis=-1)
    np.testing.assert_array_equal(out.detach().numpy(), expect)
    np.testing.assert_array_equal(ids.numpy(), k[..., 0] * 5 + k[..., 1])
    assert temp == 2.0


def test_training_is_hard_gumbel_max_with_injected_noise():
    torch.manual_seed(1)
    q = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4).train()
    (x,) = _inputs(3, 4, torch.float32)
    noise = torch.from_numpy(-np.log(np.random.default_rng(0).exponential(size=(3, 4, 2, 5))).astype(np.float32))
    out, _, ids = q.quantize_frames(x, gumbel_noise=noise)
    logits = _np_logits(q, x.numpy())
    k = (logits + noise.numpy()).argmax(-1)
    vars_ = q.vars.detach().numpy()[0]
    np.testing.assert_allclose(out.detach().numpy(), np.concatenate([vars_[k[..., 0]], vars_[k[..., 1]]], -1),
                               atol=1e-7)
    # ids always come from the noiseless logits
    k0 = logits.argmax(-1)
    np.testing.assert_array_equal(ids.numpy(), k0[..., 0] * 5 + k0[..., 1])
    # straight-through: the gradient is the softmax's at curr_temp
    out, _, _ = q.quantize_frames(x, gumbel_noise=noise)
    out.sum().backward()
    assert q.weight_proj.weight.grad is not None and float(q.weight_proj.weight.grad.abs().sum()) > 0


def test_gumbel_max_frequencies_follow_softmax():
    q = GumbelVectorQuantizer(1, 4, groups=1, vq_dim=2).train()
    p = np.array([0.1, 0.2, 0.3, 0.4])
    with torch.no_grad():
        q.weight_proj.weight.zero_()
        q.weight_proj.bias.copy_(torch.from_numpy(np.log(p)).float())
    g = torch.Generator().manual_seed(3)
    x = torch.zeros(1, 20000, 1)
    out, _, _ = q(x, generator=g)
    chosen = (out[0, :, None, :] == q.vars[0][None]).all(-1).float().argmax(-1).numpy()
    freq = np.bincount(chosen, minlength=4) / chosen.size
    np.testing.assert_allclose(freq, p, atol=0.015)


def test_perplexity_uniform_and_peaked_hand_derived():
    q = GumbelVectorQuantizer(3, 8, groups=2, vq_dim=4).eval()
    with torch.no_grad():
        q.weight_proj.weight.zero_()
        q.weight_proj.bias.zero_()
    _, ppl_loss, _ = q(torch.randn(2, 5, 3))
    ppl = 2 / (1 / 8 + 1e-7)  # exp(-sum p log(p + 1e-7)) with p = 1/8, two groups
    assert math.isclose(float(ppl_loss.detach()), (16 - ppl) / 16, abs_tol=1e-6)
    with torch.no_grad():
        q.weight_proj.bias.copy_(torch.tensor([60.0] + [0.0] * 7 + [0.0] * 3 + [60.0] + [0.0] * 4))
    _, ppl_loss, _ = q(torch.zeros(2, 5, 3))
    assert math.isclose(float(ppl_loss.detach()), (16 - 2) / 16, abs_tol=1e-5)


def test_temperature_schedule():
    q = GumbelVectorQuantizer(3, 4, temp=(2.0, 0.5, 0.999995), groups=1, vq_dim=2)
    assert q.curr_temp == 2.0
    q.set_num_updates(100_000)
    assert math.isclose(q.curr_temp, 2.0 * math.exp(100_000 * math.log(0.999995)), rel_tol=1e-12)
    assert 1.2 < q.curr_temp < 1.22
    q.set_num_updates(10_000_000)
    assert q.curr_temp == 0.5


def test_time_first_false_transposes():
    torch.manual_seed(2)
    a = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4).eval()
    b = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4, time_first=False).eval()
    b.load_state_dict(a.state_dict())
    (x,) = _inputs(2, 7, torch.float32)
    ya, pa, _ = a(x)
    yb, pb, _ = b(x.transpose(1, 2))
    torch.testing.assert_close(yb, ya.transpose(1, 2))
    torch.testing.assert_close(pb, pa)
    with pytest.raises(ValueError, match="x"):
        b(x)


def test_codebook_sampling_decodes_product_order():
    q = GumbelVectorQuantizer(3, 4, groups=2, vq_dim=6)
    combos = list(itertools.product(range(4), repeat=2))  # upstream's enumeration order
    np.testing.assert_array_equal(q.get_codebook_indices().numpy(), np.array(combos).reshape(-1))
    idx = torch.tensor([[0, 5, 15], [7, 9, 2]])
    z = q.sample_from_codebook(2, 3, indices=idx)
    vars_ = q.vars.detach().numpy()[0]
    for i in range(2):
        for j in range(3):
            a, b = combos[int(idx[i, j])]
            np.testing.assert_array_equal(z[i, j].detach().numpy(), np.concatenate([vars_[a], vars_[b]]))
    assert q.sample_from_codebook(5, 3, generator=torch.Generator().manual_seed(0)).shape == (5, 3, 6)
    with pytest.raises(ValueError, match="codebook holds only 16"):
        q.sample_from_codebook(2, 16)
    with pytest.raises(ValueError, match="indices"):
        q.sample_from_codebook(2, 3, indices=torch.tensor([[0, 16, 1], [0, 0, 0]]))
    separate = GumbelVectorQuantizer(3, 4, groups=2, vq_dim=6, combine_groups=False)
    np.testing.assert_array_equal(separate.get_codebook_indices().numpy(),
                                  (np.array(combos) + [0, 4]).reshape(-1))


def test_state_dict_keys_and_initialisation():
    torch.manual_seed(0)
    q = GumbelVectorQuantizer(64, 320, groups=2, vq_dim=128)
    assert set(q.state_dict()) == {"vars", "weight_proj.weight", "weight_proj.bias"}
    assert tuple(q.weight_proj.weight.shape) == (640, 64)
    w = q.weight_proj.weight.detach().numpy()
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1.0) < 0.01
    assert float(q.weight_proj.bias.detach().abs().max()) == 0.0
    v = q.vars.detach().numpy()
    assert v.min() >= 0.0 and v.max() < 1.0 and abs(v.mean() - 0.5) < 0.02


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="vq_dim"):
        GumbelVectorQuantizer(4, 5, groups=3, vq_dim=8)
    with pytest.raises(ValueError, match="temp"):
        GumbelVectorQuantizer(4, 5, temp=(2.0, 0.5))
    q = GumbelVectorQuantizer(4, 5, groups=2, vq_dim=4).train()
    with pytest.raises(ValueError, match="gumbel_noise"):
        q(torch.zeros(2, 3, 4), gumbel_noise=torch.zeros(2, 3, 5))
