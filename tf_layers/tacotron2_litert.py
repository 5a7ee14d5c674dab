"""A builtin-ops-only LiteRT (TFLite) Tacotron-2: three converted models and a manifest, run by
:class:`speechblocks.litert.LiteRTTacotron2` (a numpy host loop over the ``ai_edge_litert`` interpreter).

The whole model's graph cannot go to TFLite builtins: its decoder loop collects a data-dependent number of steps in
``TensorArray`` s (TensorList ops: flex only). So the loop moves to the host and the graph is cut in three:

* ``encoder.tflite``: ``ids`` int32 ``(batch, T_in)``, ``lengths`` int32 ``(batch,)`` (and ``speaker_embeddings``
  float32 ``(batch, E)`` for RTVC) -> ``values`` ``(batch, T_in, memory_size)`` (the memory zeroed past its lengths)
  and ``keys`` ``(batch, T_in, attention_dim)`` (its ``memory_layer`` projection): the embedding, the encoder
  convolutions, :class:`~tf_layers.EncoderRNN` in its masked formulation (the shrinking loop is no builtin), the
  speaker embedding and the attention's per-utterance half;
* ``decoder_step.tflite``: one :meth:`Tacotron2Decoder.step` -- the previous ``frame``, the state (``context``,
  ``attention`` (the ``attention_state``), ``cell_k``/``hidden_k`` per decoder LSTM layer), ``values``, ``keys``
  (the encoder's, the key bias added in the step), ``lengths`` (and, when the
  prenet dropout rate is above 0, ``prenet_keep_i`` keep-masks ``(batch, prenet_layers[i])``) -> ``frames``
  ``(batch, r * num_mels)``, ``stop`` ``(batch, r)`` (probabilities), ``alignments`` ``(batch, T_in)`` and the new
  state under the same names;
* ``postnet.tflite``: ``frames`` ``(batch, steps, r * num_mels)`` -> ``decoder_outputs`` and ``mel_outputs``
  ``(batch, steps * r, num_mels)`` (the postnet residual and the output clipping of ``Tacotron2``);
* ``manifest.json``: the sizes and the stop rule the host loop needs.

The prenet dropout is always on in the original. The step model takes its keep-masks as inputs (a random draw is no
TFLite builtin); the host loop draws them with numpy (``Bernoulli(1 - rate)``, seedable) or takes them from the
caller, so a model with ``tacotron_dropout_rate=0`` synthesizes deterministically (equal to
``Tacotron2.synthesize``), and one with dropout equals ``Tacotron2`` called with the same ``noise_masks["prenet"]``.

Every model is converted with ``tf.lite.OpsSet.TFLITE_BUILTINS`` only; :func:`custom_ops` reads the flatbuffer's
operator codes and the export refuses a model holding a custom (flex) op.
"""
from __future__ import annotations

import json
import os
import tempfile

import keras
import tensorflow as tf

from speechblocks.atomic_files import write_all

from .tacotron2_decoder import AttentionMemory, DecoderState

#: the files :func:`export_litert` writes into its directory
FILES = ("encoder.tflite", "decoder_step.tflite", "postnet.tflite", "manifest.json")
FORMAT = "speechblocks-litert-tacotron2/1"


def custom_ops(blob: bytes) -> list[str]:
    """The custom operators of a TFLite flatbuffer (flex ops are custom ops named ``Flex<TF op>``)."""
    from tensorflow.lite.python import schema_py_generated as schema  # noqa: PLC0415 -- only for the check
    from tensorflow.lite.python import schema_util  # noqa: PLC0415

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(blob, 0))
    out = []
    for code in model.operatorCodes or []:
        if schema_util.get_builtin_code_from_operator_code(code) == schema.BuiltinOperator.CUSTOM:
            name = code.customCode
            out.append(name.decode() if isinstance(name, bytes) else str(name))
    return out


