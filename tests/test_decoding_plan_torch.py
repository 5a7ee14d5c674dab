"""``torch_layers.decoding_plan.plan_decoding``: the one place that picks an eager torch decoder call's loop.

For each kind of call: the plan's loop and reason, and that the loop it names is the loop that runs (spies on the
native loops and on the two framework loops); progress reported alike whichever loop runs, each report the largest
stop probability of its step in the outputs; ``stop_each`` outputs equal to each entry decoded alone, in every loop;
the torch stop rule against the numpy one.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from speechblocks import stop_rule as numpy_rule
from speechblocks.decoding import DecodingPlan
from tests.test_native_decoder_batch_torch import _decoder as batch_decoder
from torch_layers import _native, _packed_linear
from torch_layers import tacotron2_decoder as decoder_module
from torch_layers.decoding_plan import plan_decoding
from torch_layers.tacotron2_decoder import Tacotron2Decoder
from torch_layers.tacotron2_stop_rule import batch_fired, entries_fired

LENGTHS = [9, 4, 7]
has_native = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native steps cannot be built")


def _decoder(seed: int = 0, stop_bias: float = -1.0, **overrides) -> Tacotron2Decoder:
    """The batched native tests' decoder (weights x3: attention that moves, stops that vary), 30 steps at most."""
    return batch_decoder(seed, stop_bias, **dict(dict(max_iters=30), **overrides))


def _memory(batch: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(batch, 9, 11, generator=torch.Generator().manual_seed(batch)).to(dtype)


@pytest.fixture
def ran(monkeypatch):
    """The loops that ran, by plan name (spies on the native loops' ``run`` and on the framework loops)."""
    calls: list[str] = []
    for name, cls in (("native-step", _native.NativeDecoderLoop), ("native-batch", _native.NativeBatchLoop)):
        original = cls.run

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "run", spy)
    for name, attr in (("graph", "decoder_loop"), ("python", "decoder_loop_python")):
        original = getattr(decoder_module, attr)

        def loop(*args, _name=name, _original=original):
            calls.append(_name)
            return _original(*args)
        monkeypatch.setattr(decoder_module, attr, loop)
    return calls


def _plan_and_run(dec, memory, ran, mel_targets=None, noise_masks=None, progress=None, grad=False):
    """The plan of the call and the loop that ran it (teacher-forced runs the TorchScript loop: "graph")."""
    context = torch.enable_grad() if grad else torch.no_grad()
    with context:
        plan = plan_decoding(dec, memory, mel_targets=mel_targets, noise_masks=noise_masks, progress=progress)
        ran.clear()
        dec.decode(memory, None, mel_targets, None, noise_masks, progress=progress)
    assert len(ran) == 1, ran
    return plan, ran[0]


@has_native
def test_the_plan_of_each_kind_of_call_is_the_loop_that_runs(monkeypatch, ran):
    dec = _decoder()
    one, three = _memory(1), _memory(3)
    report = lambda step, p: None  # noqa: E731
    cases = [  # (call, expected loop, words of the reason)
        (dict(memory=one), "native-step", ""),
        (dict(memory=three), "native-batch", ""),
        (dict(memory=one, progress=report), "native-step", ""),
        (dict(memory=three, progress=report), "native-batch", ""),
        (dict(memory=one, noise_masks={"decoder_LSTM": [torch.ones(1, 40, 20)] * 4}), "graph",
         "injected zoneout masks"),
        (dict(memory=one, grad=True), "graph", "gradients are recorded"),
        (dict(memory=one, mel_targets=torch.randn(1, 8, 6)), "teacher-forced", ""),
    ]
    if _packed_linear.ONEDNN:  # the taps multiply through packed weights: the Python loop
        cases.append((dict(memory=three, mel_targets=torch.randn(3, 8, 6), grad=True), "python",
                      "weight-gradient taps"))
    for kwargs, loop, words in cases:
        plan, running = _plan_and_run(dec, ran=ran, **kwargs)
        assert plan.loop == loop and words in plan.reason and bool(plan.reason) == bool(words), (kwargs, plan)
        assert running == {"teacher-forced": "graph"}.get(loop, loop), (plan, running)
        assert plan.progress is kwargs.get("progress")
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    for progress, loop in ((None, "graph"), (report, "python")):
        plan, running = _plan_and_run(dec, three, ran, progress=progress)
        assert (plan.loop, running) == (loop, loop)
        assert plan.reason.startswith("the native library is off: SPEECHBLOCKS_NATIVE=0"), plan.reason
    assert str(plan).startswith("decoder loop: python (the native library is off: SPEECHBLOCKS_NATIVE=0;")
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    dec.double()
    for progress, loop in ((None, "graph"), (report, "python")):
        plan, running = _plan_and_run(dec, _memory(1, torch.float64), ran, progress=progress)
        assert (plan.loop, running) == (loop, loop) and plan.reason.startswith("float64 memory"), plan
    assert str(plan_decoding(dec, _memory(1, torch.float64))) == (
        "decoder loop: graph (float64 memory (the native steps compute in float32))")


