"""Worker of ``tests/test_long_sequences.py``: runs the long-sequence blocks of ONE framework in a fresh process
and measures the peak resident memory of every call.

``python -m tests.helpers.long_sequences_worker keras|torch DIR``: builds the seeded inputs below (torch also
reads the Keras blocks' TF1 weights from ``DIR/keras.npz``), writes ``DIR/<framework>.npz`` with the outputs, the
TF1 weights (Keras) and ``peak/<case>/<T>``: the peak RSS increase in bytes during the call over the RSS just
before it. Blocks: ``EncoderRNN`` and ``CBHG`` at T = 2500 and 5000 (batch 1; Keras inside one ``tf.function``
traced before the measurements, torch eager in ``no_grad``), the three masked losses with their gradients at
T = 10000 and 20000.

Peak RSS: a thread samples ``/proc/self/statm`` every 0.2 ms while the call runs (the frameworks release the
GIL in their kernels). The test runs this with ``MALLOC_MMAP_THRESHOLD_`` fixed, so the large buffers are mapped
and unmapped (a later call does not reuse the freed heap of an earlier one and RSS returns to the baseline).
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

ENCODER = dict(size=16)
CBHG = dict(K=4, conv_channels=32, pool_size=2, projections=[64, 256], projection_kernel_size=3, n_highwaynet_layers=2,
            highway_units=16, rnn_units=8)
IN_CHANNELS = 256  # the memory of a long sequence is dominated by its per-frame buffers
RNN_LENGTHS = (2500, 5000)
LOSS_LENGTHS = (10000, 20000)
LOSS_CHANNELS = 80
SAMPLE_RATE = 16000
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def peak_increase(fn):
    """``(fn(), peak RSS during the call - RSS before it)``."""
    import gc

    gc.collect()
    base = _rss()
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.0002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        out = fn()
        peak[0] = max(peak[0], _rss())
    finally:
        done.set()
        thread.join()
    return out, peak[0] - base


def rnn_inputs(t: int) -> np.ndarray:
    return np.random.default_rng(t).standard_normal((1, t, IN_CHANNELS)).astype(np.float32)


def loss_inputs(t: int):
    """``(mel targets, mel outputs, stop targets, stop logits, lengths)``: batch 2, lengths ``[t, t - t // 10 - 1]``,
    the padding of example 1 NaN/inf (selection keeps it out)."""
    g = np.random.default_rng(t)
    targets = g.standard_normal((2, t, LOSS_CHANNELS)).astype(np.float32)
    outputs = (targets + g.standard_normal((2, t, LOSS_CHANNELS))).astype(np.float32)
    stop_t = (g.uniform(size=(2, t)) < 0.1).astype(np.float32)
    stop_x = (3.0 * g.standard_normal((2, t))).astype(np.float32)
    n = t - t // 10 - 1
    lengths = np.array([t, n], np.int32)
    for a in (outputs, stop_x):
        a[1, n:] = np.nan
    targets[1, n:, 0] = np.inf
    return targets, outputs, stop_t, stop_x, lengths


def _keras(out):
    import tensorflow as tf

    import tf_layers

    enc, cbhg = tf_layers.EncoderRNN(**ENCODER), tf_layers.CBHG(**CBHG)
    spec = tf.TensorSpec([1, None, IN_CHANNELS], tf.float32)
    run_enc = tf.function(lambda x, n: enc(x, n, training=False), input_signature=[spec, tf.TensorSpec([1], tf.int32)])
    run_cbhg = tf.function(lambda x: cbhg(x, training=False), input_signature=[spec])
    small = rnn_inputs(64)
    run_enc(small, np.array([64], np.int32)), run_cbhg(small)  # trace once, outside the measurements
    out["weights/EncoderRNN"] = enc.tf1_weights()
    out["weights/CBHG"] = cbhg.tf1_weights()
    for t in RNN_LENGTHS:
        x = tf.constant(rnn_inputs(t))
        n = tf.constant([t], tf.int32)
        y, out[f"peak/EncoderRNN/{t}"] = peak_increase(lambda: run_enc(x, n).numpy())  # noqa: B023
        out[f"EncoderRNN/{t}"] = y
        y, out[f"peak/CBHG/{t}"] = peak_increase(lambda: run_cbhg(x).numpy())  # noqa: B023
        out[f"CBHG/{t}"] = y

    def losses(targets, outputs, stop_t, stop_x, lengths):
        o, s = tf.constant(outputs), tf.constant(stop_x)
        with tf.GradientTape() as tape:
            tape.watch([o, s])
            values = tf.stack([
                tf_layers.masked_mse(targets, o, lengths, outputs_per_step=1),
                tf_layers.masked_sigmoid_cross_entropy(stop_t, s, lengths, outputs_per_step=1, pos_weight=5.0),
                tf_layers.masked_linear_loss(targets, o, lengths, outputs_per_step=1, sample_rate=SAMPLE_RATE)])
            total = tf.reduce_sum(values)
        grads = tape.gradient(total, [o, s])
        return values.numpy(), bool(np.isfinite(grads[0].numpy()).all() and np.isfinite(grads[1].numpy()).all())

    losses(*loss_inputs(64))
    return losses


def _torch(out):
    import torch

    import torch_layers

    torch.set_num_threads(1)
    weights = np.load(os.path.join(sys.argv[2], "keras.npz"))
    enc = torch_layers.EncoderRNN(IN_CHANNELS, **ENCODER).eval()
    cbhg = torch_layers.CBHG(IN_CHANNELS, **CBHG).eval()
    for name, block in (("EncoderRNN", enc), ("CBHG", cbhg)):
        prefix = f"weights/{name}/"
        block.load_tf1_weights({k[len(prefix):]: weights[k] for k in weights.files if k.startswith(prefix)})
    with torch.no_grad():
        small = torch.from_numpy(rnn_inputs(64))
        enc(small, torch.tensor([64])), cbhg(small)
        for t in RNN_LENGTHS:
            x, n = torch.from_numpy(rnn_inputs(t)), torch.tensor([t])
            # the TorchScript loop's memory (linear in T, measurable), then the native scan's (what eager
            # inference runs: no stacked or reversed copies, below the loop's)
            os.environ["SPEECHBLOCKS_NATIVE"] = "0"
            y, out[f"peak/EncoderRNN/{t}"] = peak_increase(lambda: enc(x, n).numpy())  # noqa: B023
            del os.environ["SPEECHBLOCKS_NATIVE"]
            out[f"EncoderRNN/{t}"] = y
            y, out[f"peak/EncoderRNN-native/{t}"] = peak_increase(lambda: enc(x, n).numpy())  # noqa: B023
            out[f"EncoderRNN-native/{t}"] = y
            y, out[f"peak/CBHG/{t}"] = peak_increase(lambda: cbhg(x).numpy())  # noqa: B023
            out[f"CBHG/{t}"] = y

    def losses(targets, outputs, stop_t, stop_x, lengths):
        o = torch.from_numpy(outputs).requires_grad_(True)
        s = torch.from_numpy(stop_x).requires_grad_(True)
        t, n = torch.from_numpy(targets), torch.from_numpy(lengths)
        values = torch.stack([
            torch_layers.masked_mse(t, o, n, outputs_per_step=1),
            torch_layers.masked_sigmoid_cross_entropy(torch.from_numpy(stop_t), s, n, outputs_per_step=1,
                                                      pos_weight=5.0),
            torch_layers.masked_linear_loss(t, o, n, outputs_per_step=1, sample_rate=SAMPLE_RATE)])
        go, gs = torch.autograd.grad(values.sum(), [o, s])
        return values.detach().numpy(), bool(torch.isfinite(go).all() and torch.isfinite(gs).all())

    losses(*loss_inputs(64))
    return losses


def main() -> int:
    framework, directory = sys.argv[1], sys.argv[2]
    out: dict = {}
    losses = (_keras if framework == "keras" else _torch)(out)
    for t in LOSS_LENGTHS:
        inputs = loss_inputs(t)
        (values, finite), out[f"peak/losses/{t}"] = peak_increase(lambda: losses(*inputs))  # noqa: B023
        out[f"losses/{t}"] = values
        out[f"losses_grads_finite/{t}"] = finite
    flat = {}
    for k, v in out.items():
        if isinstance(v, dict):
            flat.update({f"{k}/{name}": a for name, a in v.items()})
        else:
            flat[k] = np.asarray(v)
    np.savez(os.path.join(directory, f"{framework}.npz"), **flat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
