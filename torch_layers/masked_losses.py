"""Masked Tacotron-2 losses (``MaskedMSE``, ``MaskedSigmoidCrossEntropy``, ``MaskedLinearLoss``) for torch.

Functions with the seed's arguments (``masked_mse`` ...) and ``nn.Module`` losses of the same names.
Every loss computes in float32 (float64 when an input is float64), whatever the input dtype, so the
float16/bfloat16 outputs of autocast regions neither overflow nor lose the sum. The modules (and
``sequence_mask``) are TorchScript-able; the keyword-only functions call the same scripted code.

Masking by selection: every loss replaces the padding (mask 0) of ``targets`` and ``outputs`` by 0 *before* any
arithmetic, so NaN/inf in the padding reach neither the value nor the gradients (TF1's ``loss * mask`` gives NaN
there: ``0 * NaN``), and the gradient of every padding entry is exactly 0. For finite inputs the values and the
gradients are TF1's (parity rows of ``parity_tests/cases/masked_losses.py``). NaN/inf at valid positions propagate
as in TF1; an all-zero mask gives 0.0.

Data-parallel training (``DistributedDataParallel``; see :mod:`torch_layers.distributed`): every loss takes
``reduction=`` -- how it reduces over the ranks of an initialised ``torch.distributed`` process group with more
than one rank:

* ``"global"`` (default): the loss of the **global** batch, on every rank. The numerators and the counts
  (valid elements, or non-zero masked loss values) of every rank are gathered with gradients and summed in
  rank order, so every rank returns the same value, the one a single process computes on the global batch
  (to float rounding), whatever number of valid frames each rank holds. Each rank's gradient is
  ``world_size`` times its share of the global gradient, which DDP's gradient average divides away: the
  DDP step equals the single-process step on the global batch.
* ``"per_replica"``: each rank's own masked mean; DDP's average then gives the gradient of the mean of the
  ranks' losses -- the original TF1 multi-GPU towers.

Without a process group (or with one rank) both compute exactly the single-process value, bit for bit; a
TorchScript-compiled loss always reduces locally. With more than one rank the time axis of ``targets`` may be
longer than the rank's ``max(targets_lengths)`` rounded up to ``r`` (the rank's slice of a batch padded to its
longest target): it must be a multiple of ``r`` that holds every length. Every rank must call the loss (the
gather is a collective).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

# common: the framework-free part (options, checks, message texts), shared with the other framework's twin
from speechblocks import masked_losses as common
from speechblocks.distributed import DEFAULT_LOSS_REDUCTION, check_loss_reduction
from speechblocks.masked_losses import priority_frequencies

from ._validation import check_float_tensor, check_lengths
from .distributed import on_one_of_several_ranks, sum_over_ranks

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
def check_outputs_per_step(r: int, name: str, block: str) -> int:
    """``r`` must be an int >= 1 (``ValueError`` naming the argument)."""
    if not isinstance(r, int) or r < 1:
        raise ValueError(block + ": argument `" + name + "` must be an integer >= 1; got " + str(r) + ".")
    return r


def checked_lengths(lengths: torch.Tensor, name: str, block: str, batch: int) -> int:
    """Checks a ``(batch,)`` integer lengths tensor with entries >= 0; returns ``max(lengths)`` (0 if empty)."""
    check_lengths(lengths, name, block, batch)
    if lengths.numel() == 0:
        return 0
    if bool((lengths < 0).any()):
        raise ValueError(common.negative_lengths_message(block, name) + "; got a length of "
                         + str(int(lengths.min().item())) + ".")
    return int(lengths.max().item())


def round_up(x: int, multiple: int) -> int:
    """``x`` (>= 0) rounded up to a multiple of ``multiple``: the seed's ``_round_up_tf``."""
    return (x + multiple - 1) // multiple * multiple



