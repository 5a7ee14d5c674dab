"""The accuracy rule of the native kernels' tests (``tests/test_native_*.py``)."""
from __future__ import annotations

import torch


def assert_as_accurate(native: torch.Tensor, framework: torch.Tensor, reference: torch.Tensor, rel: float = 5e-7):
    """The native float32 result is as close to the float64 run of the framework's loop (``reference``) as the float32
    framework loop is: within 4x its error plus ``rel`` of the reference's scale (each sums in its own order; over
    many recurrent steps the float32 noise grows alike in both). NaN at the same places."""
    assert native.shape == framework.shape == reference.shape
    assert torch.equal(torch.isnan(native), torch.isnan(reference))
    ref = reference.double().nan_to_num()
    scale = max(1.0, float(ref.abs().max()))
    err_native = float((native.double().nan_to_num() - ref).abs().max())
    err_framework = float((framework.double().nan_to_num() - ref).abs().max())
    assert err_native <= 4 * err_framework + rel * scale, (err_native, err_framework)
