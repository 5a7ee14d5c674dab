"""Keras ``Tacotron2``'s exports: :meth:`Tacotron2.export_serving` (a SavedModel of the whole free-running graph) and
:meth:`Tacotron2.export_litert` (:mod:`tf_layers.tacotron2_litert`); the model class keeps thin methods."""
from __future__ import annotations

import os

import keras
import tensorflow as tf

__all__ = ["export_serving", "export_litert"]

_SERVED = ("mel_outputs", "alignments", "stop_token_prediction")


def export_serving(model, filepath, max_iters=None, verbose: bool = False) -> str:
    """:meth:`Tacotron2.export_serving`: the endpoint ``serve`` traces ``model``'s inference call (the graph loop)."""
    hp = model.hparams
    limit = hp.max_iters if max_iters is None else max_iters
    if isinstance(limit, bool) or int(limit) != limit or int(limit) < 1:
        raise ValueError(f"Tacotron2.export_serving: argument `max_iters` must be an integer >= 1; "
                         f"got {max_iters!r}.")
    limit = int(limit)
    specs = [tf.TensorSpec([None, None], tf.int32, name="inputs"),
             tf.TensorSpec([None], tf.int32, name="input_lengths")]
    if hp.speaker_embedding_size:
        specs.append(tf.TensorSpec([None, hp.speaker_embedding_size], tf.float32, name="speaker_embeddings"))

        def serve(inputs, input_lengths, speaker_embeddings):
            out = model(inputs, input_lengths, speaker_embeddings, max_iters=limit, training=False)
            return {k: out[k] for k in _SERVED}
    else:
        def serve(inputs, input_lengths):
            out = model(inputs, input_lengths, max_iters=limit, training=False)
            return {k: out[k] for k in _SERVED}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", serve, input_signature=specs)
    archive.write_out(os.fspath(filepath), verbose=verbose)
    return filepath


def export_litert(model, directory) -> str:
    """:meth:`Tacotron2.export_litert` (:func:`tf_layers.tacotron2_litert.export_litert`)."""
    from .tacotron2_litert import export_litert as write  # the converter's imports only when exporting

    return write(model, directory)
