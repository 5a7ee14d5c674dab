"""ONNX Runtime against torch eager: the Tacotron-2 encoder and one decoder step at RTVC sizes.

The graphs are ``Tacotron2.encoder_module()`` and ``Tacotron2.decoder_step_module()`` exported with ``torch.export``
(dynamic batch and ``T_in``) and ``torch.onnx.export(dynamo=True)``, run by an ONNX Runtime CPU session; the
baselines, in the same process and the same run: the model's own encoder (embedding, convolutions, the TorchScript
LSTM loop) and the eager :class:`~torch_layers.tacotron2_decoder.DecoderStep` (the ops of one step of the decoder's
TorchScript loop), under ``torch.inference_mode``; for reference the model's own decoder loop per step (at batch 1
the native step, :mod:`torch_layers._native`; ``SPEECHBLOCKS_NATIVE=0``: the TorchScript loop), ``(T(STEPS steps) -
T(1 step)) / (STEPS - 1)``. Timed with one thread and with every core; both sides get the same threads (torch
``set_num_threads``, ONNX Runtime ``intra_op_num_threads``, its threads not spinning between runs); every side is
called ``WARMUP`` times first (TorchScript's profiling executor re-optimizes during its first calls, seconds each).
Before timing, each ONNX graph must give the torch numbers (within ``TOL``). Interleaved rounds, medians; ratios are
ONNX Runtime / torch (below 1: ONNX Runtime faster).
"""
from __future__ import annotations

import os
import time

import numpy as np

from bench.results import record

#: the rows of bench/results.json this bench records: each figure at 1 thread and (more than one core) at every core
ROWS = ("encoder", "decoder step", "decoder loop step", "encoder default threads", "decoder step default threads",
        "decoder loop step default threads")
#: thread counts timed (torch and ONNX Runtime alike): one, and every core
THREAD_COUNTS = sorted({1, os.cpu_count() or 1})
BATCH = 1
SYMBOLS = 100
STEPS = 51
REPEATS = 15
#: calls before timing: TorchScript's profiling executor re-optimizes (seconds per call) during the first few calls
WARMUP = 8
TOL = 1e-4


def _onnx(exported_program) -> bytes:
    import torch

    return torch.onnx.export(exported_program, dynamo=True, verbose=False).model_proto.SerializeToString()


def _session(model_bytes: bytes, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # no busy-waiting between runs: ONNX Runtime's spinning threads would take the cores from the interleaved torch runs
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *arrays: session.run(None, dict(zip(names, arrays)))


def main() -> None:
    import torch
    from torch.export import Dim

    from torch_layers import Tacotron2

    torch.manual_seed(0)
    model = Tacotron2("rtvc", tacotron_dropout_rate=0.0).eval()
    with torch.no_grad():
        model.decoder.stop_projection.dense.bias.fill_(-30.0)  # never stops: every step of the loop runs
    hp = model.hparams
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, hp.n_symbols, (BATCH, SYMBOLS), generator=g)
    lengths = torch.full((BATCH,), SYMBOLS, dtype=torch.long)
    spk = torch.nn.functional.normalize(torch.randn(BATCH, hp.speaker_embedding_size, generator=g), dim=1)
    print(f"RTVC sizes, batch {BATCH}, {SYMBOLS} symbols; torch {torch.__version__}, "
          f"onnxruntime {__import__('onnxruntime').__version__}")

    # exports (dynamic batch and T_in), examples at another batch and length than the timed ones
    batch, t_in = Dim("batch"), Dim("t_in")
    t0 = time.perf_counter()
    example = (ids[:, :37].repeat(2, 1), torch.tensor([37, 20]), spk.repeat(2, 1))
    encoder_onnx = _onnx(torch.export.export(model.encoder_module(), example,
                                             dynamic_shapes=({0: batch, 1: t_in}, {0: batch}, {0: batch})))
    step = model.decoder_step_module()
    with torch.no_grad():
        ex_values, ex_keys, ex_bias = step.attention_memory(model._memory(*example, None, None), example[1])
        ex_state = step.initial_state(ex_values)
    step_shapes = ({0: batch}, {0: batch}, {0: batch, 1: t_in}, {1: batch}, {1: batch}, {0: batch, 1: t_in},
                   {0: batch, 2: t_in}, {0: batch, 1: t_in})
    step_onnx = _onnx(torch.export.export(step, (*ex_state, ex_values, ex_keys, ex_bias), dynamic_shapes=step_shapes))
    print(f"export + ONNX conversion of the encoder and the step: {time.perf_counter() - t0:.1f} s")
    with torch.inference_mode():
        memory = model._memory(ids, lengths, spk, None, None)
        values, keys, score_bias = step.attention_memory(memory, lengths)
        state = step.initial_state(values)

    for threads in THREAD_COUNTS:
        torch.set_num_threads(threads)
        print(f"-- {threads} thread(s), torch and ONNX Runtime")
        _run(model, step, _session(encoder_onnx, threads), _session(step_onnx, threads), ids, lengths, spk, memory,
             values, keys, score_bias, state, threads=threads)


