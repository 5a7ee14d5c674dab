"""Torch ``TF1GRUCell`` (TF1 ``GRUCell`` maths: reset *before* the candidate matmul) and a fast
bidirectional loop over it.

``nn.GRU`` applies the reset gate after its recurrent matmul and computes another function, so the
cell is written out. The sequence loop precomputes the input halves of both matmuls for every step
and both directions at once, and loops only over the recurrent halves.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from . import _mkl_threads
from ._gru_layout import split_input_recurrent
from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1

__all__ = ["TF1GRUCell", "bidirectional_tf1_gru", "gru_step"]


def gru_step(x: torch.Tensor, h: torch.Tensor, gates_t: torch.Tensor, gates_b: torch.Tensor, cand_t: torch.Tensor,
             cand_b: torch.Tensor) -> torch.Tensor:
    """The TF1 ``GRUCell`` step, on kernels laid out ``(in, out)`` (``weight.t()``), without checks: the one place
    of its maths (:meth:`TF1GRUCell.forward` and the Tacotron-1 decoder loop, TorchScript, call it).

    Args:
        x: ``(batch, input_size)``.
        h: ``(batch, units)``.
        gates_t, gates_b: ``(input_size + units, 2 * units)``, ``(2 * units,)``.
        cand_t, cand_b: ``(input_size + units, units)``, ``(units,)``.

    Returns:
        the new state ``(batch, units)``.
    """
    r, u = torch.sigmoid(torch.addmm(gates_b, torch.cat([x, h], 1), gates_t)).chunk(2, 1)
    c = torch.tanh(torch.addmm(cand_b, torch.cat([x, r * h], 1), cand_t))
    return u * h + (1.0 - u) * c


class TF1GRUCell(TF1WeightsMixin, nn.Module):
    """One step of TF1's ``GRUCell``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    ``[r, u] = σ(concat([x, h]) Wgᵀ + bg)``, ``c = tanh(concat([x, r·h]) Wcᵀ + bc)``, ``h' = u·h + (1 − u)·c``.
    Initialised as TF1: Glorot-uniform kernels, gate bias 1.0, candidate bias 0.

    Args:
        input_size: size of ``x``.
        num_units: state size ``u``.
        tf1_scope: TF1 scope of the cell; TF1 names ``gates/kernel``, ``gates/bias``, ``candidate/kernel``,
            ``candidate/bias``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> cell = TF1GRUCell(8, 16)
        >>> cell(torch.zeros(2, 8), torch.zeros(2, 16)).shape
        torch.Size([2, 16])
    """

    default_tf1_scope = "gru_cell"

    def __init__(self, input_size: int, num_units: int, tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        if input_size < 1 or num_units < 1:
            raise ValueError(f"TF1GRUCell: `input_size` and `num_units` must be >= 1; got {input_size}, {num_units}.")
        self.input_size = input_size
        self.num_units = num_units
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.gates = nn.Linear(input_size + num_units, 2 * num_units, device=device, dtype=dtype)
        self.candidate = nn.Linear(input_size + num_units, num_units, device=device, dtype=dtype)
        self._in_doc = f"(batch, {input_size})"
        self._state_doc = f"(batch, {num_units})"
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """TF1 initialisation: Glorot-uniform kernels, ``gates/bias`` 1.0, ``candidate/bias`` 0."""
        nn.init.xavier_uniform_(self.gates.weight)
        nn.init.constant_(self.gates.bias, 1.0)
        nn.init.xavier_uniform_(self.candidate.weight)
        nn.init.zeros_(self.candidate.bias)

    def forward(self, inputs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, input_size)``.
            state: ``(batch, num_units)``.

        Returns:
            the new state (= output) ``(batch, num_units)``.
        """
        check_float_tensor(inputs, "inputs", "TF1GRUCell", 2, self.input_size, self._in_doc)
        check_float_tensor(state, "state", "TF1GRUCell", 2, self.num_units, self._state_doc)
        return gru_step(inputs, state, self.gates.weight.t(), self.gates.bias, self.candidate.weight.t(),
                        self.candidate.bias)

    def _tf1_variables(self):
        return {
            "gates/kernel": TF1Variable(self.gates.weight, dense_to_tf1, dense_from_tf1),
            "gates/bias": TF1Variable(self.gates.bias),
            "candidate/kernel": TF1Variable(self.candidate.weight, dense_to_tf1, dense_from_tf1),
            "candidate/bias": TF1Variable(self.candidate.bias),
        }


