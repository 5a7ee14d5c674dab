"""The native decoder step (``speechblocks/native``) through torch (``torch_layers/_native.py``): batch-1
free-running inference in one C call a step.

Every test runs the same call twice, through the native step and through the TorchScript loop
(``SPEECHBLOCKS_NATIVE=0``), and compares what the user gets: frames, stop probabilities, alignments, the step at
which the stop rule fired, the pre-net's random draws, NaN positions, progress reports.
"""
from __future__ import annotations

import ast
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import torch_layers
from speechblocks import native as core
from speechblocks.native import _build
from tests.helpers.call_counter import count_calls
from tests.helpers.native_accuracy import assert_as_accurate
from torch_layers import _native
from torch_layers.tacotron2_decoder import Tacotron2Decoder

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native step cannot be built (the TorchScript loop runs)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = dict(num_mels=6, prenet_layers=(12, 10), decoder_layers=2, decoder_lstm_units=20, attention_dim=8,
             attention_filters=3, attention_kernel=5, max_iters=40)


@pytest.fixture
def counted(monkeypatch):
    """Counts the native loops run (each test asserts the path it compares really ran)."""
    return count_calls(monkeypatch, _native.NativeDecoderLoop, "run")


def _decoder(seed: int = 0, stop_bias: float = -3.0, **overrides) -> Tacotron2Decoder:
    torch.manual_seed(seed)
    cfg = dict(SMALL, **overrides)
    dec = Tacotron2Decoder(11, **cfg).eval()
    with torch.no_grad():
        for p in dec.parameters():  # larger weights than the initialisation: attention that moves, stops that vary
            p.mul_(3.0)
        dec.stop_projection.dense.bias.fill_(stop_bias)
    return dec


def _both(monkeypatch, call, seed: int = 7, module=None):
    """``call()`` through the native step and through the TorchScript loop, the same random seed for each; with
    ``module``, also the TorchScript loop in float64 (``call`` takes the dtype of its inputs) as the reference."""
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE", raising=False)
    args = () if module is None else (torch.float32,)
    torch.manual_seed(seed)
    native = call(*args)
    state_native = torch.get_rng_state()
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    torch.manual_seed(seed)
    scripted = call(*args)
    same_draws = torch.equal(state_native, torch.get_rng_state())
    reference = None
    if module is not None:
        module.double()
        torch.manual_seed(seed)
        reference = call(torch.float64)
        module.float()
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    return native, scripted, same_draws, reference


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 2e-6):
    assert a.shape == b.shape
    assert torch.equal(torch.isnan(a), torch.isnan(b))
    scale = max(1.0, float(b.nan_to_num().abs().max()))
    assert float((a - b).nan_to_num().abs().max()) <= tol * scale


