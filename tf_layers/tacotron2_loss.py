"""``tacotron2_loss``: the original ``Tacotron.add_loss`` of TF1 Tacotron-2 (RTVC and Rayhane variants)."""
from __future__ import annotations

import tensorflow as tf

from speechblocks.distributed import DEFAULT_LOSS_REDUCTION, check_loss_reduction
from speechblocks.tacotron2_schema import is_regularized

from ._distribute import distributed_mean, distributed_share, replica_context
from .masked_losses import masked_linear_loss, masked_mse, masked_sigmoid_cross_entropy


def _f32(x):
    return tf.cast(x, tf.float64 if x.dtype == tf.float64 else tf.float32)


def _mean(x, reduction):
    """``tf.reduce_mean(x)``; inside a replica of several its ``reduction`` over the replicas (sum / count)."""
    if replica_context()[0] is None:
        return tf.reduce_mean(x)
    return distributed_mean(tf.reduce_sum(x), tf.cast(tf.size(x), x.dtype), reduction)


def tacotron2_loss(model, outputs, mel_targets, stop_token_targets, targets_lengths=None, linear_targets=None, *,
                   reduction: str = DEFAULT_LOSS_REDUCTION):
    """The losses of the original ``add_loss`` (computed in float32, or float64 for a float64 model).

    Masked terms (``mask_decoder``) mask by selection, as :func:`masked_mse`: NaN/inf in the padding of the
    targets or outputs leave every loss term (and its gradient w.r.t. the outputs) finite.

    * ``mask_decoder``: masked MSE before/after the postnet, masked weighted sigmoid cross-entropy of the stop
      logits (``cross_entropy_pos_weight``), and -- Rayhane with ``predict_linear`` -- the masked linear L1
      loss; RTVC has no linear term then.
    * otherwise: plain means over every frame, padding included: MSE before/after, mean sigmoid
      cross-entropy; RTVC adds ``mean|mel_targets - decoder_outputs|`` as ``linear_loss`` (the SV2TTS L1
      term; linear targets are ignored even with ``predict_linear``), Rayhane with ``predict_linear`` the
      L1 loss of the linear outputs with priority to the bins under 2 kHz.
    * ``regularization_loss``: ``reg_weight * Σ l2_loss(w)`` over the trainable variables whose TF1 name
      contains none of ``bias``, ``Bias``, ``_projection``, ``inputs_embedding``, ``RNN``, ``LSTM``;
      ``reg_weight`` scaled by ``1 / (2 max_abs_value)`` (symmetric mels) or ``1 / max_abs_value`` when
      ``tacotron_scale_regularization``.

    Data-parallel training (inside a replica of a ``tf.distribute`` strategy with several replicas, e.g. ``fit``
    under ``MirroredStrategy``/``MultiWorkerMirroredStrategy``) -- every term is the replica's **share**, the shares
    summing to the loss (``strategy.reduce("SUM", ...)``), as ``tf.distribute`` sums the replicas' gradients:

    * ``reduction="global"`` (default): the loss of the global batch -- masked terms ``sum_local / count_global``
      (counts all-reduced, see :func:`~tf_layers.masked_mse`), plain means ``sum_local / size_global``, the
      regularization divided by the number of replicas. With ``sync_batch_norm=True`` in the model, a step then
      equals the single-process step on the whole batch.
    * ``reduction="per_replica"``: each replica's own loss divided by the number of replicas -- the mean of the
      replicas' losses, the original TF1 multi-GPU towers (with per-tower batch norm, ``sync_batch_norm=False``).

    In one process both give the single-process values bit for bit.

    Args:
        model: the :class:`~tf_layers.Tacotron2` that produced ``outputs``.
        outputs: its training-mode output dict (``stop_token_prediction`` holds logits).
        mel_targets: ``(batch, steps * r, num_mels)``.
        stop_token_targets: ``(batch, steps * r)``.
        targets_lengths: ``(batch,)`` int, needed with ``mask_decoder``.
        linear_targets: ``(batch, steps * r, num_freq)``, needed for Rayhane's linear loss.
        reduction: ``"global"`` (default) or ``"per_replica"``: the reduction over data-parallel replicas.

    Returns:
        dict of scalars ``before_loss, after_loss, stop_token_loss, linear_loss, regularization_loss, loss``.
    """
    reduction = check_loss_reduction(reduction, "tacotron2_loss")
    hp = model.hparams
    r = hp.outputs_per_step
    decoder_outputs = _f32(outputs["decoder_outputs"])
    mel_outputs = _f32(outputs["mel_outputs"])
    stop_logits = _f32(outputs["stop_token_prediction"])
    dtype = decoder_outputs.dtype
    mel_targets = tf.cast(mel_targets, dtype)
    stop_token_targets = tf.cast(stop_token_targets, dtype)
    _check_same_shape("mel_targets", mel_targets, "decoder_outputs", decoder_outputs)
    _check_same_shape("stop_token_targets", stop_token_targets, "stop_token_prediction", stop_logits)
    rayhane_linear = hp.variant == "rayhane" and hp.predict_linear
    if rayhane_linear:
        if linear_targets is None:
            raise ValueError("tacotron2_loss: argument `linear_targets` (batch, frames, num_freq) is needed: the model "
                             "predicts linear spectrograms (predict_linear) and Rayhane's loss includes them.")
        linear_targets = tf.cast(linear_targets, dtype)
        linear_outputs = _f32(outputs["linear_outputs"])
        _check_same_shape("linear_targets", linear_targets, "linear_outputs", linear_outputs)
    zero = tf.zeros([], dtype)
    if hp.mask_decoder:
        if targets_lengths is None:
            raise ValueError("tacotron2_loss: argument `targets_lengths` (batch,) is needed with mask_decoder=True.")
        before = masked_mse(mel_targets, decoder_outputs, targets_lengths, outputs_per_step=r, reduction=reduction)
        after = masked_mse(mel_targets, mel_outputs, targets_lengths, outputs_per_step=r, reduction=reduction)
        stop = masked_sigmoid_cross_entropy(stop_token_targets, stop_logits, targets_lengths, outputs_per_step=r,
                                            pos_weight=hp.cross_entropy_pos_weight, reduction=reduction)
        linear = (masked_linear_loss(linear_targets, linear_outputs, targets_lengths, outputs_per_step=r,
                                     sample_rate=hp.sample_rate, num_freq=hp.num_freq, reduction=reduction)
                  if rayhane_linear else zero)
    else:
        before = _mean(tf.square(mel_targets - decoder_outputs), reduction)
        after = _mean(tf.square(mel_targets - mel_outputs), reduction)
        stop = _mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=stop_token_targets, logits=stop_logits), reduction)
        if hp.variant == "rtvc":
            linear = _mean(tf.abs(mel_targets - decoder_outputs), reduction)
        elif rayhane_linear:
            l1 = tf.abs(linear_targets - linear_outputs)
            n_priority = int(2000 / (hp.sample_rate * 0.5) * hp.num_freq)
            linear = 0.5 * _mean(l1, reduction) + 0.5 * _mean(l1[:, :, :n_priority], reduction)
        else:
            linear = zero
    before, after, stop, linear = (tf.cast(x, dtype) for x in (before, after, stop, linear))
    terms = [tf.reduce_sum(tf.square(tf.cast(v, dtype))) / 2 for name, v in model.tf1_trainable_variables().items()
             if is_regularized(name)]
    regularization = distributed_share(tf.cast(hp.reg_weight, dtype) * (tf.add_n(terms) if terms else zero))
    loss = before + after + stop + regularization + linear
    return dict(before_loss=before, after_loss=after, stop_token_loss=stop, linear_loss=linear,
                regularization_loss=regularization, loss=loss)



