"""The decoder's large matrix products at memory speed: oneDNN-packed weights, and weight gradients deferred.

At batch 1 a Tacotron-2 decoder step is two matrix-vector products over the LSTM kernels (RTVC: 29 and 33 MB in
float32), so its time is how fast the kernels stream from memory. On the CPUs measured (``bench/bench_tacotron2.py``
prints the figures) MKL's ``addmm`` reads a ``(4u, in)`` weight at about half the copy bandwidth for one row of
input, and worse for 2-16 rows, while oneDNN's matmul over a weight reordered once into its blocked layout
(``torch.ops.mkldnn._reorder_linear_weight``) reads it near the copy bandwidth at every batch size. Same maths:
the sums are only associated differently (float rounding, ~1e-7 relative).

The reorder takes a batch-size hint, and oneDNN has two layouts for it: a matrix-vector one for hint 1 and a
matrix-matrix one for every hint >= 2 (hints 2 .. 64 give bitwise the same products). A product of 2 or more rows
from the hint-1 layout gives the same numbers as from the other, bitwise, but 1.3-1.8x slower (measured on a
``(4096, 2048)`` kernel at 2 .. 16 rows, 1 and 2 threads). One row is faster still from neither: the weight's
transpose cut into blocks of rows, one block a thread, multiplied as one batched product whose partial sums are then
added (:func:`split_rows`; both RTVC kernels in 2.1-2.3 ms against 2.3-2.9 ms from the hint-1 layout and 3.0 ms from
``x @ W.T``, 2 threads, interleaved; at 1 thread 3.4 against 3.9 ms). :func:`pack` takes the rows the product will
see and picks the layout.

* :func:`pack` / :func:`packed_linear`: ``x @ W.T + b`` from a packed ``W``.
* :class:`PackedLinear`: the same with a gradient for ``x`` only (``dx = dy @ W``, itself from a packed ``W.T``).
* :class:`WeightGradTap`: the weight's gradient for all steps of a recurrent loop at once. A loop that computes
  every step's ``x_t @ W.T + b`` with ``W`` and ``b`` detached adds ``taps[t]`` (zeros from this function) to the
  result; the taps' gradients are then the ``dy_t`` of every step, and the backward of the tap gives
  ``dW = sum_t dy_t.T @ x_t`` as ONE matrix product over the stacked steps (``x_t`` handed in after the loop), instead
  of an outer product and an accumulation into a ``W``-sized buffer at every step (the autograd default, which reads
  and writes the whole kernel four times per step).

Packing needs a torch built with oneDNN, CPU and float32; :func:`can_pack` says whether it applies. The packed
form is not a parameter: an eager module caches it keyed on the weights' version counters (inference) or builds it
per call (training, a scripted module), so it follows every change of the weights.
"""
from __future__ import annotations

from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["can_pack", "pack", "pack_hint", "packed_linear", "row_parts", "split_rows", "gate_linear", "PackedLinear",
           "WeightGradTap", "StepInputs"]


#: whether this torch has oneDNN
ONEDNN = bool(torch.backends.mkldnn.is_available())


def can_pack(weight: Tensor, onednn: bool = ONEDNN) -> bool:
    """Whether ``weight`` can use the packed oneDNN path: float32 on CPU, oneDNN built in (``onednn``: TorchScript
    takes no global, a scripted caller hands :data:`ONEDNN` in)."""
    return onednn and weight.dtype == torch.float32 and weight.device.type == "cpu"


def pack_hint(rows: int) -> int:
    """The batch-size hint :func:`pack` gives oneDNN for products of ``rows`` rows: 1 (the matrix-vector layout) for
    one row, 16 for more (one matrix-matrix layout serves every batch of 2 or more; a literal: TorchScript takes no
    global)."""
    return 1 if rows <= 1 else 16


def pack(weight: Tensor, rows: int = 1, threads: int = 2) -> Tensor:
    """``weight`` ``(out, in)`` laid out for :func:`packed_linear` of ``rows``-row inputs on ``threads`` threads
    (``torch.get_num_threads()``, which TorchScript cannot ask), no gradient; the result serves any number of rows,
    the fastest at that kind.

    One row: ``weight.T`` cut into parts of its rows, ``(parts, in / parts, out)`` (:func:`split_rows`, parts from
    :func:`row_parts`); otherwise (or when :func:`row_parts` finds no split) oneDNN's reorder with :func:`pack_hint`
    (a new opaque oneDNN tensor)."""
    if rows <= 1:
        parts = row_parts(weight.shape[1], threads)
        if parts > 1:
            return split_rows(weight, parts)
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), pack_hint(rows))