def _run(model, step, encoder, step_ort, ids, lengths, spk, memory, values, keys, score_bias, state,
         threads: int = 1) -> None:
    import torch

    from bench._timing import compare_times

    hp = model.hparams
    # equality first: the encoder, and a 20-step loop over the step
    np_in = (ids.numpy(), lengths.numpy(), spk.numpy())
    enc_diff = float(np.abs(encoder(*np_in)[0] - memory.numpy()).max())
    with torch.inference_mode():
        frames_t, stop_t, align_t = model.decoder(memory, lengths, None, 20)
    frame, context, att_state, cells, hiddens = (s.numpy() for s in state)
    frames, stops, aligns = [], [], []
    for _ in range(20):
        out, stop, alignments, context, att_state, cells, hiddens = step_ort(
            frame, context, att_state, cells, hiddens, values.numpy(), keys.numpy(), score_bias.numpy())
        frame = np.ascontiguousarray(out[:, -hp.num_mels:])
        frames.append(out)
        stops.append(stop)
        aligns.append(alignments)
    step_diff = max(float(np.abs(np.stack(frames, 1) - frames_t.numpy()).max()),
                    float(np.abs(np.stack(stops, 1) - stop_t.numpy()).max()),
                    float(np.abs(np.stack(aligns, 2) - align_t.numpy()).max()))
    print(f"equality: encoder max |diff| {enc_diff:.2e}, 20 decoder steps (frames, stop, alignments) "
          f"{step_diff:.2e} (tolerance {TOL:g})")
    if not (enc_diff <= TOL and step_diff <= TOL):
        raise SystemExit("ONNX Runtime differs from torch: not timing")

    # timing
    step_np = tuple(s.numpy() for s in state) + (values.numpy(), keys.numpy(), score_bias.numpy())
    step_args = (*state, values, keys, score_bias)

    def torch_encoder():
        with torch.inference_mode():
            model._memory(ids, lengths, spk, None, None)

    def torch_step():
        with torch.inference_mode():
            step(*step_args)

    def torch_loop(n):
        def run():
            with torch.inference_mode():
                model.decoder(memory, lengths, None, n)
        return run

    times = compare_times({"torch encoder": torch_encoder, "ORT encoder": lambda: encoder(*np_in),
                           "torch step": torch_step, "ORT step": lambda: step_ort(*step_np)},
                          repeats=REPEATS, warmup=WARMUP)
    loop = compare_times({"loop 1": torch_loop(1), f"loop {STEPS}": torch_loop(STEPS)}, repeats=7, warmup=WARMUP)
    scripted_step = (loop[f"loop {STEPS}"] - loop["loop 1"]) / (STEPS - 1)

    def line(what, ort, base, base_name):
        r = ort / base
        verdict = "ONNX Runtime faster" if r < 1 else "torch faster"
        print(f"{what}: ONNX Runtime {ort * 1e3:.2f} ms vs {base_name} {base * 1e3:.2f} ms -> {r:.2f}x ({verdict})")

    line(f"encoder ({SYMBOLS} symbols)", times["ORT encoder"], times["torch encoder"], "torch (the model's encoder)")
    line("decoder step", times["ORT step"], times["torch step"], "torch eager DecoderStep")
    line("decoder step", times["ORT step"], scripted_step,
         "the model's decoder loop (native step at batch 1), per step")
    record_results(times, scripted_step, threads)


def record_results(times: dict, scripted_step: float, threads: int) -> None:
    """The rows of one thread count from the medians (``ORT encoder``, ``torch encoder``, ``ORT step``, ``torch
    step``) and the model's loop per step."""
    if threads != 1 and threads != THREAD_COUNTS[-1]:
        return
    suffix = "" if threads == 1 else " default threads"
    shown = "1 thread" if threads == 1 else f"{threads} threads (every core)"
    setup = (f"ONNX Runtime vs torch, RTVC sizes, B={BATCH}, {shown} each side, median of {REPEATS} interleaved "
             f"rounds after {WARMUP} warm-up calls (`bench/bench_onnx.py`)")
    for row, label, what, ort, base in (
            ("encoder", "ONNX Runtime encoder vs torch", f"encoder ({SYMBOLS} symbols) vs the model's encoder (the "
             "native encoder scan)", times["ORT encoder"], times["torch encoder"]),
            ("decoder step", "ONNX Runtime decoder step vs eager `DecoderStep`", "one decoder step vs eager "
             "`DecoderStep`", times["ORT step"], times["torch step"]),
            ("decoder loop step", "ONNX Runtime decoder step vs the model's loop", "one decoder step vs the model's "
             f"decoder loop per step (the native step), (T({STEPS}) − T(1)) / {STEPS - 1}", times["ORT step"],
             scripted_step)):
        record("onnx", row + suffix, ort / base, unit="x", fmt=".2f", seconds=ort, baseline=base,
               label=label + ("" if threads == 1 else ", every core"), setup=setup, what=what,
               notes=f"{ort * 1e3:.2f} ms vs {base * 1e3:.2f} ms.")


if __name__ == "__main__":
    main()
