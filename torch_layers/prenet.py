"""Torch ``Prenet``: Tacotron-2's decoder pre-net, with dropout that stays on in ``eval()``."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechblocks.arguments import check_drop_rate, check_dropout_mode
from speechblocks.block_hparams import prenet_hparams

from . import activations
from ._functional import tf1_dropout
from ._validation import activation_name, check_features, check_positive_int
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1


def prenet_step(x: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str,
                drop_rate: float, dropout_masks: Optional[list[torch.Tensor]] = None,
                generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The pre-net's maths, shared by :class:`Prenet` and the decoder loop: per layer ``i``
    ``dropout(activation(x @ weights[i].T + biases[i]))``, the dropout always on (TF1 keep-prob form).

    Args:
        x: ``(..., in)``.
        weights, biases: per layer ``(out, in)`` and ``(out,)``.
        activation: a name of :mod:`torch_layers.activations`.
        drop_rate: dropout rate in [0, 1).
        dropout_masks: optional 0/1 keep-masks, mask ``i`` of shape ``(..., out_i)`` (not checked here).
        generator: optional ``torch.Generator`` of the random masks.

    Returns:
        ``(..., out_last)``.
    """
    for i in range(len(weights)):
        x = activations.apply(activation, F.linear(x, weights[i], biases[i]))
        mask: Optional[torch.Tensor] = None
        if dropout_masks is not None:
            mask = dropout_masks[i]
        x = tf1_dropout(x, drop_rate, mask, generator)  # on in train() and eval() alike
    return x


class Prenet(TF1WeightsMixin, nn.Module):
    """Tacotron-2 decoder pre-net: ``Linear -> activation -> dropout`` per layer, dropout **always on**.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    As the paper and the TF1 seed, the dropout stays active in ``eval()`` too (it brings diversity
    at synthesis): ``x / (1 - drop_rate) * keep`` with ``keep ~ Bernoulli(1 - drop_rate)``. Pass a
    ``generator`` or inject ``dropout_masks`` for reproducible runs; ``drop_rate=0`` is deterministic.
    TF1 variables ``dense_{i}/{kernel,bias}`` (``i`` from 1) relative to ``tf1_scope``.

    Export (tested by ``run_torch_module_test``): it exports (``torch.export``, ONNX) with dynamic batch and time,
    the dropout included: the masks are drawn in the graph with ``rand_like`` (ONNX ``RandomUniformLike``).

    Args:
        input_size: input features.
        layers_sizes: units of each layer (seed: ``(256, 256)``).
        drop_rate: dropout rate in [0, 1), in training and in eval.
        activation: ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"linear"`` or ``None``.
        tf1_scope: TF1 scope; ``None`` -> ``"prenet"`` (Rayhane's decoder: ``"decoder_prenet"``).
        dropout: ``"always"`` (Tacotron-2: in ``train()`` and ``eval()``) or ``"training"`` (keithito/tacotron and
            mimic2: ``tf.layers.dropout(training=is_training)``, off in ``eval()``). Injected ``dropout_masks`` apply
            in either mode.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> prenet = Prenet(80, (256, 256), drop_rate=0.5)
        >>> prenet(torch.zeros(2, 80)).shape
        torch.Size([2, 256])
    """

    default_tf1_scope = "prenet"

    def __init__(self, input_size: int, layers_sizes: Sequence[int] = (256, 256), drop_rate: float = 0.5,
                 activation: Optional[str] = "relu", tf1_scope: Optional[str] = None, dropout: str = "always",
                 device=None, dtype=None):
        super().__init__()
        self.dropout = check_dropout_mode(dropout, "Prenet")
        check_positive_int(input_size, "input_size", "Prenet")
        if isinstance(layers_sizes, (int, str)) or len(layers_sizes) == 0:
            raise ValueError(f"Prenet: `layers_sizes` must be a non-empty sequence of ints; got {layers_sizes!r}.")
        for s in layers_sizes:
            check_positive_int(s, "layers_sizes", "Prenet")
        check_drop_rate(drop_rate, "Prenet")
        self.input_size = input_size
        self.layers_sizes = [int(s) for s in layers_sizes]
        self.drop_rate = float(drop_rate)
        self.activation = activation_name(activation, "Prenet")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        sizes = [input_size] + self.layers_sizes
        self.layers = nn.ModuleList(nn.Linear(sizes[i], sizes[i + 1], device=device, dtype=dtype)
                                    for i in range(len(self.layers_sizes)))

    @classmethod
    def from_hparams(cls, hp, input_size: int, **kwargs) -> Prenet:
        """Builds the block from Rayhane-style hparams (``prenet_layers``, ``tacotron_dropout_rate``)."""
        config = prenet_hparams(hp)
        config.update(kwargs)
        return cls(input_size, **config)

    def forward(self, inputs: torch.Tensor, dropout_masks: Optional[list[torch.Tensor]] = None,
                generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, input_size)`` (one decoder step) or ``(batch, time, input_size)``.
            dropout_masks: optional list of one 0/1 keep-mask per layer, mask ``i`` of shape
                ``(..., layers_sizes[i])``, replacing the random masks.
            generator: optional ``torch.Generator`` of the random masks.

        Returns:
            ``(..., layers_sizes[-1])``.
        """
        check_features(inputs, "inputs", "Prenet", self.input_size)
        if dropout_masks is not None and len(dropout_masks) != len(self.layers_sizes):
            raise ValueError("Prenet: argument `dropout_masks` must be a list of " + str(len(self.layers_sizes))
                             + " keep-masks, one per layer; got " + str(len(dropout_masks)) + ".")
        if dropout_masks is not None:
            shape = list(inputs.shape[:-1])
            for i, mask in enumerate(dropout_masks):
                if list(mask.shape) != shape + [self.layers_sizes[i]]:
                    raise ValueError("Prenet: argument `dropout_masks[" + str(i) + "]` must have shape "
                                     + str(shape + [self.layers_sizes[i]]) + "; got " + str(list(mask.shape)) + ".")
        weights: list[torch.Tensor] = []
        biases: list[torch.Tensor] = []
        for layer in self.layers:
            weights.append(layer.weight)
            b = layer.bias
            assert b is not None
            biases.append(b)
        drop_rate = self.drop_rate
        if dropout_masks is None and self.dropout == "training" and not self.training:
            drop_rate = 0.0  # keithito/mimic2: tf.layers.dropout(training=is_training)
        return prenet_step(inputs, weights, biases, self.activation, drop_rate, dropout_masks, generator)

    def extra_repr(self) -> str:
        return (f"drop_rate={self.drop_rate}, activation={self.activation!r}, tf1_scope={self.tf1_scope!r}, "
                f"dropout={self.dropout!r}")

    def _tf1_variables(self):
        out = {}
        for i, layer in enumerate(self.layers):
            out[f"dense_{i + 1}/kernel"] = TF1Variable(layer.weight, dense_to_tf1, dense_from_tf1)
            out[f"dense_{i + 1}/bias"] = TF1Variable(layer.bias)
        return out
