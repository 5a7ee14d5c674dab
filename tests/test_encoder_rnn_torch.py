import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import EncoderRNN
from torch_layers._sequence import reverse_within_lengths
from torch_layers.encoder_rnn import reverse_within_lengths_3d


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 10 + t)
    lengths = torch.clamp(t - torch.arange(b) % max(t, 1), min=1)
    return [torch.randn(b, t, 5, generator=g, dtype=dtype), lengths]


def test_module_contract():
    run_torch_module_test(
        EncoderRNN, (5,), dict(size=4, zoneout=0.2), make_inputs=_inputs,
        expected_output_shape=lambda b, t: (b, t, 8), changes_in_training=True,
        bad_inputs=[([torch.zeros(2, 5), torch.tensor([1, 1])], "inputs"),
                    ([torch.zeros(2, 3, 4), torch.tensor([1, 1])], "(batch, time, 5)"),
                    ([torch.zeros(2, 3, 5), torch.tensor([1.0, 1.0])], "input_lengths"),
                    ([torch.zeros(2, 3, 5), torch.tensor([1, 1, 1])], "input_lengths")],
    )


def test_local_reverse_equals_shared_helper():
    x = torch.randn(3, 6, 2)
    lengths = torch.tensor([6, 1, 4])
    torch.testing.assert_close(reverse_within_lengths_3d(x, lengths), reverse_within_lengths(x, lengths))
    torch.testing.assert_close(reverse_within_lengths_3d(x, None), reverse_within_lengths(x, None))


def _encoder(seed=0, zoneout=0.1):
    enc = EncoderRNN(4, size=3, zoneout=zoneout).eval()
    g = np.random.default_rng(seed)
    enc.load_tf1_weights({k: (g.standard_normal(v.shape) * 0.5).astype(np.float32)
                          for k, v in enc.tf1_weights().items()})
    return enc


def _step(cell, xs):
    state, outs = None, []
    for t in range(xs.shape[1]):
        o, state = cell(xs[:, t], state)
        outs.append(o)
    return torch.stack(outs, 1)


