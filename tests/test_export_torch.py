"""Deployment of the whole Tacotron-2 (issue #12, torch side): its encoder and one decoder step through
``torch.export`` (dynamic batch and ``T_in``), ONNX Runtime and ``torch.compile``, against the model's own eager
results; the loop over the steps stays in Python. The per-module checks (every registered block) are steps of
``run_torch_module_test`` (tests/helpers/torch_module_test.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.export import Dim

from tests.helpers.tacotron2_checkpoint import SMALL_RAYHANE, SMALL_RTVC
from tests.helpers.torch_module_test import onnx_runtime
from torch_layers import Tacotron2

N_SYM = 66
ATOL = 1e-5
#: (batch, T_in) of the export examples, then the other sizes the exported graphs must take
EXAMPLE = (2, 9)
OTHER_SIZES = ((1, 1), (3, 4), (4, 13))
STEPS = 5


def _model(preset: str, stop_bias: float | None = -30.0, **overrides) -> Tacotron2:
    """A small model in ``eval()``, pre-net dropout off; the stop bias -30 keeps it from stopping (every step runs)."""
    torch.manual_seed(0)
    small = SMALL_RTVC if preset == "rtvc" else SMALL_RAYHANE
    model = Tacotron2(preset, n_symbols=N_SYM, **{**small, "tacotron_dropout_rate": 0.0, "max_iters": STEPS,
                                                  **overrides}).eval()
    if stop_bias is not None:
        with torch.no_grad():
            model.decoder.stop_projection.dense.bias.fill_(stop_bias)
    return model


def _inputs(model: Tacotron2, b: int, t: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed * 1000 + b * 100 + t)
    ids = torch.randint(0, N_SYM, (b, t), generator=g)
    lengths = torch.tensor([t] + [int(x) for x in torch.randint(1, t + 1, (b - 1,), generator=g)])
    spk = torch.randn(b, model.speaker_embedding_size, generator=g) if model.speaker_embedding_size else None
    return ids, lengths, spk


def _encoder_args(model, b, t):
    ids, lengths, spk = _inputs(model, b, t)
    return (ids, lengths) if spk is None else (ids, lengths, spk)


def _encoder_shapes(model):
    batch, t_in = Dim("batch"), Dim("t_in")
    shapes = ({0: batch, 1: t_in}, {0: batch})
    return shapes if not model.speaker_embedding_size else shapes + ({0: batch},)


def _step_shapes():
    batch, t_in = Dim("batch"), Dim("t_in")
    return ({0: batch}, {0: batch}, {0: batch, 1: t_in}, {1: batch}, {1: batch}, {0: batch, 1: t_in},
            {0: batch, 2: t_in}, {0: batch, 1: t_in})


def _step_example(model):
    """Example arguments of :class:`DecoderStep` (contiguous: the ONNX exporter rejects strided examples)."""
    step = model.decoder_step_module()
    ids, lengths, spk = _inputs(model, *EXAMPLE)
    with torch.no_grad():
        memory = model._memory(ids, lengths, spk, None, None)
        values, keys, score_bias = step.attention_memory(memory, lengths)
    return (*step.initial_state(values), values, keys, score_bias), (memory, lengths)


def run_steps(model: Tacotron2, attention_memory, step, memory, lengths, max_iters: int):
    """The caller's loop over a (possibly exported) step, with the original stop rule; ``(frames, stop,
    alignments)`` laid out as :class:`Tacotron2Decoder` returns them."""
    decoder = model.decoder
    values, keys, score_bias = attention_memory(memory, lengths)
    frame, context, state, cells, hiddens = model.decoder_step_module().initial_state(values)
    frames, stops, aligns = [], [], []
    for _ in range(max_iters):
        out, stop, alignments, context, state, cells, hiddens = step(frame, context, state, cells, hiddens, values,
                                                                     keys, score_bias)
        frame = out[:, -decoder.num_mels:]
        frames.append(out)
        stops.append(stop)
        aligns.append(alignments)
        done = (torch.round(stop) == 1.0).all(0)
        if bool(done.any()) if decoder.stop_at_any else bool(done.all()):
            break
    return torch.stack(frames, 1), torch.stack(stops, 1), torch.stack(aligns, 2)


def _close(got, want, what):
    for g, w in zip(got, want):
        g = g.detach().numpy() if isinstance(g, torch.Tensor) else g
        assert g.shape == tuple(w.shape), f"{what}: shape {g.shape} != {tuple(w.shape)}"
        np.testing.assert_allclose(g, w.detach().numpy(), atol=ATOL, rtol=0, err_msg=what)


def _ort(exported_program):
    run = onnx_runtime(exported_program)
    return lambda *args: [torch.from_numpy(o) for o in run(*args)]


# -- encoder --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_encoder_module_equals_the_models_memory(preset):
    model = _model(preset)
    enc = model.encoder_module()
    for b, t in (EXAMPLE,) + OTHER_SIZES:
        ids, lengths, spk = _inputs(model, b, t)
        with torch.no_grad():
            _close([enc(ids, lengths, spk)], [model._memory(ids, lengths, spk, None, None)], f"encoder {(b, t)}")
    assert [p.data_ptr() for p in enc.parameters()] == [p.data_ptr() for p in model.parameters()]


@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_encoder_exports_with_dynamic_batch_and_time(preset):
    model = _model(preset)
    ep = torch.export.export(model.encoder_module(), _encoder_args(model, *EXAMPLE),
                             dynamic_shapes=_encoder_shapes(model))
    for b, t in OTHER_SIZES:
        ids, lengths, spk = _inputs(model, b, t)
        with torch.no_grad():
            _close([ep.module()(*_encoder_args(model, b, t))], [model._memory(ids, lengths, spk, None, None)],
                   f"torch.export encoder {(b, t)}")


# -- decoder step -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset,stop_bias", [("rtvc", -30.0), ("rayhane", -30.0), ("rtvc", None)])
def test_python_loop_over_the_step_equals_the_decoder(preset, stop_bias):
    model = _model(preset, stop_bias, max_iters=STEPS)
    step = model.decoder_step_module()
    for b, t in (EXAMPLE,) + OTHER_SIZES:
        ids, lengths, spk = _inputs(model, b, t)
        with torch.no_grad():
            memory = model._memory(ids, lengths, spk, None, None)
            want = model.decoder(memory, lengths, None, STEPS)
            _close(run_steps(model, step.attention_memory, step, memory, lengths, STEPS), want, f"steps {(b, t)}")


@pytest.mark.parametrize("preset,onnx", [("rtvc", True), ("rayhane", False)])
def test_decoder_step_exports_and_runs_in_onnx_runtime_equal_to_the_model(preset, onnx):
    """The exported memory module and step (dynamic batch and T_in), looped in Python, give the model's decoder outputs
    on other sizes than the example's through torch.export; RTVC also through ONNX Runtime, and with the encoder's
    ONNX graph the whole free-running decoder output of ``model(...)`` (postnet aside). (Rayhane's ONNX path differs
    only by the absent speaker input: ~30 s of exports left out.)"""
    model = _model(preset)
    step = model.decoder_step_module()
    example, (memory, lengths) = _step_example(model)
    ep_step = torch.export.export(step, example, dynamic_shapes=_step_shapes())
    batch, t_in = Dim("batch"), Dim("t_in")
    ep_memory = torch.export.export(step.attention_memory, (memory, lengths),
                                    dynamic_shapes=({0: batch, 1: t_in}, {0: batch}))
    if onnx:
        ep_encoder = torch.export.export(model.encoder_module(), _encoder_args(model, *EXAMPLE),
                                         dynamic_shapes=_encoder_shapes(model))
        ort_step, ort_memory, ort_encoder = _ort(ep_step), _ort(ep_memory), _ort(ep_encoder)
    for b, t in OTHER_SIZES:
        ids, lengths, spk = _inputs(model, b, t)
        with torch.no_grad():
            memory = model._memory(ids, lengths, spk, None, None)
            want = model.decoder(memory, lengths, None, STEPS)
            _close(run_steps(model, ep_memory.module(), ep_step.module(), memory, lengths, STEPS), want,
                   f"torch.export step {(b, t)}")
            full = model(ids, lengths, spk)
        if not onnx:
            continue
        _close(ort_encoder(ids, lengths, spk), [memory], f"ONNX Runtime encoder {(b, t)}")
        _close(run_steps(model, ort_memory, ort_step, memory, lengths, STEPS), want, f"ONNX Runtime step {(b, t)}")
        # the whole free-running decoder through the three ONNX graphs
        frames, stop, alignments = run_steps(model, ort_memory, ort_step, ort_encoder(ids, lengths, spk)[0], lengths,
                                             STEPS)
        decoder_outputs = frames.reshape(b, -1, model.num_mels)
        if model.clip_outputs:
            decoder_outputs = decoder_outputs.clamp(model.clip_low, model.clip_high)
        _close([decoder_outputs, stop.reshape(b, -1), alignments],
               [full["decoder_outputs"], full["stop_token_prediction"], full["alignments"]], f"ONNX synthesis {(b, t)}")


def test_decoder_step_with_prenet_dropout_draws_its_masks_in_the_graph():
    """The original keeps the pre-net dropout on at inference: the step draws its masks in the graph (``rand_like``,
    ONNX ``RandomUniformLike``), so the exported step is random like the model; its shapes, and that it does vary,
    are checked (the zero-dropout twin is the equality tests above)."""
    model = _model("rtvc", tacotron_dropout_rate=0.5)
    example, _ = _step_example(model)
    ep = torch.export.export(model.decoder_step_module(), example, dynamic_shapes=_step_shapes())
    assert sum(n.target == torch.ops.aten.rand_like.default for n in ep.graph.nodes) == 2  # one per pre-net layer
    torch.manual_seed(1)
    a, b = ep.module()(*example), ep.module()(*example)
    assert [tuple(o.shape) for o in a[:3]] == [(2, 2 * model.num_mels), (2, 2), (2, EXAMPLE[1])]
    assert float((a[0] - b[0]).abs().max()) > 0


# -- torch.compile ---------------------------------------------------------------------------------------------

def _compilations(module, make_args, lengths, backend="aot_eager"):
    """Compiles ``module``, runs it at each length (checking against eager), returns the compile counts after each."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(module, backend=counter)
    counts = []
    try:
        for t in lengths:
            args = make_args(t)
            with torch.no_grad():
                _close(_leaves(compiled(*args)), _leaves(module(*args)), f"torch.compile ({backend}) at T_in={t}")
            counts.append(counter.frame_count)
    finally:
        torch._dynamo.reset()
    return counts


