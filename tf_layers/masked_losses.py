"""Masked Tacotron-2 losses (``MaskedMSE``, ``MaskedSigmoidCrossEntropy``, ``MaskedLinearLoss``) for Keras.

Functions with the seed's arguments (``masked_mse`` ...) plus ``keras.losses.Loss`` classes of the same
semantics. Every loss computes in float32 (float64 when an input is float64), whatever the dtype of its
inputs, so float16/bfloat16 tensors of mixed-precision models neither overflow nor lose the sum.

Masking by selection: every loss replaces the padding (mask 0) of ``targets`` and ``outputs`` by 0 *before* any
arithmetic, so NaN/inf in the padding reach neither the value nor the gradients (TF1's ``loss * mask`` gives NaN
there: ``0 * NaN``), and the gradient of every padding entry is exactly 0. For finite inputs the values and the
gradients are TF1's (parity rows of ``parity_tests/cases/masked_losses.py``). NaN/inf at valid positions propagate
as in TF1; an all-zero mask gives 0.0.

Data-parallel training (``tf.distribute``: ``MirroredStrategy``, ``MultiWorkerMirroredStrategy``): every loss
takes ``reduction=`` -- how it reduces over the replicas when it runs inside a replica of a strategy with more
than one replica (``strategy.run``, ``Model.fit``):

* ``"global"`` (default): the loss of the **global** batch. Each replica returns its share
  ``sum_local / count_global``, the count (valid elements, or non-zero masked loss values) summed over the
  replicas with ``ReplicaContext.all_reduce`` under ``tf.stop_gradient`` (a count has no gradient). The shares
  sum to the global loss (``strategy.reduce("SUM", per_replica_loss)``), and since ``tf.distribute`` (and the
  Keras optimizer) *sums* the replicas' gradients, the applied gradient is the gradient of the global loss --
  whatever number of valid frames each replica holds.
* ``"per_replica"``: each replica's own masked mean divided by the number of replicas (the Keras convention
  for a per-replica mean), i.e. the mean of the replicas' losses: the original TF1 multi-GPU towers.

Outside such a replica (no strategy, one replica, or cross-replica context) both return the single-process
value, bit for bit. Inside a replica with more than one replica, the time axis of ``targets`` may be longer
than the replica's ``max(targets_lengths)`` rounded up to ``r`` (a replica's slice of a batch padded to the
global longest target); it must still be a multiple of ``r``.
"""
from __future__ import annotations

import operator

import keras
import numpy as np
import tensorflow as tf

# common: the framework-free part (options, checks, message texts), shared with the other framework's twin
from speechblocks import masked_losses as common
from speechblocks.distributed import DEFAULT_LOSS_REDUCTION, check_loss_reduction
from speechblocks.masked_losses import priority_frequencies

from ._distribute import distributed_mean, replica_context
from ._validation import check_float_tensor, check_lengths

__all__ = [
    "masked_mse",
    "masked_sigmoid_cross_entropy",
    "masked_linear_loss",
    "MaskedMSE",
    "MaskedSigmoidCrossEntropy",
    "MaskedLinearLoss",
    "priority_frequencies",
]


# -- validation and masks ------------------------------------------------------------------------------
# (the length helpers live here, not in sequence_mask.py, so importing the losses does not import the
# submodule ``sequence_mask``, whose name is also the exported function's)
def check_outputs_per_step(r, name: str, block: str) -> int:
    """``r`` as a Python int >= 1, else a ``ValueError`` naming the argument."""
    try:
        value = operator.index(r)
    except TypeError:
        raise ValueError(f"{block}: argument `{name}` must be an integer >= 1; got {r!r}.") from None
    if value < 1:
        raise ValueError(f"{block}: argument `{name}` must be an integer >= 1; got {value}.")
    return int(value)


def round_up(x, multiple: int):
    """``x`` rounded up to a multiple of ``multiple`` (``x >= 0``): the seed's ``_round_up_tf``."""
    return (x + (multiple - 1)) // multiple * multiple


