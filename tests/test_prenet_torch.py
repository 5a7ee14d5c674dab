import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import Prenet


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def _weights(sizes, in_features, seed=0):
    rng = np.random.default_rng(seed)
    w, cin = {}, in_features
    for i, s in enumerate(sizes):
        w[f"dense_{i + 1}/kernel"] = rng.standard_normal((cin, s)).astype(np.float32) / np.sqrt(cin)
        w[f"dense_{i + 1}/bias"] = 0.1 * rng.standard_normal(s).astype(np.float32)
        cin = s
    return w


def test_module_contract_without_dropout():
    run_torch_module_test(
        Prenet, (6,), dict(layers_sizes=(5, 4), drop_rate=0.0), make_inputs=_inputs,
        expected_output_shape=lambda b, t: (b, t, 4),
        bad_inputs=[([torch.zeros(6)], "inputs"), ([torch.zeros(2, 7, 3)], "6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
    )


def test_module_contract_with_dropout():
    run_torch_module_test(Prenet, (6,), dict(layers_sizes=(8,), drop_rate=0.5), make_inputs=_inputs,
                          expected_output_shape=lambda b, t: (b, t, 8), deterministic_in_eval=False)


def test_matches_numpy_reference_with_injected_masks_in_eval_and_train():
    w = _weights([7, 5], 4)
    m = Prenet(4, [7, 5], drop_rate=0.5, tf1_scope="decoder_prenet")
    m.load_tf1_weights(w)
    x = torch.randn(3, 4)  # one decoder step
    masks = [(torch.rand(3, 7) > 0.5).float(), (torch.rand(3, 5) > 0.5).float()]
    h = np.maximum(x.numpy() @ w["dense_1/kernel"] + w["dense_1/bias"], 0) * 2.0 * masks[0].numpy()
    want = np.maximum(h @ w["dense_2/kernel"] + w["dense_2/bias"], 0) * 2.0 * masks[1].numpy()
    for mode in (m.eval(), m.train()):
        with torch.no_grad():
            np.testing.assert_allclose(mode(x, masks).numpy(), want, atol=1e-5)
    scripted = torch.jit.script(m.eval())
    with torch.no_grad():
        np.testing.assert_allclose(scripted(x, masks).numpy(), want, atol=1e-5)


def test_dropout_is_on_in_eval_and_generator_reproducible():
    m = Prenet(80, [256, 256], drop_rate=0.5, activation=None).eval()
    x = torch.randn(16, 80)
    with torch.no_grad():
        y1 = m(x, None, torch.Generator().manual_seed(5))
        y2 = m(x, None, torch.Generator().manual_seed(5))
        y3 = m(x)
    torch.testing.assert_close(y1, y2, rtol=0, atol=0)
    assert not torch.equal(y1, y3)
    assert abs(float((y3 == 0).float().mean()) - 0.5) < 0.03


def test_errors():
    m = Prenet(5, [4, 3])
    with pytest.raises(ValueError, match="dropout_masks"):
        m(torch.zeros(2, 5), [torch.ones(2, 4)])
    with pytest.raises(ValueError, match=r"dropout_masks\[1\].*\[2, 3\]"):
        m(torch.zeros(2, 5), [torch.ones(2, 4), torch.ones(2, 4)])
    with pytest.raises(ValueError, match="layers_sizes"):
        Prenet(5, [])
    with pytest.raises(ValueError, match="drop_rate"):
        Prenet(5, drop_rate=1.0)
    with pytest.raises(ValueError, match="dense_2/kernel"):
        m.load_tf1_weights(_weights([4], 5))
    assert Prenet.from_hparams(dict(prenet_layers=[256, 256], tacotron_dropout_rate=0.5), 80).layers_sizes == [256, 256]