def _targets_outputs(targets: torch.Tensor, outputs: torch.Tensor, block: str, rank: int,
                     shape_doc: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Both floating, rank ``rank``, equal shapes (no broadcasting); cast to the compute dtype."""
    check_float_tensor(targets, "targets", block, rank, -1, shape_doc)
    check_float_tensor(outputs, "outputs", block, rank, -1, shape_doc)
    if targets.shape != outputs.shape:
        raise ValueError(common.shape_mismatch_message(block, shape_doc) + "; got targets "
                         + str(list(targets.shape)) + " and outputs " + str(list(outputs.shape)) + ".")
    dtype = torch.float32
    if targets.dtype == torch.float64 or outputs.dtype == torch.float64:
        dtype = torch.float64
    return targets.to(dtype), outputs.to(dtype)


# -- data-parallel reduction ---------------------------------------------------------------------------------
# (eager only: a TorchScript-compiled loss never takes these branches, `torch.jit.is_scripting()` guards them)
def _sharded() -> bool:
    """Whether the loss runs on one rank of several (eager mode with an initialised process group)."""
    if torch.jit.is_scripting():
        return False
    return on_one_of_several_ranks()


def _ratios(numerators: list[torch.Tensor], denominators: list[torch.Tensor], reduction: str) -> list[torch.Tensor]:
    """``numerators[i] / denominators[i]`` (0 where a denominator is 0) -- of the global batch when
    ``reduction == "global"`` on one rank of several (both summed over the ranks by one gather), else local."""
    if reduction == "global" and _sharded():
        n = len(numerators)
        # summed over the ranks in rank order (identical on every rank), gradients flowing back to every rank
        summed = sum_over_ranks(torch.stack(numerators + denominators)).unbind(0)
        numerators, denominators = summed[:n], summed[n:]
    return [_div_no_nan(a, b) for a, b in zip(numerators, denominators)]



def _mask_from_lengths(lengths: Optional[torch.Tensor], targets: torch.Tensor, r: int, block: str,
                       shape_doc: str) -> torch.Tensor:
    """The seed's ``sequence_mask(lengths, r)`` over ``targets``' time axis ``(batch, time)``, with its checks.

    In one process the time axis must be ``max(lengths)`` rounded up to ``r`` (TF1's assertion); on one rank of
    several (a slice of a global batch) any multiple of ``r`` that holds every length."""
    if lengths is None:
        raise ValueError(common.lengths_required_message(block))
    longest = checked_lengths(lengths, "targets_lengths", block, targets.shape[0])
    time = targets.shape[1]
    if longest > time:
        raise ValueError(common.length_too_long_message(block, shape_doc) + "; got max length " + str(longest)
                         + " for time " + str(time) + ".")
    padded = round_up(longest, r)
    if _sharded():
        if time % r != 0:
            raise ValueError(common.replica_not_padded_message(block, r, shape_doc) + "; got max length " + str(longest)
                             + " -> " + str(padded) + " frames for time " + str(time) + ".")
    elif padded != time:
        raise ValueError(common.not_padded_message(block, r, shape_doc) + "; got max length " + str(longest) + " -> "
                         + str(padded) + " frames for time " + str(time) + ".")
    steps = torch.arange(time, device=targets.device)
    return (steps.unsqueeze(0) < lengths.to(targets.device).unsqueeze(1)).to(targets.dtype)


def _explicit_mask(mask: torch.Tensor, targets: torch.Tensor, block: str, per_channel: bool,
                   shape_doc: str) -> torch.Tensor:
    expect = common.mask_shape_expectation(shape_doc, per_channel)
    if per_channel:
        if mask.dim() == 2:
            mask = mask.unsqueeze(-1)
        ok = (mask.dim() == 3 and mask.shape[0] == targets.shape[0] and mask.shape[1] == targets.shape[1]
              and (mask.shape[2] == 1 or mask.shape[2] == targets.shape[2]))
    else:
        ok = mask.shape == targets.shape
    if not ok:
        raise ValueError(block + ": argument `mask` must have shape " + expect + "; got mask " + str(list(mask.shape))
                         + " for targets " + str(list(targets.shape)) + ".")
    return mask.to(device=targets.device, dtype=targets.dtype)


def _mask(block: str, targets: torch.Tensor, targets_lengths: Optional[torch.Tensor], outputs_per_step: int,
          mask: Optional[torch.Tensor], per_channel: bool, shape_doc: str) -> torch.Tensor:
    r = check_outputs_per_step(outputs_per_step, "outputs_per_step", block)
    if mask is not None:
        return _explicit_mask(mask, targets, block, per_channel, shape_doc)
    m = _mask_from_lengths(targets_lengths, targets, r, block, shape_doc)
    return m.unsqueeze(-1) if per_channel else m


def _div_no_nan(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a / b``, 0 where ``b == 0`` (``tf.math.divide_no_nan``, zero gradient there too)."""
    nonzero = b != 0
    safe = torch.where(nonzero, b, torch.ones_like(b))
    return torch.where(nonzero, a / safe, torch.zeros_like(a))


def _smallest_normal(dtype: torch.dtype) -> float:
    return 2.2250738585072014e-308 if dtype == torch.float64 else 1.1754943508222875e-38


def _flush_subnormal(x: torch.Tensor) -> torch.Tensor:
    """Subnormal entries -> 0, as TensorFlow's CPU kernels (flush-to-zero) produce them."""
    return torch.where(x.abs() < _smallest_normal(x.dtype), torch.zeros_like(x), x)


def _count_nonzero_ftz(x: torch.Tensor) -> torch.Tensor:
    """``tf.math.count_nonzero`` as TensorFlow computes it on CPU, where subnormal results are flushed to
    zero: entries with ``|x|`` below the smallest normal number do not count."""
    return (x.abs() >= _smallest_normal(x.dtype)).sum().to(x.dtype)


# -- functions -----------------------------------------------------------------------------------------

def _select(mask: torch.Tensor, targets: torch.Tensor,
            outputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Masking by selection: ``(weights, targets, outputs)`` with ``weights`` the mask expanded to the targets'
    shape and both tensors replaced by 0 where the weight is 0 -- *before* any arithmetic, so NaN/inf in the
    padding reaches neither the value nor the gradient (``where(keep, f(x), 0)`` would still back-propagate
    ``0 * f'(NaN) = NaN``); the gradient of a padding entry is exactly 0. For finite inputs the loss and its
    gradients equal TF1's ``loss * mask`` form (padding adds ``0 * f(0) = 0`` instead of ``0 * f(x) = 0``)."""
    weights = mask.expand(targets.shape)
    keep = weights != 0
    zero = torch.zeros((), dtype=targets.dtype, device=targets.device)
    return weights, torch.where(keep, targets, zero), torch.where(keep, outputs, zero)



def masked_mse(targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor] = None, *,
               outputs_per_step: int, mask: Optional[torch.Tensor] = None,
               reduction: str = DEFAULT_LOSS_REDUCTION) -> torch.Tensor:
    """Masked mean squared error of TF1 Tacotron-2 (``MaskedMSE`` of the seed).

    ``tf.compat.v1.losses.mean_squared_error(weights=mask)`` with reduction ``SUM_BY_NONZERO_WEIGHTS``:
    ``sum(mask * (outputs - targets)**2) / count_nonzero(mask)`` with the ``(batch, time, 1)`` mask
    broadcast to every channel (the divisor counts masked elements); 0.0 for an all-zero mask, as TF1.
    The time axis must be ``max(targets_lengths)`` rounded up to a multiple of ``outputs_per_step`` (the
    seed asserted it); an explicit ``mask`` overrides the lengths and acts as weights.

    Args:
        targets: ``(batch, time, channels)`` float tensor.
        outputs: ``(batch, time, channels)``, same shape.
        targets_lengths: ``(batch,)`` integer tensor, 0 <= length <= time; ignored when ``mask`` is given.
        outputs_per_step: int >= 1, the decoder's ``r``.
        mask: optional ``(batch, time)``, ``(batch, time, 1)`` or ``(batch, time, channels)`` weights.
        reduction: ``"global"`` (default: the loss of the global batch under ``DistributedDataParallel``) or
            ``"per_replica"`` (each rank's own mean); see the module docstring. No effect in one process.

    Returns:
        scalar tensor, float32 (float64 when an input is float64), computed in that dtype.

    Raises:
        ValueError: wrong rank/shape/dtype, ``outputs_per_step < 1``, a negative length, a length longer than
            the time axis, or a time axis other than the padded maximum length.
    """
    reduction = check_loss_reduction(reduction, "masked_mse")
    return _masked_mse(targets, outputs, targets_lengths, outputs_per_step, mask, reduction)


def _masked_mse(targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor],
                outputs_per_step: int, mask: Optional[torch.Tensor], reduction: str = "global") -> torch.Tensor:
    block = "masked_mse"
    doc = "(batch, time, channels)"
    targets, outputs = _targets_outputs(targets, outputs, block, 3, doc)
    m = _mask(block, targets, targets_lengths, outputs_per_step, mask, True, doc)
    weights, targets, outputs = _select(m, targets, outputs)
    total = (weights * (outputs - targets) ** 2).sum()
    return _ratios([total], [(weights != 0).sum().to(targets.dtype)], reduction)[0]


def masked_sigmoid_cross_entropy(targets: torch.Tensor, outputs: torch.Tensor,
                                 targets_lengths: Optional[torch.Tensor] = None, *, outputs_per_step: int,
                                 mask: Optional[torch.Tensor] = None, pos_weight: float = 1.0,
                                 count: str = "nonzero_loss", reduction: str = DEFAULT_LOSS_REDUCTION) -> torch.Tensor:
    """Masked weighted sigmoid cross-entropy of TF1 Tacotron-2 (``MaskedSigmoidCrossEntropy``, stop token).

    Per element the stable form of ``tf.nn.weighted_cross_entropy_with_logits``,
    ``(1 - z) * x + (1 + (pos_weight - 1) * z) * (log1p(exp(-|x|)) + max(-x, 0))``, times the mask; the sum
    is divided by a count. Seed quirk (``count="nonzero_loss"``, default): the divisor is the number of
    non-zero masked *loss values*. TensorFlow flushes subnormal results to zero on CPU, so a loss whose
    ``exp(-|x|)`` underflows (``|x|`` above ~87 in float32) is exactly 0 there and drops out of the count;
    this function flushes the same intermediates so the count (and value) match TF1. ``count="mask"``: divide by the
    number of non-zero mask entries (the corrected mean). A zero count gives 0.0 (TF1: NaN). Shape rules as
    :func:`masked_mse`.

    Args:
        targets: ``(batch, time)`` 0/1 labels.
        outputs: ``(batch, time)`` logits.
        targets_lengths: ``(batch,)`` integer tensor; ignored when ``mask`` is given.
        outputs_per_step: int >= 1.
        mask: optional ``(batch, time)`` weights.
        pos_weight: positive-class weight (hparams ``cross_entropy_pos_weight``).
        count: ``"nonzero_loss"`` (seed) or ``"mask"``.
        reduction: ``"global"`` (default: count and sum over the global batch under ``DistributedDataParallel``)
            or ``"per_replica"``; see the module docstring. No effect in one process.

    Returns:
        scalar tensor, float32 (float64 for float64 input).
    """
    reduction = check_loss_reduction(reduction, "masked_sigmoid_cross_entropy")
    return _masked_sigmoid_cross_entropy(targets, outputs, targets_lengths, outputs_per_step, mask, pos_weight, count,
                                         reduction)


def _masked_sigmoid_cross_entropy(targets: torch.Tensor, outputs: torch.Tensor,
                                  targets_lengths: Optional[torch.Tensor], outputs_per_step: int,
                                  mask: Optional[torch.Tensor], pos_weight: float, count: str,
                                  reduction: str = "global") -> torch.Tensor:
    block = "masked_sigmoid_cross_entropy"
    doc = "(batch, time)"
    if count != "nonzero_loss" and count != "mask":
        raise ValueError(block + ": argument `count` must be 'nonzero_loss' or 'mask'; got '" + count + "'.")
    if pos_weight != pos_weight or abs(pos_weight) == float("inf"):
        raise ValueError(block + ": argument `pos_weight` must be a finite number; got " + str(pos_weight) + ".")
    targets, outputs = _targets_outputs(targets, outputs, block, 2, doc)
    m = _mask(block, targets, targets_lengths, outputs_per_step, mask, False, doc)
    m, targets, outputs = _select(m, targets, outputs)
    log_weight = 1.0 + (pos_weight - 1.0) * targets
    # TensorFlow flushes subnormal float results to zero on CPU: exp(-|x|) for |x| > ~87 (float32) is 0 there,
    # which decides whether a loss value is exactly 0 (and so whether it counts in the seed's divisor)
    tail = _flush_subnormal(torch.exp(-outputs.abs()))
    losses = (1.0 - targets) * outputs + log_weight * (torch.log1p(tail) + torch.relu(-outputs))
    masked = losses * m
    if count == "nonzero_loss":
        n = _count_nonzero_ftz(masked)
    else:
        n = (m != 0).sum().to(targets.dtype)
    return _ratios([masked.sum()], [n], reduction)[0]


def masked_linear_loss(targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor] = None,
                       *, outputs_per_step: int, sample_rate: float, mask: Optional[torch.Tensor] = None,
                       num_freq: Optional[int] = None, low_band_norm: str = "full_mask",
                       reduction: str = DEFAULT_LOSS_REDUCTION) -> torch.Tensor:
    """Masked L1 loss of TF1 Tacotron-2 with priority to frequencies below 2 kHz (``MaskedLinearLoss``).

    ``n = int(2000 / (sample_rate * 0.5) * num_freq)``; with ``m`` the mask broadcast to every bin:
    ``0.5 * sum(m * |t - o|) / sum(m) + 0.5 * sum((m * |t - o|)[:, :, :n]) / sum(m)``. Seed quirk
    (``low_band_norm="full_mask"``, default): the low-band term divides by the mask sum over **all**
    channels; ``"low_band_mask"`` divides by the low-band mask sum (a true mean). The seed never returned
    its value; this returns the documented combination. An all-zero mask gives 0.0 (TF1: NaN). Shape rules
    as :func:`masked_mse`.

    Args:
        targets: ``(batch, time, num_freq)`` linear spectrogram.
        outputs: same shape.
        targets_lengths: ``(batch,)`` integer tensor; ignored when ``mask`` is given.
        outputs_per_step: int >= 1.
        sample_rate: Hz (hparams ``sample_rate``).
        mask: optional ``(batch, time)``, ``(batch, time, 1)`` or ``(batch, time, channels)`` weights.
        num_freq: hparams ``num_freq``; ``None`` takes ``targets.shape[-1]``.
        low_band_norm: ``"full_mask"`` (seed) or ``"low_band_mask"``.
        reduction: ``"global"`` (default: both sums and mask sums over the global batch under
            ``DistributedDataParallel``) or ``"per_replica"``; see the module docstring. No effect in one process.

    Returns:
        scalar tensor, float32 (float64 for float64 input).
    """
    reduction = check_loss_reduction(reduction, "masked_linear_loss")
    return _masked_linear_loss(targets, outputs, targets_lengths, outputs_per_step, sample_rate, mask, num_freq,
                               low_band_norm, reduction)


def _masked_linear_loss(targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor],
                        outputs_per_step: int, sample_rate: float, mask: Optional[torch.Tensor],
                        num_freq: Optional[int], low_band_norm: str, reduction: str = "global") -> torch.Tensor:
    block = "masked_linear_loss"
    doc = "(batch, time, num_freq)"
    if low_band_norm != "full_mask" and low_band_norm != "low_band_mask":
        raise ValueError(block + ": argument `low_band_norm` must be 'full_mask' or 'low_band_mask'; got '"
                         + low_band_norm + "'.")
    if not sample_rate > 0 or sample_rate == float("inf"):
        raise ValueError(block + ": argument `sample_rate` must be a positive number (Hz); got " + str(sample_rate)
                         + ".")
    targets, outputs = _targets_outputs(targets, outputs, block, 3, doc)
    freq = targets.shape[-1] if num_freq is None else num_freq
    if freq < 1:
        raise ValueError(block + ": argument `num_freq` must be >= 1; got " + str(freq) + ".")
    n = priority_frequencies(sample_rate, freq)
    m = _mask(block, targets, targets_lengths, outputs_per_step, mask, True, doc)
    weights, targets, outputs = _select(m, targets, outputs)
    masked_l1 = (targets - outputs).abs() * weights
    denominator = weights.sum()
    low = max(n, 0)
    if low_band_norm == "full_mask":
        low_denominator = denominator
    else:
        low_denominator = weights[:, :, :low].sum()
    mean_l1, mean_l1_low = _ratios([masked_l1.sum(), masked_l1[:, :, :low].sum()], [denominator, low_denominator],
                                   reduction)
    return 0.5 * mean_l1 + 0.5 * mean_l1_low