@torch.no_grad()
def test_directions_and_lengths_match_stepping_the_cells():
    enc = _encoder()
    x = torch.randn(3, 6, 4)
    lengths = torch.tensor([6, 1, 4])
    y = enc(x, lengths)
    for b, n in enumerate(lengths.tolist()):
        xb = x[b:b + 1, :n]
        torch.testing.assert_close(y[b, :n, :3], _step(enc.fw_cell, xb)[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(y[b, :n, 3:], _step(enc.bw_cell, xb.flip(1))[0].flip(0), atol=1e-6, rtol=0)
        assert not y[b, n:].any()


@torch.no_grad()
def test_padding_beyond_lengths_never_changes_valid_outputs():
    enc = _encoder(seed=2)
    x = torch.randn(3, 5, 4)
    lengths = torch.tensor([5, 2, 3])
    y = enc(x, lengths)
    padded = torch.cat([x, torch.randn(3, 4, 4) * 100], 1)
    for b, n in enumerate(lengths.tolist()):
        padded[b, n:] = torch.randn_like(padded[b, n:]) * 100
    yp = enc(padded, lengths)
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(yp[b, :n], y[b, :n], atol=1e-6, rtol=0)
        assert not yp[b, n:].any()
    torch.testing.assert_close(enc(x, None), enc(x, torch.tensor([5, 5, 5])), atol=0, rtol=0)


@torch.no_grad()
def test_injected_masks():
    enc = _encoder(seed=6)
    x = torch.randn(2, 5, 4)
    lengths = torch.tensor([5, 3])
    ones, zeros = torch.ones(2, 5, 3), torch.zeros(2, 5, 3)
    no_zoneout = EncoderRNN(4, size=3, zoneout=0.0).eval()
    no_zoneout.load_tf1_weights(enc.tf1_weights())
    y1 = enc(x, lengths, ((ones, ones), (ones, ones)))
    torch.testing.assert_close(y1, no_zoneout(x, lengths), atol=1e-6, rtol=0)
    y0 = enc(x, lengths, ((zeros, zeros), (zeros, zeros)))  # the state never leaves zero
    valid = (torch.arange(5)[None, :, None] < lengths[:, None, None]).float()
    for cell, sl in ((enc.fw_cell, slice(0, 3)), (enc.bw_cell, slice(3, 6))):
        o, _ = cell(x.reshape(10, 4))
        torch.testing.assert_close(y0[..., sl], o.reshape(2, 5, 3) * valid, atol=1e-6, rtol=0)
    bw_c = ones.clone()
    bw_c[1, 2] = 0.0  # first backward step of sequence 1 (length 3): changes its backward outputs at 0, 1
    diff = (enc(x, lengths, ((ones, ones), (bw_c, ones))) - y1).abs().amax(-1)
    assert diff[1, 2] == 0 and diff[1, 0] > 0 and diff[1, 1] > 0 and diff[0].max() == 0
    with pytest.raises(ValueError, match="zoneout_masks"):
        enc(x, lengths, ((ones, ones), (ones, ones[:, :4])))


def test_tf1_names_and_errors():
    enc = EncoderRNN(4, size=3, tf1_scope="my_enc")
    assert enc.tf1_scope == "my_enc"
    assert sorted(enc.tf1_weights()) == ["bidirectional_rnn/bw/encoder_bw_LSTM/bias",
                                         "bidirectional_rnn/bw/encoder_bw_LSTM/kernel",
                                         "bidirectional_rnn/fw/encoder_fw_LSTM/bias",
                                         "bidirectional_rnn/fw/encoder_fw_LSTM/kernel"]
    with pytest.raises(ValueError, match="zoneout"):
        EncoderRNN(4, zoneout=2.0)
    bad = enc.tf1_weights()
    bad["bidirectional_rnn/fw/encoder_fw_LSTM/kernel"] = np.zeros((8, 12), np.float32)
    with pytest.raises(ValueError, match="encoder_fw_LSTM/kernel"):
        enc.load_tf1_weights(bad)



def test_exported_scan_with_injected_masks_and_without_lengths(monkeypatch):
    """The export path (the masked scan) with the training maths (injected zoneout masks; one mask entry per step and
    direction) equals the TorchScript loop at other batch and time sizes, exported and eager (``masked_forward``); so
    does an encoder without zoneout called without lengths (the carried state is then the raw output: the scan's
    no-aliasing case)."""
    from torch.export import Dim

    # the reference is the TorchScript loop (eager inference would run the native scan: another summation order,
    # held to this loop by tests/test_native_encoder_scan.py)
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    g = torch.Generator().manual_seed(5)
    batch, time = Dim("batch"), Dim("time")
    bt = {0: batch, 1: time}

    def masked(b, t):
        lengths = torch.clamp(t - torch.arange(b) % t, min=1)
        masks = tuple(tuple((torch.rand(b, t, 3, generator=g) > 0.3).float() for _ in range(2)) for _ in range(2))
        return torch.randn(b, t, 4, generator=g), lengths, masks

    cases = [(_encoder(seed=4), masked, (bt, {0: batch}, ((bt, bt), (bt, bt)))),
             (_encoder(seed=4, zoneout=0.0), lambda b, t: (torch.randn(b, t, 4, generator=g), None), (bt, None))]
    with torch.no_grad():
        for enc, make, shapes in cases:
            ep = torch.export.export(enc, make(2, 5), dynamic_shapes=shapes)
            for b, t in ((3, 4), (1, 7)):
                args = make(b, t)
                want = enc(*args)
                torch.testing.assert_close(ep.module()(*args), want, atol=1e-6, rtol=0)
                torch.testing.assert_close(enc.masked_forward(*args), want, atol=0, rtol=0)  # eager: bit-equal
                assert want.abs().max() > 0
