"""Block-by-block runs of the project's Tacotron models for a trace (:mod:`speechblocks.parity.trace`).

Both frameworks' ``Tacotron2`` fuse the decoder step into one function over packed weights, run in a compiled,
TorchScript or native loop: none of the decoder's sub-blocks is called there, so no hook or wrapper could see
them. Traced, each side runs its model as its blocks' own calls instead, so every block is seen per step and
matched by its TF1 scope:

``inputs_embedding`` -> ``encoder_convolutions`` -> ``encoder_LSTM`` (+ the tiled speaker embedding) -> per
decoder step: ``decoder/decoder_prenet`` (the previous frame; the target frame ``r·t − 1`` when teacher forced)
-> ``decoder/decoder_LSTM`` (one step over ``[prenet, previous context]``) -> ``decoder/Location_Sensitive_Attention``
(the LSTM output as query) -> ``decoder/linear_transform_projection`` and ``decoder/stop_token_projection`` (over
``[output, context]``) -> ``postnet_convolutions`` -> ``postnet_projection`` (-> ``CBHG_postnet``).

The replay runs in inference mode (no zoneout noise, batch norm moving statistics) for as many decoder steps as
the compared call ran; injected pre-net and post-net masks are honoured. A note says when its outputs differ from
the side's own call (then the call computed something the blocks do not).

Tacotron-1: Keras' decoder step calls its layers (pre-net, attention GRU, attention, ``cell_0_projection``, the two
residual GRUs, the output projection), seen once the Keras side runs eagerly; torch's decoder runs a TorchScript loop
over weights, so for the traced call its ``forward`` is replaced by the same step over its modules.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

import numpy as np

from ._sides import KERAS, TORCH, Side, flatten_outputs, tolerance
from .report import max_abs_difference

__all__ = ["replayer", "decoder_steps"]


def _is_project(obj: Any, name: str) -> bool:
    return type(obj).__name__ == name and type(obj).__module__ in (f"tf_layers.{_snake(name)}",
                                                                   f"torch_layers.{_snake(name)}")


def _snake(name: str) -> str:
    return "".join(("_" + c.lower()) if c.isupper() and i and not name[i - 1].isdigit() else c.lower()
                   for i, c in enumerate(name))


def replayer(side: Side) -> Optional[Callable[[Side, Any, int], dict]]:
    """The block-by-block run of a side whose model hides its sub-blocks' calls, or ``None``."""
    if _is_project(side.obj, "Tacotron2"):
        return _replay_tacotron2
    if _is_project(side.obj, "Tacotron1") and side.kind == TORCH:
        return _replay_tacotron1_torch
    return None


def decoder_steps(outputs: tuple) -> Optional[int]:
    """The decoder steps the compared calls ran (the ``alignments`` output's last axis), or ``None``."""
    for out in outputs:
        a = out.get("alignments")
        if a is not None and np.ndim(a) == 3:
            return int(np.shape(a)[-1])
    return None


def _replay_tacotron2(side: Side, inputs: Any, steps: int) -> dict:
    if not isinstance(inputs, Mapping) or "inputs" not in inputs:
        raise ValueError(f"compare: tracing Tacotron2 needs keyword inputs (inputs=..., input_lengths=...); "
                         f"{side.label} got {type(inputs).__name__}.")
    run = _keras_tacotron2 if side.kind == KERAS else _torch_tacotron2
    return flatten_outputs(run(side.model, side.convert(inputs), steps), side.to_numpy)


def replay_notes(side: Side, replayed: dict, called: dict) -> list[str]:
    """A note where the block-by-block replay's outputs differ from the side's own call."""
    notes = []
    for name in sorted(set(replayed) & set(called)):
        if np.shape(replayed[name]) != np.shape(called[name]):
            notes.append(f"trace: {side.label}: the block-by-block replay's {name} has shape "
                         f"{np.shape(replayed[name])}, its own call's {np.shape(called[name])}")
            continue
        diff, _ = max_abs_difference(replayed[name], called[name])
        if diff > tolerance(1e-5, 0.0, called[name]):
            notes.append(f"trace: {side.label}: the block-by-block replay's {name} differs from its own call by "
                         f"{diff:.3e} (the call computes something its blocks do not)")
    return notes


def _keras_tacotron2(model, kw: dict, steps: int) -> dict:
    import tensorflow as tf

    noise = dict(kw.get("noise_masks") or {})
    ids = tf.cast(kw["inputs"], tf.int32)
    lengths = kw.get("input_lengths")
    lengths = None if lengths is None else tf.cast(lengths, tf.int32)
    memory = model._memory(ids, lengths, kw.get("speaker_embeddings"), False, noise)
    dec = model.decoder
    dtype = memory.dtype
    batch, max_time = int(memory.shape[0]), int(memory.shape[1])
    states = tf.nest.map_structure(lambda s: tf.cast(s, dtype), dec.decoder_lstm.get_initial_state(batch))
    context = tf.zeros((batch, int(memory.shape[-1])), dtype)
    attention_state = tf.zeros((batch, max_time), dtype)
    frame = tf.zeros((batch, dec.num_mels), dtype)
    targets, r = kw.get("mel_targets"), dec.outputs_per_step
    prenet_masks = noise.get("prenet")
    att_lengths = lengths if dec.attention.mask_encoder else None
    frames = []
    for t in range(steps):
        if targets is not None and t:
            frame = tf.cast(targets[:, r * t - 1], dtype)
        masks = None if prenet_masks is None else [tf.cast(m[:, t], dtype) for m in prenet_masks]
        x = dec.prenet(frame, training=False, dropout_masks=masks)
        out, states = dec.decoder_lstm(tf.concat([x, context], -1), states, training=False)
        context, _, attention_state = dec.attention(out, attention_state, memory, att_lengths)
        both = tf.concat([out, context], -1)
        step_frames = dec.frame_projection(both)
        dec.stop_projection(both, training=False)
        frames.append(step_frames)
        if targets is None:
            frame = step_frames[:, -dec.num_mels:]
    return model._postprocess(tf.stack(frames, 1), False, noise.get("postnet_convolutions"))


