import pytest
import torch

from tests.helpers.torch_module_test import RecompilesPerLength, StaticTime, run_torch_module_test
from torch_layers import DecoderRNN


def _seq(b, t, dtype):
    return [torch.randn(b, t, 5, generator=torch.Generator().manual_seed(b * 10 + t), dtype=dtype)]


def _step(b, t, dtype):
    return [torch.randn(b, 5, generator=torch.Generator().manual_seed(b * 10 + t), dtype=dtype)]


def test_module_contract_sequence_form():
    run_torch_module_test(
        DecoderRNN, (5,), dict(layers=2, size=4, zoneout=0.2), make_inputs=_seq,
        expected_output_shape=lambda b, t: [(b, t, 4)] + [(b, 4)] * 4, changes_in_training=True,
        export=StaticTime("the sequence form's loop over time (stacked_scan) is unrolled by the export"),
        compile=RecompilesPerLength("dynamo unrolls the loop over time of stacked_scan for each length"),
        bad_inputs=[([torch.zeros(2, 3, 6)], "(batch, time, 5)"),
                    ([torch.zeros(2, 3, 5, dtype=torch.int64)], "floating"), ([torch.zeros(5)], "inputs")],
    )


def test_module_contract_one_step_form():
    z = torch.zeros(2, 4)
    run_torch_module_test(
        DecoderRNN, (5,), dict(layers=3, size=4, zoneout=0.1), make_inputs=_step,
        expected_output_shape=lambda b, t: [(b, 4)] + [(b, 4)] * 6, changes_in_training=True,
        bad_inputs=[([torch.zeros(2, 6)], "(batch, 5)"), ([torch.zeros(2, 5), [(z, z)]], "states"),
                    ([torch.zeros(2, 5), [(z, z), (z, z), (z, torch.zeros(2, 3))]], "states")],
    )


@torch.no_grad()
def test_sequence_equals_stepping_eval_and_injected_masks():
    torch.manual_seed(0)
    dec = DecoderRNN(4, layers=3, size=3, zoneout=0.2)
    x = torch.randn(2, 6, 4)
    init = [(torch.randn(2, 3), torch.randn(2, 3)) for _ in range(3)]
    masks = [((torch.rand(2, 6, 3) > 0.3).float(), (torch.rand(2, 6, 3) > 0.3).float()) for _ in range(3)]
    for mode, m in (("eval", None), ("train", masks)):
        getattr(dec, mode)()
        y, final = dec(x, init, m)
        states, outs = init, []
        for t in range(6):
            mt = None if m is None else [(mc[:, t], mh[:, t]) for mc, mh in m]
            o, states = dec(x[:, t], states, mt)
            outs.append(o)
        torch.testing.assert_close(y, torch.stack(outs, 1), atol=1e-6, rtol=0)
        for (c, h), (c2, h2) in zip(final, states):
            torch.testing.assert_close(c, c2, atol=1e-6, rtol=0)
            torch.testing.assert_close(h, h2, atol=1e-6, rtol=0)


@torch.no_grad()
def test_layers_feed_raw_outputs():
    dec = DecoderRNN(4, layers=2, size=3, zoneout=0.5).eval()
    x = torch.randn(2, 4)
    out, new_states = dec(x)
    o1, s1 = dec.cells[0](x)
    o2, s2 = dec.cells[1](o1)
    torch.testing.assert_close(out, o2)
    torch.testing.assert_close(new_states[1][1], 0.5 * o2)


@torch.no_grad()
def test_random_zoneout_rate():
    torch.manual_seed(1)
    dec = DecoderRNN(4, layers=2, size=128, zoneout=0.25).train()
    states = [(torch.randn(32, 128), torch.randn(32, 128)) for _ in range(2)]
    _, new = dec(torch.randn(32, 4), states)
    rate = torch.stack([(n == s).float().mean() for pn, ps in zip(new, states) for n, s in zip(pn, ps)]).mean()
    assert abs(rate.item() - 0.25) < 0.02


def test_tf1_names_initial_state_and_errors():
    dec = DecoderRNN(4, layers=2, size=3, tf1_scope="dec")
    w = dec.tf1_weights()
    assert w["multi_rnn_cell/cell_0/decoder_LSTM_1/kernel"].shape == (7, 12)
    assert w["multi_rnn_cell/cell_1/decoder_LSTM_2/kernel"].shape == (6, 12)
    assert len(w) == 4 and dec.tf1_scope == "dec"
    init = torch.jit.script(dec).get_initial_state(5)
    assert len(init) == 2 and all(t.shape == (5, 3) and not t.any() for p in init for t in p)
    with pytest.raises(ValueError, match="zoneout_masks"):
        dec(torch.zeros(2, 4), None, [(torch.ones(2, 3), torch.ones(2, 3))])
    with pytest.raises(ValueError, match="zoneout"):
        DecoderRNN(4, zoneout=-0.5)