def _reverse_within_lengths(x: torch.Tensor, lengths: Optional[torch.Tensor]) -> torch.Tensor:
    """``tf.reverse_sequence`` on ``(batch, time, channels)`` (TorchScript-friendly 3-D form of
    :func:`torch_layers._sequence.reverse_within_lengths`); ``None`` reverses the whole time axis."""
    if lengths is None:
        return torch.flip(x, dims=[1])
    steps = x.shape[1]
    ar = torch.arange(steps, device=x.device).unsqueeze(0)
    lens = lengths.to(device=x.device, dtype=torch.long).unsqueeze(1)
    idx = torch.where(ar < lens, lens - 1 - ar, ar)  # (batch, time)
    return torch.gather(x, 1, idx.unsqueeze(2).expand(x.shape[0], steps, x.shape[2]))


@torch.jit.script  # the loop over time runs in TorchScript (eager too): 1000 frames 116 -> 67 ms at batch 1 (both
# directions in one loop then; now one direction a call, the two side by side: _bidirectional_recurrence)
def _recurrence(xg: torch.Tensor, xc: torch.Tensor, gh: torch.Tensor, ch: torch.Tensor) -> torch.Tensor:
    """The recurrent halves of one direction: ``xg (T, B, 2u)``, ``xc (T, B, u)`` (input parts incl. biases),
    ``gh (u, 2u)``, ``ch (u, u)`` -> states ``(T, B, u)`` from the zero state."""
    steps, b, u = xc.shape[0], xc.shape[1], xc.shape[2]
    h = torch.zeros(b, u, dtype=xc.dtype, device=xc.device)
    outs = torch.empty(steps, b, u, dtype=xc.dtype, device=xc.device)
    for t in range(steps):
        gates = torch.sigmoid(torch.addmm(xg[t], h, gh))
        r, z = gates.chunk(2, dim=1)
        c = torch.tanh(torch.addmm(xc[t], r * h, ch))
        h = z * h + (1.0 - z) * c
        outs[t] = h
    return outs


