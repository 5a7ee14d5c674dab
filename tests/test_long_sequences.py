"""Long sequences: EncoderRNN and CBHG at T = 5000, the masked losses at T = 20000, both frameworks, run without
overflow, equal a reference, and use peak memory linear in T.

One fresh subprocess per framework (``tests/helpers/long_sequences_worker.py``) runs every case at two lengths
(T and 2T) and measures the peak RSS increase of each call; this test asserts

* outputs finite; Keras == torch (same TF1 weights) to 1e-4 (recurrences over >= 200 steps, docs/ARCHITECTURE.md,
  tolerances); the losses equal a float64 numpy reference of TF1's formulas (the NaN/inf padding zeroed) to 1e-5
  relative, with finite gradients;
* peak(2T) / peak(T) <= 2.5 for every case (O(T^2) memory would give 4), with peak(T) large enough (>= 1 MB) for
  the ratio to mean something.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import long_sequences_worker as worker
from tests.helpers import nonfinite as nf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_PEAK = 1 << 20  # 1 MB: well above the RSS noise of a call (page-granular, allocator slack)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("long_sequences"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="", MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072",
               OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    out = {}
    for framework in ("keras", "torch"):  # torch reads the Keras weights
        proc = subprocess.run([sys.executable, "-m", "tests.helpers.long_sequences_worker", framework, directory],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with np.load(os.path.join(directory, f"{framework}.npz")) as z:
            out[framework] = {k: z[k] for k in z.files}
    return out


@pytest.mark.parametrize("block", ["EncoderRNN", "CBHG"])
def test_recurrent_blocks_at_5000_frames_equal_across_frameworks(runs, block):
    for t in worker.RNN_LENGTHS:
        k, p = runs["keras"][f"{block}/{t}"], runs["torch"][f"{block}/{t}"]
        assert k.shape[:2] == (1, t) and np.isfinite(k).all() and np.isfinite(p).all()
        np.testing.assert_allclose(p, k, rtol=0, atol=1e-4)
    assert np.abs(runs["keras"][f"{block}/5000"]).max() > 1e-3  # not a trivially zero output


def test_masked_losses_at_20000_frames_equal_the_float64_reference(runs):
    for t in worker.LOSS_LENGTHS:
        targets, outputs, stop_t, stop_x, lengths = worker.loss_inputs(t)
        pad3 = (np.arange(t)[None] >= lengths[:, None])[:, :, None]
        zt, zo = np.where(pad3, 0, targets), np.where(pad3, 0, outputs)
        ref = [nf.numpy_loss("MaskedMSE", zt, zo, lengths),
               nf.numpy_loss("MaskedSigmoidCrossEntropy", stop_t, np.where(pad3[:, :, 0], 0, stop_x), lengths,
                             pos_weight=5.0),
               nf.numpy_loss("MaskedLinearLoss", zt, zo, lengths, sample_rate=worker.SAMPLE_RATE)]
        for framework in ("keras", "torch"):
            np.testing.assert_allclose(runs[framework][f"losses/{t}"], ref, rtol=1e-5)
            assert runs[framework][f"losses_grads_finite/{t}"]


@pytest.mark.parametrize("framework", ["keras", "torch"])
@pytest.mark.parametrize("case", ["EncoderRNN", "CBHG", "losses"])
def test_peak_memory_is_linear_in_length(runs, framework, case):
    lengths = worker.LOSS_LENGTHS if case == "losses" else worker.RNN_LENGTHS
    short, long = (float(runs[framework][f"peak/{case}/{t}"]) for t in lengths)
    assert short >= MIN_PEAK, f"peak at T={lengths[0]} is {short / 2**20:.2f} MB: too small to measure a ratio"
    assert long / short <= 2.5, (f"{framework} {case}: peak {short / 2**20:.1f} MB at T={lengths[0]}, "
                                 f"{long / 2**20:.1f} MB at T={lengths[1]} (ratio {long / short:.2f})")


def test_the_native_encoder_scan_needs_no_more_memory_than_the_loop(runs):
    """torch eager inference runs the native encoder scan: at both lengths its peak stays at or below the TorchScript
    loop's (measured above), with the same outputs."""
    out = runs["torch"]
    for t in worker.RNN_LENGTHS:
        assert float(out[f"peak/EncoderRNN-native/{t}"]) <= float(out[f"peak/EncoderRNN/{t}"]) + (256 << 10)
        np.testing.assert_allclose(out[f"EncoderRNN-native/{t}"], out[f"EncoderRNN/{t}"], atol=1e-5, rtol=0)
