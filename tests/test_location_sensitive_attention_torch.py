import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import Fails, RecompilesPerLength, run_torch_module_test
from torch_layers import LocationSensitiveAttention, TF1WeightsError

Q, D, UNITS, FILTERS = 6, 5, 4, 3


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    state = torch.rand(b, t, generator=g, dtype=dtype)
    lengths = torch.tensor([t, max(1, t // 2), 1][:b])
    return [torch.randn(b, Q, generator=g, dtype=dtype), state, torch.randn(b, t, D, generator=g, dtype=dtype), lengths]


def _tf1_weights(rng, q, d, units, filters, k):
    return {
        "query_layer/kernel": rng.standard_normal((q, units)) / np.sqrt(q),
        "memory_layer/kernel": rng.standard_normal((d, units)) / np.sqrt(d),
        "location_features_convolution/kernel": rng.standard_normal((k, 1, filters)),
        "location_features_convolution/bias": 0.1 * rng.standard_normal(filters),
        "location_features_layer/kernel": rng.standard_normal((filters, units)) / np.sqrt(filters),
        "attention_variable_projection": rng.standard_normal(units),
        "attention_bias": 0.1 * rng.standard_normal(units),
    }


def _reference(w, query, state, memory, lengths, mask_encoder, smoothing, cumulate):
    """The spec's formulas in numpy, from the TF1 variables (TF1 layouts), float64."""
    batch, t_in, _ = memory.shape
    kernel = w["location_features_convolution/kernel"]  # [k, 1, filters]
    k = kernel.shape[0]
    before = (k - 1) // 2  # TF 'same': (k - 1) // 2 before, the rest after
    valid = np.arange(t_in)[None, :] < lengths[:, None]
    values = memory * valid[..., None] if mask_encoder else memory
    keys = values @ w["memory_layer/kernel"]
    pq = query @ w["query_layer/kernel"]
    padded = np.zeros((batch, t_in + k - 1))
    padded[:, before:before + t_in] = state
    f = np.zeros((batch, t_in, kernel.shape[2]))
    for t in range(t_in):
        for j in range(k):
            f[:, t, :] += padded[:, t + j, None] * kernel[j, 0][None, :]
    f += w["location_features_convolution/bias"]
    pf = f @ w["location_features_layer/kernel"]
    energy = np.sum(w["attention_variable_projection"]
                    * np.tanh(keys + pq[:, None, :] + pf + w["attention_bias"]), axis=-1)
    if mask_encoder:
        energy = np.where(valid, energy, -np.inf)
    if smoothing:
        s = 1.0 / (1.0 + np.exp(-energy))
        align = s / s.sum(-1, keepdims=True)
    else:
        e = np.exp(energy - energy.max(-1, keepdims=True))
        align = e / e.sum(-1, keepdims=True)
    context = np.einsum("bt,btd->bd", align, values)
    next_state = align + state if cumulate else align
    return context, align, next_state


@pytest.mark.parametrize("kernel_size", [5, 4, 1])
@pytest.mark.parametrize("mask_encoder,smoothing,cumulate", [(True, False, True), (True, True, False),
                                                              (False, False, True), (False, True, True)])
def test_matches_numpy_reference_of_the_spec(kernel_size, mask_encoder, smoothing, cumulate):
    rng = np.random.default_rng(kernel_size)
    w = _tf1_weights(rng, Q, D, UNITS, FILTERS, kernel_size)
    att = LocationSensitiveAttention(Q, D, UNITS, FILTERS, kernel_size, mask_encoder, smoothing, cumulate,
                                     dtype=torch.float64)
    att.load_tf1_weights(w)
    query, state = rng.standard_normal((3, Q)), rng.random((3, 7))
    memory, lengths = rng.standard_normal((3, 7, D)), np.array([7, 4, 1])
    want = _reference(w, query, state, memory, lengths, mask_encoder, smoothing, cumulate)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    got = att(t(query), t(state), t(memory), t(lengths))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), r, atol=1e-12, rtol=0)
    if mask_encoder:
        assert np.all(got[1].detach().numpy()[1, 4:] == 0) and np.all(got[1].detach().numpy()[2, 1:] == 0)
    np.testing.assert_allclose(got[1].detach().sum(-1).numpy(), 1.0, atol=1e-12)


def test_process_memory_then_step_equals_forward_and_masks_speaker_part_too():
    torch.manual_seed(0)
    att = LocationSensitiveAttention(Q, D, UNITS, FILTERS, 3).eval()
    query, state, memory, lengths = _inputs(3, 6, torch.float32)
    values, keys = att.process_memory(memory, lengths)
    assert torch.all(values[1, 3:] == 0) and torch.all(values[2, 1:] == 0)  # every channel zeroed past the length
    torch.testing.assert_close(values[0], memory[0])
    torch.testing.assert_close(keys, values @ att.memory_layer.weight.t())
    by_step = att.step(query, state, values, keys, lengths)
    for a, b in zip(by_step, att(query, state, memory, lengths)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    init = att.initial_state(3, 6)
    assert init.shape == (3, 6) and not init.any()


def test_module_contract():
    query, state, memory, lengths = _inputs(2, 7, torch.float32)
    run_torch_module_test(
        LocationSensitiveAttention, (Q, D), dict(units=UNITS, filters=FILTERS, kernel_size=4), make_inputs=_inputs,
        expected_output_shape=lambda b, t: [(b, D), (b, t), (b, t)],
        export=Fails("check_memory_lengths reads the lengths' values (int(lengths.min()))", match="data-dependent"),
        compile=RecompilesPerLength("check_memory_lengths turns the lengths into Python ints: dynamo specializes on "
                                    "them"),
        bad_inputs=[([query[:, :5], state, memory, lengths], "query"),
                    ([query, state[:, :6], memory, lengths], "state"),
                    ([query, state, memory[..., :4], lengths], "memory"),
                    ([query, state, memory, torch.tensor([8, 3])], "memory_lengths"),
                    ([query, state, memory, torch.tensor([0, 3])], "memory_lengths"),
                    ([query, state, memory, torch.tensor([7.0, 3.0])], "memory_lengths"),
                    ([query[:1], state, memory, lengths], "batch")],
    )


def test_tf1_names_shapes_layout_and_strict_errors():
    att = LocationSensitiveAttention(10, 9, units=8, filters=3, kernel_size=5)
    shapes = {k: v.shape for k, v in att.tf1_weights().items()}
    assert shapes == {"query_layer/kernel": (10, 8), "location_features_convolution/kernel": (5, 1, 3),
                      "location_features_convolution/bias": (3,), "location_features_layer/kernel": (3, 8),
                      "attention_variable_projection": (8,), "attention_bias": (8,), "memory_layer/kernel": (9, 8)}
    assert att.tf1_scope == "Location_Sensitive_Attention"
    w = {k: np.arange(np.prod(s), dtype=np.float32).reshape(s) for k, s in shapes.items()}
    att.load_tf1_weights(w)
    conv = att.location_convolution.weight.detach().numpy()  # torch (filters, 1, k) <- TF1 [k, 1, filters]
    assert conv.shape == (3, 1, 5) and conv[2, 0, 4] == w["location_features_convolution/kernel"][4, 0, 2]
    assert att.query_layer.weight[7, 9] == w["query_layer/kernel"][9, 7]
    for k, v in att.tf1_weights().items():
        np.testing.assert_array_equal(v, w[k])
    bad = dict(w)
    bad["location_features_convolution/kernel"] = np.zeros((3, 1, 5), np.float32)
    del bad["attention_bias"]
    with pytest.raises(TF1WeightsError) as err:
        att.load_tf1_weights(bad)
    assert len(err.value.problems) == 2
    np.testing.assert_array_equal(att.tf1_weights()["query_layer/kernel"], w["query_layer/kernel"])  # nothing assigned


def test_gradients_flow_and_scripted_methods():
    att = LocationSensitiveAttention(Q, D, UNITS, FILTERS, 3)
    query, state, memory, lengths = _inputs(2, 5, torch.float32)
    memory.requires_grad_(True)
    ctx, align, nxt = att(query, state, memory, lengths)
    (ctx.sum() + nxt.pow(2).sum()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in att.parameters())
    assert torch.all(memory.grad[1, 2:] == 0)  # masked memory gets no gradient
    scripted = torch.jit.script(att)
    values, keys = scripted.process_memory(memory.detach(), lengths)
    for a, b in zip(scripted.step(query, state, values, keys, lengths), att.step(query, state, values, keys, lengths)):
        torch.testing.assert_close(a, b)


def test_constructor_errors():
    with pytest.raises(ValueError, match="units"):
        LocationSensitiveAttention(4, 4, units=0)
    with pytest.raises(ValueError, match="kernel_size"):
        LocationSensitiveAttention(4, 4, kernel_size=0)
