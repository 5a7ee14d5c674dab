"""Parity of ``CBHG``: TF1 legacy reference -> Keras / torch, Keras <-> torch, inference and training.

Rayhane's default sizes (K=8, 128 channels, pool 2, projections [256, 80], projection kernel 3,
4 highway layers of 128, GRU 128, 80-dim input -> the dimension-fix dense is present) over T=200 with
mixed lengths including 1; a configuration without the dense, an odd pool and an even projection kernel
called full-length (``input_lengths=None``) under the post-net scope, as Rayhane's post-net CBHG is called;
training mode (batch statistics) with an even pool.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..reference import LegacySpec
from ..report import compare
from ._common import (
    FLOAT32_TOL,
    LONG_RECURRENCE_TOL,
    keras_from_checkpoint,
    keras_to_torch,
    randn,
    to_numpy,
    torch_from_checkpoint,
    torch_tensor,
)

BLOCK = "CBHG"
FLOAT64_TOL = 1e-9

RAYHANE = dict(K=8, conv_channels=128, pool_size=2, projections=[256, 80], projection_kernel_size=3,
               n_highwaynet_layers=4, highway_units=128, rnn_units=128)
NO_DENSE = dict(K=3, conv_channels=16, pool_size=3, projections=[24, 32], projection_kernel_size=4,
                n_highwaynet_layers=2, highway_units=32, rnn_units=16, tf1_scope="CBHG_postnet")
SMALL_TRAIN = dict(K=4, conv_channels=32, pool_size=4, projections=[48, 40], projection_kernel_size=3,
                   n_highwaynet_layers=2, highway_units=24, rnn_units=32)

# (label, config, input shape, lengths or None, training, tolerance)
CASES = [
    ("rayhane T200 lengths [200,57,1]", RAYHANE, (3, 200, 80), [200, 57, 1], False, LONG_RECURRENCE_TOL),
    ("no dense K3 pool3 proj-k4 CBHG_postnet input_lengths=None", NO_DENSE, (2, 23, 32), None, False, FLOAT32_TOL),
    ("train K4 pool4 lengths [31,12,1]", SMALL_TRAIN, (3, 31, 40), [31, 12, 1], True, FLOAT32_TOL),
]


def _inputs(i, shape, lengths):
    feeds = {"inputs": randn(shape, seed=40 + i)}
    if lengths is not None:
        feeds["input_lengths"] = np.asarray(lengths, np.int32)
    return feeds


def legacy_specs():
    return [LegacySpec(BLOCK, config, _inputs(i, shape, lengths), training=training, seed=50 + i)
            for i, (_, config, shape, lengths, training, _) in enumerate(CASES)]


def _keras(config):
    import tf_layers

    return tf_layers.CBHG(**config)


def _torch(config):
    import torch_layers

    return torch_layers.CBHG(config["projections"][-1], **config)


@contextlib.contextmanager
def _one_torch_thread():
    """Runs torch single-threaded: the per-step GRU matmuls are tiny, and extra OpenMP threads on a busy
    machine (TensorFlow's pools live in the same process) only spin. Restored afterwards; numbers unaffected
    beyond float32 rounding."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def rows(legacy):
    with _one_torch_thread():
        return _rows(legacy)


def _rows(legacy):
    import torch

    out = []
    for i, (label, config, shape, _, training, tol) in enumerate(CASES):
        res = legacy[i]
        x = res.spec.inputs["inputs"]
        lens = res.spec.inputs.get("input_lengths")
        ref = res.outputs["outputs"]
        mode = " train" if training else ""
        kb = keras_from_checkpoint(_keras(config), res)
        tb = torch_from_checkpoint(_torch(config), res).train(training)
        tl = None if lens is None else torch_tensor(lens)
        out.append(compare(BLOCK, "TF1->Keras" + mode, f"{label}: outputs", kb(x, lens, training=training), ref, tol))
        with torch.no_grad():
            out.append(compare(BLOCK, "TF1->torch" + mode, f"{label}: outputs", to_numpy(tb(torch_tensor(x), tl)), ref,
                               tol))

        # Keras <-> torch through tf1_weights, Keras' own initialisation
        kr = _keras(config)
        kr.build((None, None, shape[-1]))
        tr = keras_to_torch(kr, _torch(config)).train(training)  # before any training call moves BN averages
        xr = randn(shape, seed=300 + i)
        yk = kr(xr, lens, training=training)
        with torch.no_grad():
            yt = to_numpy(tr(torch_tensor(xr), tl))
        out.append(compare(BLOCK, "Keras<->torch" + mode, f"{label}: outputs", yt, yk, tol))
        if training:  # one training call moved every batch-norm moving average the same way (TF1 momentum 0.99)
            wk, wt = kr.tf1_weights(), tr.tf1_weights()
            keys = [k for k in wk if k.endswith(("moving_mean", "moving_variance"))]
            out.append(compare(BLOCK, "Keras<->torch train", f"{label}: {len(keys)} BN moving averages after 1 step",
                               np.concatenate([wt[k].ravel() for k in keys]),
                               np.concatenate([wk[k].ravel() for k in keys]), FLOAT32_TOL))

    # float64 on both sides separates maths differences from float32 rounding
    for config, shape, lengths in ((NO_DENSE, (2, 23, 32), [23, 9]), (SMALL_TRAIN, (3, 31, 40), None)):
        import tf_layers

        k64 = tf_layers.CBHG(**config, dtype="float64")
        x64 = randn(shape, seed=400).astype(np.float64)
        lens = None if lengths is None else np.asarray(lengths, np.int32)
        yk = k64(x64, lens)
        t64 = keras_to_torch(k64, _torch(config).double()).eval()
        with torch.no_grad():
            yt = to_numpy(t64(torch_tensor(x64), None if lens is None else torch_tensor(lens)))
        label = f"{config.get('tf1_scope', 'CBHG')} lengths={lengths}"
        out.append(compare(BLOCK, "Keras<->torch float64", f"{label}: outputs", yt, yk, FLOAT64_TOL))
    return out