def guided_attention_loss(alignments, weights, targets_lengths, outputs_per_step: int, *,
                          reduction: str = DEFAULT_LOSS_REDUCTION):
    """The optional guided-attention term (not in the original recipe; see
    :mod:`speechblocks.training.guided_attention`): ``sum(alignments * weights)`` over the valid cells divided by
    the number of valid decoder steps ``sum_b ceil(frames_b / r)`` (under a strategy of several replicas, this replica's
    share of the global batch's term with ``reduction="global"``).

    Args:
        alignments: ``(batch, T_in, steps)``, the model's ``alignments`` output.
        weights: ``(batch, T_in, steps)``, :func:`~speechblocks.training.guided_attention_weights` (0 in the
            padding).
        targets_lengths: ``(batch,)`` integer frame lengths.
        outputs_per_step (int): frames per decoder step (``r``).
        reduction: ``"global"`` (default) or ``"per_replica"``.

    Returns:
        The scalar term (float32; float64 for float64 alignments), unweighted.

    Raises:
        ValueError: ``weights`` not of the alignments' shape.
    """
    reduction = check_loss_reduction(reduction, "guided_attention_loss")
    alignments = _f32(alignments)
    weights = tf.cast(weights, alignments.dtype)
    if weights.shape.rank is not None and alignments.shape.rank is not None and (
            weights.shape.rank != alignments.shape.rank or not weights.shape.is_compatible_with(alignments.shape)):
        raise ValueError(f"guided_attention_loss: argument `weights` must have the alignments' shape (batch, T_in, "
                         f"steps) = {tuple(alignments.shape)}; got {tuple(weights.shape)}.")
    r = int(outputs_per_step)
    steps = (tf.cast(targets_lengths, tf.int64) + (r - 1)) // r
    count = tf.cast(tf.reduce_sum(steps), alignments.dtype)
    return distributed_mean(tf.reduce_sum(alignments * weights), count, reduction)


def _check_same_shape(name, a, other, b):
    if a.shape.rank is not None and b.shape.rank is not None:
        if a.shape.rank != b.shape.rank or not a.shape.is_compatible_with(b.shape):
            raise ValueError(f"tacotron2_loss: argument `{name}` must have the shape of the model's `{other}` "
                             f"{tuple(b.shape)} (frames = decoder steps * outputs_per_step); got {tuple(a.shape)}.")
