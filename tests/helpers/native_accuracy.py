"""The accuracy rule of the native kernels' tests (``tests/test_native_*.py``)."""
from __future__ import annotations

import torch


def assert_as_accurate(native: torch.Tensor, framework: torch.Tensor, reference: torch.Tensor, rel: float = 5e-7,
                       spread: tuple = ()):
    """The native float32 result is as close to the float64 run of the framework's loop (``reference``) as the float32
    framework loop is: within 4x its error plus ``rel`` of the reference's scale (each sums in its own order; over
    many recurrent steps the float32 noise grows alike in both). NaN at the same places.

    ``spread``: more float32 runs of the framework's loop on inputs one rounding away (``x * (1 +- 2**-23)``); the
    framework's error is then the largest of them. On a trajectory that amplifies rounding (large weights, many
    steps) one float32 run's error is one draw of that amplified noise, and the native result has to be as close
    as the float32 loop lands for inputs it cannot tell apart, not as close as its luckiest draw."""
    assert native.shape == framework.shape == reference.shape
    assert all(s.shape == reference.shape for s in spread)
    assert torch.equal(torch.isnan(native), torch.isnan(reference))
    ref = reference.double().nan_to_num()
    scale = max(1.0, float(ref.abs().max()))
    err_native = float((native.double().nan_to_num() - ref).abs().max())
    err_framework = max(float((f.double().nan_to_num() - ref).abs().max()) for f in (framework, *spread))
    assert err_native <= 4 * err_framework + rel * scale, (err_native, err_framework)
