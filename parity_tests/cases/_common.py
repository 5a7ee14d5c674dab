"""Helpers shared by the parity case modules."""
from __future__ import annotations

import numpy as np

FLOAT32_TOL = 1e-5
LONG_RECURRENCE_TOL = 1e-4


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(shape, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (scale * rng(seed).standard_normal(shape)).astype(np.float32)


def keras_from_checkpoint(block, result):
    """Loads a Keras block from a legacy result's real TF1 checkpoint (strict)."""
    from tf_layers.checkpoint import load_tf1_checkpoint

    load_tf1_checkpoint(block, result.checkpoint, result.block_scope)
    return block


def torch_from_checkpoint(module, result):
    """Loads a torch module from a legacy result's real TF1 checkpoint (strict)."""
    from tf_layers.checkpoint import read_tf1_checkpoint

    module.load_tf1_weights(read_tf1_checkpoint(result.checkpoint, prefix=result.block_scope))
    return module


def keras_to_torch(keras_block, torch_module):
    """Moves weights Keras -> torch with the public ``speechblocks.parity.move_weights``: the project's blocks move by
    their TF1 names (``tf1_weights()`` -> ``load_tf1_weights()``, strict: every name on both sides, all or nothing)."""
    from speechblocks.parity.weights import move_weights

    move_weights(keras_block, torch_module)
    return torch_module


def to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def torch_tensor(a):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))
