"""speechblocks' framework-free core (pure Python and numpy; imports neither TensorFlow nor torch).

What both frameworks share is written here once, and ``tf_layers`` / ``torch_layers`` import it:

* the Tacotron-2 hparams presets and their validation (:mod:`.tacotron2_hparams`), the TF1 variable table of the
  whole model with its shape inference (:mod:`.tacotron2_schema`); the same for the Tacotron-1 family
  (keithito/tacotron, mimic2: :mod:`.tacotron1_hparams`, :mod:`.tacotron1_schema` with its three checkpoint layouts);
* the TF1 weight exchange's strict checks and their messages (:mod:`.tf1_exchange`), TF1 scope names
  (:mod:`.tf1_names`), the numpy TF1 <-> Keras/torch layout conversions (:mod:`.layouts`), argument checks and
  constants of each block (:mod:`.arguments`, :mod:`.block_hparams`, :mod:`.masked_losses`, :mod:`.cbhg`, ...);
* the text front-end of the original (:mod:`.text`: symbols, cleaners, numbers);
* the checkpoint migration (:mod:`.migration`: inventory, whole-model and block migration, the file formats),
  synthesis from the command line (:mod:`.synthesis`) and the ``speechblocks`` console script (:mod:`.cli`).
"""
from .tacotron1_hparams import TACOTRON1_PRESETS, Tacotron1HParams, resolve_tacotron1_hparams, tacotron1_hparams
from .tacotron1_schema import infer_layout_and_hparams
from .tacotron2_hparams import TACOTRON2_PRESETS, Tacotron2HParams, resolve_hparams, tacotron2_hparams
from .tacotron2_schema import check_tf1_shapes, checkpoint_hparams, infer_hparams, tf1_variable_shapes
from .tf1_exchange import TF1LoadReport, TF1WeightsError

__all__ = ["TACOTRON1_PRESETS", "TACOTRON2_PRESETS", "TF1LoadReport", "TF1WeightsError", "Tacotron1HParams",
           "Tacotron2HParams", "check_tf1_shapes", "checkpoint_hparams", "infer_hparams", "infer_layout_and_hparams",
           "resolve_hparams", "resolve_tacotron1_hparams", "tacotron1_hparams", "tacotron2_hparams",
           "tf1_variable_shapes"]
