"""CBHG timing: the fast bidirectional TF1 GRU (input halves precomputed, both directions in one loop)
against a plain per-step cell loop in the same run, in Keras (``tf.function``) and torch (eager and
TorchScript), plus the whole CBHG at Rayhane's default sizes."""
from __future__ import annotations

import numpy as np

from ._timing import compare_times
from .results import record

#: the rows of bench/results.json this bench records: the BiGRU speed-up over the per-step cell loop
ROWS = ("torch 1 thread", "keras")
CONFIG = dict(K=8, conv_channels=128, pool_size=2, projections=[256, 80], projection_kernel_size=3,
              n_highwaynet_layers=4, highway_units=128, rnn_units=128)
BATCH, TIME = 4, 200


def _keras_times(x, lengths) -> dict:
    import keras
    import tensorflow as tf

    from tf_layers import CBHG
    from tf_layers._sequence import reverse_within_lengths
    from tf_layers.tf1_gru_cell import bidirectional_tf1_gru

    cbhg = CBHG(**CONFIG)
    cbhg(x, lengths)
    h = tf.random.normal((BATCH, TIME, CONFIG["highway_units"]))
    fw_rnn = keras.layers.RNN(cbhg.fw_cell, return_sequences=True)
    bw_rnn = keras.layers.RNN(cbhg.bw_cell, return_sequences=True)

    @tf.function
    def fast(v):
        return bidirectional_tf1_gru(v, cbhg.fw_cell, cbhg.bw_cell, None)

    @tf.function
    def per_step(v):  # baseline: keras.layers.RNN over the cell, one full matmul per step and direction
        return fw_rnn(v), reverse_within_lengths(bw_rnn(reverse_within_lengths(v, None)), None)

    whole = tf.function(lambda a, n: cbhg(a, n))
    np.testing.assert_allclose(np.asarray(fast(h)[1]), np.asarray(per_step(h)[1]), atol=1e-4)
    return compare_times({"per_step": lambda: per_step(h), "fast": lambda: fast(h),
                          "cbhg": lambda: whole(x, lengths)}, repeats=5)


def _keras_lines(t: dict) -> list[str]:
    return [f"keras  BiGRU T={TIME} B={BATCH}: fast {1e3 * t['fast']:.1f} ms vs keras.layers.RNN(cell) "
            f"{1e3 * t['per_step']:.1f} ms -> speed-up x{t['per_step'] / t['fast']:.2f}",
            f"keras  whole CBHG (tf.function): {1e3 * t['cbhg']:.1f} ms = x{t['cbhg'] / t['per_step']:.2f} "
            "of the per-step BiGRU baseline"]


def _torch_all_times(x, lengths) -> dict:
    import torch

    from torch_layers import CBHG
    from torch_layers.tf1_gru_cell import bidirectional_tf1_gru

    cbhg = CBHG(80, **CONFIG).eval()
    h = torch.randn(BATCH, TIME, CONFIG["highway_units"])
    xt, lt = torch.from_numpy(x), torch.from_numpy(lengths)

    def per_step(v):  # baseline: the cell called step by step, each direction on its own
        outs = []
        for cell, seq in ((cbhg.fw_cell, v), (cbhg.bw_cell, torch.flip(v, [1]))):
            s = torch.zeros(v.shape[0], cell.num_units)
            ys = []
            for i in range(seq.shape[1]):
                s = cell(seq[:, i], s)
                ys.append(s)
            outs.append(torch.stack(ys, 1))
        return outs[0], torch.flip(outs[1], [1])

    scripted = torch.jit.script(cbhg)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny per-step matmuls: extra threads only contend (restored below)
    try:
        return _torch_times(torch, cbhg, scripted, per_step, bidirectional_tf1_gru, h, xt, lt)
    finally:
        torch.set_num_threads(threads)


def _torch_lines(t: dict) -> list[str]:
    return [f"torch  BiGRU T={TIME} B={BATCH} (1 thread): fast {1e3 * t['fast']:.1f} ms vs per-step cell loop "
            f"{1e3 * t['per_step']:.1f} ms -> speed-up x{t['per_step'] / t['fast']:.2f}",
            f"torch  whole CBHG (1 thread): eager {1e3 * t['cbhg']:.1f} ms, TorchScript {1e3 * t['script']:.1f} ms "
            f"(script/eager x{t['script'] / t['cbhg']:.2f}; per-step BiGRU baseline x{t['cbhg'] / t['per_step']:.2f})"]


def _torch_times(torch, cbhg, scripted, per_step, bidirectional_tf1_gru, h, xt, lt):
    with torch.no_grad():
        torch.testing.assert_close(bidirectional_tf1_gru(h, cbhg.fw_cell, cbhg.bw_cell)[1], per_step(h)[1],
                                   atol=1e-4, rtol=0)
        t = compare_times({"per_step": lambda: per_step(h),
                           "fast": lambda: bidirectional_tf1_gru(h, cbhg.fw_cell, cbhg.bw_cell),
                           "cbhg": lambda: cbhg(xt, lt), "script": lambda: scripted(xt, lt)}, repeats=5)
    return t


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, TIME, 80)).astype(np.float32)
    lengths = np.array([TIME, 150, 57, 1], np.int32)
    t = _torch_all_times(x, lengths)
    for line in _torch_lines(t):
        print(line, flush=True)
    record_times("torch 1 thread", t)
    t = _keras_times(x, lengths)
    for line in _keras_lines(t):
        print(line, flush=True)
    record_times("keras", t)


def record_times(row: str, t: dict) -> None:
    """The row's record from one framework's medians (``per_step``, ``fast``, ``cbhg``, torch's ``script``)."""
    name = "torch, 1 thread" if row.startswith("torch") else "Keras `tf.function`"
    whole = f"whole CBHG {1e3 * t['cbhg']:.1f} ms" + (f", TorchScript {1e3 * t['script']:.1f} ms" if "script" in t
                                                     else "")
    record("cbhg", row, t["per_step"] / t["fast"], unit="x faster", fmt=".2f", seconds=t["fast"],
           baseline=t["per_step"], label=f"CBHG BiGRU, {'torch 1 thread' if row.startswith('torch') else 'Keras'}, "
           "vs a cell loop", setup=f"CBHG bidirectional TF1 GRU (input halves precomputed, both directions in one "
           f"loop), T={TIME} B={BATCH} {CONFIG['highway_units']}→2×{CONFIG['rnn_units']}, vs a per-step cell loop of "
           "the same cells (median of 5, interleaved; `bench/bench_cbhg.py`)", what=name,
           notes=f"{1e3 * t['fast']:.1f} ms vs {1e3 * t['per_step']:.1f} ms; {whole}.")


if __name__ == "__main__":
    main()
