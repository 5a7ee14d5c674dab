"""Data-parallel training: the framework-free part shared by the Keras and torch twins.

Two questions decide whether a data-parallel step equals one step on the whole global batch:

* **How a masked loss reduces.** The masked Tacotron-2 losses are ``sum(loss * mask) / count`` with a count
  of valid elements (frames x channels, or non-zero masked loss values). Replicas hold different numbers
  of valid frames, so the mean of per-replica means is *not* the mean over the global batch.

  - ``reduction="global"`` (the default): numerator and count are summed over the replicas -- each replica
    contributes ``sum_local / count_global`` (the count all-reduced, without gradient), so the replicas'
    contributions sum to the loss of the global batch and the summed (Keras ``tf.distribute``) or averaged
    (torch DDP, after scaling) gradients equal the gradient of that loss. Terms that every replica computes
    in full (the L2 regularization of ``tacotron2_loss``) are shared out the same way.
  - ``reduction="per_replica"``: each replica's own masked mean, the loss being the mean of the replicas'
    losses -- the original TF1 multi-GPU ("tower") training of Tacotron-2, which averaged the towers'
    losses and gradients.

  In one process (no distribution, or one replica) both give exactly the single-process value.

* **Batch-norm statistics.** ``sync_batch_norm=False`` (the default, the original's towers): each replica
  normalizes with its own batch statistics. ``sync_batch_norm=True``: mean and variance over the global
  batch (Keras ``BatchNormalization(synchronized=True)``, torch ``SyncBatchNorm``-style all-reduce), so a
  data-parallel step equals the single-process one. Variable names and the TF1 exchange do not change.

Imports no framework.
"""
from __future__ import annotations

__all__ = ["LOSS_REDUCTIONS", "DEFAULT_LOSS_REDUCTION", "check_loss_reduction", "check_sync_batch_norm"]

#: how a masked loss reduces over data-parallel replicas (see the module docstring)
LOSS_REDUCTIONS = ("global", "per_replica")
#: the default: the loss of the global batch
DEFAULT_LOSS_REDUCTION = "global"


def check_loss_reduction(reduction, block: str) -> str:
    """``reduction`` one of :data:`LOSS_REDUCTIONS`, else a ``ValueError`` naming ``block``; returns it."""
    if not isinstance(reduction, str) or reduction not in LOSS_REDUCTIONS:
        raise ValueError(f"{block}: argument `reduction` must be one of {LOSS_REDUCTIONS} (how the loss reduces over "
                         f"data-parallel replicas); got {reduction!r}.")
    return reduction


def check_sync_batch_norm(value, block: str) -> bool:
    """``sync_batch_norm`` must be a bool (``True``/``False``, numpy bools included); returns ``bool(value)``."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise ValueError(f"{block}: argument `sync_batch_norm` must be True or False; got {value!r}.")
    return bool(value)