def _torch_tacotron2(model, kw: dict, steps: int) -> dict:
    import torch

    from torch_layers.tacotron2_noise_masks import flatten_noise_masks

    noise = flatten_noise_masks(kw.get("noise_masks"), "Tacotron2")
    conv_masks, lstm_masks, post_masks = model._split_noise_masks(noise)
    lengths = kw.get("input_lengths")
    with torch.no_grad():
        memory = model._memory(kw["inputs"], lengths, kw.get("speaker_embeddings"), conv_masks, lstm_masks)
        dec = model.decoder
        batch, max_time = memory.shape[0], memory.shape[1]
        states = [(c.to(memory.dtype), h.to(memory.dtype)) for c, h in dec.decoder_lstm.get_initial_state(batch)]
        context = memory.new_zeros(batch, memory.shape[2])
        attention_state = memory.new_zeros(batch, max_time)
        frame = memory.new_zeros(batch, dec.num_mels)
        targets, r = kw.get("mel_targets"), dec.outputs_per_step
        prenet_masks = None if noise is None else noise.get("prenet")
        att_lengths = lengths if dec.attention.mask_encoder else None
        frames = []
        for t in range(steps):
            if targets is not None and t:
                frame = targets[:, r * t - 1].to(memory.dtype)
            masks = None if prenet_masks is None else [m[:, t].to(memory.dtype) for m in prenet_masks]
            x = dec.prenet(frame, masks)
            out, states = dec.decoder_lstm(torch.cat([x, context], 1), states)
            context, _, attention_state = dec.attention(out, attention_state, memory, att_lengths)
            both = torch.cat([out, context], 1)
            step_frames = dec.frame_projection(both)
            dec.stop_projection(both)
            frames.append(step_frames)
            if targets is None:
                frame = step_frames[:, -dec.num_mels:]
        return model._postprocess(torch.stack(frames, 1), post_masks)


def _replay_tacotron1_torch(side: Side, inputs: Any, steps: int) -> dict:
    """torch ``Tacotron1``: its decoder's TorchScript loop replaced, for this call, by the same step as the
    decoder's own modules (Keras' ``Tacotron1Decoder.step`` already calls its layers, run eagerly)."""
    decoder = side.model.decoder
    decoder.forward = lambda *args, **kwargs: _torch_tacotron1_decoder(decoder, *args, **kwargs)
    try:
        out = side.invoke(side.model, side.convert(inputs))
    finally:
        del decoder.forward
    return flatten_outputs(out, side.to_numpy)


def _torch_tacotron1_decoder(dec, memory, memory_lengths=None, mel_targets=None, max_iters=None, noise_masks=None):
    """``Tacotron1Decoder.forward`` as module calls: pre-net -> attention GRU -> attention -> ``cell0_projection``
    -> two residual GRUs -> ``output_projection`` (``torch_layers.tacotron1_decoder.decoder_step``'s maths)."""
    import torch
    import torch.nn.functional as F

    limit = dec._check_inputs(memory, memory_lengths, mel_targets, max_iters)
    masks = dec._prenet_masks(noise_masks, memory.shape[0], limit)
    lengths = memory_lengths if dec.mask_memory else None
    keys = F.linear(memory, dec.attention.memory_layer.weight)
    batch, max_time = memory.shape[0], memory.shape[1]
    h_att = memory.new_zeros(batch, dec.attention_gru.num_units)
    context = memory.new_zeros(batch, dec.memory_size)
    align = memory.new_zeros(batch, max_time)
    h1, h2 = memory.new_zeros(batch, dec.gru1.num_units), memory.new_zeros(batch, dec.gru2.num_units)
    x = memory.new_zeros(batch, dec.num_mels)
    finished = torch.zeros(batch, dtype=torch.bool)
    frames_out, aligns = [], []
    r = dec.outputs_per_step
    for t in range(limit):
        if mel_targets is not None and t:
            x = mel_targets[:, r * t - 1].to(memory.dtype)
        step_masks = None
        if dec.training and all(m is not None for m in masks):
            step_masks = [m[:, t].to(memory.dtype) for m in masks]
        if dec.prenet_outside:
            cell_in = torch.cat([dec.prenet(x, step_masks), context], 1)
        else:
            cell_in = dec.prenet(torch.cat([x, context], 1), step_masks)
        h_att = dec.attention_gru(cell_in, h_att)
        context, align = dec.attention(h_att, keys, memory, align, lengths)
        out = dec.cell0_projection(torch.cat([h_att, context], 1))
        h1 = dec.gru1(out, h1)
        out = out + h1
        h2 = dec.gru2(out, h2)
        frames = dec.output_projection(out + h2)
        frames_out.append(frames)
        aligns.append(align)
        if mel_targets is None:
            x = frames[:, frames.shape[1] - dec.num_mels:]
            finished = finished | (frames == 0).all(1)
            if bool(finished.all()):
                break
    return torch.stack(frames_out, 1), torch.stack(aligns, 2)
