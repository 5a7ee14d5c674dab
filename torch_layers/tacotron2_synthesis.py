"""Torch ``Tacotron2`` inference: :meth:`Tacotron2.synthesize <torch_layers.Tacotron2.synthesize>` and
:meth:`Tacotron2.synthesize_batch <torch_layers.Tacotron2.synthesize_batch>` (the model class keeps thin methods that
call these). The decoder runs in the loop :func:`torch_layers.decoding_plan.plan_decoding` names for the call, its
options (``progress``, ``stop_each``) passed to
:meth:`Tacotron2Decoder.decode <torch_layers.tacotron2_decoder.Tacotron2Decoder.decode>`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Optional

import numpy as np
import torch
from torch import Tensor, nn

from speechblocks.stop_rule import stop_steps
from speechblocks.synthesis_batch import check_progress, pad_sequences, speaker_rows, step_limit

__all__ = ["synthesize", "synthesize_batch"]


def synthesize(model, inputs, input_lengths, speaker_embeddings, max_iters: Optional[int], mel_targets,
               progress: Optional[Callable[[int, float], object]]) -> dict[str, Tensor]:
    """:meth:`Tacotron2.synthesize`: the arguments as tensors on the model's device, the call in ``eval()`` under
    ``torch.no_grad()``."""
    if progress is not None:
        check_progress(progress, mel_targets)
    device, dtype = model.embedding.weight.device, model.embedding.weight.dtype
    inputs = torch.as_tensor(inputs, device=device)
    if input_lengths is not None:
        input_lengths = torch.as_tensor(input_lengths, device=device)
    if speaker_embeddings is not None:
        speaker_embeddings = torch.as_tensor(speaker_embeddings, device=device)
    if mel_targets is not None:
        mel_targets = torch.as_tensor(mel_targets, device=device, dtype=dtype)
    with _eval_no_grad(model):
        input_lengths = model._check_inputs(inputs, input_lengths, speaker_embeddings, mel_targets, max_iters)
        memory = model._memory(inputs, input_lengths, speaker_embeddings, None, None)
        frames, stop, alignments = model.decoder.decode(memory, input_lengths, mel_targets, max_iters,
                                                        progress=progress)
        return model._outputs(frames, stop, alignments, None)


def synthesize_batch(model, sequences, speaker_embeddings, max_iters: Optional[int],
                     progress: Optional[Callable[[int, float], object]]) -> list[dict]:
    """:meth:`Tacotron2.synthesize_batch`: one encoder call (:meth:`Tacotron2._memory_each`), one decoder loop with
    ``stop_each``, the postnet per sentence."""
    block = "Tacotron2.synthesize_batch"
    ids, lengths = pad_sequences(sequences, block, np.int64, _seq_numpy)
    given = _numpy(speaker_embeddings) if isinstance(speaker_embeddings, Tensor) else speaker_embeddings
    spk = speaker_rows(given, len(lengths), block)
    limit = step_limit(max_iters, model.max_iters, block)
    if progress is not None:
        check_progress(progress, None)
    device = model.embedding.weight.device
    inputs = torch.as_tensor(ids, device=device)
    lengths_t = torch.as_tensor(lengths, device=device)
    if spk is not None:
        spk = torch.as_tensor(spk, device=device)
    with _eval_no_grad(model):
        model._check_inputs(inputs, lengths_t, spk, None, int(limit))
        memory = model._memory_each(inputs, lengths_t, spk)
        frames, stop, alignments = model.decoder.decode(memory, lengths_t, None, int(limit), progress=progress,
                                                        stop_each=True)
        return _each_sentence(model, frames, stop, alignments, lengths)


def _each_sentence(model, frames: Tensor, stop: Tensor, alignments: Tensor, lengths) -> list[dict]:
    """:meth:`Tacotron2.synthesize_batch`'s results: each sentence cut to its own steps (the numpy stop rule,
    :func:`speechblocks.stop_rule.stop_steps`), its postnet run on its own frames."""
    steps, stopped = stop_steps(_numpy(stop), model.decoder.stop_at_any)
    results = []
    for k, (t, s) in enumerate(zip(lengths, steps)):
        out = {key: _numpy(v[0]) for key, v in model._postprocess(frames[k:k + 1, :s], None).items()}
        results.append(dict(decoder_outputs=out.pop("decoder_outputs"), mel_outputs=out.pop("mel_outputs"),
                            stop_token_prediction=_numpy(stop[k, :s]).reshape(-1),
                            alignments=_numpy(alignments[k, :t, :s]), **out, stopped=bool(stopped[k])))
    return results


@contextlib.contextmanager
def _eval_no_grad(module: nn.Module):
    """``module.eval()`` under ``torch.no_grad()``, its mode restored afterwards."""
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        module.train(was_training)


def _numpy(x: Tensor) -> np.ndarray:
    x = x.detach().cpu()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


def _seq_numpy(seq) -> np.ndarray:
    return seq.detach().cpu().numpy() if isinstance(seq, Tensor) else np.asarray(seq)
