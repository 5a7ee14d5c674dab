"""Data-parallel helpers (``tf.distribute``) of the Keras layers and losses; see ``speechblocks.distributed``."""
from __future__ import annotations

import keras
import tensorflow as tf


def replica_context():
    """``(ReplicaContext, replicas)`` inside a replica of a ``tf.distribute`` strategy with more than one
    replica in sync, else ``(None, 1)`` (no strategy, one replica, or the cross-replica context)."""
    ctx = tf.distribute.get_replica_context()
    replicas = 1 if ctx is None else int(ctx.num_replicas_in_sync)
    return (ctx, replicas) if replicas > 1 else (None, 1)


def distributed_mean(total, count, reduction: str):
    """``total / count`` (0 when the count is 0), reduced over data-parallel replicas by ``reduction``.

    One replica (or none): ``divide_no_nan(total, count)``, the single-process value. Several: ``"global"``
    divides the local ``total`` by the count summed over the replicas (``all_reduce`` of a count under
    ``stop_gradient``: a count has no gradient), so the replicas' values sum to the mean over the global batch
    and, ``tf.distribute`` summing the replicas' gradients, the applied gradient is its gradient;
    ``"per_replica"`` divides the local mean by the number of replicas (the mean of the replicas' means, as
    Keras scales its own losses under ``tf.distribute``).
    """
    ctx, replicas = replica_context()
    if ctx is None:
        return tf.math.divide_no_nan(total, count)
    count = tf.stop_gradient(count)
    if reduction == "global":
        return tf.math.divide_no_nan(total, ctx.all_reduce(tf.distribute.ReduceOp.SUM, count))
    return tf.math.divide_no_nan(total, count) * tf.cast(1.0 / replicas, total.dtype)


def distributed_share(value):
    """A term every replica computes in full (the L2 regularization of the weights) as the replica's share:
    ``value / replicas`` inside a replica of several (either reduction: the replicas' values are equal), else
    ``value`` unchanged."""
    ctx, replicas = replica_context()
    return value if ctx is None else value * tf.cast(1.0 / replicas, value.dtype)


class BatchNormalization(keras.layers.BatchNormalization):
    """Keras ``BatchNormalization`` whose ``synchronized=True`` statistics are the local ones when there is only
    one replica: Keras' synchronized moments compute ``E[x^2] - E[x]^2`` even then, so without this a
    ``sync_batch_norm=True`` block would differ (in float rounding) from the faithful single-process one. With
    several replicas: Keras' all-reduced sums (mean and variance over the global batch).

    The moving statistics are created with ``aggregation="mean"`` (Keras 3 leaves them at ``"none"``, with which
    each replica of a ``MirroredStrategy`` keeps updating its own copy from its own batch statistics, the copies
    silently diverging and the saved one being the first replica's): the replicas' updates are averaged, so every
    copy holds ``momentum * moving + (1 - momentum) * mean_over_replicas(batch statistic)`` -- with synchronized
    statistics exactly the single-process update, with per-replica statistics (the original's towers) their
    average. Nothing changes in one process."""

    def add_weight(self, *args, **kwargs):
        if kwargs.get("name") in ("moving_mean", "moving_variance") and kwargs.get("aggregation", "none") == "none":
            kwargs["aggregation"] = "mean"
        return super().add_weight(*args, **kwargs)

    def _moments(self, inputs, mask):
        if self.synchronized and mask is None and replica_context()[0] is None:
            return keras.ops.moments(inputs, axes=self._reduction_axes)
        return super()._moments(inputs, mask)


def mirrored_strategy(replicas: int | None = None):
    """``tf.distribute.MirroredStrategy`` for ``speechblocks train --strategy mirrored``.

    With GPUs: over the first ``replicas`` of them (default: every GPU). Without: over ``replicas`` logical CPU
    devices (default 2) carved out of the CPU with ``tf.config.set_logical_device_configuration`` -- which must
    happen before TensorFlow initialises its devices (before the first op); an already initialised CPU with
    that many logical devices is used as it is.

    Raises:
        ValueError: ``replicas < 1``, more replicas than GPUs, or a CPU already initialised with another number of
            logical devices.
    """
    if replicas is not None and (isinstance(replicas, bool) or int(replicas) < 1):
        raise ValueError(f"mirrored_strategy: argument `replicas` must be >= 1; got {replicas!r}.")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        n = len(gpus) if replicas is None else int(replicas)
        if n > len(gpus):
            raise ValueError(f"mirrored_strategy: {n} replicas asked for, {len(gpus)} GPU(s) present.")
        return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(n)])
    n = 2 if replicas is None else int(replicas)
    (cpu,) = tf.config.list_physical_devices("CPU")[:1]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError:  # devices already initialised: usable only if they are the ones asked for
        pass
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) != n:
        raise ValueError(f"mirrored_strategy: TensorFlow's CPU devices were initialised before the strategy "
                         f"({len(logical)} logical CPU device(s), {n} asked for): create it first.")
    return tf.distribute.MirroredStrategy([d.name for d in logical])
