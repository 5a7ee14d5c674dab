"""Reading TF1 checkpoints (in numpy, :mod:`speechblocks.tf1_checkpoint`), loading them into blocks, and
migrating whole Tacotron-2 checkpoints (the machinery lives in :mod:`speechblocks.migration`).

* :func:`read_tf1_checkpoint` / :func:`load_tf1_checkpoint`: one block at a time.
* :func:`inspect_checkpoint`: every Tacotron-2 block a checkpoint holds, with its inferred config.
* :func:`migrate_checkpoint`: writes a Keras ``.weights.h5`` or torch ``.pt`` file (``speechblocks migrate``).
* :func:`load_migrated`: ``{block_path: keras layer}`` from a migrated Keras file
  (``torch_layers.load_migrated`` reads the torch file).
"""
from __future__ import annotations

# the migration machinery (speechblocks.migration, framework-free); importing it imports no framework
from speechblocks.migration import (
    MigrationError,
    NoTacotronBlocksError,
    inspect_checkpoint,
    is_optimizer_variable,
    load_migrated,
    migrate_checkpoint,
)
from speechblocks.tf1_checkpoint import load_tf1_checkpoint, read_tf1_checkpoint, read_tf1_weights
from speechblocks.tf1_checkpoint_file import CheckpointError, CheckpointNotFoundError, NonFiniteWeightsError

__all__ = ["read_tf1_checkpoint", "read_tf1_weights", "load_tf1_checkpoint", "is_optimizer_variable", "inspect_checkpoint",
           "migrate_checkpoint", "load_migrated", "MigrationError", "NoTacotronBlocksError", "CheckpointError",
           "CheckpointNotFoundError", "NonFiniteWeightsError"]
