"""Batch normalisation over the last axis with TF1 ``batch_normalization`` semantics."""
# no `from __future__ import annotations`: TorchScript reads the annotations of the `torch.jit.unused` methods

import torch
from torch import nn

from speechblocks.distributed import check_sync_batch_norm

from .collectives import moments_over_ranks, world_size


class TFBatchNorm(nn.Module):
    """Batch norm of ``(..., channels)`` tensors as ``tf.compat.v1.layers.batch_normalization``.

    Differs from ``nn.BatchNorm1d`` in three TF1 ways: epsilon 1e-3; moving averages
    ``moving = moving * momentum + batch * (1 - momentum)`` with momentum 0.99; the moving variance
    tracks the *biased* batch variance.

    ``sync_batch_norm=True``: in training, under an initialised ``torch.distributed`` process group of more
    than one rank (DDP), the batch statistics are those of the **global** batch -- every rank's count, mean
    and sum of squared deviations are gathered with gradients and combined (see
    :mod:`torch_layers.distributed`; ``nn.SyncBatchNorm`` runs on CUDA only, this runs on any backend) -- and
    the moving statistics are updated with them, as one process on the global batch would. Every rank must
    then call the layer the same number of times. Without a process group (or one rank), in ``eval()``, or
    TorchScript-compiled: plain batch norm, bit for bit. ``process_group`` (attribute, default ``None``: the
    world) picks the ranks; :func:`torch_layers.distributed.set_sync_batch_norm` sets both on a whole model.

    Args:
        num_features: channels (last axis).
        epsilon: variance epsilon.
        momentum: TF-style momentum of the moving averages.
        sync_batch_norm: global-batch statistics under data-parallel training (default False: each rank's own,
            as the original's multi-GPU towers).
        device: factory keyword.
        dtype: factory keyword.
    """

    __jit_ignored_attributes__ = ["process_group"]

    def __init__(self, num_features: int, epsilon: float = 1e-3, momentum: float = 0.99,
                 sync_batch_norm: bool = False, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features = num_features
        self.epsilon = epsilon
        self.momentum = momentum
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, "TFBatchNorm")
        self.process_group = None
        self.weight = nn.Parameter(torch.ones(num_features, **factory))
        self.bias = nn.Parameter(torch.zeros(num_features, **factory))
        self.register_buffer("running_mean", torch.zeros(num_features, **factory))
        self.register_buffer("running_var", torch.ones(num_features, **factory))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x ``(..., channels)``. Returns: same shape."""
        if self.training:
            dims = [i for i in range(x.dim() - 1)]
            if self.sync_batch_norm and not torch.jit.is_scripting() and self._ranks() > 1:
                mean, var = self._global_moments(x, dims)
            else:
                mean = x.mean(dim=dims)
                var = x.var(dim=dims, unbiased=False)
            with torch.no_grad():
                self.running_mean.mul_(self.momentum).add_(mean.detach().to(self.running_mean.dtype),
                                                           alpha=1.0 - self.momentum)
                self.running_var.mul_(self.momentum).add_(var.detach().to(self.running_var.dtype),
                                                          alpha=1.0 - self.momentum)
        else:
            mean = self.running_mean.to(x.dtype)
            var = self.running_var.to(x.dtype)
        scale = self.weight.to(x.dtype) * torch.rsqrt(var + self.epsilon)
        return x * scale + (self.bias.to(x.dtype) - mean * scale)

    @torch.jit.unused
    def _ranks(self) -> int:
        return world_size(self.process_group)

    @torch.jit.unused
    def _global_moments(self, x: torch.Tensor, dims: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        return moments_over_ranks(x, dims, self.process_group)

    def extra_repr(self) -> str:
        sync = ", sync_batch_norm=True" if self.sync_batch_norm else ""
        return f"{self.num_features}, epsilon={self.epsilon}, momentum={self.momentum}{sync}"