@torch.jit.script
def _bidirectional_recurrence(xg: torch.Tensor, xc: torch.Tensor, gh: torch.Tensor, ch: torch.Tensor
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Both directions, ``xg (T, 2, B, 2u)``, ``xc (T, 2, B, u)``, ``gh (2, u, 2u)``, ``ch (2, u, u)`` -> the
    forward and backward states, each ``(T, B, u)``. The backward direction runs as a TorchScript fork on the
    inter-op pool while this thread runs the forward one: the two loops are independent, as the two while loops of
    TF1's ``bidirectional_dynamic_rnn``, which its executor runs side by side likewise."""
    bw = torch.jit.fork(_recurrence, xg[:, 1], xc[:, 1], gh[1], ch[1])
    fw = _recurrence(xg[:, 0], xc[:, 0], gh[0], ch[0])
    return fw, torch.jit.wait(bw)


@torch.jit.unused  # (TorchScript forks always: its interpreter runs the fork)
def _side_by_side():
    """Whether the two directions run side by side: more than one inter-op thread, and not under torch.export /
    ONNX / torch.compile / tracing (their graphs have no fork: there they run one after the other)."""
    return torch.get_num_interop_threads() > 1 and not (torch.compiler.is_compiling() or torch.jit.is_tracing())


@torch.jit.unused
def _eager_recurrences(xg: torch.Tensor, xc: torch.Tensor, gh: torch.Tensor, ch: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """The two directions' loops (arguments as :func:`_bidirectional_recurrence`), MKL single-threaded on the
    calling thread (:mod:`torch_layers._mkl_threads`: each step's small tanh and GEMV would otherwise open an OpenMP
    region once ``torch.set_num_threads`` was called; thread-local, restored, outputs bit-identical). Side by side
    (:func:`_side_by_side`) the backward direction is a TorchScript fork on the inter-op pool; otherwise (one
    inter-op thread; export / ONNX / torch.compile: no fork in their graphs) one after the other."""
    with _mkl_threads.single_threaded_mkl():
        if _side_by_side():
            return _bidirectional_recurrence(xg, xc, gh, ch)
        return _recurrence(xg[:, 0], xc[:, 0], gh[0], ch[0]), _recurrence(xg[:, 1], xc[:, 1], gh[1], ch[1])


def bidirectional_tf1_gru(inputs: torch.Tensor, fw_cell: TF1GRUCell, bw_cell: TF1GRUCell,
                          lengths: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``bidirectional_dynamic_rnn(fw_cell, bw_cell, inputs, sequence_length=lengths)`` from the zero state.

    Args:
        inputs: ``(batch, time, input_size)``.
        fw_cell: forward :class:`TF1GRUCell`.
        bw_cell: backward :class:`TF1GRUCell` (same sizes).
        lengths: ``(batch,)`` integer lengths or ``None`` (full length). The backward direction sees each
            sequence reversed within its own length; outputs past a length are zeros.

    Returns:
        ``(fw_outputs, bw_outputs)``, each ``(batch, time, num_units)``.
    """
    return _bigru(inputs, fw_cell.gates.weight, fw_cell.gates.bias, fw_cell.candidate.weight, fw_cell.candidate.bias,
                  bw_cell.gates.weight, bw_cell.gates.bias, bw_cell.candidate.weight, bw_cell.candidate.bias, lengths)


def _bigru(inputs: torch.Tensor, fgw: torch.Tensor, fgb: torch.Tensor, fcw: torch.Tensor, fcb: torch.Tensor,
           bgw: torch.Tensor, bgb: torch.Tensor, bcw: torch.Tensor, bcb: torch.Tensor,
           lengths: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    b, steps, n_in = inputs.shape[0], inputs.shape[1], inputs.shape[2]
    u = fcb.shape[0]
    fgx, fgh = split_input_recurrent(fgw, n_in)
    fcx, fch = split_input_recurrent(fcw, n_in)
    bgx, bgh = split_input_recurrent(bgw, n_in)
    bcx, bch = split_input_recurrent(bcw, n_in)
    x2 = torch.stack([inputs, _reverse_within_lengths(inputs, lengths)]).reshape(2, b * steps, n_in)
    # input halves of both matmuls, every step, both directions: (2, B*T, 3u)
    wx = torch.stack([torch.cat([fgx, fcx], 0), torch.cat([bgx, bcx], 0)]).transpose(1, 2)
    bias = torch.stack([torch.cat([fgb, fcb]), torch.cat([bgb, bcb])]).unsqueeze(1)
    proj = torch.baddbmm(bias, x2, wx).reshape(2, b, steps, 3 * u).permute(2, 0, 1, 3)  # (T, 2, B, 3u)
    xg = proj[..., : 2 * u]
    xc = proj[..., 2 * u:]
    gh = torch.stack([fgh, bgh]).transpose(1, 2)  # (2, u, 2u)
    ch = torch.stack([fch, bch]).transpose(1, 2)  # (2, u, u)
    if torch.jit.is_scripting():
        fw, bw = _bidirectional_recurrence(xg, xc, gh, ch)  # the two directions side by side
    else:
        fw, bw = _eager_recurrences(xg, xc, gh, ch)
    fw = fw.transpose(0, 1)  # (B, T, u)
    bw = _reverse_within_lengths(bw.transpose(0, 1), lengths)
    if lengths is not None:
        valid = (torch.arange(steps, device=inputs.device).unsqueeze(0)
                 < lengths.to(inputs.device).unsqueeze(1)).unsqueeze(2)
        zeros = torch.zeros_like(fw)
        fw = torch.where(valid, fw, zeros)
        bw = torch.where(valid, bw, zeros)
    return fw, bw
