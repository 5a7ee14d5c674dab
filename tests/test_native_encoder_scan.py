"""The native encoder scan (``speechblocks/native/encoder_scan.c``) through torch's ``EncoderRNN``: the bidirectional
zoneout LSTM's recurrence at inference in one C call.

Each test compares the native result with the TorchScript loop (``SPEECHBLOCKS_NATIVE=0``, or
:func:`~torch_layers.encoder_rnn.bidirectional_scan` directly) and with that loop in float64: the native float32
result must be as close to float64 as the float32 loop is (within 4x its error, plus 5e-7 of the scale).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import torch_layers
from speechblocks import native as core
from tests.helpers.native_accuracy import assert_as_accurate
from torch_layers.encoder_rnn import bidirectional_scan, reverse_within_lengths_3d

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native scan cannot be built (the TorchScript loop runs)")


@pytest.fixture
def counted(monkeypatch):
    """Counts the native scans run (each test asserts the path it compares really ran)."""
    calls = []
    scan = core.encoder_scan

    def spy(*args, **kwargs):
        calls.append(args[4])  # the zoneout factor
        return scan(*args, **kwargs)

    monkeypatch.setattr(core, "encoder_scan", spy)
    return calls


def _loop(gx: torch.Tensor, w: torch.Tensor, lengths, zoneout: float) -> torch.Tensor:
    """The scan's contract through the TorchScript loop: ``gx (batch, time, 2, 4u)`` -> ``(batch, time, 2u)``, the
    backward direction reversed within the lengths on the way in and out (what ``EncoderRNN`` does around it)."""
    batch, n_steps = gx.shape[:2]
    lens = None if lengths is None else torch.clamp(torch.as_tensor(lengths), 0, n_steps)
    valid = None if lens is None else (torch.arange(n_steps)[:, None] < lens[None]).view(n_steps, 1, batch, 1)
    gx_tm = torch.stack([gx[:, :, 0], reverse_within_lengths_3d(gx[:, :, 1], lens)], 0).transpose(1, 2)
    out = bidirectional_scan(gx_tm.contiguous(), w, valid, None, None, zoneout, zoneout).permute(1, 2, 0, 3)
    return torch.cat([out[0], reverse_within_lengths_3d(out[1], lens)], 2)


@pytest.mark.parametrize("units", [1, 5, 16, 40])  # 4u below, at and past one register tile, with a remainder
@pytest.mark.parametrize("batch, lengths", [
    (1, None), (3, [4, 9, 0]), (6, [9, 2, 9, 7, 1, 5]), (9, None), (5, [12, 9, 30, 1, 9]),  # 30 > time: all steps
])
@pytest.mark.parametrize("zoneout", [0.1, 0.0])
@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_the_scan_equals_the_torchscript_loop(units, batch, lengths, zoneout, threads):
    n_steps = 9
    g = torch.Generator().manual_seed(units * 100 + batch)
    gx = 2 * torch.randn(batch, n_steps, 2, 4 * units, generator=g)
    w = torch.randn(2, units, 4 * units, generator=g) / units ** 0.5 * 2
    out = core.encoder_scan(core.library(), gx.numpy(), w.numpy(), None if lengths is None else np.array(lengths),
                            zoneout, threads)
    assert_as_accurate(torch.from_numpy(out), _loop(gx, w, lengths, zoneout), _loop(gx.double(), w.double(), lengths,
                                                                                     zoneout))
    if lengths is not None:  # zeros past each length, exactly
        for b, n in enumerate(lengths):
            assert not out[b, n:].any()


@pytest.mark.parametrize("lengths", [None, [40, 23, 1, 40, 17]])
def test_encoder_rnn_inference_runs_the_native_scan(monkeypatch, counted, lengths):
    torch.manual_seed(0)
    enc = torch_layers.EncoderRNN(24, size=32, zoneout=0.1).eval()
    x = torch.randn(5, 40, 24)
    lens = None if lengths is None else torch.tensor(lengths)
    with torch.inference_mode():
        native = enc(x, lens)
        assert counted == [0.1]
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
        scripted = enc(x, lens)
        enc.double()
        reference = enc(x.double(), lens)
    assert len(counted) == 1
    assert_as_accurate(native, scripted, reference)


def test_what_keeps_the_torchscript_loop(monkeypatch, counted):
    """Training, a recorded gradient, float64, CPU autocast, TorchScript, the export path and SPEECHBLOCKS_NATIVE=0 run
    the framework's loop; inference under no_grad does not need inference_mode."""
    torch.manual_seed(0)
    enc = torch_layers.EncoderRNN(6, size=8, zoneout=0.1).eval()
    x, lens = torch.randn(2, 7, 6), torch.tensor([7, 3])
    out = enc(x, lens)  # the weights require grad and grad is on
    assert out.requires_grad and counted == []
    out.sum().backward()
    enc.train()
    with torch.no_grad():
        enc(x, lens)
    enc.eval()
    assert counted == []
    with torch.no_grad():
        enc(x, lens)
    assert len(counted) == 1
    with torch.no_grad():
        enc.double()(x.double(), lens)
        enc.float()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            enc(x, lens)
        torch.jit.script(enc)(x, lens)
        enc.masked_forward(x, lens)
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
        enc(x, lens)
    assert len(counted) == 1


