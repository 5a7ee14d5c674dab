import numpy as np
import pytest
import torch

from bench._seed_references_ge2e_tac import tac_loop
from tests.helpers.torch_module_test import Fails, run_torch_module_test
from torch_layers import TAC
from torch_layers.norms import ChanLN, GlobLN

MICS = 3


def _valid(b):
    return (torch.arange(b) % MICS) + 1


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, MICS, 6, t, 2, generator=g, dtype=dtype), _valid(b)]


def _randomised(input_dim=6, hidden_dim=5, **kw):
    torch.manual_seed(2)
    m = TAC(input_dim, hidden_dim, **kw).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name == "norm.gamma" else 0.0))
    return m


def test_module_contract():
    x = torch.zeros(2, MICS, 6, 4, 2)
    run_torch_module_test(
        TAC, (6,), dict(hidden_dim=5), make_inputs=_inputs, expected_output_shape=lambda b, t: (b, MICS, 6, t, 2),
        export=Fails("the valid_mics check reads its values (int(valid_mics.min()))", match="data-dependent"),
        bad_inputs=[([torch.zeros(2, MICS, 6, 4)], "x"),
                    ([torch.zeros(2, MICS, 5, 4, 2)], "(batch, mics, 6, chunk_size, n_chunks)"),
                    ([x, torch.tensor([2, 0])], "valid_mics"),
                    ([x, torch.tensor([2, 4])], "valid_mics"),
                    ([x, torch.tensor([2, -1])], "valid_mics"),
                    ([x, torch.tensor([2.0, 1.0])], "valid_mics"),
                    ([x, torch.tensor([2, 1, 1])], "valid_mics")],
    )


def test_state_dict_keys_and_shapes_are_asteroids():
    m = TAC(64, 384)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {
        "input_tf.0.weight": (384, 64), "input_tf.0.bias": (384,), "input_tf.1.weight": (1,),
        "avg_tf.0.weight": (384, 384), "avg_tf.0.bias": (384,), "avg_tf.1.weight": (1,),
        "concat_tf.0.weight": (64, 768), "concat_tf.0.bias": (64,), "concat_tf.1.weight": (1,),
        "norm.gamma": (64,), "norm.beta": (64,),
    }
    assert m.input_tf[1].weight.item() == 0.25
    assert "input_tf.1.weight" not in TAC(4, 3, activation="relu").state_dict()


@pytest.mark.parametrize("valid", [[3, 1, 2, 3], None, [3, 3, 3, 3]])
def test_matches_upstream_per_example_loop(valid):
    m = _randomised()
    x = torch.randn(4, MICS, 6, 5, 3)
    vm = None if valid is None else torch.tensor(valid)
    with torch.no_grad():
        got = m(x, vm)
    want = tac_loop({k: v.detach() for k, v in m.state_dict().items()}, x, vm)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_gradients_match_upstream_loop():
    m = _randomised()
    x1 = torch.randn(3, MICS, 6, 4, 2, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    vm = torch.tensor([1, 3, 2])
    m(x1, vm).square().sum().backward()
    grads = {k: p.grad.clone() for k, p in m.named_parameters()}
    state = {k: p.detach().clone().requires_grad_(True) for k, p in m.named_parameters()}
    tac_loop(state, x2, vm).square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-4, rtol=1e-5)
    for k in grads:
        torch.testing.assert_close(grads[k], state[k].grad, atol=1e-4, rtol=1e-5, msg=k)


def test_all_zero_valid_mics_is_fixed_geometry_over_mics():
    m = _randomised()
    x = torch.randn(2, MICS, 6, 4, 2)
    with torch.no_grad():
        torch.testing.assert_close(m(x, torch.tensor([0, 0])), m(x), atol=0, rtol=0)
        # the mean really is over mics: with equal mics the output equals a single-mic run
        same = x[:, :1].expand(-1, MICS, -1, -1, -1).contiguous()
        torch.testing.assert_close(m(same), m(x[:, :1]).expand(-1, MICS, -1, -1, -1), atol=1e-5, rtol=0)


