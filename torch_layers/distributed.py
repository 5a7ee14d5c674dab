"""Data-parallel training (``DistributedDataParallel``) with the torch blocks: collectives with gradients.

Two things decide whether a DDP step equals one single-process step on the global batch (the shared
rationale is in :mod:`speechblocks.distributed`):

* **Loss reduction.** The masked losses and :func:`~torch_layers.tacotron2_loss` take ``reduction=``.
  ``"global"`` (default): every rank computes the loss of the **global** batch -- the numerators and the
  counts of valid elements of every rank are gathered (:func:`all_gather_with_grad`) and summed in rank
  order, so all ranks hold the same value, the one a single process computes on the global batch (up to
  float rounding). The gather carries gradients: rank ``r``'s gradient is that of ``sum over ranks of their
  losses`` through its own data, i.e. ``world_size`` times its share of the global loss's gradient, and DDP's
  gradient *average* divides that factor away -- whatever number of valid frames each rank holds. Terms every
  rank computes in full from the weights (the L2 regularization) need nothing: every rank's gradient of them
  is already the global one. ``"per_replica"``: each rank's own masked mean; DDP's average then gives the
  gradient of the mean of the ranks' losses -- the original TF1 multi-GPU ("tower") training.
* **Batch statistics.** ``sync_batch_norm=True`` (:class:`~torch_layers.tf_batch_norm.TFBatchNorm`, the
  blocks with batch norm, ``Tacotron2``): mean and variance over the global batch. ``nn.SyncBatchNorm`` only
  runs on CUDA; ours gathers each rank's ``(count, mean, sum of squared deviations)`` with gradients and
  combines them (Chan et al.'s parallel variance; numerically stable, unlike sum / sum of squares), on any
  backend (gloo on CPU included). The moving statistics follow the global batch's moments, as one process.

Without an initialised process group (or with one rank) every helper is the identity and every block and loss
computes exactly as in one process (bit for bit). A TorchScript-compiled block or loss always computes locally
(per rank): the collectives run in eager mode only.

Collectives must be issued in the same order on every rank: every rank must run the same blocks on the same
time axis (pad every rank's batch to the same length; the masked losses accept a rank whose longest target is
shorter than its padded time axis) and call the losses the same way.
"""
from torch import nn

from .collectives import (
    all_gather_with_grad,
    gather_embeddings,
    global_sum,
    is_distributed,
    moments_over_ranks,
    on_one_of_several_ranks,
    sum_over_ranks,
    world_size,
)
from .tf_batch_norm import TFBatchNorm

__all__ = ["world_size", "is_distributed", "all_gather_with_grad", "global_sum", "gather_embeddings",
           "set_sync_batch_norm", "on_one_of_several_ranks", "sum_over_ranks", "moments_over_ranks"]


def set_sync_batch_norm(module: nn.Module, enabled: bool = True, process_group=None) -> nn.Module:
    """Switches the global-batch statistics of every :class:`~torch_layers.tf_batch_norm.TFBatchNorm` in
    ``module`` on (or off), e.g. for a model built by ``from_tf1_checkpoint``; like the constructors'
    ``sync_batch_norm=`` keyword, plus an optional ``process_group`` (default: the world). Returns ``module``."""
    for m in module.modules():
        if isinstance(m, TFBatchNorm):
            m.sync_batch_norm = bool(enabled)
            m.process_group = process_group
    return module
