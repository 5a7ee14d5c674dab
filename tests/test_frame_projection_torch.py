import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import FrameProjection
from torch_layers.tf1_exchange import dense_from_tf1


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def test_module_contract():
    run_torch_module_test(
        FrameProjection, (6,), dict(shape=5, activation="tanh"), make_inputs=_inputs,
        expected_output_shape=lambda b, t: (b, t, 5),
        bad_inputs=[([torch.zeros(6)], "inputs"), ([torch.zeros(2, 7, 3)], "6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
    )


@pytest.mark.parametrize("scope,activation", [(None, None), ("linear_transform_projection", "relu"),
                                              ("postnet_projection", "sigmoid")])
def test_matches_numpy_reference_with_tf1_names(scope, activation):
    rng = np.random.default_rng(0)
    name = f"projection_{scope or 'Linear_projection'}"
    w = {f"{name}/kernel": rng.standard_normal((6, 4)).astype(np.float32),
         f"{name}/bias": rng.standard_normal(4).astype(np.float32)}
    m = FrameProjection(6, 4, activation=activation, tf1_scope=scope)
    m.load_tf1_weights(w)
    act = {None: lambda v: v, "relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[activation]
    for shape in ((3, 6), (2, 5, 6)):
        x = torch.randn(*shape)
        with torch.no_grad():
            np.testing.assert_allclose(m(x).numpy(), act(x.double().numpy() @ w[f"{name}/kernel"] + w[f"{name}/bias"]),
                                       atol=1e-5)


def test_layout_and_errors():
    m = FrameProjection(3, 2)
    k = m.tf1_weights()["projection_Linear_projection/kernel"]
    assert k.shape == (3, 2)
    np.testing.assert_array_equal(dense_from_tf1(k), m.dense.weight.detach().numpy())
    with pytest.raises(ValueError, match="activation"):
        FrameProjection(3, 2, activation="gelu")
    with pytest.raises(ValueError, match="shape"):
        FrameProjection(3, 0)
