"""Migration of legacy TF1 Tacotron-2 checkpoints to Keras and PyTorch (``speechblocks inspect`` / ``migrate``;
framework-free).

* :mod:`.schema` -- which blocks exist, their TF1 names, and how a block's constructor config is
  inferred from variable shapes (pure Python, no framework import).
* :mod:`.inventory` -- reads a checkpoint's variable list and sorts every variable into a recognised
  block, optimizer state, ExponentialMovingAverage shadow, or "unmigrated".
* :mod:`.migrated_file` -- what both frameworks need to read a migrated file (no framework import).
* :mod:`.migrate` -- the driver (the application layer: it imports the target framework, lazily): builds the
  blocks, loads the weights, and writes the Keras (``.weights.h5``) or torch (``.pt``) file atomically;
  :func:`load_migrated` reads a Keras file back (``tf_layers.checkpoint.load_migrated``).
* :mod:`.cli` -- ``inspect_main`` / ``migrate_main`` of the ``speechblocks`` console script.

Importing this package imports neither TensorFlow nor torch; the functions import what they need.
"""
from __future__ import annotations

from .inventory import CheckpointInventory, RecognisedBlock, inspect_checkpoint, is_optimizer_variable
from .migrate import MigrationError, MigrationReport, load_migrated, migrate_checkpoint
from .migrated_file import MigratedFileError
from .schema import BLOCK_PATHS, NoTacotronBlocksError

__all__ = [
    "BLOCK_PATHS",
    "CheckpointInventory",
    "MigratedFileError",
    "MigrationError",
    "MigrationReport",
    "NoTacotronBlocksError",
    "RecognisedBlock",
    "inspect_checkpoint",
    "is_optimizer_variable",
    "load_migrated",
    "migrate_checkpoint",
]