def checked_lengths(lengths, name: str, block: str):
    """A ``(batch,)`` integer lengths tensor with every entry >= 0.

    Eager (or constant) values are checked in Python and answered with a ``ValueError``; symbolic values
    inside ``tf.function`` get a ``tf.debugging`` assertion carrying the same message.
    """
    lengths = check_lengths(lengths, name, block)
    message = common.negative_lengths_message(block, name)
    value = tf.get_static_value(lengths)
    if value is not None:
        value = np.asarray(value)
        if value.size and value.min() < 0:
            raise ValueError(f"{message}; got {value.tolist()}.")
        return lengths
    with tf.control_dependencies([tf.debugging.assert_non_negative(lengths, message=message)]):
        return tf.identity(lengths)


def padded_max_length(lengths, r: int):
    """``max(lengths)`` (0 for an empty batch) rounded up to a multiple of ``r``."""
    longest = tf.maximum(tf.reduce_max(lengths), tf.zeros([], lengths.dtype))
    return round_up(longest, tf.cast(r, lengths.dtype))


def _static(t):
    value = tf.get_static_value(t)
    return None if value is None else np.asarray(value)


def _targets_outputs(targets, outputs, block: str, rank: int, shape_doc: str):
    """Both floating, rank ``rank``, equal shapes (no broadcasting); cast to the compute dtype."""
    targets = tf.convert_to_tensor(targets)
    outputs = tf.convert_to_tensor(outputs)
    check_float_tensor(targets, "targets", block, rank=rank, shape_doc=shape_doc)
    check_float_tensor(outputs, "outputs", block, rank=rank, shape_doc=shape_doc)
    compute = tf.float64 if tf.float64 in (targets.dtype, outputs.dtype) else tf.float32
    message = common.shape_mismatch_message(block, shape_doc)
    if not targets.shape.is_compatible_with(outputs.shape):
        raise ValueError(f"{message}; got targets {targets.shape} and outputs {outputs.shape}.")
    checks = []
    if not (targets.shape.is_fully_defined() and outputs.shape.is_fully_defined()):
        checks.append(tf.debugging.assert_equal(tf.shape(targets), tf.shape(outputs), message=message))
    return tf.cast(targets, compute), tf.cast(outputs, compute), checks


