"""Torch ``DecoderRNN``: Tacotron-2's stack of unidirectional zoneout LSTMs (``MultiRNNCell``)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from speechblocks.tf1_names import decoder_rnn_tf1_variables

from ._packed_linear import gate_linear
from ._validation import check_float_tensor
from .tf1_exchange import TF1WeightsMixin
from .zoneout_lstm_cell import (
    ZoneoutLSTMCell,
    check_mask,
    check_zoneout,
    effective_bias,
    keep_masks,
    lstm_from_gates,
    zoneout,
)


def lstm_stack_step(x: Tensor, cs: list[Tensor], hs: list[Tensor], weights: list[Tensor], biases: list[Tensor],
                    zoneout_factor: float, keep_c: Optional[Tensor] = None, keep_h: Optional[Tensor] = None,
                    packed: Optional[list[Tensor]] = None, packed_t: Optional[list[Tensor]] = None,
                    taps: Optional[list[Tensor]] = None
                    ) -> tuple[Tensor, list[Tensor], list[Tensor], list[Tensor]]:
    """One step of a ``MultiRNNCell`` of zoneout LSTMs, the form every caller runs (:class:`DecoderRNN`'s one-step
    call, the Tacotron-2 decoder loop and its exported step): layer ``k`` computes its four gates with one
    product over ``[input, h_k]``, feeds the next layer its raw output and keeps the zoned-out ``(c, h)``.

    Args:
        x: ``(batch, input_size)`` the first layer's input.
        cs, hs: per layer ``(batch, u)`` states.
        weights, biases: per layer ``(4u, in + u)`` (torch gate order i, f, g, o) and ``(4u,)`` with the
            forget bias included (:func:`~torch_layers.zoneout_lstm_cell.effective_bias`).
        zoneout_factor: zoneout of cell and hidden states (the inference mix when no keep-mask is given).
        keep_c, keep_h: ``(layers, batch, u)`` 0/1 training keep-masks, or ``None``.
        packed, packed_t: per layer the weights packed for oneDNN (and their transposes, for a gradient), or
            ``None`` (:mod:`torch_layers._packed_linear`).
        taps: per layer ``(batch, 4u)`` added to the gates (:class:`~torch_layers._packed_linear.WeightGradTap`:
            the weights' gradients of a whole loop at once), or ``None``.

    Returns:
        ``(output, new_cs, new_hs, layer_inputs)``: ``(batch, u)`` the last layer's raw output, the new states and
        each layer's ``[input, h]`` ``(batch, in + u)``.
    """
    new_cs: list[Tensor] = []
    new_hs: list[Tensor] = []
    layer_inputs: list[Tensor] = []
    for k in range(len(weights)):
        xin = torch.cat([x, hs[k]], 1)
        layer_inputs.append(xin)
        p: Optional[Tensor] = None
        pt: Optional[Tensor] = None
        if packed is not None:
            p = packed[k]
        if packed_t is not None:
            pt = packed_t[k]
        gates = gate_linear(xin, weights[k], biases[k], p, pt)
        if taps is not None:
            gates = gates + taps[k]
        c_new, h_new = lstm_from_gates(gates, cs[k])
        mc: Optional[Tensor] = None
        mh: Optional[Tensor] = None
        if keep_c is not None:
            mc = keep_c[k]
        if keep_h is not None:
            mh = keep_h[k]
        new_cs.append(zoneout(c_new, cs[k], zoneout_factor, mc))
        new_hs.append(zoneout(h_new, hs[k], zoneout_factor, mh))
        x = h_new
    return x, new_cs, new_hs, layer_inputs


@torch.jit.script
def stacked_scan(gx0: Tensor, w_hh0: Tensor, weights: list[Tensor], biases: list[Tensor], cs: list[Tensor],
                 hs: list[Tensor], keep_c: Optional[Tensor], keep_h: Optional[Tensor], z: float
                 ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """A ``MultiRNNCell`` of zoneout LSTMs over time (TorchScript).

    Args:
        gx0: ``(time, batch, 4u)`` layer-1 input projection, bias and forget bias included.
        w_hh0: ``(u, 4u)`` layer-1 recurrent weight (transposed).
        weights, biases: layers 2..L, weights ``(2u, 4u)`` over ``concat([x, h])`` (transposed) and
            effective biases.
        cs, hs: initial states per layer ``(batch, u)``.
        keep_c, keep_h: ``(time, L, batch, u)`` keep-masks (training) or None.

    Returns:
        ``(outputs (time, batch, u), final cs, final hs)``.
    """
    outs: list[Tensor] = []
    cs = list(cs)
    hs = list(hs)
    for t in range(gx0.shape[0]):
        kc: Optional[Tensor] = None
        kh: Optional[Tensor] = None
        if keep_c is not None:
            kc = keep_c[t]
        if keep_h is not None:
            kh = keep_h[t]
        x = gx0[t]
        for k in range(len(cs)):
            if k == 0:
                gates = torch.addmm(x, hs[0], w_hh0)
            else:
                gates = torch.addmm(biases[k - 1], torch.cat([x, hs[k]], 1), weights[k - 1])
            c_new, h_new = lstm_from_gates(gates, cs[k])
            mc: Optional[Tensor] = None
            mh: Optional[Tensor] = None
            if kc is not None:
                mc = kc[k]
            if kh is not None:
                mh = kh[k]
            cs[k] = zoneout(c_new, cs[k], z, mc)
            hs[k] = zoneout(h_new, hs[k], z, mh)
            x = h_new
        outs.append(x)
    if len(outs) == 0:
        return gx0.new_zeros(0, gx0.shape[1], w_hh0.shape[0]), cs, hs
    return torch.stack(outs, 0), cs, hs


class DecoderRNN(TF1WeightsMixin, nn.Module):
    """Stack of ``layers`` unidirectional zoneout LSTMs, TF1 Tacotron-2's ``DecoderRNN``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    A ``MultiRNNCell`` of :class:`ZoneoutLSTMCell` (TF1 ``decoder_LSTM_1 .. decoder_LSTM_L``): each layer feeds
    the next its raw LSTM output; states carry the zoned-out ``(c, h)``. Two forms:

    * one step (the seed's API): ``inputs`` ``(batch, input_size)``, ``states`` -> ``(output, new_states)``;
    * teacher-forced sequence: ``inputs`` ``(batch, time, input_size)`` -> ``(outputs, final_states)``, equal to
      stepping; the layer-1 input projection is one matmul before a TorchScript loop.

    Export (tested by ``run_torch_module_test``): the one-step form exports (``torch.export``, ONNX) with a
    dynamic batch; the sequence form's loop over time is unrolled: exported with time fixed (batch dynamic), and
    ``torch.compile`` compiles again for every new length.

    Args:
        input_size: input features.
        layers: number of LSTM layers.
        size: units per layer.
        zoneout: zoneout factor of cell and hidden states, in [0, 1].
        tf1_scope: TF1 scope (default ``"decoder_rnn"``); keys
            ``multi_rnn_cell/cell_{k}/decoder_LSTM_{k+1}/{kernel,bias}``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> dec = DecoderRNN(5, layers=2, size=8).eval()
        >>> out, states = dec(torch.zeros(3, 5), dec.get_initial_state(3))
        >>> out.shape, len(states)
        (torch.Size([3, 8]), 2)
    """

    default_tf1_scope = "decoder_rnn"

    def __init__(self, input_size: int, layers: int = 2, size: int = 1024, zoneout: float = 0.1,
                 tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        if input_size < 1 or layers < 1 or size < 1:
            raise ValueError(f"DecoderRNN: `input_size`, `layers` and `size` must be >= 1; got {input_size}, {layers}, "
                             f"{size}.")
        self.input_size = int(input_size)
        self.layers = int(layers)
        self.size = int(size)
        self.zoneout = check_zoneout(zoneout, "zoneout", "DecoderRNN")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.cells = nn.ModuleList([
            ZoneoutLSTMCell(input_size if k == 0 else size, size, self.zoneout, self.zoneout, f"decoder_LSTM_{k + 1}",
                            device=device, dtype=dtype) for k in range(layers)])
        self._step_doc = f"(batch, {size})"

    @torch.jit.export
    def get_initial_state(self, batch_size: int) -> list[tuple[Tensor, Tensor]]:
        """The zero state: a list of ``layers`` pairs ``(c, h)``, each ``(batch_size, size)``."""
        w = self.cells[0].weight
        out: list[tuple[Tensor, Tensor]] = []
        for _ in range(self.layers):
            z = torch.zeros(batch_size, self.size, device=w.device, dtype=w.dtype)
            out.append((z, z))
        return out

    def _checked_states(self, states: list[tuple[Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        """:meth:`forward`'s ``states`` checked, as the lists of cells and hiddens."""
        if len(states) != self.layers:
            raise ValueError("DecoderRNN: argument `states` must be a list of " + str(self.layers)
                             + " pairs (c, h), each (batch, " + str(self.size) + "); got " + str(len(states))
                             + " pairs.")
        cs: list[Tensor] = []
        hs: list[Tensor] = []
        for c, h in states:
            check_float_tensor(c, "states", "DecoderRNN", 2, self.size, self._step_doc)
            check_float_tensor(h, "states", "DecoderRNN", 2, self.size, self._step_doc)
            cs.append(c)
            hs.append(h)
        return cs, hs

    def _keep_masks(self, zoneout_masks: Optional[list[tuple[Tensor, Tensor]]], inputs: Tensor
                    ) -> tuple[Optional[Tensor], Optional[Tensor]]:
        """The zoneout keep-masks of cells and hiddens, ``(layers, batch, [time,] size)``: the given ones checked,
        else in ``train()`` fresh draws, else ``None`` (the inference mix)."""
        block = "DecoderRNN"
        rank = inputs.dim()
        u = self.size
        mask_shape = [inputs.shape[0], u] if rank == 2 else [inputs.shape[0], inputs.shape[1], u]
        mask_doc = "a list of " + str(self.layers) + " pairs (c_keep, h_keep), each " + (
            self._step_doc if rank == 2 else "(batch, time, " + str(u) + ")")
        keep_c: Optional[Tensor] = None
        keep_h: Optional[Tensor] = None
        if zoneout_masks is not None:
            if len(zoneout_masks) != self.layers:
                raise ValueError(block + ": argument `zoneout_masks` must be " + mask_doc + "; got "
                                 + str(len(zoneout_masks)) + " pairs.")
            mcs: list[Tensor] = []
            mhs: list[Tensor] = []
            for mc, mh in zoneout_masks:
                check_mask(mc, "zoneout_masks", block, mask_shape, mask_doc)
                check_mask(mh, "zoneout_masks", block, mask_shape, mask_doc)
                mcs.append(mc.to(inputs.dtype))
                mhs.append(mh.to(inputs.dtype))
            keep_c = torch.stack(mcs, 0)  # (L, batch, [time,] u)
            keep_h = torch.stack(mhs, 0)
        elif self.training:
            keep_c = keep_masks([self.layers] + mask_shape, self.zoneout, inputs)
            keep_h = keep_masks([self.layers] + mask_shape, self.zoneout, inputs)
        return keep_c, keep_h

    def forward(self, inputs: Tensor, states: Optional[list[tuple[Tensor, Tensor]]] = None,
                zoneout_masks: Optional[list[tuple[Tensor, Tensor]]] = None
                ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """
        Args:
            inputs: ``(batch, input_size)`` (one step) or ``(batch, time, input_size)`` (sequence).
            states: list of per-layer ``(c, h)``, each ``(batch, size)``; ``None`` is the zero state.
            zoneout_masks: optional per-layer ``(c_keep, h_keep)`` 0/1 keep-masks, ``(batch, size)`` (one step) or
                ``(batch, time, size)`` (sequence); when given the training-mode zoneout uses exactly these.

        Returns:
            ``(output, new_states)``: ``(batch, size)`` or ``(batch, time, size)`` raw output of the last layer, and
            the list of per-layer zoned-out ``(c, h)``.
        """
        block = "DecoderRNN"
        rank = inputs.dim()
        if rank != 2 and rank != 3:
            raise ValueError(block + ": argument `inputs` must have shape (batch, " + str(self.input_size)
                             + ") (one step) or (batch, time, " + str(self.input_size) + ") (sequence); got shape "
                             + str(list(inputs.shape)) + ".")
        doc = "(batch, " + str(self.input_size) + ")" if rank == 2 else "(batch, time, " + str(self.input_size) + ")"
        check_float_tensor(inputs, "inputs", block, rank, self.input_size, doc)
        batch = inputs.shape[0]
        u = self.size
        if states is None:
            states = self.get_initial_state(batch)
        cs, hs = self._checked_states(states)
        weights: list[Tensor] = []
        lstm_weights: list[Tensor] = []
        biases: list[Tensor] = []
        for cell in self.cells:
            weights.append(cell.weight.t())
            lstm_weights.append(cell.weight)
            biases.append(effective_bias(cell.bias, cell.forget_bias))
        keep_c, keep_h = self._keep_masks(zoneout_masks, inputs)
        if rank == 2:
            x, new_cs, new_hs, _ = lstm_stack_step(inputs, cs, hs, lstm_weights, biases, self.zoneout, keep_c, keep_h)
            new_states: list[tuple[Tensor, Tensor]] = []
            for k in range(self.layers):
                new_states.append((new_cs[k], new_hs[k]))
            return x, new_states

        n_steps = inputs.shape[1]
        n_in = self.input_size
        w0 = weights[0]
        gx0 = torch.addmm(biases[0], inputs.transpose(0, 1).reshape(n_steps * batch, n_in), w0[:n_in])
        if keep_c is not None:
            keep_c = keep_c.permute(2, 0, 1, 3)  # (time, L, batch, u)
        if keep_h is not None:
            keep_h = keep_h.permute(2, 0, 1, 3)
        out, cs, hs = stacked_scan(gx0.view(n_steps, batch, 4 * u), w0[n_in:], weights[1:], biases[1:], cs, hs,
                                   keep_c, keep_h, self.zoneout)
        final: list[tuple[Tensor, Tensor]] = []
        for k in range(self.layers):
            final.append((cs[k], hs[k]))
        return out.transpose(0, 1), final

    @torch.jit.unused
    def _tf1_variables(self):
        return decoder_rnn_tf1_variables(self.cells)
