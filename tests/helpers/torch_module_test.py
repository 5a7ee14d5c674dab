"""``run_torch_module_test``: the checks every speechblocks torch module gets for free.

factory keywords (``device``/``dtype``; constructible on the meta device, so nothing is moved in
``__init__``), ``state_dict`` round trip, ``train()``/``eval()`` honoured, TorchScript (or
``torch.compile``) inference, float64, bad input answered by a ``ValueError``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for e in x for t in _flat(e)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _flat(x[k])]
    return []


def _assert_close(a, b, atol, what):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb), what
    for u, v in zip(fa, fb):
        np.testing.assert_allclose(u.detach().double().numpy(), v.detach().double().numpy(), atol=atol, rtol=0,
                                   err_msg=what)


def run_torch_module_test(
    module_cls,
    init_args: Sequence = (),
    init_kwargs: dict | None = None,
    make_inputs: Callable[[int, int, torch.dtype], Sequence] = None,
    expected_output_shape: Callable[[int, int], object] | None = None,
    bad_inputs: Sequence[tuple[Sequence, str]] = (),
    deterministic_in_eval: bool = True,
    changes_in_training: bool = False,
    scriptable: str = "script",
    sizes: Sequence[tuple[int, int]] = ((2, 7), (1, 1), (3, 4)),
    atol: float = 1e-6,
):
    """Runs the shared module checks.

    Args:
        module_cls: the module class.
        init_args, init_kwargs: constructor arguments (without ``device``/``dtype``).
        make_inputs: ``(batch, time, dtype) -> list of positional forward arguments`` (tensors).
        expected_output_shape: ``(batch, time) -> shape`` or a nest of shapes.
        bad_inputs: ``(args, fragment)``: each must raise ``ValueError`` mentioning the fragment.
        deterministic_in_eval: two eval calls agree exactly.
        changes_in_training: ``train()`` must change the output.
        scriptable: ``"script"`` (``torch.jit.script``), ``"compile"`` (``torch.compile``) or ``""``.
        sizes: ``(batch, time)`` pairs to run.
    """
    init_kwargs = dict(init_kwargs or {})
    torch.manual_seed(0)
    m = module_cls(*init_args, **init_kwargs).eval()
    args = make_inputs(*sizes[0], torch.float32)
    with torch.no_grad():
        y = m(*args)
    if expected_output_shape is not None:
        shapes = expected_output_shape(*sizes[0])
        shapes = [shapes] if isinstance(shapes, (tuple, torch.Size)) and all(isinstance(s, int) for s in shapes) else shapes
        for t, s in zip(_flat(y), shapes):
            assert tuple(t.shape) == tuple(s), f"output shape {tuple(t.shape)} != expected {tuple(s)}"
    for t in _flat(y):
        assert torch.isfinite(t).all(), "non-finite output"
    if deterministic_in_eval:
        with torch.no_grad():
            _assert_close(m(*args), y, 0.0, "eval is not deterministic")

    # factory keywords: meta device (nothing moved in __init__) and float64
    meta = module_cls(*init_args, **init_kwargs, device="meta")
    assert all(p.device.type == "meta" for p in meta.parameters()), "parameters ignore device="
    m64 = module_cls(*init_args, **init_kwargs, dtype=torch.float64).eval()
    assert all(p.dtype == torch.float64 for p in m64.parameters()), "parameters ignore dtype="
    m64.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in m.state_dict().items()})
    with torch.no_grad():
        y64 = m64(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])
    if deterministic_in_eval:
        _assert_close(y64, y, 1e-4, "float64 differs from float32")

    # state_dict round trip
    m2 = module_cls(*init_args, **init_kwargs).eval()
    m2.load_state_dict(m.state_dict())
    if deterministic_in_eval:
        with torch.no_grad():
            _assert_close(m2(*args), y, 0.0, "state_dict round trip differs")

    # train()/eval()
    if changes_in_training:
        m.train()
        with torch.no_grad():
            yt = m(*args)
        m.eval()
        diff = max(float((u - v).abs().max()) for u, v in zip(_flat(yt), _flat(y)))
        assert diff > 0, "train() gives the eval output"

    # TorchScript / compile for inference, unknown sizes
    if scriptable:
        compiled = torch.jit.script(m) if scriptable == "script" else torch.compile(m, dynamic=True)
        for b, t in sizes:
            a = make_inputs(b, t, torch.float32)
            with torch.no_grad():
                got, want = compiled(*a), m(*a)
            if deterministic_in_eval:
                _assert_close(got, want, 1e-5, f"{scriptable} differs at {(b, t)}")

    for bad_args, fragment in bad_inputs:
        try:
            with torch.no_grad():
                m(*bad_args)
        except ValueError as e:
            assert fragment in str(e), f"error message {str(e)!r} does not mention {fragment!r}"
        else:
            raise AssertionError("bad input did not raise ValueError")
    return m
