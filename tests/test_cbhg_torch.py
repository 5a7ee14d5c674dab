import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import (
    Fails,
    RecompilesPerLength,
    Skip,
    StaticTime,
    run_torch_module_test,
)
from torch_layers import CBHG
from torch_layers.cbhg import max_pool_same

CONFIG = dict(K=3, conv_channels=4, pool_size=2, projections=[6, 16], projection_kernel_size=3,
              n_highwaynet_layers=2, highway_units=12, rnn_units=5)


def _with_lengths(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 16, generator=g, dtype=dtype), torch.tensor([t, max(1, t // 2), 1][:b])]


def test_module_contract_with_lengths():
    x = torch.randn(2, 7, 16)
    run_torch_module_test(
        CBHG, (16,), CONFIG, make_inputs=_with_lengths, expected_output_shape=lambda b, t: (b, t, 10),
        changes_in_training=True,
        export=Fails("the input check reads the lengths' values (int(input_lengths.min()))", match="data-dependent"),
        compile=RecompilesPerLength("the bidirectional GRU's loop over time is unrolled for each length"),
        bad_inputs=[([x[0], torch.tensor([7, 3])], "inputs"), ([x[..., :8], torch.tensor([7, 3])], "(batch, time, 16)"),
                    ([x.long(), torch.tensor([7, 3])], "floating"),
                    ([x, torch.tensor([7.0, 3.0])], "input_lengths"), ([x, torch.tensor([[7, 3]])], "input_lengths"),
                    ([x, torch.tensor([7, 3, 1])], "input_lengths"), ([x, torch.tensor([8, 3])], "input_lengths"),
                    ([x, torch.tensor([-1, 3])], "input_lengths")],
    )


def test_module_contract_full_length_without_dense():
    cfg = {**CONFIG, "highway_units": 16, "pool_size": 3}
    run_torch_module_test(CBHG, (16,), cfg, make_inputs=lambda b, t, dt: [_with_lengths(b, t, dt)[0]],
                          expected_output_shape=lambda b, t: (b, t, 10), sizes=((2, 5), (1, 1)),
                          export=StaticTime("the bidirectional GRU's loop over time is unrolled by the export"),
                          compile=Skip("RecompilesPerLength pinned in test_module_contract_with_lengths"))


@pytest.mark.parametrize("pool", [1, 2, 3, 4])
def test_max_pool_same_hand_derived(pool):
    v = torch.tensor([1.0, -3.0, 2.0, -5.0, -4.0]).view(1, 5, 1)
    before = (pool - 1) // 2  # TF 'same': (p-1)//2 frames before, the rest after, padding never wins
    vals = v.view(-1).tolist()
    expect = [max(vals[max(0, i - before): i - before + pool]) for i in range(5)]
    assert max_pool_same(v, pool).view(-1).tolist() == expect


def test_tf1_names_and_shapes_and_dense_rule():
    m = CBHG(16, **CONFIG, tf1_scope="CBHG_postnet")
    shapes = {k: v.shape for k, v in m.tf1_weights().items()}
    assert shapes["conv_bank/conv1d_2/conv1d/kernel"] == (2, 16, 4)
    assert shapes["dense/kernel"] == (16, 12)
    assert shapes["CBHG_postnet_highwaynet_2/H/kernel"] == (12, 12)
    assert shapes["bidirectional_rnn/fw/CBHG_postnet_forward_RNN/gates/kernel"] == (17, 10)
    assert shapes["bidirectional_rnn/bw/CBHG_postnet_backward_RNN/candidate/kernel"] == (17, 5)
    assert len(shapes) == 5 * 6 + 2 + 8 + 8
    no_dense = CBHG(16, **{**CONFIG, "highway_units": 16})
    assert not any(k.startswith("dense/") for k in no_dense.tf1_weights())


def test_input_size_must_equal_last_projection_and_other_errors():
    with pytest.raises(ValueError, match="input_size"):
        CBHG(12, **CONFIG)
    with pytest.raises(ValueError, match="projections"):
        CBHG(16, **{**CONFIG, "projections": [16]})
    m = CBHG(16, **CONFIG)
    w = m.tf1_weights()
    w["bidirectional_rnn/fw/CBHG_forward_RNN/gates/kernel"] = np.zeros((16, 10), np.float32)
    with pytest.raises(ValueError, match="gates/kernel"):
        m.load_tf1_weights(w)


def test_outputs_past_lengths_are_zero_and_gradients_flow():
    m = CBHG(16, **CONFIG).train()
    x = torch.randn(3, 6, 16, requires_grad=True)
    y = m(x, torch.tensor([6, 2, 0]))
    assert torch.all(y[1, 2:] == 0) and torch.all(y[2] == 0)
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and m.fw_cell.gates.weight.grad.abs().sum() > 0


def test_bigru_directions_side_by_side_equal_one_after_the_other(monkeypatch):
    """With more than one inter-op thread the two directions run as a TorchScript fork
    (``_bidirectional_recurrence``); with one they run one after the other. The same outputs bit for bit, with lengths,
    and gradients (autograd runs through the fork; their two directions' sums meet in another order: float32 rounding)."""
    import torch_layers.tf1_gru_cell as gru

    cbhg = CBHG(16, **CONFIG).train()
    x = torch.randn(3, 9, 16, requires_grad=True)
    lengths = torch.tensor([9, 4, 1])
    calls = []
    forked = gru._bidirectional_recurrence
    monkeypatch.setattr(gru, "_bidirectional_recurrence", lambda *a: calls.append(1) or forked(*a))
    results = {}
    for threads in (2, 1):
        monkeypatch.setattr(torch, "get_num_interop_threads", lambda n=threads: n)
        x.grad = None
        out = cbhg(x, lengths)
        out.square().sum().backward()
        results[threads] = (out.detach(), x.grad.clone())
    assert calls == [1]  # the fork ran for 2 inter-op threads only
    assert torch.equal(results[2][0], results[1][0])
    torch.testing.assert_close(results[2][1], results[1][1], rtol=0, atol=1e-6)
    assert torch.all(results[2][0][1, 4:] == 0) and torch.all(results[2][0][2, 1:] == 0)
