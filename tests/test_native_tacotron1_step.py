"""The native Tacotron-1 decoder loop (``speechblocks/native/tacotron1_step.c``) through torch
(``torch_layers/_native.py``): a ``Tacotron1Decoder``'s whole free-running inference in one C call.

Every comparison runs the same call twice, through the native loop and through the TorchScript loop
(``SPEECHBLOCKS_NATIVE=0``), for the three layouts (keithito-20180906: pre-net outside the attention wrapper;
keithito-20170720 and mimic2: inside; mimic2: location-sensitive attention), at batch 1 and 2: frames and
alignments within float32 rounding, the same number of steps, the exact-zero stop (every row at step 1; one row while
the other runs on), ``mask_memory``, NaN positions, any thread count giving the same bits; and which loop the plan
names (and runs) for each kind of call.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from speechblocks import native as core
from speechblocks.native import _build, _structs
from tests.helpers.call_counter import count_calls
from torch_layers import Tacotron1, Tacotron1Decoder, _native
from torch_layers.decoding_plan import plan_decoding

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native loop cannot be built (the TorchScript loop runs)")

SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, embed_depth=5, prenet_depths=[6, 4], encoder_depth=6,
             attention_depth=5, decoder_depth=7, postnet_depth=6, n_symbols=10, max_iters=5)
#: sizes past a vector's width (and not multiples of it): the C loop's vector paths and their remainders
WIDE = dict(SMALL, prenet_depths=[40, 24], encoder_depth=18, attention_depth=37, decoder_depth=45, max_iters=12)
CASES = [("keithito", "keithito-20180906"), ("keithito", "keithito-20170720"), ("mimic2", "mimic2")]
T_IN = 7
TOL = 1e-5


@pytest.fixture
def counted(monkeypatch):
    """Counts the native loops run (each test asserts the path it compares really ran)."""
    return count_calls(monkeypatch, _native, "tacotron1_decode")


def _decoder(preset: str, layout: str, sizes: dict = SMALL, seed: int = 0, **kw) -> Tacotron1Decoder:
    hp = dict(sizes, **kw)
    if preset == "mimic2":
        hp["embedding_dim"] = hp.pop("embed_depth")
    torch.manual_seed(seed)
    dec = Tacotron1Decoder(preset, layout, **hp).eval()
    with torch.no_grad():
        for name, p in dec.named_parameters():  # non-zero biases and larger weights: attention that moves
            if name.endswith("bias"):
                p.add_(0.1 * torch.randn(p.shape))
            else:
                p.mul_(1.5)
    return dec


def _memory(batch: int, e: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, T_IN, e, generator=torch.Generator().manual_seed(seed))


def _both(monkeypatch, call):
    """``call()`` through the native loop, then through the TorchScript loop (``SPEECHBLOCKS_NATIVE=0``)."""
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE", raising=False)
    with torch.no_grad():
        native = call()
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    with torch.no_grad():
        scripted = call()
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    return native, scripted


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = TOL):
    assert a.shape == b.shape and a.dtype == b.dtype == torch.float32
    assert torch.equal(torch.isnan(a), torch.isnan(b))
    assert float((a - b).nan_to_num().abs().max()) <= tol * max(1.0, float(b.nan_to_num().abs().max()))


@pytest.mark.parametrize("preset,layout", CASES)
@pytest.mark.parametrize("batch", [1, 2])
def test_native_loop_equals_the_torchscript_loop(monkeypatch, counted, preset, layout, batch):
    for sizes in (SMALL, WIDE):
        dec = _decoder(preset, layout, sizes)
        memory = _memory(batch, dec.memory_size)
        (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda d=dec, m=memory: d(m))
        assert frames.shape == ref_frames.shape == (batch, sizes["max_iters"], 12)
        assert align.shape == ref_align.shape == (batch, T_IN, sizes["max_iters"])
        _close(frames, ref_frames)
        _close(align, ref_align)
        assert (ref_frames != 0).any(2).all()  # no exact-zero step: every step ran
    assert len(counted) == 2


@pytest.mark.parametrize("preset,layout", CASES)
def test_exact_zero_frames_stop_after_one_step(monkeypatch, counted, preset, layout):
    dec = _decoder(preset, layout, max_iters=50)
    with torch.no_grad():
        dec.output_projection.weight.zero_()
        dec.output_projection.bias.zero_()
    memory = _memory(2, dec.memory_size)
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory))
    assert frames.shape == ref_frames.shape == (2, 1, 12) and align.shape == (2, T_IN, 1)
    assert (frames == 0).all()
    _close(align, ref_align)
    assert len(counted) == 1


def test_a_finished_row_is_computed_while_the_other_runs(monkeypatch, counted):
    """Zero biases and a zero memory row: that row's frames are exactly 0 from step 1 (finished, and kept
    computed), the other row's never are, so both loops run to max_iters."""
    dec = _decoder("keithito", "keithito-20180906", max_iters=6)
    with torch.no_grad():
        for name, p in dec.named_parameters():
            if name.endswith("bias"):
                p.zero_()
    memory = _memory(2, dec.memory_size)
    memory[0] = 0.0
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory))
    assert frames.shape == ref_frames.shape == (2, 6, 12)
    assert (frames[0] == 0).all() and (frames[1] != 0).any(1).all()
    _close(frames, ref_frames)
    _close(align, ref_align)
    assert len(counted) == 1


