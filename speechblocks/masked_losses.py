"""The framework-free part of the masked Tacotron-2 losses (Keras and torch twins).

Option values and their checks, the seed's priority-band size, and the texts of the errors both twins
raise. The message builders are plain annotated string functions, so the TorchScript-compiled torch
losses call them too. Imports no framework.
"""
from __future__ import annotations

import math

__all__ = ["COUNT_MODES", "LOW_BAND_NORMS", "priority_frequencies", "check_cross_entropy_options",
           "check_linear_loss_options", "negative_lengths_message", "lengths_required_message",
           "length_too_long_message", "not_padded_message", "shape_mismatch_message", "mask_shape_expectation"]

#: divisor of the cross-entropy: the seed's non-zero masked loss values, or the corrected mask count
COUNT_MODES = ("nonzero_loss", "mask")
#: divisor of the linear loss's low band: the seed's full mask sum, or the corrected low-band mask sum
LOW_BAND_NORMS = ("full_mask", "low_band_mask")


def priority_frequencies(sample_rate: float, num_freq: int) -> int:
    """The seed's ``n_priority_freq = int(2000 / (sample_rate * 0.5) * num_freq)``: bins below 2 kHz."""
    return int(2000 / (sample_rate * 0.5) * num_freq)


# -- options of the loss classes ----------------------------------------------------------------------
def check_cross_entropy_options(pos_weight, count: str, block: str) -> tuple[float, str]:
    """``count`` one of :data:`COUNT_MODES`, ``pos_weight`` finite; returns ``(float(pos_weight), count)``."""
    if count not in COUNT_MODES:
        raise ValueError(f"{block}: argument `count` must be one of {COUNT_MODES}; got {count!r}.")
    if not math.isfinite(float(pos_weight)):
        raise ValueError(f"{block}: argument `pos_weight` must be finite; got {pos_weight!r}.")
    return float(pos_weight), count


def check_linear_loss_options(sample_rate, num_freq, low_band_norm: str, block: str) -> tuple[float, int | None, str]:
    """``low_band_norm`` one of :data:`LOW_BAND_NORMS`, ``sample_rate`` > 0, ``num_freq`` None or >= 1;
    returns ``(float(sample_rate), num_freq as int or None, low_band_norm)``."""
    if low_band_norm not in LOW_BAND_NORMS:
        raise ValueError(f"{block}: argument `low_band_norm` must be one of {LOW_BAND_NORMS}; got {low_band_norm!r}.")
    if not math.isfinite(float(sample_rate)) or float(sample_rate) <= 0:
        raise ValueError(f"{block}: argument `sample_rate` must be a positive number; got {sample_rate!r}.")
    if num_freq is not None and int(num_freq) < 1:
        raise ValueError(f"{block}: argument `num_freq` must be >= 1; got {num_freq!r}.")
    return float(sample_rate), None if num_freq is None else int(num_freq), low_band_norm


# -- messages (TorchScript-compatible: annotated, str concatenation) ----------------------------------------
def negative_lengths_message(block: str, name: str) -> str:
    """A length below 0 (the caller appends ``"; got ..."``)."""
    return block + ": argument `" + name + "` must hold lengths >= 0, expected shape (batch,)"


def lengths_required_message(block: str) -> str:
    """Neither lengths nor a mask were given."""
    return (block + ": argument `targets_lengths` (integer tensor of shape (batch,)) is required when `mask` is "
            "None.")


def length_too_long_message(block: str, shape_doc: str) -> str:
    """A length exceeds the time axis (the caller appends ``"; got ..."``)."""
    return (block + ": argument `targets_lengths` holds a length longer than the time axis of `targets` " + shape_doc
            + "; every length must be <= time")


def not_padded_message(block: str, r: int, shape_doc: str) -> str:
    """The time axis is not ``max(lengths)`` rounded up to a multiple of ``r`` (the caller appends ``"; got ..."``)."""
    return (block + ": argument `targets_lengths`: max(targets_lengths) rounded up to a multiple of outputs_per_step="
            + str(r) + " must equal the time axis of `targets` " + shape_doc + " (TF1 Tacotron-2 pads targets to "
            "exactly that length); pad or crop targets and outputs, or pass `mask=`")


def replica_not_padded_message(block: str, r: int, shape_doc: str) -> str:
    """On one data-parallel replica (rank) of several: the time axis is not a multiple of ``r`` (the caller appends
    ``"; got ..."``)."""
    return (block + ": argument `targets`: inside a data-parallel replica the time axis of `targets` " + shape_doc
            + " must be a multiple of outputs_per_step=" + str(r) + " holding every length (a slice of a batch padded "
            "to its longest target)")


def shape_mismatch_message(block: str, shape_doc: str) -> str:
    """``outputs`` and ``targets`` differ in shape (the caller appends ``"; got ..."``)."""
    return (block + ": argument `outputs` must have the shape of `targets`, expected shape " + shape_doc
            + " for both (no broadcasting)")


def mask_shape_expectation(shape_doc: str, per_channel: bool) -> str:
    """The shapes an explicit ``mask`` may have, as the messages word them."""
    if per_channel:
        return "(batch, time), (batch, time, 1) or (batch, time, channels) with targets " + shape_doc
    return shape_doc + " like targets"