def _leaves(x):
    return [x] if isinstance(x, torch.Tensor) else list(x)


def _step_args(model, t):
    step = model.decoder_step_module()
    ids, lengths, spk = _inputs(model, 2, t)
    with torch.no_grad():
        memory = model._memory(ids, lengths, spk, None, None)
        values, keys, score_bias = step.attention_memory(memory, lengths)
        frame, context, state, cells, hiddens = step.initial_state(values)
        # one step in, so the state is not zeros
        _, _, _, context, state, cells, hiddens = step(frame, context, state, cells, hiddens, values, keys,
                                                       score_bias)
    return frame, context, state, cells, hiddens, values, keys, score_bias


def test_encoder_and_step_compile_without_recompiling_per_length():
    """aot_eager: two compilations over three lengths (the second makes the length dynamic), none at the third."""
    model = _model("rtvc")
    assert _compilations(model.encoder_module(), lambda t: _encoder_args(model, 2, t), (7, 8, 9))[1:] == [2, 2]
    assert _compilations(model.decoder_step_module(), lambda t: _step_args(model, t), (7, 8, 9))[1:] == [2, 2]


# inductor (C++ kernels, ~40 s of CPU with a cold cache) on the decoder step: `make bench` (bench/bench_inductor.py)
# checks its outputs against eager over 20 steps at two input lengths (no new compilation at the second) and times it
