"""CBHG's constructor checks, shared by ``tf_layers.CBHG`` and ``torch_layers.CBHG`` (imports no framework)."""
from __future__ import annotations

from .arguments import check_bn_position

__all__ = ["check_cbhg_arguments"]


def check_cbhg_arguments(K, conv_channels, pool_size, projections, projection_kernel_size, n_highwaynet_layers,
                         highway_units, rnn_units, bn_position, input_size=None) -> list[int]:
    """Checks CBHG's sizes (``ValueError`` naming the first bad argument); returns ``projections`` as two ints.

    ``input_size`` (torch, where the input width is a constructor argument) must equal ``projections[1]``:
    the residual connection adds the input to proj2's output. ``None`` skips it (Keras learns the input
    width when it builds).
    """
    check_bn_position(bn_position, "CBHG")
    sizes = [] if input_size is None else [("input_size", input_size)]
    sizes += [("K", K), ("conv_channels", conv_channels), ("pool_size", pool_size),
              ("projection_kernel_size", projection_kernel_size), ("highway_units", highway_units),
              ("rnn_units", rnn_units)]
    for name, value in sizes:
        if int(value) < 1:
            raise ValueError(f"CBHG: `{name}` must be >= 1; got {value}.")
    if int(n_highwaynet_layers) < 0:
        raise ValueError(f"CBHG: `n_highwaynet_layers` must be >= 0; got {n_highwaynet_layers}.")
    projections = [int(p) for p in projections]
    if len(projections) != 2 or min(projections) < 1:
        raise ValueError(f"CBHG: `projections` must hold two positive sizes (proj1, proj2); got {projections}.")
    if input_size is not None and input_size != projections[1]:
        raise ValueError(f"CBHG: `input_size` ({input_size}) must equal projections[1] ({projections[1]}): "
                         "the residual connection adds the input to proj2's output.")
    return projections
