"""Torch ``ZoneoutLSTMCell``: TF1 ``LSTMBlockCell`` maths with zoneout."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from speechblocks.arguments import check_zoneout as check_zoneout  # re-exported for the recurrent blocks
from speechblocks.layouts import (
    DEFAULT_FORGET_BIAS,
    tf1_bias_to_torch,
    tf1_kernel_to_torch,
    torch_bias_to_tf1,
    torch_weight_to_tf1,
)

from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin


def effective_bias(bias: Tensor, forget_bias: float) -> Tensor:
    """Adds TF1's run-time forget bias to the ``f`` block (torch gate order i, f, g, o)."""
    u = bias.shape[0] // 4
    return torch.cat([bias[:u], bias[u:2 * u] + forget_bias, bias[2 * u:]])


def lstm_from_gates(gates: Tensor, c_prev: Tensor) -> tuple[Tensor, Tensor]:
    """LSTM update from pre-activations ``(..., 4u)`` in torch gate order (forget bias included)."""
    i, f, g, o = gates.chunk(4, -1)
    c_new = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return c_new, torch.sigmoid(o) * torch.tanh(c_new)


def zoneout(new: Tensor, prev: Tensor, factor: float, keep: Optional[Tensor]) -> Tensor:
    """Training (``keep`` given): ``prev + keep * (new - prev)``; inference: ``(1 - z) * new + z * prev``, written
    tensor first (``new * (1 - z) + prev * z``, the same products) so TorchScript needs no scalar-to-tensor copies."""
    if keep is not None:
        return prev + keep * (new - prev)
    if factor == 0.0:
        return new
    return new * (1.0 - factor) + prev * factor


def keep_masks(shape: list[int], factor: float, like: Tensor) -> Tensor:
    """Random 0/1 keep-mask ~ Bernoulli(1 - factor), in ``like``'s dtype and device."""
    return (torch.rand(shape, device=like.device) >= factor).to(like.dtype)


def check_mask(mask: Tensor, name: str, block: str, shape: list[int], shape_doc: str) -> None:
    if list(mask.shape) != shape:
        raise ValueError(block + ": argument `" + name + "` must be 0/1 keep-masks of shape " + shape_doc
                         + " = " + str(shape) + "; got shape " + str(list(mask.shape)) + ".")


def init_tf1_lstm_(weight: Tensor, bias: Tensor) -> None:
    """TF1's default initialisation: glorot-uniform kernel ``(in + u, 4u)``, zero bias."""
    fan_out, fan_in = weight.shape
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        nn.init.uniform_(weight, -bound, bound)
        nn.init.zeros_(bias)


