"""The TF1 legacy reference server (``parity_tests.reference``): one long-lived subprocess per test process serves
every ``run_legacy`` call; a failing batch is reported with its traceback and the server keeps serving."""
import numpy as np
import pytest

from parity_tests import reference
from parity_tests.cases import stop_projection
from parity_tests.reference import LegacyReferenceError, LegacySpec, run_legacy


def test_a_failing_spec_is_reported_and_the_server_keeps_serving():
    bad = LegacySpec(block="no_such_builder", config={}, inputs={"x": np.zeros((1, 2), np.float32)})
    with pytest.raises(LegacyReferenceError, match="no_such_builder"):
        run_legacy([bad])
    pid = reference._SERVER.proc.pid
    spec = stop_projection.legacy_specs()[0]
    (result,) = run_legacy([spec])
    assert reference._SERVER.proc.pid == pid  # the same process served the next batch
    # the TF1 stop projection at inference (sigmoid of a dense layer), recomputed by hand from the saved checkpoint
    import tensorflow as tf

    reader = tf.train.load_checkpoint(result.checkpoint)
    names = {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(result.checkpoint)
             if n.startswith(result.block_scope)}
    kernel = next(v for n, v in names.items() if n.endswith("kernel"))
    bias = next(v for n, v in names.items() if n.endswith("bias"))
    (x,) = [v for k, v in spec.inputs.items()]
    (y,) = [v for k, v in result.outputs.items() if not k.startswith("mask/")]
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-(x @ kernel + bias))), atol=1e-6, rtol=1e-5)
