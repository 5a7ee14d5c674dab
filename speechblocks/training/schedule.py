"""The original learning-rate schedule (``Tacotron._learning_rate_decay``, the same in both originals)."""
from __future__ import annotations

import math

from ._hparams import get_bool, get_float, get_int

__all__ = ["learning_rate"]


def learning_rate(step: int, hparams) -> float:
    """The learning rate the original optimizer uses at a global step.

    With ``tacotron_decay_learning_rate`` the original computes ``tf.train.exponential_decay(init,
    global_step - tacotron_start_decay, tacotron_decay_steps, tacotron_decay_rate)`` -- not staircase, so the
    exponent is the real quotient -- and clips it to ``[tacotron_final_learning_rate,
    tacotron_initial_learning_rate]``::

        lr(step) = min(max(init * rate ** ((step - start_decay) / decay_steps), final), init)

    Before ``tacotron_start_decay`` the exponent is negative, the unclipped value exceeds ``init`` and the clip
    returns ``init``: the rate is constant until the decay starts, then falls continuously until it reaches the
    floor ``final``. Without decay the rate is ``tacotron_initial_learning_rate`` at every step. The original
    evaluates this in float32; this is the float64 value.

    Args:
        step (int): the global step the update is computed at (the graph's ``global_step`` before it is
            incremented: 0 for the first update), ``>= 0``.
        hparams: a preset name (``"rtvc"``, ``"rayhane"``), a mapping or an object with the original names
            ``tacotron_decay_learning_rate``, ``tacotron_initial_learning_rate`` and, when decaying,
            ``tacotron_start_decay``, ``tacotron_decay_steps``, ``tacotron_decay_rate``,
            ``tacotron_final_learning_rate``.

    Returns:
        float: the learning rate.

    Raises:
        ValueError: if ``step`` is not an integer ``>= 0`` or an hparam is missing or invalid (naming it).

    Example:
        >>> learning_rate(0, "rtvc"), learning_rate(150_000, "rtvc")
        (0.001, 0.00025)
    """
    if isinstance(step, bool) or not hasattr(step, "__index__"):
        raise ValueError(f"learning_rate: `step` must be an integer >= 0; got {step!r}.")
    step = int(step.__index__())
    if step < 0:
        raise ValueError(f"learning_rate: `step` must be an integer >= 0; got {step}.")
    init = get_float(hparams, "tacotron_initial_learning_rate", low=0.0)
    if not get_bool(hparams, "tacotron_decay_learning_rate"):
        return init
    start = get_int(hparams, "tacotron_start_decay", minimum=0)
    decay_steps = get_int(hparams, "tacotron_decay_steps", minimum=1)
    rate = get_float(hparams, "tacotron_decay_rate", low=0.0, low_open=True)
    final = get_float(hparams, "tacotron_final_learning_rate", low=0.0)
    try:
        decayed = init * rate ** ((step - start) / decay_steps)
    except OverflowError:  # far before the start with a tiny rate: the unclipped value is huge
        decayed = math.inf
    return float(min(max(decayed, final), init))