def _mask_from_lengths(lengths, targets, r: int, block: str, shape_doc: str):
    """The seed's ``sequence_mask(lengths, r)`` laid over ``targets``' time axis, with its shape checks.

    In one process the time axis must be ``max(lengths)`` rounded up to ``r`` (TF1's assertion); inside a
    replica of several (a slice of a global batch) any multiple of ``r`` that holds every length."""
    if lengths is None:
        raise ValueError(common.lengths_required_message(block))
    lengths = checked_lengths(lengths, "targets_lengths", block)
    shard = replica_context()[0] is not None
    checks = []
    batch, time = targets.shape[0], targets.shape[1]
    if batch is not None and lengths.shape[0] is not None and lengths.shape[0] != batch:
        raise ValueError(f"{block}: argument `targets_lengths` has {lengths.shape[0]} entries but `targets` has "
                         f"batch {batch}; expected shape (batch,) with targets {shape_doc}.")
    too_long = common.length_too_long_message(block, shape_doc)
    not_padded = (common.replica_not_padded_message(block, r, shape_doc) if shard
                  else common.not_padded_message(block, r, shape_doc))
    value = _static(lengths)
    if value is not None and time is not None:
        longest = int(value.max()) if value.size else 0
        padded = -(-longest // r) * r
        if longest > time:
            raise ValueError(f"{too_long}; got max length {longest} for time {time}.")
        if (time % r != 0) if shard else (padded != time):
            raise ValueError(f"{not_padded}; got max length {longest} -> {padded} frames for time {time}.")
    else:
        t = tf.cast(tf.shape(targets)[1], lengths.dtype)
        checks.append(tf.debugging.assert_equal(tf.size(lengths), tf.shape(targets)[0],
                                                message=f"{block}: argument `targets_lengths` must have shape (batch,) "
                                                        f"with targets {shape_doc}"))
        checks.append(tf.debugging.assert_less_equal(lengths, t, message=too_long))
        if shard:
            checks.append(tf.debugging.assert_equal(t % tf.cast(r, t.dtype), tf.zeros([], t.dtype),
                                                    message=not_padded))
        else:
            checks.append(tf.debugging.assert_equal(padded_max_length(lengths, r), t, message=not_padded))
    with tf.control_dependencies(checks):
        return tf.sequence_mask(lengths, maxlen=tf.shape(targets)[1], dtype=targets.dtype)



def _explicit_mask(mask, targets, block: str, per_channel: bool, shape_doc: str):
    """A user mask cast to the compute dtype, shape-checked against ``targets`` (3-D losses accept
    ``(batch, time)``, ``(batch, time, 1)`` and ``(batch, time, channels)``; the cross-entropy ``(batch, time)``)."""
    mask = tf.convert_to_tensor(mask)
    expect = common.mask_shape_expectation(shape_doc, per_channel)
    if per_channel:
        if mask.shape.rank not in (None, 2, 3):
            raise ValueError(f"{block}: argument `mask` must have shape {expect}; got shape {mask.shape}.")
        if mask.shape.rank == 2:
            mask = mask[:, :, None]
        ok = ((mask.shape[:2].is_compatible_with(targets.shape[:2]) and mask.shape[2:].is_compatible_with([1]))
              or mask.shape.is_compatible_with(targets.shape))
    else:
        ok = mask.shape.is_compatible_with(targets.shape)
    if not ok:
        raise ValueError(f"{block}: argument `mask` must have shape {expect}; got mask {mask.shape} for targets "
                         f"{targets.shape}.")
    checks = []
    if not (mask.shape.is_fully_defined() and targets.shape.is_fully_defined()):
        checks.append(tf.debugging.assert_equal(tf.shape(mask)[:2], tf.shape(targets)[:2],
                                                message=f"{block}: argument `mask` must have shape {expect}"))
    with tf.control_dependencies(checks):
        return tf.cast(mask, targets.dtype)


def _mask(block, targets, targets_lengths, outputs_per_step, mask, per_channel, shape_doc):
    r = check_outputs_per_step(outputs_per_step, "outputs_per_step", block)
    if mask is not None:
        return _explicit_mask(mask, targets, block, per_channel, shape_doc)
    m = _mask_from_lengths(targets_lengths, targets, r, block, shape_doc)
    return m[:, :, None] if per_channel else m


def _check_linear_args(sample_rate, num_freq, targets, low_band_norm, block):
    if low_band_norm not in common.LOW_BAND_NORMS:
        raise ValueError(f"{block}: argument `low_band_norm` must be one of {common.LOW_BAND_NORMS}; got "
                         f"{low_band_norm!r}.")
    if sample_rate is None or not np.isfinite(float(sample_rate)) or float(sample_rate) <= 0:
        raise ValueError(f"{block}: argument `sample_rate` must be a positive number (Hz); got {sample_rate!r}.")
    if num_freq is None:
        num_freq = targets.shape[-1]
        if num_freq is None:
            raise ValueError(f"{block}: argument `num_freq` is required when the channel axis of `targets` is unknown.")
    if int(num_freq) < 1:
        raise ValueError(f"{block}: argument `num_freq` must be >= 1; got {num_freq!r}.")
    return priority_frequencies(float(sample_rate), int(num_freq))


# -- functions -----------------------------------------------------------------------------------------

def _select(mask, *tensors):
    """Masking by selection: ``(weights, tensors)`` with ``weights`` the mask broadcast to the tensors' shape
    and every tensor replaced by 0 where its weight is 0 -- *before* any arithmetic, so NaN/inf in the padding
    reaches neither the value nor the gradient (``where(keep, f(x), 0)`` would still back-propagate
    ``0 * f'(NaN) = NaN``); the gradient of a padding entry is exactly 0. For finite inputs the loss and its
    gradients equal TF1's ``loss * mask`` form (padding adds ``0 * f(0) = 0`` instead of ``0 * f(x) = 0``)."""
    weights = mask * tf.ones_like(tensors[0])
    keep = tf.not_equal(weights, 0)
    return weights, [tf.where(keep, t, tf.zeros_like(t)) for t in tensors]



def masked_mse(targets, outputs, targets_lengths=None, *, outputs_per_step, mask=None,
               reduction: str = DEFAULT_LOSS_REDUCTION):
    """Masked mean squared error of TF1 Tacotron-2 (``MaskedMSE`` of the seed).

    ``tf.compat.v1.losses.mean_squared_error(targets, outputs, weights=mask)`` with reduction
    ``SUM_BY_NONZERO_WEIGHTS``: ``sum(mask * (outputs - targets)**2) / count_nonzero(mask)``, the
    ``(batch, time, 1)`` mask broadcast to every channel, so the divisor counts masked *elements*
    (frames x channels). Like TF1 it returns 0.0 when the mask is all zeros.

    Quirks kept from the seed: the mask comes from ``sequence_mask(targets_lengths, outputs_per_step)``,
    so the time axis of ``targets`` must be ``max(targets_lengths)`` rounded up to a multiple of
    ``outputs_per_step`` (TF1 asserted it; here a ``ValueError``). An explicit ``mask`` overrides the
    lengths and acts as weights (non-0/1 values weight the squared errors; the divisor still counts
    non-zero weights).

    Args:
        targets: float tensor ``(batch, time, channels)``.
        outputs: float tensor ``(batch, time, channels)``, same shape.
        targets_lengths: integer tensor ``(batch,)``, 0 <= length <= time; ignored when ``mask`` is given.
        outputs_per_step: int >= 1, the decoder's ``r``.
        mask: optional ``(batch, time)``, ``(batch, time, 1)`` or ``(batch, time, channels)`` weights.
        reduction: ``"global"`` (default) or ``"per_replica"``: how the loss reduces over the replicas of a
            ``tf.distribute`` strategy (see the module docstring; no effect in one process).

    Returns:
        scalar tensor, float32 (float64 when an input is float64), computed in that dtype whatever the
        input dtype (float16/bfloat16 inputs are cast first). Inside a replica of several: the replica's
        share (``"global"``: ``sum_local / count_global``; the shares sum to the global-batch loss).

    Raises:
        ValueError: a wrong rank, shape or dtype, ``outputs_per_step < 1``, a negative length, a length
            longer than the time axis, or a time axis that is not the padded maximum length (inside
            ``tf.function`` with unknown shapes the run-time checks are ``tf.debugging`` assertions).

    Example:
    >>> t = tf.zeros((2, 4, 3)); o = tf.ones((2, 4, 3))
    >>> float(masked_mse(t, o, [3, 1], outputs_per_step=2))
    1.0
    """
    block, doc = "masked_mse", "(batch, time, channels)"
    reduction = check_loss_reduction(reduction, block)
    targets, outputs, checks = _targets_outputs(targets, outputs, block, 3, doc)
    mask = _mask(block, targets, targets_lengths, outputs_per_step, mask, True, doc)
    with tf.control_dependencies(checks):
        weights, (targets, outputs) = _select(mask, targets, outputs)
        total = tf.reduce_sum(weights * tf.math.squared_difference(outputs, targets))
        return distributed_mean(total, tf.math.count_nonzero(weights, dtype=targets.dtype), reduction)


def masked_sigmoid_cross_entropy(targets, outputs, targets_lengths=None, *, outputs_per_step, mask=None,
                                 pos_weight: float = 1.0, count: str = "nonzero_loss",
                                 reduction: str = DEFAULT_LOSS_REDUCTION):
    """Masked weighted sigmoid cross-entropy of TF1 Tacotron-2 (``MaskedSigmoidCrossEntropy``, stop token).

    Per element ``tf.nn.weighted_cross_entropy_with_logits`` in its stable form,
    ``(1 - z) * x + (1 + (pos_weight - 1) * z) * (log1p(exp(-|x|)) + max(-x, 0))`` (``z`` targets, ``x``
    logits), times the ``(batch, time)`` mask; the result is the sum divided by a count.

    Quirk kept from the seed (``count="nonzero_loss"``, the default): the divisor is
    ``count_nonzero(loss * mask)`` -- the number of non-zero masked *loss values*, not of mask entries.
    Confidently right frames whose loss underflows to exactly 0 (TensorFlow flushes float32 values below
    1.18e-38 to zero) drop out of the divisor, which inflates the mean. ``count="mask"`` gives the
    corrected mean over ``count_nonzero(mask)`` entries. Where TF1 returned NaN (a zero count) this
    returns 0.0. The time axis must be ``max(targets_lengths)`` rounded up to a multiple of
    ``outputs_per_step``; an explicit ``mask`` overrides the lengths.

    Args:
        targets: float tensor ``(batch, time)`` of 0/1 stop-token labels.
        outputs: float tensor ``(batch, time)`` of logits, same shape.
        targets_lengths: integer tensor ``(batch,)``; ignored when ``mask`` is given.
        outputs_per_step: int >= 1, the decoder's ``r``.
        mask: optional ``(batch, time)`` mask (weights).
        pos_weight: weight of the positive class (hparams ``cross_entropy_pos_weight``; 1 = plain sigmoid
            cross-entropy).
        count: ``"nonzero_loss"`` (seed) or ``"mask"`` (corrected).
        reduction: ``"global"`` (default: the count summed over data-parallel replicas) or ``"per_replica"``
            (see the module docstring; no effect in one process).

    Returns:
        scalar tensor, float32 (float64 for float64 input), 0.0 when the count is 0 (inside a replica of
        several: the replica's share, as :func:`masked_mse`).

    Raises:
        ValueError: as :func:`masked_mse`, plus an unknown ``count`` or a non-finite ``pos_weight``.

    Example:
    >>> z = tf.constant([[1.0, 0.0]]); x = tf.constant([[0.0, 0.0]])
    >>> round(float(masked_sigmoid_cross_entropy(z, x, [2], outputs_per_step=1)), 6)
    0.693147
    """
    block, doc = "masked_sigmoid_cross_entropy", "(batch, time)"
    reduction = check_loss_reduction(reduction, block)
    if count not in common.COUNT_MODES:
        raise ValueError(f"{block}: argument `count` must be one of {common.COUNT_MODES}; got {count!r}.")
    if not np.isfinite(float(pos_weight)):
        raise ValueError(f"{block}: argument `pos_weight` must be a finite number; got {pos_weight!r}.")
    targets, outputs, checks = _targets_outputs(targets, outputs, block, 2, doc)
    mask = _mask(block, targets, targets_lengths, outputs_per_step, mask, False, doc)
    with tf.control_dependencies(checks):
        mask, (targets, outputs) = _select(mask, targets, outputs)
        losses = tf.nn.weighted_cross_entropy_with_logits(labels=targets, logits=outputs,
                                                          pos_weight=tf.cast(pos_weight, targets.dtype))
        masked = losses * mask
        n = tf.math.count_nonzero(masked if count == "nonzero_loss" else mask, dtype=targets.dtype)
        return distributed_mean(tf.reduce_sum(masked), n, reduction)


def masked_linear_loss(targets, outputs, targets_lengths=None, *, outputs_per_step, mask=None,
                       sample_rate: float, num_freq: int | None = None, low_band_norm: str = "full_mask",
                       reduction: str = DEFAULT_LOSS_REDUCTION):
    """Masked L1 loss of TF1 Tacotron-2 with priority to frequencies below 2 kHz (``MaskedLinearLoss``).

    With ``m`` the ``(batch, time, 1)`` mask broadcast to every bin and
    ``n = int(2000 / (sample_rate * 0.5) * num_freq)`` priority bins:
    ``0.5 * sum(m * |t - o|) / sum(m) + 0.5 * sum(m * |t - o|)[:, :, :n] / sum(m)``.

    Quirk kept from the seed (``low_band_norm="full_mask"``, the default): the low-band term is divided by
    the mask sum over **all** channels, so it is ``n / channels`` times smaller than a low-band mean.
    ``low_band_norm="low_band_mask"`` divides by the low-band mask sum (a true mean). The seed's function
    never returned its value (it ends after computing both means); this returns the documented
    ``0.5 * mean_l1 + 0.5 * mean_l1_low``. Where TF1 would divide 0 by 0 (an all-zero mask) this returns 0.0.
    The time axis must be ``max(targets_lengths)`` rounded up to a multiple of ``outputs_per_step``; an
    explicit ``mask`` overrides the lengths.

    Args:
        targets: float tensor ``(batch, time, num_freq)`` (linear spectrogram).
        outputs: float tensor, same shape.
        targets_lengths: integer tensor ``(batch,)``; ignored when ``mask`` is given.
        outputs_per_step: int >= 1, the decoder's ``r``.
        mask: optional ``(batch, time)``, ``(batch, time, 1)`` or ``(batch, time, channels)`` weights.
        sample_rate: Hz (hparams ``sample_rate``).
        num_freq: hparams ``num_freq``; ``None`` takes the channel count of ``targets``.
        low_band_norm: ``"full_mask"`` (seed) or ``"low_band_mask"`` (corrected).
        reduction: ``"global"`` (default: both mask sums summed over data-parallel replicas) or
            ``"per_replica"`` (see the module docstring; no effect in one process).

    Returns:
        scalar tensor, float32 (float64 for float64 input); inside a replica of several the replica's share.

    Raises:
        ValueError: as :func:`masked_mse`, plus a non-positive ``sample_rate`` or an unknown ``low_band_norm``.

    Example:
    >>> t = tf.zeros((1, 2, 4)); o = tf.ones((1, 2, 4))
    >>> float(masked_linear_loss(t, o, [2], outputs_per_step=1, sample_rate=8000))  # n = 2 of 4 bins
    0.75
    """
    block, doc = "masked_linear_loss", "(batch, time, num_freq)"
    reduction = check_loss_reduction(reduction, block)
    targets, outputs, checks = _targets_outputs(targets, outputs, block, 3, doc)
    n = _check_linear_args(sample_rate, num_freq, targets, low_band_norm, block)
    mask = _mask(block, targets, targets_lengths, outputs_per_step, mask, True, doc)
    with tf.control_dependencies(checks):
        weights, (targets, outputs) = _select(mask, targets, outputs)
        masked_l1 = tf.abs(targets - outputs) * weights
        denominator = tf.reduce_sum(weights)
        low_denominator = denominator if low_band_norm == "full_mask" else tf.reduce_sum(weights[:, :, :n])
        mean_l1 = distributed_mean(tf.reduce_sum(masked_l1), denominator, reduction)
        mean_l1_low = distributed_mean(tf.reduce_sum(masked_l1[:, :, :n]), low_denominator, reduction)
        return 0.5 * mean_l1 + 0.5 * mean_l1_low


# -- keras.losses.Loss classes ---------------------------------------------------------------------------

class _MaskedLoss(keras.losses.Loss):
    """Shared ``__call__``: how a Keras loss receives the lengths or the mask (see the subclasses)."""

    _target_rank = 3

    def __init__(self, outputs_per_step: int, packed: bool = False, name=None,
                 reduction=DEFAULT_LOSS_REDUCTION, dtype=None):
        if reduction == "sum_over_batch_size":  # the Keras default, stored by earlier versions: the global loss
            reduction = "global"
        reduction = check_loss_reduction(reduction, type(self).__name__)
        super().__init__(name=name, reduction="sum_over_batch_size", dtype=dtype)
        self.reduction = reduction  # not a Keras reduction (the value is already a scalar): __call__ is ours
        self.outputs_per_step = check_outputs_per_step(outputs_per_step, "outputs_per_step", type(self).__name__)
        self.packed = bool(packed)

    @classmethod
    def pack(cls, targets, lengths):
        """Packs ``lengths`` into ``y_true`` for ``compile()``/``fit()`` (use with ``packed=True``).

        Args:
            targets: ``(batch, time, channels)`` (cross-entropy: ``(batch, time)``), float32 or float64.
            lengths: integer ``(batch,)``.

        Returns:
            ``(batch, time, channels + 1)`` (cross-entropy: ``(batch, time, 2)``): the targets with one
            extra last channel holding each example's length at every frame (``time >= 1``; the loss
            reads the lengths from frame 0).
        """
        targets = tf.convert_to_tensor(targets)
        if targets.dtype not in (tf.float32, tf.float64):
            raise ValueError(f"{cls.__name__}.pack: argument `targets` must be float32 or float64 so lengths stay "
                             f"exact; got {targets.dtype.name}.")
        if cls._target_rank == 2:
            targets = targets[:, :, None]
        lengths = tf.cast(tf.convert_to_tensor(lengths), targets.dtype)
        extra = tf.ones_like(targets[:, :, :1]) * lengths[:, None, None]
        return tf.concat([targets, extra], axis=-1)

    def _unpack(self, y_true):
        name = type(self).__name__
        if isinstance(y_true, (tuple, list)):
            if len(y_true) != 2:
                raise ValueError(f"{name}: a tuple `y_true` must be (targets, lengths); got {len(y_true)} items.")
            return y_true[0], y_true[1]
        if not self.packed:
            return y_true, None
        y_true = tf.convert_to_tensor(y_true)
        if y_true.dtype not in (tf.float32, tf.float64):
            raise ValueError(f"{name}: a packed `y_true` must be float32 or float64; got {y_true.dtype.name}.")
        if y_true.shape.rank is not None and y_true.shape.rank != 3:
            raise ValueError(f"{name}: a packed `y_true` must have shape (batch, time, channels + 1) built by "
                             f"{name}.pack(targets, lengths); got shape {y_true.shape}.")
        targets = y_true[:, :, 0] if self._target_rank == 2 else y_true[:, :, :-1]
        lengths = tf.cast(tf.round(y_true[:, 0, -1]), tf.int32)
        return targets, lengths

    def __call__(self, y_true, y_pred, sample_weight=None):
        """Computes the loss.

        Args:
            y_true: one of: ``(targets, lengths)``; with ``packed=True`` a tensor made by
                :meth:`pack`; or the plain targets when ``sample_weight`` carries the mask.
            y_pred: outputs of the targets' shape.
            sample_weight: optional mask (``(batch, time)``; 3-D losses also ``(batch, time, 1|channels)``);
                it overrides the lengths, as the seed's ``mask=``.

        Returns:
            scalar float32 loss (float64 for float64 inputs or a float64 loss dtype).
        """
        targets, lengths = self._unpack(y_true)
        if lengths is None and sample_weight is None:
            raise ValueError(f"{type(self).__name__}: no lengths and no mask: pass y_true as (targets, lengths), "
                             "use packed=True with a packed y_true, or pass the (batch, time) mask as "
                             "`sample_weight`.")
        if self.dtype == "float64":
            targets, y_pred = tf.cast(targets, tf.float64), tf.cast(y_pred, tf.float64)
        with tf.name_scope(self.name):
            # inside a replica of several, the function returns the replica's share (``reduction``), which is
            # what Keras' ``fit`` expects of a loss under tf.distribute (it sums the replicas' gradients)
            return self._loss(targets, y_pred, lengths, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(outputs_per_step=self.outputs_per_step, packed=self.packed)
        return config


_LOSS_DOC = """

    How the loss receives the lengths (the seed's ``targets_lengths``), one of:

    * ``loss((targets, lengths), outputs)`` -- a ``(targets, lengths)`` tuple as ``y_true``;
    * ``packed=True`` and ``y_true = {cls}.pack(targets, lengths)`` -- one tensor, as ``compile()``/``fit()``
      want (the lengths ride in an extra last channel);
    * ``loss(targets, outputs, sample_weight=mask)`` -- the Keras temporal-weight slot carries the mask
      (``fit(x, y, sample_weight=mask)``); it overrides the lengths, as the seed's ``mask=``.

    A Keras mask carried by ``y_pred`` (``_keras_mask``) is not used: pass the lengths or ``sample_weight``.
    The value is a scalar already normalised over the masked batch, so ``reduction`` is not a Keras
    reduction: ``"global"`` (default; Keras' ``"sum_over_batch_size"`` is accepted for it) or
    ``"per_replica"`` say how the loss reduces over the replicas of a ``tf.distribute`` strategy in ``fit``
    (see the module docstring: ``"global"`` makes a data-parallel step equal the single-process step on
    the global batch). Computation in float32 whatever the dtype policy (float64 for float64 inputs or
    ``dtype="float64"``).
"""


@keras.saving.register_keras_serializable(package="speechblocks")
class MaskedMSE(_MaskedLoss):
    __doc__ = """Keras loss form of :func:`masked_mse` (TF1 ``tf.losses.mean_squared_error(weights=mask)``).

    Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and the gradients finite,
    where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.

    Args:
        outputs_per_step: int >= 1, the decoder's ``r``.
        packed: read lengths packed into ``y_true`` by :meth:`pack`.
        reduction: ``"global"`` (default) or ``"per_replica"`` (data-parallel reduction, see below).
        name, dtype: ``keras.losses.Loss`` arguments.
    """ + _LOSS_DOC.format(cls="MaskedMSE") + """
    Example:
    >>> loss = MaskedMSE(outputs_per_step=2)
    >>> float(loss((tf.zeros((2, 4, 3)), [3, 1]), tf.ones((2, 4, 3))))
    1.0
    """

    def __init__(self, outputs_per_step: int, packed: bool = False, name="masked_mse",
                 reduction=DEFAULT_LOSS_REDUCTION, dtype=None):
        super().__init__(outputs_per_step, packed, name=name, reduction=reduction, dtype=dtype)

    def _loss(self, targets, outputs, lengths, mask):
        return masked_mse(targets, outputs, lengths, outputs_per_step=self.outputs_per_step, mask=mask,
                          reduction=self.reduction)


@keras.saving.register_keras_serializable(package="speechblocks")
class MaskedSigmoidCrossEntropy(_MaskedLoss):
    __doc__ = """Keras loss form of :func:`masked_sigmoid_cross_entropy` (stop-token loss; ``y_pred`` are logits).

    Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and the gradients finite,
    where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.

    Args:
        outputs_per_step: int >= 1, the decoder's ``r``.
        pos_weight: positive-class weight (hparams ``cross_entropy_pos_weight``).
        count: ``"nonzero_loss"`` (seed: divide by the non-zero masked loss values) or ``"mask"``.
        packed: read lengths packed into ``y_true`` by :meth:`pack` (``(batch, time, 2)``).
        reduction: ``"global"`` (default) or ``"per_replica"`` (data-parallel reduction, see below).
        name, dtype: ``keras.losses.Loss`` arguments.
    """ + _LOSS_DOC.format(cls="MaskedSigmoidCrossEntropy") + """
    Example:
    >>> loss = MaskedSigmoidCrossEntropy(outputs_per_step=1)
    >>> round(float(loss((tf.constant([[1.0, 0.0]]), [2]), tf.zeros((1, 2)))), 6)
    0.693147
    """

    _target_rank = 2

    def __init__(self, outputs_per_step: int, pos_weight: float = 1.0, count: str = "nonzero_loss",
                 packed: bool = False, name="masked_sigmoid_cross_entropy", reduction=DEFAULT_LOSS_REDUCTION,
                 dtype=None):
        super().__init__(outputs_per_step, packed, name=name, reduction=reduction, dtype=dtype)
        self.pos_weight, self.count = common.check_cross_entropy_options(pos_weight, count, "MaskedSigmoidCrossEntropy")

    def _loss(self, targets, outputs, lengths, mask):
        return masked_sigmoid_cross_entropy(targets, outputs, lengths, outputs_per_step=self.outputs_per_step,
                                            mask=mask, pos_weight=self.pos_weight, count=self.count,
                                            reduction=self.reduction)

    def get_config(self):
        config = super().get_config()
        config.update(pos_weight=self.pos_weight, count=self.count)
        return config


@keras.saving.register_keras_serializable(package="speechblocks")
class MaskedLinearLoss(_MaskedLoss):
    __doc__ = """Keras loss form of :func:`masked_linear_loss` (L1 with priority below 2 kHz).

    Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and the gradients finite,
    where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.

    Args:
        outputs_per_step: int >= 1, the decoder's ``r``.
        sample_rate: Hz (hparams ``sample_rate``).
        num_freq: hparams ``num_freq``; ``None`` takes the channel count of the targets.
        low_band_norm: ``"full_mask"`` (seed) or ``"low_band_mask"`` (corrected).
        packed: read lengths packed into ``y_true`` by :meth:`pack`.
        reduction: ``"global"`` (default) or ``"per_replica"`` (data-parallel reduction, see below).
        name, dtype: ``keras.losses.Loss`` arguments.
    """ + _LOSS_DOC.format(cls="MaskedLinearLoss") + """
    Example:
    >>> loss = MaskedLinearLoss(outputs_per_step=1, sample_rate=8000)
    >>> float(loss((tf.zeros((1, 2, 4)), [2]), tf.ones((1, 2, 4))))
    0.75
    """

    def __init__(self, outputs_per_step: int, sample_rate: float, num_freq: int | None = None,
                 low_band_norm: str = "full_mask", packed: bool = False, name="masked_linear_loss",
                 reduction=DEFAULT_LOSS_REDUCTION, dtype=None):
        super().__init__(outputs_per_step, packed, name=name, reduction=reduction, dtype=dtype)
        self.sample_rate, self.num_freq, self.low_band_norm = common.check_linear_loss_options(
            sample_rate, num_freq, low_band_norm, "MaskedLinearLoss")

    def _loss(self, targets, outputs, lengths, mask):
        return masked_linear_loss(targets, outputs, lengths, outputs_per_step=self.outputs_per_step, mask=mask,
                                  sample_rate=self.sample_rate, num_freq=self.num_freq,
                                  low_band_norm=self.low_band_norm, reduction=self.reduction)

    def get_config(self):
        config = super().get_config()
        config.update(sample_rate=self.sample_rate, num_freq=self.num_freq, low_band_norm=self.low_band_norm)
        return config