def test_mask_memory_and_nan(monkeypatch, counted):
    dec = _decoder("mimic2", "mimic2", mask_memory=True)
    memory = _memory(2, dec.memory_size)
    lengths = torch.tensor([7, 3])
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory, lengths))
    _close(frames, ref_frames)
    _close(align, ref_align)
    assert (align[1, 3:] == 0).all() and (align[1, :3] > 0).all()
    memory[1, 2, 0] = float("nan")  # row 1 all NaN from its first step on, row 0 untouched
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory, lengths))
    assert torch.isnan(frames[1]).all() and not torch.isnan(frames[0]).any()
    _close(frames, ref_frames)
    _close(align, ref_align)
    assert len(counted) == 2


def test_any_thread_count_gives_the_same_bits(monkeypatch, counted):
    """Every product's outputs split between 1 to 5 threads (forced: a step this small runs on one by default)."""
    dec = _decoder("mimic2", "mimic2", WIDE)
    memory = _memory(2, dec.memory_size)
    monkeypatch.setattr(core.tacotron1_loop, "MACS_PER_THREAD", 1)
    threads_run = count_calls(monkeypatch, core.tacotron1_loop, "_threads", lambda n: n > 1)
    outs = []
    for threads in (1, 2, 3, 5):
        monkeypatch.setattr(_native, "native_threads", lambda n=threads: n)
        with torch.no_grad():
            outs.append(dec(memory))
    for frames, align in outs[1:]:
        assert torch.equal(frames, outs[0][0]) and torch.equal(align, outs[0][1])
    assert len(counted) == 4 and len(threads_run) == 3


def test_the_model_synthesizes_alike(monkeypatch, counted):
    torch.manual_seed(0)
    model = Tacotron1(dict(SMALL)).eval()
    ids = torch.tensor([[1, 4, 2, 7, 3, 9, 5]])
    native, scripted = _both(monkeypatch, lambda: model.synthesize(ids))
    for key in ("mel_outputs", "linear_outputs", "alignments"):
        _close(torch.from_numpy(native[key]), torch.from_numpy(scripted[key]))
    assert len(counted) == 1


