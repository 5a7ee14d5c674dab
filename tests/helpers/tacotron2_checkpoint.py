"""Small whole-model TF1 Tacotron-2 checkpoints for the command-line tests (``tf.raw_ops.SaveV2``, the op TF1's
``Saver`` runs), with every variable of :func:`speechblocks.tf1_variable_shapes` under ``Tacotron_model/inference/``."""
from __future__ import annotations

import os

import numpy as np

from speechblocks import resolve_hparams, tf1_variable_shapes

#: small sizes (seconds per test); RTVC-like: r = 2 and a speaker embedding
SMALL_RTVC = dict(embedding_dim=16, enc_conv_channels=16, encoder_lstm_units=8, attention_dim=8, attention_filters=4,
                  prenet_layers=[8, 8], decoder_lstm_units=16, postnet_channels=16, speaker_embedding_size=6,
                  num_mels=10)
SMALL_RAYHANE = dict(SMALL_RTVC, speaker_embedding_size=None, cbhg_conv_channels=8, cbhg_kernels=3,
                     cbhg_projection=8, cbhg_highway_units=8, cbhg_rnn_units=8, num_freq=12)

STOP_BIAS = "decoder/stop_token_projection/projection_stop_token_projection/bias"


def small_variables(preset: str = "rtvc", seed: int = 0, stop_bias: float | None = None, **overrides):
    """``(hparams, {relative TF1 name: array})``: random weights of a small model (scale 0.3; moving variances
    positive). ``stop_bias`` sets the stop projection's bias (e.g. +3 with a zero kernel: stop at step 1)."""
    hp = resolve_hparams(preset, 66, **{**(SMALL_RTVC if preset == "rtvc" else SMALL_RAYHANE), **overrides})
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in tf1_variable_shapes(hp).items():
        v = rng.standard_normal(shape).astype(np.float32) * 0.3
        if name.endswith("moving_variance"):
            v = np.abs(v) + 0.5
        out[name] = v
    if stop_bias is not None:
        out[STOP_BIAS] = np.full_like(out[STOP_BIAS], stop_bias)
    return hp, out


def save_model_checkpoint(directory, variables: dict, name: str = "model.ckpt-100") -> str:
    """Writes the variables under ``Tacotron_model/inference/`` (plus a ``checkpoint`` state file); returns the
    prefix."""
    import tensorflow as tf

    prefix = os.path.join(os.fspath(directory), name)
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=[f"Tacotron_model/inference/{n}" for n in names],
                      shape_and_slices=[""] * len(names), tensors=[np.asarray(variables[n]) for n in names])
    with open(os.path.join(os.fspath(directory), "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{name}"\n')
    return prefix