def test_the_library_builds_here_and_shares_torchs_openmp():
    lib = _native.library()
    assert lib is not None, "a C compiler is on PATH but the native step did not build"
    # in a fresh process (this one may hold other packages' OpenMP copies): torch, then a native synthesis step
    code = ("import torch, torch_layers\n"
            "from torch_layers.tacotron2_decoder import Tacotron2Decoder\n"
            "dec = Tacotron2Decoder(5, num_mels=4, prenet_layers=(8,), decoder_lstm_units=8, attention_dim=4,"
            " attention_filters=2, attention_kernel=3, max_iters=3).eval()\n"
            "with torch.inference_mode():\n"
            "    dec(torch.randn(1, 6, 5))\n"
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert len(loaded) == 1 and "torch" in loaded[0], loaded  # one OpenMP runtime: torch's, one pool of threads


@pytest.mark.parametrize("variant", [
    dict(),
    dict(outputs_per_step=3),
    dict(smoothing=True),
    dict(cumulative_weights=False),
    dict(zoneout=0.0, drop_rate=0.0),
    dict(attention_kernel=4),  # TF 'same' padding 1 before, 2 after
    dict(decoder_layers=3, prenet_layers=(9,)),
    dict(stop_at_any=False, outputs_per_step=2),
])
@pytest.mark.parametrize("lengths", [None, [7]])
def test_native_equals_the_torchscript_loop(monkeypatch, counted, variant, lengths):
    stop_at_any = variant.pop("stop_at_any", True)
    dec = _decoder(stop_at_any=stop_at_any, **variant)
    memory = torch.randn(1, 9, 11)
    memory_lengths = None if lengths is None else torch.tensor(lengths)

    def call(dtype):
        with torch.inference_mode():
            return dec(memory.to(dtype), memory_lengths)

    native, scripted, same_draws, reference = _both(monkeypatch, call, module=dec)
    assert len(counted) == 1
    for a, b, c in zip(native, scripted, reference):
        assert_as_accurate(a, b, c)
    assert same_draws  # the pre-net's dropout drew the same numbers, in the same order, as many


def test_the_stop_rule_fires_at_the_same_step(monkeypatch, counted):
    steps = set()
    for seed in range(12):
        dec = _decoder(seed, stop_bias=-1.0, max_iters=60)
        memory = torch.randn(1, 9, 11)

        def call(dec=dec, memory=memory):
            with torch.no_grad():
                return dec(memory)

        native, scripted, _, _ = _both(monkeypatch, call, seed)
        assert native[0].shape == scripted[0].shape
        _close(native[1], scripted[1])
        steps.add(native[0].shape[1])
    assert len(counted) == 12
    assert len(steps) >= 3, steps  # the cases stop at different steps, some before max_iters
    assert min(steps) < 60


def test_injected_prenet_masks_and_a_mask_shorter_than_max_iters(monkeypatch, counted):
    dec = _decoder(stop_bias=-50.0)
    memory = torch.randn(1, 9, 11)
    masks = {"prenet": [(torch.rand(1, 40, n) > 0.5).float() for n in (12, 10)]}

    def call():
        with torch.inference_mode():
            return dec(memory, max_iters=40, noise_masks=masks)

    native, scripted, _, _ = _both(monkeypatch, call)
    for a, b in zip(native, scripted):
        _close(a, b)
    short = {"prenet": [m[:, :5] for m in masks["prenet"]]}
    for env in (None, "0"):
        if env:
            monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        with pytest.raises(ValueError, match="covers 5 decoder steps"), torch.inference_mode():
            dec(memory, max_iters=40, noise_masks=short)
    assert len(counted) == 2


def test_nan_in_the_memory_propagates_as_in_the_loop(monkeypatch, counted):
    dec = _decoder(stop_bias=-50.0, max_iters=6)
    memory = torch.randn(1, 9, 11)
    memory[0, 4, 2] = math.nan

    def call():
        with torch.inference_mode():
            return dec(memory, torch.tensor([7]))

    native, scripted, _, _ = _both(monkeypatch, call)
    assert len(counted) == 1
    assert torch.isnan(native[2]).any()
    for a, b in zip(native, scripted):
        _close(a, b)


def test_progress_reports_the_same_steps_and_probabilities(monkeypatch, counted):
    dec = _decoder(seed=3, stop_bias=-1.0, max_iters=30)
    memory = torch.randn(1, 9, 11)
    reports = {}

    for name, env in (("native", None), ("scripted", "0")):
        if env:
            monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        got = []
        torch.manual_seed(1)
        with torch.inference_mode():
            dec.decode(memory, progress=lambda step, p, got=got: got.append((step, p)))
        reports[name] = got
    assert len(counted) == 1
    assert [s for s, _ in reports["native"]] == [s for s, _ in reports["scripted"]]
    assert max(abs(a - b) for (_, a), (_, b) in zip(reports["native"], reports["scripted"])) <= 1e-6


def test_rtvc_sizes_through_the_model(monkeypatch, counted):
    from speechblocks import resolve_hparams
    torch.manual_seed(0)
    model = torch_layers.Tacotron2(resolve_hparams("rtvc")).eval()
    with torch.no_grad():
        model.decoder.stop_projection.dense.bias.fill_(-1e3)
    ids = torch.randint(1, 60, (1, 37))
    speaker = torch.randn(1, 256)

    def call(dtype):
        with torch.inference_mode():
            return model(ids, torch.tensor([37]), speaker.to(dtype), max_iters=25)

    native, scripted, same_draws, reference = _both(monkeypatch, call, module=model)
    assert len(counted) == 1 and same_draws
    for key in native:
        assert_as_accurate(native[key], scripted[key], reference[key])


def test_what_the_native_step_does_not_take_runs_the_torchscript_loop(counted):
    dec = _decoder(stop_bias=-50.0, max_iters=4)
    memory = torch.randn(2, 9, 11)
    with torch.inference_mode():
        dec(memory)  # batch 2
        dec(memory[:1].double().float(), mel_targets=torch.randn(1, 4, 6))  # teacher-forced
        dec.double()(memory[:1].double())  # float64
    dec.float()
    dec(memory[:1])  # gradient recorded (parameters require it)
    assert counted == []
    with torch.inference_mode():
        dec(memory[:1])
    assert len(counted) == 1


def test_no_native_step_while_a_graph_is_recorded(monkeypatch, counted):
    """Under ``torch.compile`` (or a trace) a C call's result would enter the graph as a constant: the loop runs."""
    dec = _decoder(stop_bias=-50.0, max_iters=4)
    memory = torch.randn(1, 9, 11)
    for recording in ("torch.compiler.is_compiling", "torch.jit.is_tracing"):
        with monkeypatch.context() as m:
            m.setattr(recording, lambda: True)
            with torch.inference_mode():
                dec(memory)
        assert counted == []
    with torch.inference_mode():
        dec(memory)
    assert len(counted) == 1


def test_shapes_the_c_step_would_misread_are_refused():
    dec = _decoder()
    memory = dec.attention_memory(torch.randn(1, 9, 11))
    w, cfg = dec.step_weights(), dec.step_config()
    assert _native.shapes_fit(w, cfg, memory, dec.num_mels)
    bad = [w._replace(query_weight=w.query_weight[:, :-1]),
           w._replace(location_weight=w.location_weight[:, :, :-1]),
           w._replace(lstm_weights=[w.lstm_weights[0][:, :-1], w.lstm_weights[1]]),
           w._replace(projection_weight=w.projection_weight[:, :-1]),
           w._replace(prenet_weights=[w.prenet_weights[0][:, :-1], w.prenet_weights[1]])]
    for x in bad:
        assert not _native.shapes_fit(x, cfg, memory, dec.num_mels)
    assert not _native.shapes_fit(w, cfg, memory._replace(keys=memory.keys[:, :, :-1]), dec.num_mels)
    assert not _native.shapes_fit(w, cfg, memory, dec.num_mels + 100)


def test_no_compiler_or_switched_off_means_the_torchscript_loop(monkeypatch, tmp_path, counted):
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    assert core.library() is None
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    monkeypatch.setenv("CC", "false")  # a "compiler" that fails every build
    monkeypatch.setenv("SPEECHBLOCKS_CACHE", str(tmp_path))
    assert core.library() is None
    assert not any(tmp_path.rglob("*.so")) and not any(p.is_file() for p in tmp_path.rglob("*"))  # nothing left
    dec = _decoder(stop_bias=-50.0, max_iters=3)
    with torch.inference_mode():
        frames, _, _ = dec(torch.randn(1, 9, 11))
    assert frames.shape == (1, 3, 6) and counted == []


def test_a_fresh_cache_builds_once(monkeypatch, tmp_path):
    monkeypatch.setenv("SPEECHBLOCKS_CACHE", str(tmp_path))
    monkeypatch.setattr(_build, "_LOADED", {})
    lib = core.library()
    assert lib is not None
    built = list((tmp_path / "native").glob("speechblocks_native-*.so"))
    assert len(built) == 1 and not [p for p in (tmp_path / "native").iterdir() if p not in built]
    monkeypatch.setattr(_build, "build", lambda *a: pytest.fail("built again"))
    monkeypatch.setattr(_build, "_LOADED", {})
    assert core.library() is not None


def _child_synthesis(queue):
    dec = _decoder(stop_bias=-50.0, max_iters=5)
    torch.manual_seed(2)
    with torch.inference_mode():
        memory = dec.attention_memory(torch.ones(1, 9, 11))
        loop = _native.NativeDecoderLoop(core.library(), dec.step_weights(), dec.step_config(), memory, dec.num_mels,
                                         dec.stop_at_any, threads=2)  # asks for 2 threads, as a Keras caller does
        frames = loop.run(5)[0]
    queue.put((loop.loop.m.threads, frames.numpy()))


def test_a_forked_child_runs_the_native_step_on_one_thread(counted):
    """GNU libgomp is not fork-safe: a child forked after the parent's native step started OpenMP threads runs its
    steps on one thread (as torch does in such a child) instead of hanging on the parent's pool."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    dec = _decoder(stop_bias=-50.0, max_iters=5)
    torch.manual_seed(2)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.inference_mode():
            parent = dec(torch.ones(1, 9, 11))[0].numpy()
    finally:
        torch.set_num_threads(threads)
    assert len(counted) == 1
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_synthesis, args=(queue,))
    child.start()
    child.join(timeout=120)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung in the native step"
    assert child.exitcode == 0
    threads_in_child, got = queue.get(timeout=10)
    assert threads_in_child == 1
    assert got.shape == parent.shape and float(abs(got - parent).max()) <= 1e-6


def test_a_damaged_cached_library_is_built_again(monkeypatch, tmp_path):
    monkeypatch.setenv("SPEECHBLOCKS_CACHE", str(tmp_path))
    monkeypatch.setattr(_build, "_LOADED", {})
    assert core.library() is not None
    (built,) = (tmp_path / "native").glob("speechblocks_native-*.so")
    damaged = tmp_path / "damaged"
    damaged.write_bytes(b"not an ELF file")
    os.replace(damaged, built)  # a new file (this process keeps the old one mapped)
    # a fresh process finds the damaged file where the library should be
    code = "from speechblocks import native; print(native.library() is not None)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "SPEECHBLOCKS_CACHE": str(tmp_path)})
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
    assert built.read_bytes()[:4] == b"\x7fELF"


def test_the_loop_refuses_arrays_it_would_misread_and_missing_draws():
    dec = _decoder()
    memory = dec.attention_memory(torch.randn(1, 9, 11))
    loop = _native.NativeDecoderLoop(core.library(), dec.step_weights(), dec.step_config(), memory, dec.num_mels,
                                     dec.stop_at_any, 1)
    with pytest.raises(ValueError, match="needs `draws` or `keep_masks`"):
        loop.loop.run(3)  # dropout on, no random numbers
    with pytest.raises(ValueError, match=r"draws\(0\) must have shape \(22,\)"):
        loop.loop.run(3, draws=lambda step: np.zeros(5, np.float32))
    w = [np.zeros((8, 4), np.float32).T]  # a transposed view: not C-contiguous
    with pytest.raises(ValueError, match="float32 and C-contiguous"):
        core.DecoderLoop(core.library(), lstm_weights=w, lstm_biases=w, lstm_cols=False, gates=core.TORCH_GATES,
                         prenet_weights=w, prenet_biases=w, dense_cols=False, query_weight=w[0],
                         location_weight=w[0], v_a=w[0], keys=w[0], values=w[0], score_bias=None,
                         projection_weight=w[0], projection_bias=w[0], num_mels=4, frame_size=4, zoneout=0.0,
                         prenet_rate=0.0, pad_before=0, smoothing=False, cumulate=True, stop_at_any=True, threads=1)
