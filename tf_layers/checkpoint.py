"""Reading TF1 checkpoints (in numpy, :mod:`speechblocks.tf1_checkpoint`), loading them into blocks, and reading the
Keras files of ``speechblocks migrate``.

* :func:`read_tf1_checkpoint` / :func:`load_tf1_checkpoint`: one block at a time.
* :func:`inspect_checkpoint`: every Tacotron-2 block a checkpoint holds, with its inferred config.
* :func:`load_migrated`: ``{block_path: keras layer}`` from a migrated Keras file
  (``torch_layers.load_migrated`` reads the torch file); :func:`build_migrated_block`: one of them.

The migration itself (``speechblocks migrate``) is the application layer's: ``speechblocks.migration``'s
``migrate_checkpoint``, which builds the Keras blocks with :func:`build_migrated_block`. This module imports the
framework-free core only.
"""
from __future__ import annotations

import os

from speechblocks.migration.inventory import inspect_checkpoint, is_optimizer_variable
from speechblocks.migration.migrated_file import (
    file_error,
    model_from_keras_file,
    read_block_table,
    read_keras_file,
)
from speechblocks.migration.schema import MigrationError, NoTacotronBlocksError
from speechblocks.state_dict import one_line
from speechblocks.tacotron2_schema import MODEL_BLOCK_ATTRIBUTES, model_block
from speechblocks.tf1_checkpoint import load_tf1_checkpoint, read_tf1_checkpoint, read_tf1_weights
from speechblocks.tf1_checkpoint_file import CheckpointError, CheckpointNotFoundError, NonFiniteWeightsError

from .cbhg import CBHG
from .decoder_rnn import DecoderRNN
from .encoder_convolutions import EncoderConvolutions
from .encoder_rnn import EncoderRNN
from .frame_projection import FrameProjection
from .postnet import Postnet
from .prenet import Prenet
from .stop_projection import StopProjection

__all__ = ["read_tf1_checkpoint", "read_tf1_weights", "load_tf1_checkpoint", "is_optimizer_variable",
           "inspect_checkpoint", "load_migrated", "build_migrated_block", "MIGRATED_BLOCK_CLASSES", "MigrationError",
           "NoTacotronBlocksError", "CheckpointError", "CheckpointNotFoundError", "NonFiniteWeightsError"]

#: the Keras class of every class name a migrated file's block table may hold
#: (``speechblocks.migration.schema.BLOCK_CLASSES``)
MIGRATED_BLOCK_CLASSES = {cls.__name__: cls for cls in (CBHG, DecoderRNN, EncoderConvolutions, EncoderRNN,
                                                         FrameProjection, Postnet, Prenet, StopProjection)}


def build_migrated_block(entry: dict, weights: dict):
    """The Keras block of one block-table entry (``{"class_name", "config", ...}``, as ``speechblocks migrate``
    writes it), built from the shapes of ``weights`` (TF1 names relative to the block's scope, TF1 layout) and
    loaded with them strictly.

    Raises:
        KeyError: a class name that is not a migratable block.
        ValueError: weights the block refuses (``TF1WeightsError``, every problem listed).
    """
    cls = MIGRATED_BLOCK_CLASSES[entry["class_name"]]
    layer = cls(**entry["config"], name=entry["config"]["tf1_scope"])
    layer.load_tf1_weights(weights, strict=True)  # builds the layer from the weight shapes
    return layer


def load_migrated(path) -> dict:
    """Loads a file written by ``speechblocks migrate --to keras``.

    All or nothing: the file's integrity (``sha256``), block table, configs and tensors are checked before any
    layer is built; any problem raises one ``MigratedFileError`` line naming the file.

    Args:
        path: the migrated ``.weights.h5`` file.

    Returns:
        ``{block_path: keras layer}`` -- each layer built, its weights loaded, ready to call (inference
        by default: call with ``training=False``), keyed by the block paths of docs/ARCHITECTURE.md, TF1 names
        (``"encoder_LSTM"``, ``"decoder/decoder_LSTM"``, ...). For a whole-model file the layers are the blocks of
        the rebuilt ``Tacotron2`` (``decoder/Location_Sensitive_Attention`` included).

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError (a ``ValueError``): not a migrated Keras file (e.g. a torch ``.pt`` file), a newer format
            version, damage, a config contradicting the tensors, missing, unknown, mis-shaped or non-floating
            tensors.
    """
    path = os.fspath(path)
    mf = read_keras_file(path, read_block_table)
    if mf.model is not None:
        from .tacotron2 import Tacotron2

        model = model_from_keras_file(path, Tacotron2, migrated=mf)
        return {p: model_block(model, p) for p in MODEL_BLOCK_ATTRIBUTES if _has_block(model, p)}
    mf.check_blocks(path)
    blocks = {}
    for block_path, entry in mf.table.items():
        try:
            blocks[block_path] = build_migrated_block(entry, mf.block_weights(block_path))
        except (TypeError, ValueError, KeyError) as e:  # a config the class refuses (checked shapes load)
            raise file_error(path, f"block {block_path!r}: its config does not build a {entry['class_name']}: "
                             + one_line(getattr(e, "problems", None) or [str(e)])) from None
    return blocks


def _has_block(model, block_path: str) -> bool:
    try:
        return model_block(model, block_path) is not None
    except AttributeError:
        return False
