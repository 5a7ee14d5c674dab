"""Keras ``Tacotron2`` inference: the eager inference call, :meth:`Tacotron2.synthesize` and
:meth:`Tacotron2.synthesize_batch` (the model class keeps thin methods that call these).

An eager inference call runs the encoder and the post-net in cached ``tf.function`` s and the decoder between them
in the loop :func:`tf_layers.decoding_plan.plan_decoding` names for the call (the native step in float32 on the CPU,
else the decoder's compiled graph loop); a traced call (``fit``, ``predict``, ``tf.function``, the exports) builds
the whole graph in :meth:`Tacotron2.call` instead.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from speechblocks.synthesis_batch import check_progress, pad_sequences, speaker_rows, step_limit, stop_steps

__all__ = ["cached_function", "infer", "synthesize", "synthesize_batch"]

_ENCODER_NOISE = ("encoder_convolutions", "encoder_LSTM")


def cached_function(model, key: str, body, signature=None):
    """``tf.function(body)`` cached on ``model`` under ``key`` (with ``signature``, else ``reduce_retracing``)."""
    fn = model.__dict__.get(key)
    if fn is None:
        fn = (tf.function(body, reduce_retracing=True) if signature is None
              else tf.function(body, input_signature=signature))
        object.__setattr__(model, key, fn)  # not tracked by Keras
    return fn


def postprocess_function(model):
    """The cached inference post-net ``tf.function`` (frames ``(batch, steps, r * num_mels)``, unknown batch and
    steps) that every eager inference call shares."""
    hp = model.hparams
    return cached_function(model, "_postprocess_fn", lambda f: model._postprocess(f), signature=[
        tf.TensorSpec([None, None, hp.outputs_per_step * hp.num_mels], model.decoder.compute_dtype)])


def model_outputs(frames, stop, alignments, post: dict) -> dict:
    """The model's output dict from the decoder's outputs and :meth:`Tacotron2._postprocess`'s."""
    post = dict(post)
    out = dict(decoder_outputs=post.pop("decoder_outputs"), mel_outputs=post.pop("mel_outputs"),
               stop_token_prediction=tf.reshape(stop, tf.stack([tf.shape(frames)[0], -1])), alignments=alignments)
    out.update(post)  # linear_outputs
    return out


def infer(model, inputs, input_lengths, speaker_embeddings, mel_targets, max_iters, noise: dict, progress=None):
    """An eager inference call of ``model`` (checked inputs): the memory (a cached ``tf.function`` unless encoder
    masks are injected), the decoder's planned loop (:meth:`Tacotron2Decoder.decode`), the post-net (a cached
    ``tf.function`` unless post-net masks are injected). Returns the model's output dict of tensors."""
    if any(k in noise for k in _ENCODER_NOISE):
        memory = model._memory(inputs, input_lengths, speaker_embeddings, False, noise)
    else:
        memory = cached_function(model, "_memory_fn", lambda i, n, s: model._memory(i, n, s, False, {}))(
            inputs, input_lengths, speaker_embeddings)
    decoder_noise = {k: noise[k] for k in ("prenet", "decoder_LSTM") if k in noise} or None
    frames, stop, alignments = model.decoder.decode(memory, input_lengths, mel_targets, max_iters, False,
                                                    decoder_noise, progress=progress)
    masks = noise.get("postnet_convolutions")
    post = postprocess_function(model)(frames) if masks is None else model._postprocess(frames, False, masks)
    return model_outputs(frames, stop, alignments, post)


def synthesize(model, inputs, input_lengths=None, speaker_embeddings=None, max_iters=None, mel_targets=None,
               progress=None) -> dict:
    """:meth:`Tacotron2.synthesize`."""
    if progress is not None:
        check_progress(progress, mel_targets)
    if max_iters is not None and (isinstance(max_iters, bool) or int(max_iters) != max_iters or int(max_iters) < 1):
        raise ValueError(f"Tacotron2: argument `max_iters` must be >= 1; got {max_iters}.")
    inputs, input_lengths, speaker_embeddings, mel_targets = model._check_inputs(
        inputs, input_lengths, speaker_embeddings, mel_targets)
    out = infer(model, inputs, input_lengths, speaker_embeddings, mel_targets,
                None if max_iters is None else int(max_iters), {}, progress=progress)
    return {k: np.asarray(v) for k, v in out.items()}


def _encode_each(model, ids, lengths, spk):
    """The batch's memory (:meth:`Tacotron2._memory_each`) through a cached ``tf.function`` of fixed signature."""
    e = model.hparams.speaker_embedding_size
    ids_spec, lengths_spec = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)
    if e:
        encode = cached_function(model, "_encode_each_fn", model._memory_each,
                                 signature=[ids_spec, lengths_spec, tf.TensorSpec([None, e], tf.float32)])
        return encode(ids, lengths, spk)
    encode = cached_function(model, "_encode_each_fn", lambda i, n: model._memory_each(i, n, None),
                             signature=[ids_spec, lengths_spec])
    return encode(ids, lengths)


def synthesize_batch(model, sequences, speaker_embeddings=None, max_iters=None, progress=None) -> list[dict]:
    """:meth:`Tacotron2.synthesize_batch`."""
    hp = model.hparams
    block = "Tacotron2.synthesize_batch"
    ids, lengths = pad_sequences(sequences, block, np.int32)
    spk = speaker_rows(speaker_embeddings, len(lengths), block)
    limit = step_limit(max_iters, hp.max_iters, block)
    if progress is not None:
        check_progress(progress, None)
    model._check_inputs(ids, lengths, spk, None)
    memory = _encode_each(model, ids, lengths, spk)
    frames, stop, alignments = model.decoder.decode(memory, tf.constant(lengths), None, int(limit), False,
                                                    progress=progress, stop_each=True)
    stop, alignments = np.asarray(stop), np.asarray(alignments)
    steps, stopped = stop_steps(stop, hp.stop_at_any)
    post = postprocess_function(model)
    results = []
    for k, (n, s) in enumerate(zip(lengths, steps)):
        out = {key: v.numpy()[0] for key, v in post(frames[k:k + 1, :s]).items()}
        results.append(dict(decoder_outputs=out.pop("decoder_outputs"), mel_outputs=out.pop("mel_outputs"),
                            stop_token_prediction=stop[k, :s].reshape(-1), alignments=alignments[k, :n, :s],
                            **out, stopped=bool(stopped[k])))
    return results
