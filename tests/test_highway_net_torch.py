import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import HighwayNet


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def test_module_contract():
    run_torch_module_test(
        HighwayNet, (6,), {}, make_inputs=_inputs, expected_output_shape=lambda b, t: (b, t, 6),
        bad_inputs=[([torch.zeros(2, 6)], "inputs"), ([torch.zeros(2, 7, 5)], "(batch, time, 6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
    )


def test_matches_hand_derived_formula_with_tf1_layout_weights():
    rng = np.random.default_rng(2)
    w = {k: rng.standard_normal(s).astype(np.float32)
         for k, s in (("H/kernel", (4, 4)), ("H/bias", (4,)), ("T/kernel", (4, 4)), ("T/bias", (4,)))}
    m = HighwayNet(4).eval()
    m.load_tf1_weights(w)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    h = np.maximum(x @ w["H/kernel"] + w["H/bias"], 0.0)
    t = 1.0 / (1.0 + np.exp(-(x @ w["T/kernel"] + w["T/bias"])))
    with torch.no_grad():
        y = m(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, h * t + x * (1.0 - t), atol=1e-5)
    # TF1 kernel (in, out) is stored transposed as nn.Linear's (out, in)
    assert m.H.weight[1, 3].item() == w["H/kernel"][3, 1]
    for k, v in m.tf1_weights().items():
        np.testing.assert_array_equal(v, w[k])


def test_tf1_initialisation_and_errors():
    m = HighwayNet(5)
    torch.testing.assert_close(m.T.bias, torch.full((5,), -1.0))
    torch.testing.assert_close(m.H.bias, torch.zeros(5))
    with pytest.raises(ValueError, match="units"):
        HighwayNet(0)
    with pytest.raises(ValueError, match="H/kernel"):
        m.load_tf1_weights({**m.tf1_weights(), "H/kernel": np.zeros((4, 5), np.float32)})
