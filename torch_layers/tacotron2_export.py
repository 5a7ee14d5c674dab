"""Torch ``Tacotron2``'s export pieces: the encoder as one module, :class:`Tacotron2Encoder`
(:meth:`Tacotron2.encoder_module <torch_layers.Tacotron2.encoder_module>`; the decoder step is
:class:`~torch_layers.tacotron2_decoder_step.DecoderStep`)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

__all__ = ["Tacotron2Encoder"]


class Tacotron2Encoder(nn.Module):
    """The encoder of a :class:`Tacotron2` in inference, for ``torch.export`` / ONNX with dynamic batch and ``T_in``:
    ``(inputs, input_lengths[, speaker_embeddings]) -> memory`` ``(batch, T_in, memory_size)``, equal to the
    model's own memory in ``eval()`` (embedding -> encoder convolutions -> bidirectional zoneout LSTM [-> the
    speaker embedding tiled and concatenated]).

    It shares the model's parameters (no copy) and runs the model's own blocks: eager, the model's memory (the LSTM's
    TorchScript loop); under ``torch.export`` / ``torch.compile``, :meth:`EncoderRNN.masked_forward
    <torch_layers.EncoderRNN.masked_forward>`, the LSTM's export path (one masked ``scan`` over time, the same step
    maths), so one graph serves every batch and ``T_in``. The input checks are the blocks' shape and dtype checks only
    (none reads tensor values; :meth:`Tacotron2.forward` checks the values). Meant for inference: an exported program
    has no gradient through the LSTM. From :meth:`Tacotron2.encoder_module`.
    """

    def __init__(self, model: nn.Module):  # a Tacotron2
        super().__init__()
        self.model = model

    def forward(self, inputs: Tensor, input_lengths: Tensor, speaker_embeddings: Optional[Tensor] = None) -> Tensor:
        model = self.model
        if not torch.compiler.is_compiling():  # eager: the model's own path (the LSTM's TorchScript loop)
            return model._memory(inputs, input_lengths, speaker_embeddings, None, None)
        memory = model.encoder_lstm.masked_forward(model.encoder_convolutions(model.embedding(inputs)), input_lengths)
        if speaker_embeddings is not None:
            tiled = speaker_embeddings.to(memory.dtype).unsqueeze(1).expand(
                inputs.shape[0], inputs.shape[1], speaker_embeddings.shape[1])
            memory = torch.cat([memory, tiled], 2)
        return memory