def test_non_finite_inputs_as_the_framework_loop(monkeypatch, counted):
    """NaN in a step that runs propagates as in the loop; NaN in the padding stays out (the padded steps are not
    computed, the loop selects them away)."""
    torch.manual_seed(1)
    enc = torch_layers.EncoderRNN(6, size=8, zoneout=0.1).eval()
    x, lens = torch.randn(3, 10, 6), torch.tensor([10, 6, 4])
    x[1, 8] = float("nan")  # padding of entry 1
    x[2, 2, 0] = float("nan")  # inside entry 2
    x[0, 5, 1] = float("inf")
    with torch.inference_mode():
        native = enc(x, lens)
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
        scripted = enc(x, lens)
    assert len(counted) == 1
    assert torch.equal(torch.isnan(native), torch.isnan(scripted)) and torch.isnan(native[2]).any()
    assert not torch.isnan(native[1]).any() and not native[1, 6:].any()
    finite = ~torch.isnan(scripted)
    assert float((native[finite] - scripted[finite]).abs().max()) <= 1e-5


def test_synthesis_runs_the_native_scan_and_keeps_its_numbers(monkeypatch, counted):
    torch.manual_seed(3)
    model = torch_layers.Tacotron2("rayhane", n_symbols=10, embedding_dim=16, enc_conv_channels=16,
                                   enc_conv_kernel_size=3, encoder_lstm_units=8, attention_dim=8, attention_filters=4,
                                   attention_kernel=5, prenet_layers=[8, 8], decoder_layers=1, decoder_lstm_units=16,
                                   postnet_channels=16, postnet_num_layers=2, num_mels=6, outputs_per_step=1,
                                   max_iters=6, num_freq=9, cbhg_kernels=3, cbhg_conv_channels=4, cbhg_projection=8,
                                   cbhg_highwaynet_layers=1, cbhg_highway_units=8, cbhg_rnn_units=4)
    ids = torch.tensor([[3, 5, 7, 2, 9, 1, 0, 0]])
    lengths = torch.tensor([6])
    torch.manual_seed(5)
    native = model.synthesize(ids, lengths)["mel_outputs"]
    assert len(counted) == 1
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    torch.manual_seed(5)
    scripted = model.synthesize(ids, lengths)["mel_outputs"]
    assert native.shape == scripted.shape
    assert float((native - scripted).abs().max()) <= 1e-5 * max(1.0, float(scripted.abs().max()))


def test_empty_sequences_and_the_scan_refuses_what_it_would_misread():
    lib = core.library()
    out = core.encoder_scan(lib, np.zeros((3, 0, 2, 8), np.float32), np.zeros((2, 2, 8), np.float32), None, 0.1, 2)
    assert out.shape == (3, 0, 4)
    enc = torch_layers.EncoderRNN(4, size=2).eval()
    with torch.inference_mode():
        assert enc(torch.zeros(3, 0, 4)).shape == (3, 0, 4)
    with pytest.raises(ValueError, match=r"`gx` must be \(batch, time, 2, 4u\)"):
        core.encoder_scan(lib, np.zeros((3, 4, 2, 8), np.float32), np.zeros((2, 3, 8), np.float32), None, 0.1, 1)
    with pytest.raises(ValueError, match="`w_hh` must be float32 and C-contiguous"):
        core.encoder_scan(lib, np.zeros((3, 4, 2, 8), np.float32), np.zeros((2, 8, 2), np.float32).transpose(0, 2, 1),
                          None, 0.1, 1)
    with pytest.raises(ValueError, match=r"`lengths` must have shape \(3,\)"):
        core.encoder_scan(lib, np.zeros((3, 4, 2, 8), np.float32), np.zeros((2, 2, 8), np.float32), np.array([4, 4]),
                          0.1, 1)


def test_a_traced_encoder_keeps_the_loop(counted):
    """``torch.jit.trace`` records ops: the native call would enter the trace as a constant, so the loop runs and
    the traced module answers other inputs correctly."""
    torch.manual_seed(2)
    enc = torch_layers.EncoderRNN(6, size=8, zoneout=0.1).eval()
    x, lens = torch.randn(3, 7, 6), torch.tensor([7, 5, 2])
    with torch.no_grad():
        traced = torch.jit.trace(enc, (x, lens), check_trace=False)
        assert counted == []
        x2 = torch.randn(3, 7, 6)
        want = enc(x2, lens)
        assert len(counted) == 1
        torch.testing.assert_close(traced(x2, lens), want, atol=1e-5, rtol=0)
