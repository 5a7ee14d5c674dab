"""Collectives with gradients for data-parallel training (the primitives of :mod:`torch_layers.distributed`).

Without an initialised process group (or with one rank) every helper is the identity. Kept apart from
:mod:`torch_layers.distributed` so that :class:`~torch_layers.tf_batch_norm.TFBatchNorm` (which gathers batch
moments) and the public module (which switches batch norms) import in one direction.
"""
# no `from __future__ import annotations`: TorchScript reads the annotations of the `torch.jit.unused` helpers
# below (called from scripted losses, never run there) and cannot resolve string annotations of free functions
from typing import Optional

import torch
from torch import Tensor

__all__ = ["world_size", "is_distributed", "all_gather_with_grad", "global_sum", "gather_embeddings",
           "on_one_of_several_ranks", "sum_over_ranks", "moments_over_ranks"]


def world_size(group=None) -> int:
    """The number of ranks of ``group`` (default: the world); 1 without an initialised process group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def is_distributed(group=None) -> bool:
    """Whether a process group with more than one rank is initialised (the collectives then run)."""
    return world_size(group) > 1


class _AllGather(torch.autograd.Function):
    """``(world_size, *x.shape)``: every rank's ``x`` in rank order. Backward: rank ``r`` gets the sum over
    ranks of the gradients of slot ``r`` (an all-reduce; gloo has no reduce-scatter)."""

    @staticmethod
    def forward(ctx, x: Tensor, group) -> Tensor:  # noqa: D102
        import torch.distributed as dist

        ctx.group = group
        ctx.rank = dist.get_rank(group)
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x, group=group)
        return torch.stack(parts)

    @staticmethod
    def backward(ctx, grad: Tensor):  # noqa: D102
        import torch.distributed as dist

        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad[ctx.rank], None


def all_gather_with_grad(x: Tensor, group=None) -> Tensor:
    """Every rank's ``x`` (same shape on every rank), stacked in rank order: ``(world_size, *x.shape)``.

    Gradients flow back to every rank's ``x``: rank ``r`` receives the sum over all ranks of the gradients
    of slot ``r`` -- the gradient of the sum of the ranks' objectives. Without a process group (or one rank):
    ``x.unsqueeze(0)``.
    """
    if not is_distributed(group):
        return x.unsqueeze(0)
    return _AllGather.apply(x, group)


def global_sum(x: Tensor, group=None) -> Tensor:
    """``x`` summed over the ranks (in rank order: the same bits on every rank), with gradients as
    :func:`all_gather_with_grad`. Without a process group: ``x`` itself."""
    if not is_distributed(group):
        return x
    return all_gather_with_grad(x, group).sum(0)


@torch.jit.unused
def on_one_of_several_ranks() -> bool:
    """:func:`is_distributed` for the default group, callable from TorchScript-compiled code (never run there)."""
    return is_distributed()


@torch.jit.unused
def sum_over_ranks(x: Tensor) -> Tensor:
    """:func:`global_sum` over the default process group, for TorchScript-compiled code (where it is never run:
    the scripted losses compute locally)."""
    return global_sum(x)


def gather_embeddings(embeds: Tensor, dim: int = 0, group=None) -> Tensor:
    """Concatenates every rank's ``embeds`` along ``dim`` in rank order, gradients flowing back to each rank.

    For losses that need the whole global batch at once, e.g. the GE2E loss of
    :class:`~torch_layers.SpeakerEncoder` (every speaker's centroid against every utterance): each rank embeds
    its share (its speakers, ``dim=0``, or its utterances of every speaker, ``dim=1``), gathers, and computes
    the loss of the global batch -- the same value on every rank. Each rank's gradient is then
    ``world_size`` times its share of the global gradient and DDP's average gives the single-process gradient.
    The ranks' sizes along ``dim`` may differ (e.g. 3 speakers here, 2 there); the other axes must agree.
    Without a process group (or one rank): ``embeds`` itself.

    Example (on each rank; ``ddp = DistributedDataParallel(SpeakerEncoder())``)::

        local = ddp(mels).view(speakers_here, utterances, -1)   # (S_r, U, E)
        embeds = gather_embeddings(local)                        # (S, U, E), the global batch
        loss, eer = ddp.module.loss(embeds)                      # identical on every rank
        loss.backward()                                          # DDP averages the gradients
        ddp.module.do_gradient_ops()                             # on the averaged (global) gradients
        optimizer.step()
    """
    if not is_distributed(group):
        return embeds
    import torch.distributed as dist

    dim = dim % embeds.dim()
    n = world_size(group)
    shape = torch.tensor(list(embeds.shape), dtype=torch.long)
    shapes = [torch.empty_like(shape) for _ in range(n)]
    dist.all_gather(shapes, shape, group=group)
    sizes = [int(s[dim]) for s in shapes]
    for r, s in enumerate(shapes):
        other = [int(v) for i, v in enumerate(s) if i != dim]
        if other != [int(v) for i, v in enumerate(shape) if i != dim]:
            raise ValueError(f"gather_embeddings: argument `embeds` must have the same shape on every rank except "
                             f"along dim={dim}; got {list(embeds.shape)} here and {s.tolist()} on rank {r}.")
    longest = max(sizes)
    if embeds.shape[dim] < longest:
        pad_shape = list(embeds.shape)
        pad_shape[dim] = longest - embeds.shape[dim]
        padded = torch.cat([embeds, embeds.new_zeros(pad_shape)], dim)
    else:
        padded = embeds
    gathered = all_gather_with_grad(padded, group)
    return torch.cat([gathered[r].narrow(dim, 0, sizes[r]) for r in range(n)], dim)


def moments_over_ranks(x: Tensor, dims: list[int], group: Optional[object]) -> tuple[Tensor, Tensor]:
    """Mean and biased variance of ``x`` over ``dims`` and over every rank's ``x`` (channels last).

    Each rank contributes ``(count, mean, sum of squared deviations)`` per channel; they are gathered with
    gradients and combined as Chan et al.'s parallel algorithm (stable where ``E[x^2] - E[x]^2`` cancels).
    Low-precision inputs combine in float32."""
    work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    channels = x.shape[-1]
    count = x.numel() // channels if channels > 0 else 0
    if count > 0:
        mean = work.mean(dim=dims)
        m2 = ((work - mean) ** 2).sum(dim=dims)
    else:
        mean = work.new_zeros(channels)
        m2 = work.new_zeros(channels)
    n = work.new_full((channels,), float(count))
    stats = all_gather_with_grad(torch.stack([n, mean, m2]), group)  # (world, 3, channels)
    counts, means, m2s = stats[:, 0], stats[:, 1], stats[:, 2]
    total = counts.sum(0)
    safe = torch.where(total > 0, total, torch.ones_like(total))
    global_mean = (counts * means).sum(0) / safe
    global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
    var = global_m2 / safe
    return global_mean.to(x.dtype), var.to(x.dtype)