# -- modules -------------------------------------------------------------------------------------------

class MaskedMSE(nn.Module):
    """Module form of :func:`masked_mse` (TF1 ``tf.losses.mean_squared_error(weights=mask)``).

    Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and the gradients finite,
    where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.

    Args:
        outputs_per_step: int >= 1, the decoder's ``r``.
        reduction: ``"global"`` (default) or ``"per_replica"``: how the loss reduces over the ranks of a
            ``DistributedDataParallel`` run (see the module docstring; no effect in one process).
        device: factory keyword (the loss has no parameters; accepted for uniformity).
        dtype: factory keyword (likewise).

    Example:
        >>> loss = MaskedMSE(outputs_per_step=2)
        >>> float(loss(torch.zeros(2, 4, 3), torch.ones(2, 4, 3), torch.tensor([3, 1])))
        1.0
    """

    def __init__(self, outputs_per_step: int, reduction: str = DEFAULT_LOSS_REDUCTION, device=None, dtype=None):
        super().__init__()
        self.outputs_per_step = check_outputs_per_step(int(outputs_per_step), "outputs_per_step", "MaskedMSE")
        self.reduction = check_loss_reduction(reduction, "MaskedMSE")

    def forward(self, targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            targets: ``(batch, time, channels)``.
            outputs: ``(batch, time, channels)``.
            targets_lengths: ``(batch,)`` integers; ignored when ``mask`` is given.
            mask: optional ``(batch, time)``, ``(batch, time, 1)`` or ``(batch, time, channels)``.

        Returns:
            scalar loss (float32, or float64 for float64 input).
        """
        return _masked_mse(targets, outputs, targets_lengths, self.outputs_per_step, mask, self.reduction)

    def extra_repr(self) -> str:
        return f"outputs_per_step={self.outputs_per_step}, reduction={self.reduction!r}"


class MaskedSigmoidCrossEntropy(nn.Module):
    """Module form of :func:`masked_sigmoid_cross_entropy` (stop-token loss on logits).

    Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and the gradients finite,
    where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.

    Args:
        outputs_per_step: int >= 1.
        pos_weight: positive-class weight (hparams ``cross_entropy_pos_weight``).
        count: ``"nonzero_loss"`` (seed quirk) or ``"mask"`` (corrected).
        reduction: ``"global"`` (default) or ``"per_replica"`` (data-parallel reduction, see the module docstring).
        device: factory keyword (no parameters; accepted for uniformity).
        dtype: factory keyword (likewise).

    Example:
        >>> loss = MaskedSigmoidCrossEntropy(outputs_per_step=1)
        >>> round(float(loss(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2), torch.tensor([2]))), 6)
        0.693147
    """

    def __init__(self, outputs_per_step: int, pos_weight: float = 1.0, count: str = "nonzero_loss",
                 reduction: str = DEFAULT_LOSS_REDUCTION, device=None, dtype=None):
        super().__init__()
        self.outputs_per_step = check_outputs_per_step(int(outputs_per_step), "outputs_per_step",
                                                       "MaskedSigmoidCrossEntropy")
        self.pos_weight, self.count = common.check_cross_entropy_options(pos_weight, count, "MaskedSigmoidCrossEntropy")
        self.reduction = check_loss_reduction(reduction, "MaskedSigmoidCrossEntropy")

    def forward(self, targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            targets: ``(batch, time)`` 0/1 labels.
            outputs: ``(batch, time)`` logits.
            targets_lengths: ``(batch,)`` integers; ignored when ``mask`` is given.
            mask: optional ``(batch, time)``.

        Returns:
            scalar loss (float32, or float64 for float64 input); 0.0 when the count is 0.
        """
        return _masked_sigmoid_cross_entropy(targets, outputs, targets_lengths, self.outputs_per_step, mask,
                                             self.pos_weight, self.count, self.reduction)

    def extra_repr(self) -> str:
        return (f"outputs_per_step={self.outputs_per_step}, pos_weight={self.pos_weight}, count={self.count!r}, "
                f"reduction={self.reduction!r}")


