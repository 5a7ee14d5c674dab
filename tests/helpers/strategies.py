"""Hypothesis strategies shared by the property tests (``tests/test_properties_*.py``).

Sizes stay small (the whole suite has a time budget); the length draws always include the edge cases the
issue names: every length 1, every length = time, all lengths equal, one long sequence among many short ones.
Values are plain numpy arrays (framework-free); weights are drawn as a seed (``weight_seeds``), not as arrays,
so a block is built once per test module and only reloaded.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

#: how a batch's lengths are laid out; every draw picks one of them
LENGTH_LAYOUTS = ("random", "all_one", "all_full", "all_equal", "one_long_many_short")

weight_seeds = st.integers(0, 2**16)
value_seeds = st.integers(0, 2**16)


def lengths_array(layout: str, batch: int, time: int, rng: np.random.Generator, min_length: int = 1) -> np.ndarray:
    """``(batch,)`` int32 lengths in ``[min_length, time]`` laid out as ``layout`` (see ``LENGTH_LAYOUTS``)."""
    low = min(min_length, time)
    if layout == "all_one":
        out = np.full(batch, low)
    elif layout == "all_full":
        out = np.full(batch, time)
    elif layout == "all_equal":
        out = np.full(batch, rng.integers(low, time + 1))
    elif layout == "one_long_many_short":
        out = np.full(batch, low)
        out[rng.integers(batch)] = time
    else:
        out = rng.integers(low, time + 1, size=batch)
    return out.astype(np.int32)


@st.composite
def batch_lengths(draw, max_batch: int = 4, max_time: int = 7, min_batch: int = 1, min_length: int = 1):
    """``(time, lengths)``: ``lengths`` of a drawn batch size and layout, ``max(lengths) <= time``."""
    batch = draw(st.integers(min_batch, max_batch))
    time = draw(st.integers(max(min_length, 1), max_time))
    layout = draw(st.sampled_from(LENGTH_LAYOUTS))
    rng = np.random.default_rng(draw(value_seeds))
    return time, lengths_array(layout, batch, time, rng, min_length)


@st.composite
def paddings(draw, max_extra: int = 5):
    """``(extra frames appended, seed of the padding values)``; ``extra`` is 0 in some draws (only the padding
    already present past each length is replaced)."""
    return draw(st.integers(0, max_extra)), draw(value_seeds)


def normal(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def padding_values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Finite arbitrary padding: large normal values (scale 100) for floats, uniform bytes for integers."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, size=shape).astype(dtype)
    return (100.0 * rng.standard_normal(shape)).astype(dtype)


def round_up(n: int, multiple: int) -> int:
    return -(-int(n) // multiple) * multiple


@st.composite
def sequence_batches(draw, channels: int, max_batch: int = 4, max_time: int = 7):
    """``{"inputs": (batch, time, channels) float32, "input_lengths": (batch,) int32}`` (the lengths of
    :func:`batch_lengths`)."""
    time, lengths = draw(batch_lengths(max_batch=max_batch, max_time=max_time))
    x = normal(np.random.default_rng(draw(value_seeds)), (len(lengths), time, channels))
    return {"inputs": x, "input_lengths": lengths}