def test_the_plan_names_the_loop_that_runs(monkeypatch, counted):
    dec = _decoder("keithito", "keithito-20170720")
    memory = _memory(1, dec.memory_size)
    with torch.no_grad():
        assert plan_decoding(dec, memory).loop == "native-tacotron1" and str(plan_decoding(dec, memory)) == \
            "decoder loop: native-tacotron1"
        dec(memory)
    assert len(counted) == 1

    def refused(expected_loop: str, reason: str, call, *args, **kwargs):
        plan = plan_decoding(dec, *args, **kwargs)
        assert plan.loop == expected_loop and reason in plan.reason, str(plan)
        call()
        assert len(counted) == 1  # the framework's loop ran

    targets = torch.randn(1, 6, 6)
    with torch.no_grad():
        assert plan_decoding(dec, memory, mel_targets=targets).loop == "teacher-forced"
        dec(memory, mel_targets=targets)
        masks = [torch.ones(1, 5, 6), None]
        refused("graph", "injected pre-net masks", lambda: dec(memory, noise_masks={"decoder_prenet": masks}),
                memory, noise_masks={"decoder_prenet": masks})
        refused("graph", "batch 9", lambda: dec(_memory(9, dec.memory_size)), _memory(9, dec.memory_size))
        dec.train()
        refused("graph", "training", lambda: dec(memory), memory)
        dec.eval()
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
        refused("graph", "SPEECHBLOCKS_NATIVE=0", lambda: dec(memory), memory)
        monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
        dec.double()
        refused("graph", "float64 memory", lambda: dec(memory.double()), memory.double())
        dec.float()
    refused("graph", "gradients are recorded", lambda: dec(memory), memory)  # grad enabled, parameters need grad
    with pytest.raises(ValueError, match="`progress`"):
        plan_decoding(dec, memory, progress=lambda step, p: None)


def test_the_library_holds_the_loop_and_its_layout():
    lib = core.library()
    assert lib is not None and _build.check_layouts(lib) == ""
    assert "sb_tacotron1_decoder_layout" in _structs.LAYOUTS
    assert any(p.name == "tacotron1_step.c" for p in core.SOURCES)


def test_the_loop_refuses_what_it_cannot_read():
    dec = _decoder("keithito", "keithito-20180906")
    f32 = lambda x: np.ascontiguousarray(x.detach().numpy(), np.float32)  # noqa: E731
    grus = (dec.attention_gru, dec.gru1, dec.gru2)
    good = dict(prenet_weights=[f32(x.weight) for x in dec.prenet.layers],
                prenet_biases=[f32(x.bias) for x in dec.prenet.layers],
                gru_weights=[[f32(g.gates.weight), f32(g.gates.bias), f32(g.candidate.weight), f32(g.candidate.bias)]
                             for g in grus],
                query_weight=f32(dec.attention.query_layer.weight), v_a=f32(dec.attention.attention_v),
                location_weight=None, pad_before=0, keys=np.zeros((1, T_IN, 5), np.float32),
                values=np.zeros((1, T_IN, 6), np.float32), score_bias=None,
                cell0_weight=f32(dec.cell0_projection.weight), cell0_bias=f32(dec.cell0_projection.bias),
                projection_weight=f32(dec.output_projection.weight), projection_bias=f32(dec.output_projection.bias),
                num_mels=6, prenet_outside=True, cols=False, threads=1)
    loop = core.Tacotron1Loop(core.library(), **dict(good, threads=4))
    assert loop.m.threads == 1  # a step this small runs on one thread
    frames, align = loop.run(3)
    assert frames.shape == (1, 3, 12) and align.shape == (1, T_IN, 3)
    for key, bad, named in (("keys", np.zeros((1, T_IN, 4), np.float32), "`keys`"),
                            ("values", np.zeros((1, T_IN, 6)), "`values`"),
                            ("cell0_weight", good["cell0_weight"].T, "`cell0_weight`"),
                            ("projection_weight", good["projection_weight"].T.copy(), "`projection_weight`")):
        with pytest.raises(ValueError, match=named):
            core.Tacotron1Loop(core.library(), **dict(good, **{key: bad}))
    with pytest.raises(ValueError, match="`prenet_weights\\[1\\]`"):
        core.Tacotron1Loop(core.library(), **dict(good, cols=True))
    with pytest.raises(ValueError, match="`max_iters`"):
        core.Tacotron1Loop(core.library(), **good).run(0)
