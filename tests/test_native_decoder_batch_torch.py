"""The native batched decoder step (``speechblocks/native/decoder_batch.c``) through torch
(``torch_layers/_native.py``): an eager ``Tacotron2Decoder`` call at batch > 1 (the original stop rule, or each entry
leaving at its own stop with ``decode(stop_each=True)``, as ``Tacotron2.synthesize_batch`` runs it).

Each test runs the same call through the native step and through the TorchScript loop (``SPEECHBLOCKS_NATIVE=0``)
with the same random seed (the pre-net's dropout draws, ``(entries running, size)`` per layer and step), and through
the TorchScript loop in float64 as the reference.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import torch_layers
from speechblocks import resolve_hparams
from tests.helpers.call_counter import count_calls
from tests.helpers.native_accuracy import assert_as_accurate
from torch_layers import _native
from torch_layers.tacotron2_decoder import Tacotron2Decoder

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native step cannot be built (the TorchScript loop runs)")

SMALL = dict(num_mels=6, prenet_layers=(12, 10), decoder_layers=2, decoder_lstm_units=20, attention_dim=8,
             attention_filters=3, attention_kernel=5, max_iters=40)
LENGTHS = [9, 4, 7, 1, 9]


@pytest.fixture
def counted(monkeypatch):
    """Counts the native batched loops run."""
    return count_calls(monkeypatch, _native.NativeBatchLoop, "run")


def _decoder(seed: int = 0, stop_bias: float = -1.0, **overrides) -> Tacotron2Decoder:
    torch.manual_seed(seed)
    dec = Tacotron2Decoder(11, **dict(SMALL, **overrides)).eval()
    with torch.no_grad():
        for p in dec.parameters():  # larger weights: attention that moves, stops that vary between the entries
            p.mul_(3.0)
        dec.stop_projection.dense.bias.fill_(stop_bias)
    return dec


def _call(monkeypatch, dec, memory, lengths, stop_each, native: str, seed=7, **kwargs) -> tuple:
    """The call with ``SPEECHBLOCKS_NATIVE=native`` in ``memory``'s dtype (the decoder cast to it, then back to
    float32), seeded with ``seed``: its outputs and the generator's state after it."""
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", native)
    dec.to(memory.dtype)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = dec.decode(memory, lengths, None, None, stop_each=stop_each, **kwargs)
    dec.float()
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    return out, torch.get_rng_state()


def _three(monkeypatch, dec, memory, lengths, stop_each, seed=7, **kwargs):
    """The call through the native step, the TorchScript loop and the TorchScript loop in float64."""
    out = {}
    for key, env, dtype in (("native", "1", torch.float32), ("loop", "0", torch.float32),
                            ("reference", "0", torch.float64)):
        out[key], out[key + " rng"] = _call(monkeypatch, dec, memory.to(dtype), lengths, stop_each, env, seed,
                                            **kwargs)
    return out


def _stop_steps(stop: torch.Tensor, stop_at_any: bool) -> list:
    fired = torch.round(stop) == 1.0
    rule = fired.any(-1) if stop_at_any else fired.all(-1)
    return [int(row.int().argmax()) + 1 if bool(row.any()) else None for row in rule]


@pytest.mark.parametrize("variant", [
    dict(), dict(outputs_per_step=3), dict(smoothing=True), dict(cumulative_weights=False),
    dict(zoneout=0.0, drop_rate=0.0), dict(attention_kernel=4), dict(decoder_layers=3, prenet_layers=(9,)),
    dict(stop_at_any=False, outputs_per_step=2),
])
@pytest.mark.parametrize("stop_each", [True, False])
def test_batched_native_equals_the_torchscript_loop(monkeypatch, counted, variant, stop_each):
    dec = _decoder(**variant)
    memory = torch.randn(5, 9, 11, generator=torch.Generator().manual_seed(1))
    out = _three(monkeypatch, dec, memory, torch.tensor(LENGTHS), stop_each)
    assert len(counted) == 1
    assert _stop_steps(out["native"][1], dec.stop_at_any) == _stop_steps(out["loop"][1], dec.stop_at_any)
    for a, b, c in zip(out["native"], out["loop"], out["reference"]):
        assert_as_accurate(a, b, c, rel=2e-6)
    assert torch.equal(out["native rng"], out["loop rng"])  # as many draws, in the same order


def test_entries_stop_at_their_own_steps(monkeypatch, counted):
    # weights x3 over 50 steps: some trajectories amplify float32 rounding ~100x (seed 4: the float32 loop lands
    # 1.5e-5 from the float64 reference, and 4e-5 to 9e-5 for the memory one rounding away), so the native result is
    # held to the float32 loop's spread over the memory and its two one-rounding neighbours
    distinct = 0
    lengths = torch.tensor([9, 3, 6, 9, 2, 8])
    for seed in range(6):
        dec = _decoder(seed, max_iters=50)
        memory = torch.randn(6, 9, 11, generator=torch.Generator().manual_seed(seed))
        out = _three(monkeypatch, dec, memory, lengths, True)
        steps = _stop_steps(out["loop"][1], dec.stop_at_any)
        assert _stop_steps(out["native"][1], dec.stop_at_any) == steps
        distinct = max(distinct, len(set(steps)))
        near = [_call(monkeypatch, dec, memory * (1 + e), lengths, True, "0")[0] for e in (2.0 ** -23, -2.0 ** -23)]
        for a, b, c, *spread in zip(out["native"], out["loop"], out["reference"], *near):
            assert_as_accurate(a, b, c, rel=2e-6, spread=tuple(spread))
    assert distinct >= 3 and len(counted) == 6


def test_injected_prenet_masks(monkeypatch, counted):
    dec = _decoder()
    g = torch.Generator().manual_seed(3)
    memory = torch.randn(3, 9, 11, generator=g)
    masks = {"prenet": [(torch.rand(3, 40, n, generator=g) > 0.5).float() for n in (12, 10)]}
    for stop_each in (True, False):
        out = _three(monkeypatch, dec, memory, torch.tensor([9, 5, 2]), stop_each, noise_masks=masks)
        for a, b in zip(out["native"], out["loop"]):
            torch.testing.assert_close(a, b, atol=2e-5 * max(1.0, float(b.abs().max())), rtol=0)
    assert len(counted) == 2


def test_synthesize_batch_runs_the_batched_step(monkeypatch, counted):
    torch.manual_seed(0)
    hp = dict(encoder_lstm_units=16, decoder_lstm_units=32, prenet_layers=[16, 16], attention_dim=8,
              postnet_channels=8, enc_conv_channels=16, embedding_dim=16, speaker_embedding_size=4, max_iters=30)
    model = torch_layers.Tacotron2(resolve_hparams("rtvc", **hp)).eval()
    with torch.no_grad():
        model.decoder.stop_projection.dense.bias.fill_(-2.0)
    rng = np.random.default_rng(0)
    sentences = [rng.integers(1, 60, n) for n in (23, 9, 17, 4)]
    speaker = rng.normal(size=(4, 4)).astype(np.float32)
    results = {}
    for env in ("1", "0"):
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        torch.manual_seed(5)
        results[env] = model.synthesize_batch(sentences, speaker)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    assert len(counted) == 1
    for native, loop in zip(results["1"], results["0"]):
        assert native["stopped"] == loop["stopped"]
        for key in ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments"):
            assert native[key].shape == loop[key].shape, key
            np.testing.assert_allclose(native[key], loop[key], atol=2e-5 * max(1.0, float(np.abs(loop[key]).max())))
