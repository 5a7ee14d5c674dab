"""speechblocks' framework-free core (pure Python and numpy; imports neither TensorFlow nor torch).

What both frameworks share is written here once: the Tacotron-2 hparams presets and their validation
(:mod:`speechblocks.tacotron2_hparams`) and the TF1 variable table of the whole model with the shape
inference used by ``Tacotron2.from_tf1_checkpoint`` (:mod:`speechblocks.tacotron2_schema`).
"""
from .tacotron2_hparams import TACOTRON2_PRESETS, Tacotron2HParams, resolve_hparams, tacotron2_hparams
from .tacotron2_schema import check_tf1_shapes, checkpoint_hparams, infer_hparams, tf1_variable_shapes

__all__ = ["TACOTRON2_PRESETS", "Tacotron2HParams", "check_tf1_shapes", "checkpoint_hparams", "infer_hparams",
           "resolve_hparams",
           "tacotron2_hparams", "tf1_variable_shapes"]