class MaskedLinearLoss(nn.Module):
    """Module form of :func:`masked_linear_loss` (L1 with priority below 2 kHz).

    Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and the gradients finite,
    where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.

    Args:
        outputs_per_step: int >= 1.
        sample_rate: Hz (hparams ``sample_rate``).
        num_freq: hparams ``num_freq``; ``None`` takes ``targets.shape[-1]``.
        low_band_norm: ``"full_mask"`` (seed quirk) or ``"low_band_mask"`` (corrected).
        reduction: ``"global"`` (default) or ``"per_replica"`` (data-parallel reduction, see the module docstring).
        device: factory keyword (no parameters; accepted for uniformity).
        dtype: factory keyword (likewise).

    Example:
        >>> loss = MaskedLinearLoss(outputs_per_step=1, sample_rate=8000)
        >>> float(loss(torch.zeros(1, 2, 4), torch.ones(1, 2, 4), torch.tensor([2])))
        0.75
    """

    def __init__(self, outputs_per_step: int, sample_rate: float, num_freq: Optional[int] = None,
                 low_band_norm: str = "full_mask", reduction: str = DEFAULT_LOSS_REDUCTION, device=None, dtype=None):
        super().__init__()
        self.outputs_per_step = check_outputs_per_step(int(outputs_per_step), "outputs_per_step", "MaskedLinearLoss")
        sample_rate, num_freq, low_band_norm = common.check_linear_loss_options(
            sample_rate, num_freq, low_band_norm, "MaskedLinearLoss")
        self.sample_rate = sample_rate
        self.num_freq: Optional[int] = num_freq
        self.low_band_norm = low_band_norm
        self.reduction = check_loss_reduction(reduction, "MaskedLinearLoss")

    def forward(self, targets: torch.Tensor, outputs: torch.Tensor, targets_lengths: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            targets: ``(batch, time, num_freq)``.
            outputs: same shape.
            targets_lengths: ``(batch,)`` integers; ignored when ``mask`` is given.
            mask: optional ``(batch, time)``, ``(batch, time, 1)`` or ``(batch, time, channels)``.

        Returns:
            scalar loss (float32, or float64 for float64 input).
        """
        return _masked_linear_loss(targets, outputs, targets_lengths, self.outputs_per_step, self.sample_rate, mask,
                                   self.num_freq, self.low_band_norm, self.reduction)

    def extra_repr(self) -> str:
        return (f"outputs_per_step={self.outputs_per_step}, sample_rate={self.sample_rate}, "
                f"num_freq={self.num_freq}, low_band_norm={self.low_band_norm!r}, reduction={self.reduction!r}")