def row_parts(in_features: int, threads: int) -> int:
    """How many parts :func:`split_rows` cuts ``in_features`` rows into for ``threads`` threads: the largest divisor
    of ``in_features`` up to ``max(2, threads)`` (1: do not split, e.g. an odd ``in_features`` at 2 threads)."""
    parts = max(2, threads)
    while parts > 1 and in_features % parts != 0:
        parts -= 1
    return parts


def split_rows(weight: Tensor, parts: int = 2) -> Tensor:
    """``weight`` ``(out, in)`` as ``weight.T`` cut into ``parts`` equal blocks of rows, ``(parts, in / parts, out)``:
    the layout of a one-row product that streams the weight on several cores at once. :func:`packed_linear` runs it
    as one batched product of the blocks (torch spreads a batch over its threads) and adds the partial sums (the
    figures against oneDNN's matrix-vector layout: this module's docstring)."""
    out_features, in_features = weight.shape
    if in_features % parts != 0:
        raise ValueError(f"split_rows: argument `parts` must divide the weight's {in_features} input features; "
                         f"got {parts}.")
    return weight.detach().t().reshape(parts, in_features // parts, out_features).contiguous()


def packed_linear(x: Tensor, packed: Tensor, bias: Optional[Tensor]) -> Tensor:
    """``x @ W.T + bias`` with ``W`` laid out by :func:`pack`; ``x`` ``(batch, in)``. No gradient (see
    :class:`PackedLinear`)."""
    if packed.dim() == 3:  # split_rows: (parts, in / parts, out)
        y = torch.bmm(x.reshape(x.shape[0], packed.shape[0], packed.shape[1]).transpose(0, 1), packed).sum(0)
        return y if bias is None else y + bias
    no_scalars: list[Optional[Union[int, float, complex]]] = []
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", no_scalars, "")


class PackedLinear(torch.autograd.Function):
    """``x @ W.T + b`` from the packed ``W``, differentiable in ``x`` only (``dx = dy @ W`` from the packed ``W.T``);
    the weight's and the bias' gradients come from a :class:`WeightGradTap`."""

    @staticmethod
    def forward(ctx, x: Tensor, bias: Tensor, packed: Tensor, packed_t: Tensor) -> Tensor:
        ctx.packed_t = packed_t
        return packed_linear(x, packed, bias.detach())

    @staticmethod
    def backward(ctx, grad: Tensor):
        return packed_linear(grad.contiguous(), ctx.packed_t, None), None, None, None


def gate_linear(x: Tensor, weight: Tensor, bias: Tensor, packed: Optional[Tensor], packed_t: Optional[Tensor]
                ) -> Tensor:
    """``x @ weight.T + bias`` by the fastest applicable path: packed (with a gradient for ``x`` through
    :class:`PackedLinear` when ``packed_t`` is given and autograd records), else ``F.linear``."""
    if packed is None:
        return F.linear(x, weight, bias)
    if not torch.jit.is_scripting():
        if packed_t is not None and torch.is_grad_enabled():
            return PackedLinear.apply(x, bias, packed, packed_t)
    return packed_linear(x, packed, bias)


class StepInputs:
    """Filled after a loop with each layer's stacked step inputs ``(steps, batch, in)`` for :class:`WeightGradTap`."""

    def __init__(self, layers: int):
        self.inputs: list[Optional[Tensor]] = [None] * layers


class WeightGradTap(torch.autograd.Function):
    """Zeros ``(steps, batch, out)`` to add to a loop's ``x_t @ W.T + b`` computed with ``W`` and ``b`` detached;
    the backward turns their gradients ``dy`` and the stacked inputs into ``(dW, db)`` with one product."""

    @staticmethod
    def forward(ctx, weight: Tensor, bias: Tensor, steps: int, batch: int, holder: StepInputs, layer: int) -> Tensor:
        ctx.holder, ctx.layer = holder, layer
        return weight.new_zeros(steps, batch, weight.shape[0])

    @staticmethod
    def backward(ctx, grad: Tensor):
        x = ctx.holder.inputs[ctx.layer]
        if x is None:
            raise RuntimeError("WeightGradTap: the loop did not hand in its step inputs")
        n = grad.shape[0] * grad.shape[1]
        g = grad.reshape(n, grad.shape[2])
        x = x[:grad.shape[0]].reshape(n, x.shape[2])
        return torch.mm(g.t(), x), g.sum(0), None, None, None, None