def convert_builtins(fn, trackable) -> bytes:
    """``fn`` (a ``tf.function`` with an input signature) as a TFLite flatbuffer of builtin ops only, its variables
    (those of ``trackable``) frozen as constants. Raises ``ValueError`` if the model holds a custom op."""
    archive = keras.export.ExportArchive()  # tracks the Keras variables so that the converter freezes them
    archive.track(trackable)
    archive.add_endpoint("serve", fn)
    with tempfile.TemporaryDirectory(prefix="speechblocks_litert_") as directory:
        archive.write_out(directory, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(directory, signature_keys=["serving_default"])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        blob = converter.convert()
    bad = custom_ops(blob)
    if bad:
        raise ValueError(f"the converted model holds custom (non-builtin) ops {sorted(set(bad))}")
    return blob


def _check_model(model) -> None:
    hp = model.hparams
    if hp.predict_linear:
        raise ValueError("Tacotron2.export_litert: `predict_linear` models are not supported (the CBHG's GRU loop "
                         "over time is no TFLite builtin loop); export a model with predict_linear=False.")


def encoder_function(model):
    """The ``tf.function`` of ``encoder.tflite`` (see the module docstring)."""
    hp = model.hparams
    att = model.decoder.attention
    specs = [tf.TensorSpec([None, None], tf.int32, name="ids"), tf.TensorSpec([None], tf.int32, name="lengths")]

    def encode(ids, lengths, speaker_embeddings=None):
        with model.encoder_lstm.masked_formulation():
            memory = model._memory(ids, lengths, speaker_embeddings, False, {})
        values, keys = att.process_memory(memory, lengths if att.mask_encoder else None)
        return {"values": values, "keys": keys}

    if hp.speaker_embedding_size:
        specs.append(tf.TensorSpec([None, hp.speaker_embedding_size], tf.float32, name="speaker_embeddings"))
        return tf.function(lambda ids, lengths, speaker_embeddings: encode(ids, lengths, speaker_embeddings),
                           input_signature=specs)
    return tf.function(lambda ids, lengths: encode(ids, lengths), input_signature=specs)


def step_input_names(model) -> list[str]:
    """The decoder-step model's input names, in the order of its function's arguments."""
    dec = model.decoder
    names = ["frame", "context", "attention"]
    names += ([f"cell_{k}" for k in range(dec.decoder_lstm.layers)]
              + [f"hidden_{k}" for k in range(dec.decoder_lstm.layers)])
    names += ["values", "keys", "lengths"]
    if dec.prenet.drop_rate > 0:
        names += [f"prenet_keep_{i}" for i in range(len(dec.prenet.layers_sizes))]
    return names


def decoder_step_function(model):
    """The ``tf.function`` of ``decoder_step.tflite``: one :meth:`Tacotron2Decoder.step` (see the module docstring)."""
    hp = model.hparams
    dec = model.decoder
    n_layers, units = dec.decoder_lstm.layers, dec.decoder_lstm.size
    sizes = dict(frame=[None, hp.num_mels], context=[None, hp.memory_size], attention=[None, None],
                 values=[None, None, hp.memory_size], keys=[None, None, dec.attention.units], lengths=[None])
    names = step_input_names(model)
    specs = []
    for name in names:
        if name.startswith(("cell_", "hidden_")):
            shape = [None, units]
        elif name.startswith("prenet_keep_"):
            shape = [None, dec.prenet.layers_sizes[int(name.rsplit("_", 1)[1])]]
        else:
            shape = sizes[name]
        specs.append(tf.TensorSpec(shape, tf.int32 if name == "lengths" else tf.float32, name=name))

    def step(*args):
        a = dict(zip(names, args))
        state = DecoderState(context=a["context"], attention_state=a["attention"],
                             cells=tuple(a[f"cell_{k}"] for k in range(n_layers)),
                             hiddens=tuple(a[f"hidden_{k}"] for k in range(n_layers)))
        att = dec.attention
        values = a["values"]
        memory = AttentionMemory(values, a["keys"] + att.weights_in(tf.float32)["key_bias"],
                                 att.score_bias(a["lengths"], tf.shape(values)[1], values.dtype))
        keeps = [a[n] for n in names if n.startswith("prenet_keep_")] or None
        out, new = dec.step(a["frame"], state, memory, dec.step_weights(tf.float32), prenet_masks=keeps)
        result = {"frames": out.frames, "stop": out.stop, "alignments": out.alignments, "context": new.context,
                  "attention": new.attention_state}
        result.update({f"cell_{k}": c for k, c in enumerate(new.cells)})
        result.update({f"hidden_{k}": h for k, h in enumerate(new.hiddens)})
        return result

    return tf.function(step, input_signature=specs)


def postnet_function(model):
    """The ``tf.function`` of ``postnet.tflite`` (see the module docstring)."""
    hp = model.hparams
    spec = tf.TensorSpec([None, None, hp.outputs_per_step * hp.num_mels], tf.float32, name="frames")
    return tf.function(lambda frames: model._postprocess(frames), input_signature=[spec])


def manifest(model) -> dict:
    """What the host loop needs besides the three models."""
    hp = model.hparams
    dec = model.decoder
    return dict(format=FORMAT, num_mels=hp.num_mels, outputs_per_step=hp.outputs_per_step, max_iters=hp.max_iters,
                stop_at_any=bool(hp.stop_at_any), n_symbols=hp.n_symbols, memory_size=hp.memory_size,
                speaker_embedding_size=hp.speaker_embedding_size or None, decoder_layers=dec.decoder_lstm.layers,
                decoder_lstm_units=dec.decoder_lstm.size, prenet_layers=list(dec.prenet.layers_sizes),
                prenet_drop_rate=dec.prenet.drop_rate, step_inputs=step_input_names(model))


def export_litert(model, directory) -> str:
    """Writes ``encoder.tflite``, ``decoder_step.tflite``, ``postnet.tflite`` and ``manifest.json`` of ``model`` (a
    float32 ``Tacotron2``) into ``directory`` (created if missing): converted with TFLite builtins only, written all
    or nothing (``speechblocks.atomic_files.write_all``). Returns ``directory``."""
    _check_model(model)
    if model.compute_dtype != "float32":
        raise ValueError(f"Tacotron2.export_litert: the model must compute in float32; got {model.compute_dtype}.")
    blobs = {"encoder.tflite": convert_builtins(encoder_function(model), model),
             "decoder_step.tflite": convert_builtins(decoder_step_function(model), model),
             "postnet.tflite": convert_builtins(postnet_function(model), model)}
    text = json.dumps(manifest(model), indent=1, sort_keys=True)
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)

    def writer(data: bytes):
        def write(tmp):
            with open(tmp, "wb") as f:
                f.write(data)
        return write

    jobs = [(os.path.join(directory, name), writer(blob)) for name, blob in blobs.items()]
    jobs.append((os.path.join(directory, "manifest.json"), writer(text.encode())))
    write_all(jobs)
    return directory
