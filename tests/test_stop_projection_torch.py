import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import StopProjection


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def test_module_contract():
    run_torch_module_test(
        StopProjection, (6,), dict(shape=2), make_inputs=_inputs, expected_output_shape=lambda b, t: (b, t, 2),
        changes_in_training=True,
        bad_inputs=[([torch.zeros(6)], "inputs"), ([torch.zeros(2, 7, 3)], "6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
    )


def test_logits_in_train_sigmoid_in_eval():
    rng = np.random.default_rng(0)
    name = "projection_stop_token_projection"
    w = {f"{name}/kernel": rng.standard_normal((6, 2)).astype(np.float32),
         f"{name}/bias": rng.standard_normal(2).astype(np.float32)}
    m = StopProjection(6, 2, tf1_scope="stop_token_projection")
    m.load_tf1_weights(w)
    x = 3 * torch.randn(4, 6)
    logits = x.double().numpy() @ w[f"{name}/kernel"] + w[f"{name}/bias"]
    with torch.no_grad():
        np.testing.assert_allclose(m.train()(x).numpy(), logits, atol=1e-5)
        np.testing.assert_allclose(m.eval()(x).numpy(), 1 / (1 + np.exp(-logits)), atol=1e-6)
        np.testing.assert_allclose(m.eval()(x, training=True).numpy(), logits, atol=1e-5)  # explicit override
        np.testing.assert_allclose(m.train()(x, training=False).numpy(), 1 / (1 + np.exp(-logits)), atol=1e-6)
        scripted = torch.jit.script(m.eval())
        np.testing.assert_allclose(scripted(x, True).numpy(), logits, atol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="activation"):
        StopProjection(4, activation="softmax")
    with pytest.raises(ValueError, match="input_size"):
        StopProjection(0)
