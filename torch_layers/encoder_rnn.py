"""Torch ``EncoderRNN``: Tacotron-2's bidirectional zoneout LSTM encoder with sequence lengths."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from speechblocks.tf1_names import encoder_rnn_tf1_variables

from . import _native
from ._validation import check_float_tensor, check_lengths
from .tf1_exchange import TF1WeightsMixin
from .zoneout_lstm_cell import (
    ZoneoutLSTMCell,
    check_mask,
    check_zoneout,
    effective_bias,
    keep_masks,
)


def reverse_within_lengths_3d(x: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """``(batch, time, features)``: each sequence reversed within its own length (``tf.reverse_sequence``).

    A TorchScript-compatible twin of ``torch_layers._sequence.reverse_within_lengths`` for 3-D tensors.
    """
    if lengths is None:
        return torch.flip(x, [1])
    t = x.shape[1]
    ar = torch.arange(t, device=x.device).unsqueeze(0)
    lens = lengths.to(device=x.device, dtype=torch.long).unsqueeze(1)
    idx = torch.where(ar < lens, lens - 1 - ar, ar)
    return torch.gather(x, 1, idx.unsqueeze(2).expand(x.shape))


def ifgo_to_ifog(a: Tensor, dim: int) -> Tensor:
    """Reorders gate blocks i, f, g, o -> i, f, o, g along ``dim`` (one sigmoid then covers i, f, o)."""
    i, f, g, o = a.chunk(4, dim)
    return torch.cat([i, f, o, g], dim)


def zoneout_lstm_step(gx_t: Tensor, c: Tensor, h: Tensor, w_hh: Tensor, valid: Optional[Tensor],
                      keep_c: Optional[Tensor], keep_h: Optional[Tensor], zoneout_cell: float,
                      zoneout_output: float) -> tuple[Tensor, Tensor, Tensor]:
    """One step of both directions: the encoder LSTM's only step maths (the TorchScript loop and the ``scan`` call it).

    Args:
        gx_t: ``(2, batch, 4u)`` input projections of the step, bias and forget bias included, gate blocks
            **i, f, o, g**.
        c, h: ``(2, batch, u)`` the zoned-out state.
        w_hh: ``(2, u, 4u)`` recurrent weights (transposed), blocks i, f, o, g.
        valid: ``(1, batch, 1)`` bool ``t < length``, or None (every sequence runs).
        keep_c, keep_h: ``(2, batch, u)`` keep-masks (training) or None (inference).

    Returns:
        ``(h_new, c, h)``: the raw output (zeros where not ``valid``) and the next zoned-out state (the previous one
        where not ``valid``: selection, so NaN in the padding stays out). Inference zoneout is
        ``torch.lerp(prev, new, 1 - z)`` -- the same interpolation as TF1's ``(1 - z) * new + z * prev`` up to float
        rounding -- to keep the per-step kernel count low.
    """
    units = w_hh.shape[1]
    gates = torch.baddbmm(gx_t, h, w_hh)
    i, f, o = torch.sigmoid(gates[:, :, :3 * units]).chunk(3, 2)
    c_new = torch.addcmul(f * c, i, torch.tanh(gates[:, :, 3 * units:]))
    h_new = o * torch.tanh(c_new)
    if keep_c is not None:
        c_z = torch.addcmul(c, keep_c, c_new - c)
    elif zoneout_cell != 0.0:
        c_z = torch.lerp(c, c_new, 1.0 - zoneout_cell)
    else:
        c_z = c_new
    if keep_h is not None:
        h_z = torch.addcmul(h, keep_h, h_new - h)
    elif zoneout_output != 0.0:
        h_z = torch.lerp(h, h_new, 1.0 - zoneout_output)
    else:
        h_z = h_new
    if valid is not None:
        h_new = torch.where(valid, h_new, torch.zeros_like(h_new))
        c_z = torch.where(valid, c_z, c)
        h_z = torch.where(valid, h_z, h)
    return h_new, c_z, h_z


@torch.jit.script
def bidirectional_scan(gx: Tensor, w_hh: Tensor, valid: Optional[Tensor], keep_c: Optional[Tensor],
                       keep_h: Optional[Tensor], zoneout_cell: float, zoneout_output: float) -> Tensor:
    """Both directions of a zoneout LSTM over time (TorchScript), few kernels per step: eager and TorchScript.

    Args:
        gx: ``(2, time, batch, 4u)`` input projections, bias and forget bias included, gate blocks
            **i, f, o, g**; direction 1 already in processing order (reversed within lengths).
        w_hh: ``(2, u, 4u)`` recurrent weights (transposed), blocks i, f, o, g.
        valid: ``(time, 1, batch, 1)`` bool ``t < length`` or None (all valid).
        keep_c, keep_h: ``(time, 2, batch, u)`` keep-masks (training) or None (inference).

    Returns:
        ``(time, 2, batch, u)`` raw outputs, zeros past a length.

    The steps where every sequence runs (counted from the lengths' values: a device sync, and what keeps this loop
    from ``torch.export``) skip the masking; :func:`masked_bidirectional_scan` is the exportable twin.
    """
    n_steps = gx.shape[1]
    units = w_hh.shape[1]
    c = torch.zeros(2, gx.shape[2], units, dtype=gx.dtype, device=gx.device)
    h = torch.zeros_like(c)
    if n_steps == 0:
        return gx.new_zeros(0, 2, gx.shape[2], units)
    gxs = gx.unbind(1)
    kcs: list[Tensor] = [] if keep_c is None else keep_c.unbind(0)
    khs: list[Tensor] = [] if keep_h is None else keep_h.unbind(0)
    vs: list[Tensor] = []
    n_full = n_steps
    if valid is not None:
        vs = valid.unbind(0)
        n_full = int(valid.reshape(n_steps, -1).all(1).sum())  # leading steps where every sequence runs
    outs: list[Tensor] = []
    for t in range(n_steps):
        v: Optional[Tensor] = None
        if t >= n_full:
            v = vs[t]
        kc: Optional[Tensor] = None
        if keep_c is not None:
            kc = kcs[t]
        kh: Optional[Tensor] = None
        if keep_h is not None:
            kh = khs[t]
        h_new, c, h = zoneout_lstm_step(gxs[t], c, h, w_hh, v, kc, kh, zoneout_cell, zoneout_output)
        outs.append(h_new)
    return torch.stack(outs, 0)


def masked_bidirectional_scan(gx: Tensor, w_hh: Tensor, valid: Optional[Tensor], keep_c: Optional[Tensor],
                              keep_h: Optional[Tensor], zoneout_cell: float, zoneout_output: float) -> Tensor:
    """:func:`bidirectional_scan` as one ``scan`` over the padded length (``torch._higher_order_ops``): every step
    masked by ``valid``, nothing read from the lengths' values, so ``torch.export`` / ONNX keep batch and time
    dynamic. Same arguments, same result (the same :func:`zoneout_lstm_step`, bit-equal in eager)."""
    from torch._higher_order_ops.scan import scan

    units = w_hh.shape[1]
    xs: list[Tensor] = [gx.transpose(0, 1)]  # (time, 2, batch, 4u)
    has_valid, has_kc, has_kh = valid is not None, keep_c is not None, keep_h is not None
    xs += [t for t in (valid, keep_c, keep_h) if t is not None]
    # with nothing masking h (no lengths, no zoneout) the carried h would be the output itself: scan refuses aliasing
    alias = not has_valid and not has_kh and zoneout_output == 0.0

    def step(carry: list[Tensor], x: list[Tensor]):
        rest = iter(x[1:])
        v = next(rest) if has_valid else None
        kc = next(rest) if has_kc else None
        kh = next(rest) if has_kh else None
        h_new, c, h = zoneout_lstm_step(x[0], carry[0], carry[1], w_hh, v, kc, kh, zoneout_cell, zoneout_output)
        return [c, h], h_new.clone() if alias else h_new

    c0 = gx.new_zeros(2, gx.shape[2], units)
    _, out = scan(step, [c0, torch.zeros_like(c0)], xs)
    return out


class EncoderRNN(TF1WeightsMixin, nn.Module):
    """Bidirectional one-layer zoneout LSTM, TF1 Tacotron-2's ``EncoderRNN``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Exactly ``tf.nn.bidirectional_dynamic_rnn(sequence_length=input_lengths)`` over two zoneout LSTM cells
    (``fw_cell`` = TF1 ``encoder_fw_LSTM``, ``bw_cell`` = ``encoder_bw_LSTM``): the backward direction runs
    each sequence reversed within its own length, outputs past a length are zeros, states stop at the
    length. The input projection of all steps and both directions is one matmul; the recurrent step of both
    directions is one batched matmul.

    Which recurrence runs (the same maths, the same numbers up to float32 rounding):

    - eager inference -- float32 on the CPU, nothing recording a gradient, eval mode (no zoneout masks): the native
      encoder scan (``speechblocks/native/encoder_scan.c`` through :func:`torch_layers._native.encoder_scan`; both
      directions in one C call, only the entries still running computed) when the library builds and
      ``SPEECHBLOCKS_NATIVE`` is not ``0``;
    - otherwise eager, ``torch.jit.script`` and ``torch.compile``: :func:`bidirectional_scan`, a TorchScript loop
      that skips the masking over the leading steps where every sequence runs (it reads the lengths' values: one
      device sync).
      The fastest on CPU eager; ``torch.compile`` breaks the graph there and runs without recompiling per length,
      with ``aot_eager`` faster than the scan and with ``inductor`` as fast and without its lowering limit (see
      :meth:`masked_forward`);
    - under ``torch.export`` (``torch.compiler.is_exporting()``) and :meth:`masked_forward`:
      :func:`masked_bidirectional_scan`, one ``scan`` over the padded length with every step masked, nothing read
      from tensor values, so ``torch.export`` and ONNX (``torch.onnx.export(dynamo=True)``) keep batch and time
      dynamic. An exported program is for inference: the export detaches the LSTM's inputs and weights (no gradient
      through it).

    Export (tested by ``run_torch_module_test``): dynamic batch and time, ONNX Runtime within 1e-5 of eager at other
    sizes than the export's. :meth:`Tacotron2.encoder_module` exports the whole encoder through this path.

    Args:
        input_size: input features.
        size: LSTM units per direction.
        zoneout: zoneout factor of cell and hidden states, in [0, 1].
        tf1_scope: TF1 scope (default ``"encoder_LSTM"``); keys
            ``bidirectional_rnn/{fw,bw}/encoder_{fw,bw}_LSTM/{kernel,bias}``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> enc = EncoderRNN(3, size=8).eval()
        >>> enc(torch.zeros(2, 5, 3), torch.tensor([5, 2])).shape
        torch.Size([2, 5, 16])
    """

    default_tf1_scope = "encoder_LSTM"

    def __init__(self, input_size: int, size: int = 256, zoneout: float = 0.1, tf1_scope: Optional[str] = None,
                 device=None, dtype=None):
        super().__init__()
        if input_size < 1 or size < 1:
            raise ValueError(f"EncoderRNN: `input_size` and `size` must be >= 1; got {input_size}, {size}.")
        self.input_size = int(input_size)
        self.size = int(size)
        self.zoneout = check_zoneout(zoneout, "zoneout", "EncoderRNN")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.fw_cell = ZoneoutLSTMCell(input_size, size, self.zoneout, self.zoneout, "encoder_fw_LSTM", device=device,
                                       dtype=dtype)
        self.bw_cell = ZoneoutLSTMCell(input_size, size, self.zoneout, self.zoneout, "encoder_bw_LSTM", device=device,
                                       dtype=dtype)
        self._in_doc = f"(batch, time, {input_size})"
        self._mask_doc = f"((fw_c, fw_h), (bw_c, bw_h)), each (batch, time, {size})"

    def forward(self, inputs: Tensor, input_lengths: Optional[Tensor] = None,
                zoneout_masks: Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]] = None) -> Tensor:
        """
        Args:
            inputs: ``(batch, time, input_size)``.
            input_lengths: ``(batch,)`` integer lengths; ``None`` means all full length.
            zoneout_masks: optional ``((fw_c, fw_h), (bw_c, bw_h))`` 0/1 keep-masks ``(batch, time, size)``;
                entry ``t`` applies to the step consuming ``inputs[:, t]`` (both directions). When given, the
                training-mode zoneout uses exactly these masks.

        Returns:
            ``(batch, time, 2 * size)``: forward outputs then backward outputs, zeros past each length.
        """
        return self._encode(inputs, input_lengths, zoneout_masks, False)

    @torch.jit.unused
    def masked_forward(self, inputs: Tensor, input_lengths: Optional[Tensor] = None,
                       zoneout_masks: Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]] = None) -> Tensor:
        """:meth:`forward` through the export path whatever the mode: the masked ``scan``
        (:func:`masked_bidirectional_scan`), one graph for every batch and length under ``torch.compile``
        (differentiable; ``inductor`` needs ``torch._dynamo.config.capture_scalar_outputs = True`` to lower it in torch
        2.13), the same numbers as :meth:`forward`. :class:`~torch_layers.tacotron2.Tacotron2Encoder` compiles through
        it."""
        return self._encode(inputs, input_lengths, zoneout_masks, True)

    def _encode(self, inputs: Tensor, input_lengths: Optional[Tensor],
                zoneout_masks: Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]], masked: bool) -> Tensor:
        block = "EncoderRNN"
        check_float_tensor(inputs, "inputs", block, 3, self.input_size, self._in_doc)
        batch, n_steps = inputs.shape[0], inputs.shape[1]
        if input_lengths is not None:
            check_lengths(input_lengths, "input_lengths", block, batch)
        if zoneout_masks is None and not self.training and not masked and not torch.jit.is_scripting():
            out = self._native_inference(inputs, input_lengths)
            if out is not None:
                return out
        n_in, u = self.input_size, self.size
        w_in, bias, w_rec = self._direction_weights()
        # both directions, time-major: (2, time * batch, in); the backward one reversed within lengths
        xs = torch.stack([inputs, reverse_within_lengths_3d(inputs, input_lengths)], 0).transpose(1, 2)
        gx = torch.baddbmm(bias.unsqueeze(1), xs.reshape(2, n_steps * batch, n_in), w_in.transpose(1, 2))
        gx = gx.view(2, n_steps, batch, 4 * u)
        gx = gx.to(inputs.dtype)  # under CPU autocast the state stays in the inputs' dtype (lerp needs one dtype)
        # (2, u, 4u) as a transposed view of contiguous (2, 4u, u): the "NT" GEMM is the faster one on CPU
        w_hh = w_rec.transpose(1, 2)
        valid: Optional[Tensor] = None
        if input_lengths is not None:
            ar = torch.arange(n_steps, device=inputs.device).unsqueeze(1)
            valid = (ar < input_lengths.to(inputs.device).unsqueeze(0)).view(n_steps, 1, batch, 1)
        keep_c: Optional[Tensor] = None
        keep_h: Optional[Tensor] = None
        if zoneout_masks is not None:
            (fc, fh), (bc, bh) = zoneout_masks
            shape = [batch, n_steps, u]
            for m in (fc, fh, bc, bh):
                check_mask(m, "zoneout_masks", block, shape, self._mask_doc)
            keep_c = (torch.stack([fc, reverse_within_lengths_3d(bc, input_lengths)], 0)
                      .permute(2, 0, 1, 3).to(inputs.dtype))
            keep_h = (torch.stack([fh, reverse_within_lengths_3d(bh, input_lengths)], 0)
                      .permute(2, 0, 1, 3).to(inputs.dtype))
        elif self.training:
            keep_c = keep_masks([n_steps, 2, batch, u], self.zoneout, inputs)
            keep_h = keep_masks([n_steps, 2, batch, u], self.zoneout, inputs)
        if torch.jit.is_scripting():
            out = bidirectional_scan(gx, w_hh, valid, keep_c, keep_h, self.zoneout, self.zoneout)
        else:
            out = self._recurrence(gx, w_hh, valid, keep_c, keep_h, masked)  # (time, 2, batch, u)
        out = out.permute(1, 2, 0, 3)
        return torch.cat([out[0], reverse_within_lengths_3d(out[1], input_lengths)], 2)

    @torch.jit.unused
    def _native_inference(self, inputs: Tensor, input_lengths: Optional[Tensor]) -> Optional[Tensor]:
        """Inference through the native scan (:mod:`torch_layers._native`), or ``None`` when it does not apply: one
        GEMM for both directions' input projections in the layer's (batch, time) layout, then the C scan, which
        reads and writes the backward direction reversed within the lengths by index (no reversed copies)."""
        fw, bw = self.fw_cell, self.bw_cell
        if not _native.encoder_scan_applies(inputs, fw.weight, bw.weight, fw.bias, bw.bias):
            return None
        n_in, u = self.input_size, self.size
        batch, n_steps = inputs.shape[0], inputs.shape[1]
        w_in, bias, w_rec = self._direction_weights()
        gx = torch.addmm(bias.reshape(8 * u), inputs.reshape(batch * n_steps, n_in), w_in.reshape(8 * u, n_in).t())
        return _native.encoder_scan(gx.view(batch, n_steps, 2, 4 * u), w_rec.transpose(1, 2), input_lengths,
                                    self.zoneout)

    def _direction_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """Both directions' weights with the gate blocks reordered i, f, o, g (one sigmoid then covers i, f, o):
        input rows ``(2, 4u, in)``, effective biases ``(2, 4u)`` (the forward cell's forget bias folded in, as in
        TF1's encoder) and recurrent rows ``(2, 4u, u)``, each contiguous (the loops multiply transposed views)."""
        n_in = self.input_size
        fb = self.fw_cell.forget_bias
        w = ifgo_to_ifog(torch.stack([self.fw_cell.weight, self.bw_cell.weight], 0), 1)
        bias = ifgo_to_ifog(torch.stack([effective_bias(self.fw_cell.bias, fb), effective_bias(self.bw_cell.bias, fb)],
                                        0), 1)
        return w[:, :, :n_in].contiguous(), bias, w[:, :, n_in:].contiguous()

    @torch.jit.unused
    def _recurrence(self, gx: Tensor, w_hh: Tensor, valid: Optional[Tensor], keep_c: Optional[Tensor],
                    keep_h: Optional[Tensor], masked: bool) -> Tensor:
        """Exporting (or ``masked``): the masked ``scan``; otherwise the TorchScript loop (see the class docstring)."""
        z = self.zoneout
        exporting = torch.compiler.is_exporting()
        if not (masked or exporting):
            return bidirectional_scan(gx, w_hh, valid, keep_c, keep_h, z, z)
        if exporting:
            # an exported program is for inference: a scan whose inputs require grad fails torch 2.13's ONNX exporter
            # (its decompositions run the scan through autograd) when torch.onnx.export runs with grad on
            gx, w_hh = gx.detach(), w_hh.detach()
        return masked_bidirectional_scan(gx, w_hh, valid, keep_c, keep_h, z, z)

    @torch.jit.unused
    def _tf1_variables(self):
        return encoder_rnn_tf1_variables(self.fw_cell, self.bw_cell)