def test_plan_arguments():
    dec = _decoder()
    memory = _memory(2)
    plan = plan_decoding(dec, memory, stop_each=True)
    assert isinstance(plan, DecodingPlan) and plan.stop_each
    with pytest.raises(ValueError, match="progress"):
        plan_decoding(dec, memory, progress="yes")
    with pytest.raises(ValueError, match="mel_targets"):
        plan_decoding(dec, memory, mel_targets=torch.zeros(2, 4, 6), progress=print)
    with pytest.raises(ValueError, match="eval"):
        plan_decoding(dec, memory, training=True)
    # the attention memory and the raw memory give the same plan
    with torch.no_grad():
        assert plan_decoding(dec, dec.attention_memory(memory)) == plan_decoding(dec, memory)


def _recorder():
    """``(reports, progress)``: the progress callback appends its ``(step, probability)`` to the list."""
    got: list = []
    return got, lambda step, p: got.append((step, p))


def _loops(monkeypatch):
    """The free-running loops a float32 CPU call can run, by name: (environment, with progress)."""
    out = {"graph": ("0", False), "python": ("0", True)}
    if _native.library() is not None:
        out["native"] = ("1", False)
        out["native + progress"] = ("1", True)
    return out


@pytest.mark.parametrize("batch", [1, 3])
def test_progress_is_reported_alike_whichever_loop_runs(monkeypatch, batch):
    dec = _decoder(seed=3, drop_rate=0.0)
    memory = _memory(batch)
    lengths = torch.tensor(LENGTHS[:batch])
    runs = {}
    for name, (env, with_progress) in _loops(monkeypatch).items():
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        got, report = _recorder()
        with torch.inference_mode():
            out = dec.decode(memory, lengths, progress=report if with_progress else None)
        runs[name] = out, got
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    graph = runs["graph"][0]
    steps = graph[1].shape[1]
    for name, (out, got) in runs.items():
        for a, b in zip(out, graph):
            assert a.shape == b.shape and float((a - b).abs().max()) <= 2e-5, name
        if name in ("graph", "native"):
            assert got == []
            continue
        assert [s for s, _ in got] == list(range(1, steps + 1)), name
        largest = out[1].amax(dim=(0, 2))  # each step's largest stop probability in this loop's own outputs
        assert max(abs(p - float(largest[s - 1])) for s, p in got) <= 1e-6, name
    python, native = runs["python"][1], runs.get("native + progress", runs["python"])[1]
    assert max(abs(a[1] - b[1]) for a, b in zip(python, native)) <= 2e-5
    assert torch.equal(runs["python"][0][0], graph[0])  # the Python loop is the TorchScript loop's ops


def test_stop_each_equals_each_entry_alone_in_every_loop(monkeypatch):
    dec = _decoder(seed=5, drop_rate=0.0, stop_bias=-0.5)
    memory = _memory(3)
    lengths = torch.tensor(LENGTHS)
    alone = []
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    with torch.inference_mode():
        for k, n in enumerate(LENGTHS):
            alone.append(dec.decode(memory[k:k + 1, :n]))
    own = [int(a[1].shape[1]) for a in alone]
    assert len(set(own)) > 1, own  # the entries stop at different steps
    for name, (env, with_progress) in _loops(monkeypatch).items():
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        with torch.inference_mode():
            frames, stop, alignments = dec.decode(memory, lengths, stop_each=True,
                                                  progress=(lambda s, p: None) if with_progress else None)
        assert stop.shape[1] == max(own), name
        for k, (a, s) in enumerate(zip(alone, own)):
            for got, want in ((frames[k, :s], a[0][0]), (stop[k, :s], a[1][0]),
                              (alignments[k, :LENGTHS[k], :s], a[2][0])):
                assert float((got - want).abs().max()) <= 2e-5, (name, k)
            assert not frames[k, s:].any() and not stop[k, s:].any() and not alignments[k, :, s:].any(), (name, k)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")


def test_the_torch_stop_rule_is_the_numpy_one():
    rng = np.random.default_rng(0)
    for r in (1, 2, 3):
        probs = rng.choice(np.float32([0.1, 0.5, 0.49, 0.51, 0.9, 1.0, 0.0]), size=(200, 4, r))
        for stop_at_any in (True, False):
            t = torch.from_numpy(probs)
            for step in range(probs.shape[0]):
                assert batch_fired(t[step], stop_at_any) == numpy_rule.batch_fired(probs[step], stop_at_any)
                assert np.array_equal(entries_fired(t[step], stop_at_any).numpy(),
                                      numpy_rule.entries_fired(probs[step], stop_at_any))
    scripted = torch.jit.script(batch_fired)
    assert not scripted(torch.tensor([[0.5]]), True) and scripted(torch.tensor([[0.51]]), True)


def test_recording_a_graph_and_stop_each(monkeypatch):
    dec = _decoder(seed=5, drop_rate=0.0, stop_bias=-0.5)
    memory, lengths = _memory(3), torch.tensor(LENGTHS)
    with torch.no_grad():
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        plan = plan_decoding(dec, memory)
        monkeypatch.undo()
        assert (plan.loop, plan.reason) == ("graph", "torch.compile is tracing")
        explicit = dec.decode(memory, lengths, stop_each=True)
        original = dec(memory, lengths)  # forward: the original rule
    # stop_each: some row left before the last step (zeros there); the original rule: every row ran every step
    assert bool((explicit[1][:, -1] == 0).all(-1).any()) and bool((original[1][:, -1] != 0).all())
