"""The C steps' stop rule (``speechblocks/native/stop_rule.h``, included by ``decoder_step.c`` and
``decoder_batch.c``) is the numpy one (``speechblocks/stop_rule.py``) at its edge: a stop probability of exactly 0.5
rounds half to even, to 0, and does not stop; the next float above it does.

The stop outputs are set through the projection (zero stop rows, a bias): the sigmoid of 0 is exactly 0.5, of 1e-6
is 0.50000025. Numpy loops over the library only, no framework.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from speechblocks import native, stop_rule

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native step cannot be built")
F32 = np.float32
U, PRENET, MELS, D, T, UNITS, K, R = 8, (6, 5), 4, 7, 9, 6, 3, 2


def _arrays(stop_logits, rows: bool, batch=None) -> dict:
    rng = np.random.default_rng(0)

    def w(o, i):
        x = rng.normal(size=(o, i)).astype(F32) * 0.5
        return np.ascontiguousarray(x if rows else x.T)

    lead = () if batch is None else (batch,)
    projection = rng.normal(size=(MELS * R + R, U + D)).astype(F32)
    projection[MELS * R:] = 0.0  # the stop rows: the bias alone
    bias = np.concatenate([rng.normal(size=MELS * R), stop_logits]).astype(F32)
    return dict(lstm_weights=[w(4 * U, PRENET[-1] + D + U), w(4 * U, 2 * U)],
                lstm_biases=[rng.normal(size=4 * U).astype(F32) for _ in range(2)],
                gates=native.TORCH_GATES if rows else native.TF1_GATES, prenet_weights=[w(6, MELS), w(5, 6)],
                prenet_biases=[rng.normal(size=n).astype(F32) for n in PRENET], query_weight=w(UNITS, U),
                location_weight=rng.normal(size=(K, UNITS)).astype(F32), v_a=rng.normal(size=UNITS).astype(F32),
                keys=rng.normal(size=lead + (T, UNITS)).astype(F32), values=rng.normal(size=lead + (T, D)).astype(F32),
                score_bias=None, projection_weight=np.ascontiguousarray(projection if rows else projection.T),
                projection_bias=bias, num_mels=MELS, frame_size=MELS * R, zoneout=0.1, prenet_rate=0.0,
                pad_before=1, smoothing=False, cumulate=True, threads=2)


@pytest.mark.parametrize("stop_at_any", [True, False])
@pytest.mark.parametrize("logits", [(0.0, 0.0), (0.0, 1e-6), (1e-6, 1e-6), (-1e-6, 0.0)])
def test_both_c_steps_round_half_to_even_as_numpy(logits, stop_at_any):
    lib = native.library()
    assert lib is not None, native.status().reason
    expected = bool(stop_rule.entries_fired(1.0 / (1.0 + np.exp(-np.asarray(logits, F32))), stop_at_any))
    runs = []
    for rows in (False, True):
        loop = native.DecoderLoop(lib, lstm_cols=not rows, dense_cols=not rows, stop_at_any=stop_at_any,
                                  **_arrays(logits, rows))
        runs.append(loop.run(3)[1:4:2])  # (stop probabilities, finished)
        batch = native.BatchDecoderLoop(lib, rows=rows, stop_at_any=stop_at_any, **_arrays(logits, rows, batch=2))
        stop, finished = batch.run(3)[1:4:2]
        runs += [(stop[0], finished), (stop[1], finished)]
    for stop, finished in runs:
        assert np.array_equal(stop[0] == 0.5, np.asarray(logits) == 0)  # the sigmoid of 0: 0.5 exactly
        assert np.array_equal(stop[0] > 0.5, np.asarray(logits) > 0)
        assert finished == expected and len(stop) == (1 if expected else 3)
    assert expected == {(0.0, 0.0): False, (0.0, 1e-6): stop_at_any, (1e-6, 1e-6): True, (-1e-6, 0.0): False}[logits]
