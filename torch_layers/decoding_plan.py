"""Which loop runs an eager torch Tacotron-2 decoder call, decided in one place: :func:`plan_decoding`.

The loops (:data:`speechblocks.decoding.LOOPS`), fastest first where several could run a call:

=================  ==========================================================================================
``native-step``    free running at batch 1: the C step (:class:`~torch_layers._native.NativeDecoderLoop`)
``native-batch``   free running at batch > 1: the batched C step (:class:`~torch_layers._native.NativeBatchLoop`)
``graph``          free running: the TorchScript loop (:func:`~torch_layers.tacotron2_decoder_loops.decoder_loop`)
``python``         the same loop run as Python (:func:`~torch_layers.tacotron2_decoder_loops.decoder_loop_python`):
                   free running with ``progress`` where no native step runs (TorchScript cannot call back), and
                   teacher-forced training whose LSTM weights are packed (the weight-gradient taps are Python)
``teacher-forced`` ``mel_targets`` given: the TorchScript loop over the target frames (GTA; training unpacked)
=================  ==========================================================================================

A :class:`~torch_layers.Tacotron1Decoder` (keithito/tacotron, mimic2) plans among three: ``native-tacotron1`` (its
whole free-running loop in one C call, :func:`~torch_layers._native.tacotron1_decode`), ``graph`` (its TorchScript
loop, :func:`~torch_layers.tacotron1_decoder.decode`) and ``teacher-forced``; the native loop runs free-running
``eval()`` calls of float32 CPU memory, batch at most :data:`speechblocks.native.tacotron1_loop.MAX_BATCH`, without
injected pre-net masks, autocast or a gradient recorded, no graph being recorded, the library built and
``SPEECHBLOCKS_NATIVE`` not ``0`` (:func:`tacotron1_refusal`).

A native step runs a free-running call when: no zoneout masks are injected (pre-net masks are), the memory is
float32 on the CPU, the pre-net is ReLU, ``SPEECHBLOCKS_NATIVE`` is not ``0``, no graph is being recorded
(``torch.jit.trace``, ``torch.compile``: a C call would enter it as a constant), no gradient is recorded, the weights
are float32 on the CPU with the shapes the C step holds (:func:`~torch_layers._native.shapes_fit`), and the library
is built. ``progress`` and ``stop_each`` are honoured by every free-running loop (the plan carries them to it).

A scripted module (``torch.jit.script``) never plans: it always runs the TorchScript loop.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional, Union

import torch
from torch import Tensor

from speechblocks import native
from speechblocks.decoding import DecodingPlan
from speechblocks.synthesis_batch import check_progress

from . import _native
from ._decoder_containers import AttentionMemory
from ._packed_linear import can_pack

__all__ = ["plan_decoding", "DecodingPlan", "tacotron1_refusal"]


def plan_decoding(decoder, memory: Union[Tensor, AttentionMemory], *, mel_targets: Optional[Tensor] = None,
                  training: Optional[bool] = None, noise_masks: Optional[dict] = None,
                  progress: Optional[Callable[[int, float], object]] = None, stop_each: bool = False) -> DecodingPlan:
    """The loop an eager call of ``decoder`` (a :class:`~torch_layers.Tacotron2Decoder` or a
    :class:`~torch_layers.Tacotron1Decoder`) runs, and why.

    Args:
        decoder: the decoder.
        memory: the call's :class:`~torch_layers.tacotron2_decoder.AttentionMemory` (what the loop reads), or the
            ``(batch, T_in, memory_size)`` memory (its attention memory is then computed here); a Tacotron-1
            decoder's: the memory.
        mel_targets: the teacher-forcing targets, or ``None`` (free running).
        training: the decoder's mode (default ``decoder.training``); free running is ``eval()`` only.
        noise_masks: the call's injected keep-masks (nested or flat); only whether ``"decoder_LSTM"`` is given
            matters (the native steps take injected pre-net masks, not zoneout masks); a Tacotron-1 decoder's:
            whether a ``"decoder_prenet"`` mask is given (its native loop takes none).
        progress: ``progress(step, largest stop probability)`` after every free-running step, or ``None``.
        stop_each: free running: each batch entry leaves at its own stop (``synthesize_batch``).

    Returns:
        :class:`speechblocks.decoding.DecodingPlan`; ``str(plan)`` says the loop and why a faster one was not taken.

    Raises:
        ValueError: ``progress`` not callable, or given with ``mel_targets`` or for a Tacotron-1 decoder; free
            running a Tacotron-2 decoder in training.
    """
    if getattr(decoder, "decoder_family", None) == "tacotron1":  # a Tacotron1Decoder (which imports this module)
        if progress is not None:
            raise ValueError("plan_decoding: argument `progress` must be None for a Tacotron1Decoder (its loops "
                             "report no progress).")
        if mel_targets is not None:
            return DecodingPlan("teacher-forced")
        if decoder.training if training is None else training:
            return DecodingPlan("graph", "training (the pre-net's dropout is on; the native loop is inference only)")
        refusal = tacotron1_refusal(decoder, memory, noise_masks)
        return DecodingPlan("graph", refusal) if refusal else DecodingPlan("native-tacotron1")
    if progress is not None:
        check_progress(progress, mel_targets)
    if training is None:
        training = decoder.training
    if mel_targets is not None:
        cells = decoder.decoder_lstm.cells
        if lstm_records_gradients(cells) and all(can_pack(cell.weight) for cell in cells):
            return DecodingPlan("python", "teacher-forced with gradients: the weight-gradient taps multiply through "
                                          "packed LSTM weights, which run in Python")
        return DecodingPlan("teacher-forced")
    if training:
        raise ValueError("plan_decoding: free running is eval() only (the original trains teacher-forced); pass "
                         "`mel_targets` or `training=False`.")
    if not isinstance(memory, AttentionMemory):
        with torch.no_grad():
            memory = decoder.attention_memory(memory)
    refusal = native_refusal(decoder, memory, noise_masks)
    if not refusal:
        return DecodingPlan("native-step" if memory.values.shape[0] == 1 else "native-batch", "", progress, stop_each)
    if progress is not None:
        return DecodingPlan("python", refusal + "; progress reports need the Python loop (TorchScript cannot call "
                                                "back)", progress, stop_each)
    return DecodingPlan("graph", refusal, None, stop_each)


def native_refusal(decoder, memory: AttentionMemory, noise_masks: Optional[dict] = None) -> str:
    """Why no native step runs a free-running ``eval()`` call of ``decoder`` on ``memory`` ("" when one does)."""
    if noise_masks is not None and noise_masks.get("decoder_LSTM") is not None:
        return "injected zoneout masks (the native steps take injected pre-net masks only)"
    values = memory.values
    if values.dtype != torch.float32:
        return f"{str(values.dtype).replace('torch.', '')} memory (the native steps compute in float32)"
    if values.device.type != "cpu":
        return f"a {values.device.type.upper()} tensor (the native steps run on the CPU)"
    cfg = decoder.step_config()
    if cfg.prenet_activation != "relu":
        return f"a {cfg.prenet_activation} pre-net (the native steps have ReLU)"
    if not _native.enabled():
        return "the native library is off: SPEECHBLOCKS_NATIVE=0"
    if torch.jit.is_tracing():
        return "torch.jit.trace is recording"
    if torch.compiler.is_compiling():
        return "torch.compile is tracing"
    w = decoder.step_weights()
    tensors = (w.prenet_weights + w.prenet_biases + w.lstm_weights + w.lstm_biases
               + [w.query_weight, w.location_weight, w.v_a, w.projection_weight, w.projection_bias, memory.keys])
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors + [values]):
        return "gradients are recorded"
    if not all(x.dtype == torch.float32 and x.device.type == "cpu" for x in tensors):
        return "the decoder's weights are not float32 on the CPU"
    if not _native.shapes_fit(w, cfg, memory, decoder.num_mels):
        return "shapes the native steps do not hold"
    if _native.library() is None:
        return "the native library is off: " + _native.unavailable_reason()
    return ""


def tacotron1_refusal(decoder, memory: Tensor, noise_masks: Optional[dict] = None) -> str:
    """Why the native loop does not run a free-running ``eval()`` call of a :class:`~torch_layers.Tacotron1Decoder`
    on ``memory`` ``(batch, T_in, memory_size)`` ("" when it does)."""
    given = None if noise_masks is None else noise_masks.get("decoder_prenet")
    if given is not None and any(m is not None for m in given):
        return "injected pre-net masks (the native loop runs inference without dropout)"
    if memory.dtype != torch.float32:
        return f"{str(memory.dtype).replace('torch.', '')} memory (the native loop computes in float32)"
    if memory.device.type != "cpu":
        return f"a {memory.device.type.upper()} tensor (the native loop runs on the CPU)"
    limit = native.tacotron1_loop.MAX_BATCH
    if not 1 <= memory.shape[0] <= limit:
        return f"batch {memory.shape[0]} (the native loop runs batches of 1 to {limit})"
    if not _native.enabled():
        return "the native library is off: SPEECHBLOCKS_NATIVE=0"
    if _native.recording_a_graph():
        return "torch.jit.trace or torch.compile is recording"
    if torch.is_autocast_enabled("cpu"):
        return "CPU autocast is on (the native loop computes in float32)"
    params = list(decoder.parameters())
    if torch.is_grad_enabled() and (memory.requires_grad or any(p.requires_grad for p in params)):
        return "gradients are recorded"
    if not all(p.dtype == torch.float32 and p.device.type == "cpu" for p in params):
        return "the decoder's weights are not float32 on the CPU"
    if len(decoder.prenet.layers) > native.MAX_LAYERS or decoder.attention.units > native.MAX_ATTENTION_UNITS:
        return (f"sizes past the native loop's limits (MAX_LAYERS={native.MAX_LAYERS}, "
                f"MAX_ATTENTION_UNITS={native.MAX_ATTENTION_UNITS})")
    if _native.library() is None:
        return "the native library is off: " + _native.unavailable_reason()
    return ""


def lstm_records_gradients(cells) -> bool:
    """Whether autograd records the LSTM weights' products (the loop then taps their gradients)."""
    return torch.is_grad_enabled() and any(c.weight.requires_grad or c.bias.requires_grad for c in cells)
