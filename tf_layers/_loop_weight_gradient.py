"""A recurrent loop's weight gradient in one product after the loop, instead of one per step.

Inside a ``tf.while_loop`` a step's ``gates = x_t @ W + b`` makes TensorFlow's loop gradient compute, at every step,
the outer product ``x_t^T dy_t`` (a ``(in, out)`` matrix: 32 MiB for a Tacotron-2 decoder LSTM) and add it to an
accumulator of the same size: at RTVC sizes two thirds of a training step's time. This module moves that sum out of
the loop: the loop multiplies by ``tf.stop_gradient(W)`` (the gradient for ``x_t`` stays in the loop) and adds a
per-step tensor from :func:`weight_gradient_tap`, whose value is the ``base`` it is given (the precomputed input part
and bias, or the bias alone) and whose gradient hands ``W`` the whole ``sum_t x_t^T dy_t`` as one matrix product over
the stacked step inputs, which the loop writes out and :class:`StepInputs` carries to the gradient. The sum is the
same; only its float rounding order differs (the torch twin is ``torch_layers._packed_linear.WeightGradTap``).
"""
from __future__ import annotations

import tensorflow as tf

__all__ = ["StepInputs", "weight_gradient_tap"]


class StepInputs:
    """Each tapped product's stacked step inputs ``(steps, batch, in)``, set after the loop (``inputs[k]``)."""

    def __init__(self, n: int):
        self.inputs: list = [None] * n


def weight_gradient_tap(base, kernel, holder: StepInputs, index: int):
    """``base`` ``(steps, batch, out)`` unchanged; in the gradient, ``base`` gets the upstream gradient ``dy`` and
    ``kernel`` ``(in, out)`` gets ``X^T dy`` over every step and batch row, ``X = holder.inputs[index]``
    ``(steps, batch, in)`` (the inputs the loop multiplied by ``tf.stop_gradient(kernel)``)."""

    @tf.custom_gradient
    def tap(base, kernel):
        def grad(dy):
            x = holder.inputs[index]
            if x is None:
                raise RuntimeError(f"weight_gradient_tap: the loop did not record the inputs of product {index}")
            rows_in = tf.reshape(x, [-1, tf.shape(x)[-1]])
            rows_dy = tf.reshape(dy, [-1, tf.shape(dy)[-1]])
            return dy, tf.matmul(rows_in, rows_dy, transpose_a=True)

        return tf.identity(base), grad

    return tap(base, kernel)
