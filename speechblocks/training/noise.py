"""The random draws of one training step (dropout and zoneout keep-masks) as arrays of the **global** batch.

A training step draws its keep-masks here, from the step's seed, for every row of the global batch, and hands
the model the rows it runs (``noise_masks=``): one process takes every row, a data-parallel rank or replica its
own rows. So the draws are a function of ``(seed, global step)`` and the row, never of how the batch is split:
a 2-process step equals the 1-process step on the same global batch, dropout and zoneout included, and the torch
and Keras trainers draw the same masks.
"""
from __future__ import annotations

import numpy as np

from ._hparams import get_int, lookup

__all__ = ["draw_noise_masks", "noise_mask_rows", "step_seed"]


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    """The 32-bit seed of the random draws of global step ``step`` (a function of the run's seed and the step;
    ``stream``: another draw of the same step, e.g. an evaluation batch)."""
    return int(np.random.SeedSequence([int(seed), int(step), int(stream)]).generate_state(1)[0])


def _rate(hparams, name: str) -> float:
    value = float(lookup(hparams, name))
    if not 0.0 <= value < 1.0:
        raise ValueError(f"training: hparam `{name}` must lie in [0, 1); got {value}.")
    return value


def draw_noise_masks(hparams, batch_size: int, t_in: int, t_out: int, seed: int) -> dict:
    """The 0/1 keep-masks of one teacher-forced training pass over a padded global batch.

    Each element is kept with probability ``1 - rate`` (TF1's ``dropout(keep_prob)``; zoneout's ``m ~
    Bernoulli(1 - z)``), independently per element, row, time step and layer, from
    ``numpy.random.default_rng(seed)`` in a fixed order: pre-net layers, encoder convolutions, encoder LSTM
    ``(fw_c, fw_h, bw_c, bw_h)``, decoder LSTM layers ``(c, h)``, postnet layers.

    Args:
        hparams: the original names ``tacotron_dropout_rate`` (pre-net and convolutions), ``tacotron_zoneout_rate``
            (both LSTMs), ``prenet_layers``, ``enc_conv_num_layers``, ``enc_conv_channels``, ``encoder_lstm_units``,
            ``decoder_layers``, ``decoder_lstm_units``, ``postnet_num_layers``, ``postnet_channels``,
            ``outputs_per_step``.
        batch_size (int): rows of the global batch ``B``.
        t_in (int): the padded input length ``T_in``.
        t_out (int): the padded target length ``T_out`` (a multiple of ``outputs_per_step``).
        seed (int): the step's seed.

    Returns:
        dict: the ``noise_masks`` of both frameworks' ``Tacotron2``: ``"prenet"`` ``[(B, steps, size)]`` per
        layer, ``"encoder_convolutions"`` ``[(B, T_in, enc_conv_channels)]`` per layer, ``"encoder_LSTM"``
        ``((fw_c, fw_h), (bw_c, bw_h))`` each ``(B, T_in, encoder_lstm_units)``, ``"decoder_LSTM"`` ``[(c, h)]``
        per layer each ``(B, steps, decoder_lstm_units)``, ``"postnet_convolutions"`` ``[(B, T_out,
        postnet_channels)]`` per layer; float32 arrays, ``steps = T_out / outputs_per_step``.

    Raises:
        ValueError: a rate outside ``[0, 1)``, or ``T_out`` not a multiple of ``outputs_per_step``.
    """
    r = get_int(hparams, "outputs_per_step")
    if t_out % r:
        raise ValueError(f"draw_noise_masks: argument `t_out` must be a multiple of outputs_per_step={r}; got {t_out}.")
    drop, zone = _rate(hparams, "tacotron_dropout_rate"), _rate(hparams, "tacotron_zoneout_rate")
    rng = np.random.default_rng(int(seed))
    steps = t_out // r

    def keep(shape, rate):
        return (rng.random(shape, dtype=np.float32) >= rate).astype(np.float32)

    b = int(batch_size)
    enc_units, dec_units = get_int(hparams, "encoder_lstm_units"), get_int(hparams, "decoder_lstm_units")
    prenet = [keep((b, steps, int(size)), drop) for size in lookup(hparams, "prenet_layers")]
    convs = [keep((b, t_in, get_int(hparams, "enc_conv_channels")), drop)
             for _ in range(get_int(hparams, "enc_conv_num_layers"))]
    enc = [keep((b, t_in, enc_units), zone) for _ in range(4)]
    dec = [(keep((b, steps, dec_units), zone), keep((b, steps, dec_units), zone))
           for _ in range(get_int(hparams, "decoder_layers"))]
    post = [keep((b, t_out, get_int(hparams, "postnet_channels")), drop)
            for _ in range(get_int(hparams, "postnet_num_layers"))]
    return {"prenet": prenet, "encoder_convolutions": convs, "encoder_LSTM": ((enc[0], enc[1]), (enc[2], enc[3])),
            "decoder_LSTM": dec, "postnet_convolutions": post}


def noise_mask_rows(masks, lo: int, hi: int):
    """Rows ``lo:hi`` of every mask of a (nested) ``noise_masks`` (a rank's or a replica's share)."""
    if isinstance(masks, dict):
        return {k: noise_mask_rows(v, lo, hi) for k, v in masks.items()}
    if isinstance(masks, (list, tuple)):
        return type(masks)(noise_mask_rows(v, lo, hi) for v in masks)
    return masks[lo:hi]
