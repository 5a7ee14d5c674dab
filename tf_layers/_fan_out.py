"""``fan_out``: several uses of one tensor inside a ``tf.while_loop`` body without an ``AddN`` of three or more inputs
in the loop's gradient (TensorFlow's memory optimizer can turn such an ``AddN`` into a temporary variable that fails
with ``AlreadyExistsError`` on the next call of a training step; tensorflow#23780)."""
from __future__ import annotations

import tensorflow as tf


def fan_out(x, n: int):
    """``n`` copies of ``x`` whose gradients are summed with binary adds.

    A tensor consumed by three or more ops inside a ``tf.while_loop`` body gets an ``AddN`` of as many inputs in the
    loop's gradient; TensorFlow's memory optimizer rewrites such an ``AddN`` into a temporary variable that fails
    with AlreadyExistsError on the next call of the training step (seen at real Tacotron-2 sizes from the second
    ``fit`` step on). Give each use its own copy: every ``AddN`` then has at most two inputs.
    """
    @tf.custom_gradient
    def copies(v):
        def grad(*upstream):
            total = None
            for g in upstream:
                if g is not None:
                    total = g if total is None else total + g
            return tf.zeros_like(v) if total is None else total

        return [tf.identity(v) for _ in range(n)], grad

    return copies(x)
