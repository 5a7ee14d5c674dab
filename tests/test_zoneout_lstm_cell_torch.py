import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import ZoneoutLSTMCell


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _numpy_lstm(kernel, bias, x, c, h):
    """TF1 LSTMCell maths in numpy (gates i, j, f, o; forget bias 1.0)."""
    i, j, f, o = np.split(np.concatenate([x, h], -1) @ kernel + bias, 4, -1)
    c_new = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    return c_new, _sigmoid(o) * np.tanh(c_new)


def _inputs(b, t, dtype):
    return [torch.randn(b, 5, generator=torch.Generator().manual_seed(b * 10 + t), dtype=dtype)]


def test_module_contract():
    run_torch_module_test(
        ZoneoutLSTMCell, (5, 6), dict(zoneout_factor_cell=0.3, zoneout_factor_output=0.2), make_inputs=_inputs,
        expected_output_shape=lambda b, t: [(b, 6), (b, 6), (b, 6)], changes_in_training=True,
        bad_inputs=[([torch.zeros(2, 3, 5)], "inputs"), ([torch.zeros(2, 4)], "(batch, 5)"),
                    ([torch.zeros(2, 5, dtype=torch.int64)], "floating"),
                    ([torch.zeros(2, 5), (torch.zeros(2, 6), torch.zeros(2, 3))], "state")],
    )


@pytest.mark.parametrize("kwargs", [dict(zoneout_factor_cell=-0.1), dict(zoneout_factor_output=1.01)])
def test_zoneout_factor_outside_unit_interval(kwargs):
    with pytest.raises(ValueError, match="zoneout_factor"):
        ZoneoutLSTMCell(3, 4, **kwargs)


def _setup(zc, zh, seed=0):
    g = np.random.default_rng(seed)
    cell = ZoneoutLSTMCell(3, 4, zc, zh)
    kernel = (g.standard_normal((7, 16)) * 0.5).astype(np.float32)
    bias = (g.standard_normal(16) * 0.1).astype(np.float32)
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    x, c, h = (g.standard_normal((3, n)).astype(np.float32) for n in (3, 4, 4))
    return cell, kernel, bias, x, c, h


def _t(*arrays):
    return [torch.from_numpy(a) for a in arrays]


def test_eval_zoneout_interpolates_and_output_is_raw():
    cell, kernel, bias, x, c, h = _setup(0.3, 0.2)
    c_new, h_new = _numpy_lstm(kernel, bias, x, c, h)
    tx, tc, th = _t(x, c, h)
    with torch.no_grad():
        out, (c1, h1) = cell.eval()(tx, (tc, th))
    np.testing.assert_allclose(out.numpy(), h_new, atol=1e-6)
    np.testing.assert_allclose(c1.numpy(), 0.7 * c_new + 0.3 * c, atol=1e-6)
    np.testing.assert_allclose(h1.numpy(), 0.8 * h_new + 0.2 * h, atol=1e-6)


def test_injected_masks_keep_prob_semantics():
    cell, kernel, bias, x, c, h = _setup(0.3, 0.2, seed=1)
    c_new, h_new = _numpy_lstm(kernel, bias, x, c, h)
    g = np.random.default_rng(5)
    mc, mh = ((g.random((3, 4)) > 0.5).astype(np.float32) for _ in range(2))
    tx, tc, th, tmc, tmh = _t(x, c, h, mc, mh)
    with torch.no_grad():
        out, (c1, h1) = cell.train()(tx, (tc, th), zoneout_masks=(tmc, tmh))
    np.testing.assert_allclose(out.numpy(), h_new, atol=1e-6)
    np.testing.assert_allclose(c1.numpy(), np.where(mc == 1, c_new, c), atol=1e-6)
    np.testing.assert_allclose(h1.numpy(), np.where(mh == 1, h_new, h), atol=1e-6)
    with pytest.raises(ValueError, match="zoneout_masks"):
        cell(tx, (tc, th), zoneout_masks=(tmc, tmh[:, :2]))


def test_random_zoneout_rate_is_z_not_one_minus_z():
    torch.manual_seed(0)
    cell = ZoneoutLSTMCell(3, 128, 0.1, 0.4).train()
    x, c, h = torch.randn(64, 3), torch.randn(64, 128), torch.randn(64, 128)
    with torch.no_grad():
        _, (c1, h1) = cell(x, (c, h))
    assert abs((c1 == c).float().mean().item() - 0.1) < 0.02
    assert abs((h1 == h).float().mean().item() - 0.4) < 0.02


def test_scripted_cell_and_initial_state():
    cell = ZoneoutLSTMCell(3, 4, 0.1, 0.1, tf1_scope="x").eval()
    scripted = torch.jit.script(cell)
    c, h = scripted.get_initial_state(2)
    assert c.shape == (2, 4) and not c.any()
    x = torch.randn(2, 3)
    torch.testing.assert_close(scripted(x, (c, h))[1][0], cell(x, (c, h))[1][0])
    assert cell.state_size == (4, 4) and cell.output_size == 4 and cell.tf1_scope == "x"
    assert set(cell.tf1_weights()) == {"kernel", "bias"} and cell.tf1_weights()["kernel"].shape == (7, 16)
