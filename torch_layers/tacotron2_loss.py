"""``tacotron2_loss``: the original Tacotron-2 ``add_loss`` (RTVC and Rayhane variants) for torch."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from speechblocks.distributed import DEFAULT_LOSS_REDUCTION, check_loss_reduction

from .masked_losses import (
    _ratios,
    _sharded,
    masked_linear_loss,
    masked_mse,
    masked_sigmoid_cross_entropy,
    priority_frequencies,
)

__all__ = ["tacotron2_loss", "guided_attention_loss", "LOSS_KEYS"]

LOSS_KEYS = ("before_loss", "after_loss", "stop_token_loss", "linear_loss", "regularization_loss", "loss")


def _check_same(targets: Optional[Tensor], outputs: Tensor, name: str, doc: str) -> Tensor:
    if targets is None:
        raise ValueError(f"tacotron2_loss: argument `{name}` of shape {doc} = {list(outputs.shape)} is required.")
    if not targets.is_floating_point() or tuple(targets.shape) != tuple(outputs.shape):
        raise ValueError(f"tacotron2_loss: argument `{name}` must be a floating tensor of shape {doc} = "
                         f"{list(outputs.shape)} (the model's outputs: steps * r frames); got dtype {targets.dtype} "
                         f"and shape {list(targets.shape)}.")
    return targets


def _mean_or_zero(x: Tensor) -> Tensor:
    return x.mean() if x.numel() > 0 else x.new_zeros(())


def _global_means(sums: list[Tensor], counts: list[int], like: Tensor) -> list[Tensor]:
    """``sums[i] / counts[i]`` over the global batch (both summed over the ranks by one gather; 0 for a count
    of 0, as :func:`_mean_or_zero`)."""
    return _ratios(sums, [like.new_tensor(float(c)) for c in counts], "global")


def tacotron2_loss(model, outputs: dict[str, Tensor], mel_targets: Tensor, stop_token_targets: Tensor,
                   targets_lengths: Optional[Tensor] = None, linear_targets: Optional[Tensor] = None, *,
                   reduction: str = DEFAULT_LOSS_REDUCTION) -> dict[str, Tensor]:
    """The loss of TF1 Tacotron-2 (``Tacotron.add_loss``) over a :class:`~torch_layers.Tacotron2`'s outputs.

    Masked terms (``mask_decoder``) mask by selection, as :func:`masked_mse`: NaN/inf in the padding of the
    targets or outputs leave every loss term (and its gradient w.r.t. the outputs) finite.

    ``hparams.mask_decoder``: before/after = :func:`masked_mse` of the decoder / mel outputs, stop =
    :func:`masked_sigmoid_cross_entropy` (``pos_weight = cross_entropy_pos_weight``), linear = Rayhane with
    ``predict_linear``: :func:`masked_linear_loss`, else 0. Not masked: mean squared errors over every frame
    (padding included), stop = mean sigmoid cross-entropy, linear = RTVC: ``mean|mel_targets - decoder_outputs|``;
    Rayhane with ``predict_linear``: ``0.5 * mean(l1) + 0.5 * mean(l1[..., :n])``, ``n = int(2000 / (sample_rate / 2)
    * num_freq)`` (the low band of an ``n = 0`` model counts 0); else 0. Regularisation:
    ``reg_weight * sum(sum(w**2) / 2)`` over the trainable variables whose full TF1 name contains none of
    ``bias, Bias, _projection, inputs_embedding, RNN, LSTM`` (batch-norm gamma/beta included).
    ``loss = before + after + stop + regularization + linear``. Computed in float32 (float64 for float64
    outputs), whatever autocast produced.

    ``DistributedDataParallel`` (an initialised process group of more than one rank; see
    :mod:`torch_layers.distributed`):

    * ``reduction="global"`` (default): every rank returns the loss of the **global** batch -- the masked terms
      as :func:`masked_mse` (numerators and counts summed over the ranks), the plain means (``mask_decoder``
      off) as global sums over global element counts (every rank's batch must then be padded to the same time
      axis, as the single-process batch is), the regularization as it is (every rank computes it in full). The
      gathers carry gradients, so each rank's gradient is ``world_size`` times its share and DDP's average is
      the gradient of the global loss; with ``Tacotron2(sync_batch_norm=True)`` a DDP step equals the
      single-process step on the global batch.
    * ``reduction="per_replica"``: each rank's own loss; DDP's average is the gradient of the mean of the ranks'
      losses -- the original TF1 multi-GPU towers (with ``sync_batch_norm=False``, per-tower statistics).

    In one process both give the single-process values bit for bit.

    Args:
        model: the :class:`~torch_layers.Tacotron2` (its hparams and weights), or its
            ``DistributedDataParallel`` wrapper.
        outputs: the model's output dict from a ``train()`` pass (``stop_token_prediction`` must be logits, as
            TF1's training and evaluation graphs give them).
        mel_targets: ``(batch, steps * r, num_mels)``.
        stop_token_targets: ``(batch, steps * r)`` 0/1.
        targets_lengths: ``(batch,)`` integer frame lengths (required when ``mask_decoder``; else unused).
        linear_targets: ``(batch, steps * r, num_freq)``; required by Rayhane's loss with ``predict_linear``.
        reduction: ``"global"`` (default) or ``"per_replica"``: the reduction over data-parallel ranks.

    Returns:
        dict of scalar tensors ``before_loss, after_loss, stop_token_loss, linear_loss, regularization_loss, loss``.

    Raises:
        ValueError: a target of the wrong shape or dtype, or a required target missing.
    """
    reduction = check_loss_reduction(reduction, "tacotron2_loss")
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    hp = model.hparams
    r = hp.outputs_per_step
    decoder_outputs = outputs["decoder_outputs"]
    dtype = torch.float64 if decoder_outputs.dtype == torch.float64 else torch.float32
    dec = decoder_outputs.to(dtype)
    mel = outputs["mel_outputs"].to(dtype)
    logits = outputs["stop_token_prediction"].to(dtype)
    mel_t = _check_same(mel_targets, dec, "mel_targets", "(batch, steps * r, num_mels)").to(dtype)
    stop_t = _check_same(stop_token_targets, logits, "stop_token_targets", "(batch, steps * r)").to(dtype)
    rayhane_linear = hp.variant == "rayhane" and hp.predict_linear
    lin = lin_t = None
    if rayhane_linear:
        if "linear_outputs" not in outputs:
            raise ValueError("tacotron2_loss: argument `outputs` lacks 'linear_outputs' (predict_linear model).")
        lin = outputs["linear_outputs"].to(dtype)
        lin_t = _check_same(linear_targets, lin, "linear_targets", "(batch, steps * r, num_freq)").to(dtype)
    zero = dec.new_zeros(())
    if hp.mask_decoder:
        if targets_lengths is None:
            raise ValueError("tacotron2_loss: argument `targets_lengths` (integer tensor of shape (batch,)) is "
                             "required when hparams.mask_decoder is True.")
        before = masked_mse(mel_t, dec, targets_lengths, outputs_per_step=r, reduction=reduction)
        after = masked_mse(mel_t, mel, targets_lengths, outputs_per_step=r, reduction=reduction)
        stop = masked_sigmoid_cross_entropy(stop_t, logits, targets_lengths, outputs_per_step=r,
                                            pos_weight=hp.cross_entropy_pos_weight, reduction=reduction)
        linear = zero
        if rayhane_linear:
            linear = masked_linear_loss(lin_t, lin, targets_lengths, outputs_per_step=r, sample_rate=hp.sample_rate,
                                        num_freq=hp.num_freq, reduction=reduction)
    elif reduction == "global" and _sharded():
        # the plain means of the global batch: sums and element counts summed over the ranks (one gather)
        sq_dec, sq_mel = (mel_t - dec) ** 2, (mel_t - mel) ** 2
        xent = F.binary_cross_entropy_with_logits(logits, stop_t, reduction="none")
        sums, counts = [sq_dec.sum(), sq_mel.sum(), xent.sum()], [sq_dec.numel(), sq_mel.numel(), xent.numel()]
        if hp.variant == "rtvc":
            l1 = (mel_t - dec).abs()
            sums, counts = sums + [l1.sum()], counts + [l1.numel()]
        elif rayhane_linear:
            l1 = (lin_t - lin).abs()
            low = l1[:, :, :max(priority_frequencies(hp.sample_rate, hp.num_freq), 0)]
            sums, counts = sums + [l1.sum(), low.sum()], counts + [l1.numel(), low.numel()]
        means = _global_means(sums, counts, dec)
        before, after, stop = means[0], means[1], means[2]
        if hp.variant == "rtvc":
            linear = means[3]
        elif rayhane_linear:
            linear = 0.5 * means[3] + 0.5 * means[4]
        else:
            linear = zero
    else:
        before = ((mel_t - dec) ** 2).mean()
        after = ((mel_t - mel) ** 2).mean()
        stop = F.binary_cross_entropy_with_logits(logits, stop_t)
        if hp.variant == "rtvc":
            linear = (mel_t - dec).abs().mean()
        elif rayhane_linear:
            l1 = (lin_t - lin).abs()
            n = priority_frequencies(hp.sample_rate, hp.num_freq)
            linear = 0.5 * l1.mean() + 0.5 * _mean_or_zero(l1[:, :, :max(n, 0)])
        else:
            linear = zero
    l2 = zero
    for w in model.regularized_parameters().values():
        l2 = l2 + 0.5 * (w.to(dtype) ** 2).sum()
    regularization = l2 * hp.reg_weight
    loss = before + after + stop + regularization + linear
    return {"before_loss": before, "after_loss": after, "stop_token_loss": stop, "linear_loss": linear,
            "regularization_loss": regularization, "loss": loss}


def guided_attention_loss(alignments: Tensor, weights: Tensor, targets_lengths: Tensor, outputs_per_step: int, *,
                          reduction: str = DEFAULT_LOSS_REDUCTION) -> Tensor:
    """The optional guided-attention term (not in the original recipe; see
    :mod:`speechblocks.training.guided_attention`): ``sum(alignments * weights)`` over the valid cells divided by
    the number of valid decoder steps ``sum_b ceil(frames_b / r)`` (of the global batch under
    ``reduction="global"`` on one rank of several).

    Args:
        alignments: ``(batch, T_in, steps)``, the model's ``alignments`` output.
        weights: ``(batch, T_in, steps)``, :func:`~speechblocks.training.guided_attention_weights` (0 in the
            padding).
        targets_lengths: ``(batch,)`` integer frame lengths.
        outputs_per_step (int): frames per decoder step (``r``).
        reduction: ``"global"`` (default) or ``"per_replica"``.

    Returns:
        Tensor: the scalar term (float32; float64 for float64 alignments), unweighted.

    Raises:
        ValueError: ``weights`` not of the alignments' shape.
    """
    reduction = check_loss_reduction(reduction, "guided_attention_loss")
    if tuple(weights.shape) != tuple(alignments.shape):
        raise ValueError(f"guided_attention_loss: argument `weights` must have the alignments' shape (batch, T_in, "
                         f"steps) = {list(alignments.shape)}; got {list(weights.shape)}.")
    dtype = torch.float64 if alignments.dtype == torch.float64 else torch.float32
    steps = torch.div(targets_lengths.long() + (outputs_per_step - 1), outputs_per_step, rounding_mode="floor")
    count = steps.sum().to(dtype)
    total = (alignments.to(dtype) * weights.to(dtype)).sum()
    return _ratios([total], [count], reduction)[0]