class ZoneoutLSTMCell(TF1WeightsMixin, nn.Module):
    """LSTM cell with zoneout, TF1 Tacotron-2's ``ZoneoutLSTMCell``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    TF1 ``LSTMCell``/``LSTMBlockCell`` maths: ``c' = σ(f + 1)·c + σ(i)·tanh(j)``, ``h' = σ(o)·tanh(c')``,
    forget bias 1.0 added at run time (not stored). Zoneout: in eval ``c = (1 - z_c)·c' + z_c·c`` (``h``
    likewise); in training ``c = c + m ⊙ (c' - c)``, ``m ~ Bernoulli(1 - z_c)`` per element per step. The
    cell **returns the raw LSTM output** ``h'``; the returned state carries the zoned-out ``(c, h)``.

    Parameters: ``weight`` ``(4 * num_units, input_size + num_units)`` and ``bias`` ``(4 * num_units,)`` in
    torch gate order i, f, g, o (``torch_layers._lstm_layout`` converts to and from TF1's kernel / bias).

    Args:
        input_size: input features.
        num_units: LSTM units.
        zoneout_factor_cell: zoneout of the cell state, in [0, 1].
        zoneout_factor_output: zoneout of the hidden state, in [0, 1].
        tf1_scope: TF1 name of the cell (default ``"lstm_cell"``); TF1 keys ``kernel``, ``bias``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> cell = ZoneoutLSTMCell(3, 8, 0.1, 0.1).eval()
        >>> out, (c, h) = cell(torch.zeros(2, 3))
        >>> out.shape
        torch.Size([2, 8])
    """

    default_tf1_scope = "lstm_cell"

    def __init__(self, input_size: int, num_units: int, zoneout_factor_cell: float = 0.0,
                 zoneout_factor_output: float = 0.0, tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        if input_size < 1 or num_units < 1:
            raise ValueError(f"ZoneoutLSTMCell: `input_size` and `num_units` must be >= 1; got {input_size}, "
                             f"{num_units}.")
        self.input_size = int(input_size)
        self.num_units = int(num_units)
        self.zoneout_factor_cell = check_zoneout(zoneout_factor_cell, "zoneout_factor_cell", "ZoneoutLSTMCell")
        self.zoneout_factor_output = check_zoneout(zoneout_factor_output, "zoneout_factor_output", "ZoneoutLSTMCell")
        self.forget_bias = DEFAULT_FORGET_BIAS
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(4 * num_units, input_size + num_units, **factory))
        self.bias = nn.Parameter(torch.empty(4 * num_units, **factory))
        if self.weight.device.type != "meta":
            init_tf1_lstm_(self.weight, self.bias)
        self._in_doc = f"(batch, {input_size})"
        self._state_doc = f"(batch, {num_units})"

    @property
    @torch.jit.unused
    def state_size(self) -> tuple[int, int]:
        return (self.num_units, self.num_units)

    @property
    @torch.jit.unused
    def output_size(self) -> int:
        return self.num_units

    @torch.jit.export
    def get_initial_state(self, batch_size: int) -> tuple[Tensor, Tensor]:
        """The zero state ``(c, h)``, each ``(batch_size, num_units)``."""
        z = torch.zeros(batch_size, self.num_units, device=self.weight.device, dtype=self.weight.dtype)
        return z, z

    def forward(self, inputs: Tensor, state: Optional[tuple[Tensor, Tensor]] = None,
                zoneout_masks: Optional[tuple[Tensor, Tensor]] = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """
        Args:
            inputs: ``(batch, input_size)``.
            state: ``(c, h)``, each ``(batch, num_units)``; ``None`` is the zero state.
            zoneout_masks: optional ``(c_keep, h_keep)`` 0/1 keep-masks ``(batch, num_units)``; when given the
                training-mode zoneout uses exactly these (in train or eval mode).

        Returns:
            ``(output, (c, h))``: the raw LSTM output ``(batch, num_units)`` and the zoned-out state.
        """
        block = "ZoneoutLSTMCell"
        check_float_tensor(inputs, "inputs", block, 2, self.input_size, self._in_doc)
        if state is None:
            c_prev, h_prev = self.get_initial_state(inputs.shape[0])
        else:
            c_prev, h_prev = state
            check_float_tensor(c_prev, "state[0] (c)", block, 2, self.num_units, self._state_doc)
            check_float_tensor(h_prev, "state[1] (h)", block, 2, self.num_units, self._state_doc)
        gates = torch.addmm(effective_bias(self.bias, self.forget_bias), torch.cat([inputs, h_prev], 1),
                            self.weight.t())
        c_new, h_new = lstm_from_gates(gates, c_prev)
        keep_c: Optional[Tensor] = None
        keep_h: Optional[Tensor] = None
        if zoneout_masks is not None:
            keep_c, keep_h = zoneout_masks
            shape = [inputs.shape[0], self.num_units]
            check_mask(keep_c, "zoneout_masks", block, shape, self._state_doc)
            check_mask(keep_h, "zoneout_masks", block, shape, self._state_doc)
            keep_c, keep_h = keep_c.to(c_new.dtype), keep_h.to(c_new.dtype)
        elif self.training:
            keep_c = keep_masks(list(c_new.shape), self.zoneout_factor_cell, c_new)
            keep_h = keep_masks(list(c_new.shape), self.zoneout_factor_output, c_new)
        c = zoneout(c_new, c_prev, self.zoneout_factor_cell, keep_c)
        h = zoneout(h_new, h_prev, self.zoneout_factor_output, keep_h)
        return h_new, (c, h)

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.num_units}, zoneout_factor_cell={self.zoneout_factor_cell}, "
                f"zoneout_factor_output={self.zoneout_factor_output}, tf1_scope={self.tf1_scope!r}")

    @torch.jit.unused
    def _tf1_variables(self):
        return {"kernel": TF1Variable(self.weight, torch_weight_to_tf1, tf1_kernel_to_torch),
                "bias": TF1Variable(self.bias, torch_bias_to_tf1, tf1_bias_to_torch)}
