"""Legacy builders of the whole Tacotron-2 and of its attention (``BUILDERS``: name -> build function).

A build function takes ``(config, inputs, training, options)`` and returns ``(block_scope, outputs)``; the
runner opens the spec's scope (``Tacotron_model/inference`` by default) around it.

``"Tacotron2"``: ``config = {"hparams": {original hparam names...}, "n_symbols": int}`` (resolved with
:func:`speechblocks.resolve_hparams`). Inputs: ``inputs`` int32 ``[B, T_in]``, ``input_lengths`` int32 ``[B]``,
optional ``speaker_embeddings`` ``[B, E]``, ``mel_targets`` ``[B, T_out, M]`` (teacher forcing; free running
without), ``stop_token_targets`` ``[B, T_out]``, ``targets_lengths`` int32 ``[B]``, ``linear_targets``
``[B, T_out, num_freq]`` and the injected keep-masks ``noise/prenet/{i}``, ``noise/encoder_convolutions/{i}``,
``noise/encoder_LSTM/{fw_c,fw_h,bw_c,bw_h}``, ``noise/decoder_LSTM/{k}/{c,h}``, ``noise/postnet_convolutions/{i}``.
Outputs ``decoder_outputs``, ``mel_outputs``, ``stop_token_prediction``, ``alignments`` (+ ``linear_outputs``);
with ``options["loss"]`` also ``loss/<name>`` (before_loss, after_loss, stop_token_loss, linear_loss,
regularization_loss, loss) and ``grad/<variable name relative to the builder's scope>`` for every trainable
variable (dense; zeros where the loss does not depend on it; ``options["gradients"] = False`` leaves them out).
``options["max_iters"]`` overrides
``hparams["max_iters"]`` when not training (in training the loop has no cap).

``"LocationSensitiveAttention"``: ``config`` = the Keras keywords (``units, filters, kernel_size, mask_encoder,
smoothing, cumulate_weights``). Inputs ``memory`` ``[B, T, D]``, ``memory_lengths`` int32 ``[B]``, ``queries``
``[B, steps, q]``. ``memory_layer`` sits at the builder's scope, the step's variables under
``decoder/Location_Sensitive_Attention``; the attention runs from the zero state for ``steps`` steps in a
``while_loop``. Outputs ``alignments`` ``[B, T, steps]``, ``contexts`` ``[B, steps, D]``, ``states``
``[B, steps, T]`` (the state after each step).
"""
from __future__ import annotations

import tensorflow as tf

from .tf1_tacotron2 import LocationSensitiveAttention, tacotron2, tacotron2_loss

v1 = tf.compat.v1


def _noise(inputs, hp):
    """The spec's ``noise_masks`` dict from the ``noise/...`` inputs (groups absent stay absent)."""
    noise = {}

    def listed(prefix, n):
        masks = [inputs.get(f"noise/{prefix}/{i}") for i in range(n)]
        if any(m is not None for m in masks):
            noise[prefix] = masks

    listed("prenet", len(hp.prenet_layers))
    listed("encoder_convolutions", hp.enc_conv_num_layers)
    listed("postnet_convolutions", hp.postnet_num_layers)
    enc = [inputs.get(f"noise/encoder_LSTM/{k}") for k in ("fw_c", "fw_h", "bw_c", "bw_h")]
    if any(m is not None for m in enc):
        if any(m is None for m in enc):
            raise ValueError("noise/encoder_LSTM needs all of fw_c, fw_h, bw_c, bw_h")
        noise["encoder_LSTM"] = ((enc[0], enc[1]), (enc[2], enc[3]))
    dec = [(inputs.get(f"noise/decoder_LSTM/{k}/c"), inputs.get(f"noise/decoder_LSTM/{k}/h"))
           for k in range(hp.decoder_layers)]
    if any(m is not None for pair in dec for m in pair):
        if any(m is None for pair in dec for m in pair):
            raise ValueError("noise/decoder_LSTM needs c and h of every decoder layer")
        noise["decoder_LSTM"] = dec
    unknown = sorted(k for k in inputs if k.startswith("noise/") and k.split("/")[1] not in noise)
    if unknown:
        raise ValueError(f"unused noise inputs {unknown}")
    return noise


def build_tacotron2(config, inputs, training, options):
    """Builds the whole model (and, with ``options["loss"]``, its loss and gradients) at the current scope."""
    from speechblocks import resolve_hparams

    hp = resolve_hparams(config["hparams"], config.get("n_symbols"))
    max_iters = None
    if not training:
        max_iters = int(hp.max_iters if options.get("max_iters") is None else options["max_iters"])
        if max_iters <= 0:
            raise ValueError("max_iters must be > 0")
    scope = v1.get_variable_scope().name
    prefix = scope + "/" if scope else ""
    outputs = tacotron2(hp, inputs["inputs"], inputs["input_lengths"], training,
                        speaker_embeddings=inputs.get("speaker_embeddings"), mel_targets=inputs.get("mel_targets"),
                        max_iters=max_iters, noise=_noise(inputs, hp))
    if options.get("loss"):
        variables = [v for v in v1.trainable_variables() if v.op.name.startswith(prefix)]
        losses = tacotron2_loss(hp, outputs, inputs["mel_targets"], inputs["stop_token_targets"],
                                inputs["targets_lengths"], variables, inputs.get("linear_targets"))
        outputs.update({f"loss/{k}": t for k, t in losses.items()})
        grads = tf.gradients(losses["loss"], variables) if options.get("gradients", True) else []
        for v, g in zip(variables, grads):
            g = tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            outputs[f"grad/{v.op.name[len(prefix):]}"] = g
    return "", outputs


def build_attention(config, inputs, training, options):
    """``memory_layer`` at the current scope, then ``steps`` attention steps inside ``variable_scope("decoder")``."""
    memory, lengths, queries = inputs["memory"], inputs["memory_lengths"], inputs["queries"]
    attention = LocationSensitiveAttention(config.get("units", 128), memory, lengths,
                                           filters=config.get("filters", 32), kernel_size=config.get("kernel_size", 31),
                                           mask_encoder=config.get("mask_encoder", True),
                                           smoothing=config.get("smoothing", False),
                                           cumulate_weights=config.get("cumulate_weights", True))
    batch_size, steps = tf.shape(queries)[0], tf.shape(queries)[1]
    with v1.variable_scope("decoder"):
        arrays0 = tuple(tf.TensorArray(tf.float32, size=0, dynamic_size=True) for _ in range(3))

        def body(time, state, align_ta, context_ta, state_ta):
            context, alignments, next_state = attention(queries[:, time], state)
            return (time + 1, next_state, align_ta.write(time, alignments), context_ta.write(time, context),
                    state_ta.write(time, next_state))

        result = v1.while_loop(lambda time, *rest: time < steps, body,
                               (tf.constant(0, dtype=tf.int32), attention.initial_state(batch_size), *arrays0))
    align_ta, context_ta, state_ta = result[2:]
    return "", {"alignments": tf.transpose(align_ta.stack(), [1, 2, 0]),
                "contexts": tf.transpose(context_ta.stack(), [1, 0, 2]),
                "states": tf.transpose(state_ta.stack(), [1, 0, 2])}


BUILDERS = {"Tacotron2": build_tacotron2, "LocationSensitiveAttention": build_attention}
