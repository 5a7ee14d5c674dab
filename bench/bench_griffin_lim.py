"""Griffin-Lim timing: 60 iterations of a 5 s utterance at RTVC's sizes (16 kHz, n_fft 800, hop 200,
win 800, reflect padding), the originals' ``_griffin_lim`` loop over ``librosa.stft`` / ``librosa.istft``
(complex128, as they ran it) against ``torch_layers.griffin_lim`` and ``tf_layers.griffin_lim``
(``tf.function``) in float32 (the model's output dtype), same initial phases. Each output is checked close to
the original's first (float32 after 60 iterations: measured 1.9e-5 (torch) and 3.3e-5 (TF) of the peak on this
utterance; checked at 1e-4). Targets: torch >= 5x, TF >= 3x faster than the original loop.

Threads: torch runs with 1 thread (per core, as the original's single-threaded numpy loop) and with all cores;
TensorFlow with ``BENCH_GL_THREADS`` intra-op (and inter-op) threads, default 1 (fixed at its start-up).
Each framework is timed in its own phase, interleaved with the original loop: TensorFlow's thread pool
spinning after its runs would otherwise steal the cores of torch's threads (measured: torch with 2 threads
20x slower when interleaved with TF on 2 cores).
"""
from __future__ import annotations

import os

import numpy as np

from ._timing import compare_times
from .bench_audio import _utterance
from .results import record

#: the rows of bench/results.json this bench records (Keras at BENCH_GL_THREADS=1 only)
ROWS = ("torch default threads", "torch 1 thread", "keras 1 thread")
N_ITER = 60
SECONDS = 5.0
TOL = 1e-4  # float32 vs the float64 original, of the peak (5 s: more weak bins than the tests' 0.3 s)


GL_SETUP = (f"Griffin-Lim, {N_ITER} iterations, {SECONDS:.0f} s at RTVC sizes, float32, speed-up over the original "
            "numpy/librosa loop (`bench/bench_griffin_lim.py`)")


def _line(name: str, t: dict) -> str:
    return (f"{name} {t['fw']:.3f} s; original loop with librosa {t['original']:.3f} s: "
            f"{t['original'] / t['fw']:.1f}x faster")


def main() -> None:
    import librosa
    import torch

    from speechblocks.audio import audio_hparams
    from torch_layers.griffin_lim import griffin_lim as torch_griffin_lim

    hp = audio_hparams("rtvc")
    wav = _utterance(hp.sample_rate, SECONDS, seed=1)
    S = np.abs(librosa.stft(wav.astype(np.float64), n_fft=hp.n_fft, hop_length=hp.hop_size,
                            win_length=hp.win_size, pad_mode="reflect"))
    angles = np.exp(2j * np.pi * np.random.default_rng(0).random(S.shape))

    def original():  # the originals' _griffin_lim, librosa as RTVC called it (librosa 0.6-0.8: reflect)
        s_complex = np.abs(S).astype(complex)
        y = librosa.istft(s_complex * angles, hop_length=hp.hop_size, win_length=hp.win_size)
        for _ in range(N_ITER):
            a = np.exp(1j * np.angle(librosa.stft(y, n_fft=hp.n_fft, hop_length=hp.hop_size,
                                                  win_length=hp.win_size, pad_mode="reflect")))
            y = librosa.istft(s_complex * a, hop_length=hp.hop_size, win_length=hp.win_size)
        return y

    def check(name: str, out: np.ndarray) -> None:
        err = np.abs(out - ref).max() / np.abs(ref).max()
        assert err <= TOL, f"{name}: max error {err:.1e} of the peak"
        print(f"{name} float32 vs the original (float64): max error {err:.1e} of the peak", flush=True)

    sizes = dict(n_fft=hp.n_fft, hop_size=hp.hop_size, win_size=hp.win_size, n_iter=N_ITER,
                 pad_mode="reflect")
    print(f"griffin_lim rtvc, {N_ITER} iterations, {SECONDS:.0f} s ({S.shape[1]} frames x {hp.num_freq} "
          f"bins), float32; targets: torch >= 5x, TF >= 3x faster than the original loop", flush=True)
    ref = original()
    s_torch, a_torch = torch.tensor(S.T, dtype=torch.float32), torch.tensor(angles, dtype=torch.complex64)

    def with_torch():
        with torch.inference_mode():
            return torch_griffin_lim(s_torch, angles=a_torch, **sizes)

    check("torch", with_torch().numpy())
    for threads in sorted({1, os.cpu_count() or 1}):
        torch.set_num_threads(threads)
        t = compare_times({"original": original, "fw": with_torch}, repeats=5, warmup=1)
        print(_line(f"torch, {threads} thread(s):", t), flush=True)
        default = threads == (os.cpu_count() or 1) and threads > 1
        record("griffin_lim", "torch default threads" if default else f"torch {threads} thread", unit="x faster",
               value=t["original"] / t["fw"], seconds=t["fw"], baseline=t["original"], target=">= 5", fmt=".1f",
               setup=GL_SETUP, what=f"torch, {threads} thread(s)")

    threads = int(os.environ.get("BENCH_GL_THREADS", "1"))
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    from tf_layers.griffin_lim import griffin_lim as tf_griffin_lim

    s_tf, a_tf = tf.constant(S.T[None], tf.float32), tf.constant(angles[None], tf.complex64)
    signature = [tf.TensorSpec([None, None, hp.num_freq], tf.float32),
                 tf.TensorSpec([None, hp.num_freq, None], tf.complex64)]
    graph = tf.function(lambda s, a: tf_griffin_lim(s, angles=a, **sizes), input_signature=signature)

    def with_tf():
        return graph(s_tf, a_tf).numpy()

    check("tf", with_tf()[0])
    t = compare_times({"original": original, "fw": with_tf}, repeats=5, warmup=1)
    print(_line(f"Keras/TF tf.function, {threads} thread(s):", t), flush=True)
    if threads != 1:
        print("(BENCH_GL_THREADS is not 1: the Keras row is not recorded)", flush=True)
        return
    record("griffin_lim", "keras 1 thread", unit="x faster", value=t["original"] / t["fw"], seconds=t["fw"],
           baseline=t["original"], target=">= 3", fmt=".1f", setup=GL_SETUP,
           what=f"Keras `tf.function`, {threads} thread(s)")


if __name__ == "__main__":
    main()