def test_permuting_valid_mics_permutes_output():
    m = _randomised()
    x = torch.randn(2, 4, 6, 3, 2)
    vm = torch.tensor([3, 4])
    perm0 = torch.tensor([2, 0, 1, 3])  # example 0: permute its 3 valid mics, padded slot stays
    perm1 = torch.tensor([3, 1, 0, 2])
    xp = torch.stack([x[0, perm0], x[1, perm1]])
    with torch.no_grad():
        y, yp = m(x, vm), m(xp, vm)
    torch.testing.assert_close(yp[0], y[0, perm0], atol=1e-5, rtol=0)
    torch.testing.assert_close(yp[1], y[1, perm1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("grad", [False, True])
def test_padded_mic_slots_never_influence_valid_outputs(grad):
    m = _randomised()
    x = torch.randn(3, 4, 6, 3, 2)
    vm = torch.tensor([2, 4, 1])
    noisy = x.clone()
    noisy[0, 2:] = float("nan")
    noisy[2, 1:] = 1e30 * torch.randn(3, 6, 3, 2)
    noisy.requires_grad_(grad)
    with torch.set_grad_enabled(grad):
        y, yn = m(x, vm), m(noisy, vm)
    for b, v in enumerate(vm.tolist()):
        torch.testing.assert_close(yn[b, :v], y[b, :v], atol=0, rtol=0)
    if grad:
        yn[1].sum().backward()  # the masked reduction keeps autograd intact (no in-place on saved tensors)
        assert torch.isfinite(noisy.grad[1]).all() and bool((noisy.grad[1] != 0).any())


def test_norms_hand_derived():
    x = torch.randn(2, 3, 4, 5)
    g = GlobLN(3)
    assert g.gamma.shape == (3,) and g.beta.shape == (3,)
    with torch.no_grad():
        g.gamma.copy_(torch.tensor([1.0, 2.0, 3.0]))
        g.beta.copy_(torch.tensor([0.5, 0.0, -0.5]))
    xn = x.double().numpy()
    mean = xn.mean(axis=(1, 2, 3), keepdims=True)
    var = ((xn - mean) ** 2).mean(axis=(1, 2, 3), keepdims=True)
    want = ((xn - mean) / np.sqrt(var + 1e-8) * np.array([1, 2, 3.0])[:, None, None]
            + np.array([0.5, 0, -0.5])[:, None, None])
    np.testing.assert_allclose(g(x).detach().numpy(), want, atol=1e-5)
    c = ChanLN(3)
    mean = xn.mean(axis=1, keepdims=True)
    var = ((xn - mean) ** 2).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(c(x).detach().numpy(), (xn - mean) / np.sqrt(var + 1e-8), atol=1e-5)
    with pytest.raises(ValueError, match="x"):
        g(torch.zeros(2, 4, 5))


def test_other_activation_and_norm_scriptable():
    m = _randomised(activation="relu", norm_type="cLN")
    x = torch.randn(2, MICS, 6, 3, 2)
    vm = torch.tensor([2, 3])
    s = torch.jit.script(m)
    with torch.no_grad():
        torch.testing.assert_close(s(x, vm), m(x, vm), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="norm_type"):
        TAC(4, norm_type="bN")
    with pytest.raises(ValueError, match="activation"):
        TAC(4, activation="swish")


@pytest.mark.parametrize("name,ref", [("prelu", torch.nn.PReLU()), ("relu", torch.nn.ReLU()), ("tanh", torch.nn.Tanh()),
                                      ("sigmoid", torch.nn.Sigmoid()), ("elu", torch.nn.ELU()),
                                      ("gelu", torch.nn.GELU()), ("linear", torch.nn.Identity())])
def test_activations_match_torch_nn_in_and_out_of_place(name, ref):
    from torch_layers.tac import make_activation

    act = make_activation(name)
    x = torch.randn(50) * 3
    want = ref(x)
    torch.testing.assert_close(act(x), want, atol=0, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(act.inplace(x.clone()), want, atol=1e-7, rtol=0)


@pytest.mark.parametrize("activation,norm_type", [("prelu", "gLN"), ("relu", "cLN"), ("tanh", "gLN")])
@pytest.mark.parametrize("valid", [[3, 1, 2], [3, 3, 3]])
def test_every_mic_slot_matches_loop_in_float64_with_and_without_autograd(activation, norm_type, valid):
    # both inference paths (features-major, in place: per-example blocks on CPU, batch-wide elsewhere) and
    # the autograd path give the upstream values on every mic slot, valid and padded alike
    m = _randomised(activation=activation, norm_type=norm_type, dtype=torch.float64)
    x = torch.randn(3, MICS, 6, 5, 3, dtype=torch.float64)
    vm = torch.tensor(valid)
    with torch.no_grad():
        fast = m(x, vm)
    slow = m(x, vm).detach()
    if activation == "prelu" and norm_type == "gLN":
        want = tac_loop({k: v.detach() for k, v in m.state_dict().items()}, x, vm)
        torch.testing.assert_close(fast, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(fast, slow, atol=1e-12, rtol=0)
    with torch.no_grad():  # the batch-wide inference path (used off CPU) on CPU too
        torch.testing.assert_close(m._forward_inference(x, m._mic_counts(vm, 3, MICS)), slow, atol=1e-12, rtol=0)
