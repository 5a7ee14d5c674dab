"""``run_torch_module_test``: the checks every speechblocks torch module gets for free.

factory keywords (``device``/``dtype``; constructible on the meta device, so nothing is moved in
``__init__``), ``state_dict`` round trip, ``train()``/``eval()`` honoured, TorchScript (or
``torch.compile``) inference, float64, bad input answered by a ``ValueError``, and deployment (inference,
``eval()``): ``torch.export`` with dynamic batch and time, ONNX (``torch.onnx.export(dynamo=True)`` run in ONNX
Runtime) and ``torch.compile`` (with the number of compilations over three lengths), each compared with the
eager module (1e-5) on batch and time sizes other than the example's.

A module that cannot do one of them says so in its docstring, and its test pins it with a reason:
:class:`StaticTime` (the export unrolls a loop over time: batch dynamic, time fixed, another time rejected),
:class:`Fails` (the documented failure is asserted), :class:`RecompilesPerLength` (``torch.compile`` compiles again
for every new length), :class:`Skip` (not comparable, e.g. random in ``eval()``).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch.utils import _pytree as pytree

from tests.helpers.deploy_limits import Fails, Limit, Skip, expect_failure


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


# -- deployment checks: what a module cannot do is pinned with a reason ------------------------------------------

@dataclass(frozen=True)
class StaticTime(Limit):
    """``torch.export`` / ONNX: the graph fixes the time axis (a Python loop over time is unrolled): exported with a
    dynamic batch only, compared at other batch sizes, and an input of another time length must be rejected."""


@dataclass(frozen=True)
class RecompilesPerLength(Limit):
    """``torch.compile``: every new length compiles again (the loop over time is unrolled per length)."""


#: Limits of modules whose tests do not pass them (yet): class name -> {"export"|"onnx"|"compile": Limit}; a limit
#: given at the call site wins. Move an entry to its call site when that test file is next edited.
KNOWN_LIMITS: dict[str, dict[str, Limit]] = {
    name: {"export": Fails("checked_lengths reads the lengths' values (int(lengths.max()))", match="data-dependent")}
    for name in ("MaskedMSE", "MaskedLinearLoss", "MaskedSigmoidCrossEntropy")
}

#: ``torch.compile`` backend of the compile check. ``aot_eager`` (dynamo + AOTAutograd, no code generation) keeps the
#: check to seconds; the recompilations it counts are dynamo's, the same with inductor. ``inductor`` compiles C++
#: kernels (tens of seconds per module on 2 cores): ``SPEECHBLOCKS_COMPILE_BACKEND=inductor make test`` runs it.
COMPILE_BACKEND = os.environ.get("SPEECHBLOCKS_COMPILE_BACKEND", "aot_eager")
#: the compile check's lengths are ``t0``, ``t0 + 1``, ``t0 + 2`` (``t0`` the example's time)
COMPILE_LENGTH_STEPS = (0, 1, 2)
#: ``SPEECHBLOCKS_DEPLOY_CHECKS=0`` leaves the export / ONNX / compile checks out (quick local runs; CI keeps them)
DEPLOY_CHECKS = os.environ.get("SPEECHBLOCKS_DEPLOY_CHECKS", "1") != "0"


def _leaves(x) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def _assert_leaves_close(got: Sequence, want, atol: float, what: str) -> None:
    want = _leaves(want)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, eager has {len(want)}"
    for g, w in zip(got, want):
        g = g.detach().double().numpy() if isinstance(g, torch.Tensor) else np.asarray(g, np.float64)
        np.testing.assert_allclose(g, w.detach().double().numpy(), atol=atol, rtol=0, err_msg=what)


def _axes(make_inputs, b0: int, t0: int, b1: int, t1: int) -> list[dict[int, str]]:
    """Per positional argument, its dims that follow the batch (``"batch"``) or the time (``"time"``)."""
    base = make_inputs(b0, t0, torch.float32)
    by_b = make_inputs(b1, t0, torch.float32) if b1 != b0 else base
    by_t = make_inputs(b0, t1, torch.float32) if t1 != t0 else base
    out = []
    for x, xb, xt in zip(base, by_b, by_t):
        axes = {}
        if isinstance(x, torch.Tensor):
            for d in range(x.dim()):
                if xt.shape[d] != x.shape[d]:
                    axes[d] = "time"
                elif xb.shape[d] != x.shape[d]:
                    axes[d] = "batch"
        out.append(axes)
    return out


def _dynamic_shapes(axes: list[dict[int, str]], args: Sequence, static_time: bool):
    spec = []
    for a, x in zip(axes, args):
        if not isinstance(x, torch.Tensor):
            spec.append(None)
            continue
        d = {k: torch.export.Dim.DYNAMIC for k, kind in a.items() if kind == "batch" or not static_time}
        spec.append(d or None)
    return tuple(spec)


_REGISTRY_CACHED = False


def _cache_onnx_registry() -> None:
    """``torch.onnx.export(dynamo=True)`` rebuilds its op registry from onnxscript's torchlib on every call (~1 s of
    CPU, half of a small module's export); the tests build it once per process. A private torch API: if it moves, the
    exports stay correct, only slower."""
    global _REGISTRY_CACHED
    if _REGISTRY_CACHED:
        return
    _REGISTRY_CACHED = True
    try:
        from torch.onnx._internal.exporter import _registration

        build = _registration.ONNXRegistry.from_torchlib.__func__
    except (ImportError, AttributeError):
        return
    built = {}

    def from_torchlib(cls, *args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if key not in built:
            built[key] = build(cls, *args, **kwargs)
        return built[key]

    _registration.ONNXRegistry.from_torchlib = classmethod(from_torchlib)


def onnx_runtime(exported_program):
    """``torch.onnx.export(exported_program, dynamo=True)`` loaded in an ONNX Runtime CPU session (one thread);
    returns ``run(*args) -> list of numpy outputs``, ``args`` the positional tensors of the export (``None`` left
    out, as the ONNX graph has no input for them)."""
    import onnxruntime as ort

    _cache_onnx_registry()
    program = torch.onnx.export(exported_program, dynamo=True, verbose=False)
    options = ort.SessionOptions()
    options.log_severity_level = 3  # no warnings about initializers the optimizer left unused
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(program.model_proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        feed = _leaves(list(args))
        assert len(feed) == len(names), f"ONNX graph inputs {names} vs {len(feed)} tensors"
        return session.run(None, {n: np.ascontiguousarray(v.detach().numpy()) for n, v in zip(names, feed)})

    return run


def _export_check(m, make_inputs, sizes, atol, export, onnx) -> None:
    """torch.export (and ONNX from the same ExportedProgram) on ``sizes[0]``, compared at the other sizes."""
    (b0, t0) = sizes[0]
    b1 = next((b for b, _ in sizes[1:] if b != b0), b0)
    t1 = next((t for _, t in sizes[1:] if t != t0), t0)
    static_time = isinstance(export, StaticTime)
    args = make_inputs(b0, t0, torch.float32)
    spec = _dynamic_shapes(_axes(make_inputs, b0, t0, b1, t1), args, static_time)

    def run_export():
        with torch.no_grad():
            return torch.export.export(m, tuple(args), dynamic_shapes=spec)

    if isinstance(export, Fails):
        expect_failure(export, "torch.export", run_export)  # (ONNX's dynamo exporter runs torch.export first)
        return
    ep = run_export()
    checks = [(b, t) for b, t in sizes[1:]] if not static_time else sorted({(b, t0) for b, _ in sizes if b != b0})
    if static_time:
        assert t1 != t0, "StaticTime needs sizes with another time to check the rejection"
    module = ep.module()
    for b, t in checks:
        x = make_inputs(b, t, torch.float32)
        with torch.no_grad():
            _assert_close(module(*x), m(*x), atol, f"torch.export differs at {(b, t)} (exported at {(b0, t0)})")
    if static_time:
        try:
            module(*make_inputs(b0, t1, torch.float32))
        except Exception:  # noqa: BLE001 -- the exported program's input guard
            pass
        else:
            raise AssertionError("torch.export pinned StaticTime accepts another time length: update the pin")

    if isinstance(onnx, Skip):
        return
    if isinstance(onnx, Fails):
        expect_failure(onnx, "ONNX export", lambda: onnx_runtime(ep))
        return
    run = onnx_runtime(ep)
    for b, t in [(b0, t0)] + checks:
        x = make_inputs(b, t, torch.float32)
        got = run(*x)
        with torch.no_grad():
            _assert_leaves_close(got, m(*x), atol, f"ONNX Runtime differs at {(b, t)} (exported at {(b0, t0)})")


def _guard_failures(since: Optional[dict] = None) -> dict:
    """The guard failures dynamo recorded (``{code: [reasons]}``), or those after the snapshot ``since``: why a
    length compiled again."""
    from torch._dynamo.utils import guard_failures

    now = {code: list(failures) for code, failures in list(guard_failures.items())}
    if since is None:
        return now
    return {code.co_name: failures[len(since.get(code, [])):] for code, failures in now.items()
            if len(failures) > len(since.get(code, []))}


def _compile_check(m, make_inputs, sizes, atol, compile) -> None:
    """``torch.compile`` at the example's batch over three lengths, counting the compilations. (Other batch sizes
    would only add compilations: the export checks cover them.)"""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    try:
        counter = CompileCounterWithBackend(COMPILE_BACKEND)
        compiled = torch.compile(m, backend=counter)
        (b0, t0) = sizes[0]
        counts, reasons = [], []
        for t in [t0 + s for s in COMPILE_LENGTH_STEPS]:
            x = make_inputs(b0, t, torch.float32)
            before = _guard_failures()
            with torch.no_grad():
                _assert_close(compiled(*x), m(*x), atol, f"torch.compile differs at {(b0, t)}")
            counts.append(counter.frame_count)
            reasons = _guard_failures(before)
        # the first length compiles, the second one again with the length dynamic; the third must reuse that graph
        again = counts[2] > counts[1]
        if isinstance(compile, RecompilesPerLength):
            assert again, f"pinned RecompilesPerLength but the third length reused the graph (counts {counts})"
        else:
            assert not again, (f"torch.compile compiles again at every new length (compilations after 3 lengths: "
                               f"{counts}); pin RecompilesPerLength(reason) and document it. The third length's "
                               f"guard failures: {reasons}")
    finally:
        torch._dynamo.reset()


def _check_eval(m, args, expected_output_shape, size, deterministic):
    """The ``eval()`` output at the first size: its shape, finite, the same at a second call; returns it."""
    with torch.no_grad():
        y = m(*args)
    if expected_output_shape is not None:
        shapes = expected_output_shape(*size)
        shapes = ([shapes] if isinstance(shapes, (tuple, torch.Size)) and all(isinstance(s, int) for s in shapes)
                  else shapes)
        for t, s in zip(_flat(y), shapes):
            assert tuple(t.shape) == tuple(s), f"output shape {tuple(t.shape)} != expected {tuple(s)}"
    for t in _flat(y):
        assert torch.isfinite(t).all(), "non-finite output"
    if deterministic:
        with torch.no_grad():
            _assert_close(m(*args), y, 0.0, "eval is not deterministic")
    return y


def _check_factory_keywords(module_cls, init_args, init_kwargs, m, args, y, deterministic):
    """``device="meta"`` (nothing moved in ``__init__``) and ``dtype=torch.float64`` (the float32 weights loaded:
    the same numbers)."""
    meta = module_cls(*init_args, **init_kwargs, device="meta")
    assert all(p.device.type == "meta" for p in meta.parameters()), "parameters ignore device="
    m64 = module_cls(*init_args, **init_kwargs, dtype=torch.float64).eval()
    assert all(p.dtype == torch.float64 for p in m64.parameters()), "parameters ignore dtype="
    m64.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in m.state_dict().items()})
    with torch.no_grad():
        y64 = m64(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])
    if deterministic:
        _assert_close(y64, y, 1e-4, "float64 differs from float32")


def _check_state_dict_round_trip(module_cls, init_args, init_kwargs, m, args, y, deterministic):
    """A new module loading ``m``'s ``state_dict`` gives ``m``'s output."""
    m2 = module_cls(*init_args, **init_kwargs).eval()
    m2.load_state_dict(m.state_dict())
    if deterministic:
        with torch.no_grad():
            _assert_close(m2(*args), y, 0.0, "state_dict round trip differs")


def _check_training_changes(m, args, y):
    """``train()`` is honoured: it changes the output (``m`` is back in ``eval()`` after)."""
    m.train()
    with torch.no_grad():
        yt = m(*args)
    m.eval()
    diff = max(float((u - v).abs().max()) for u, v in zip(_flat(yt), _flat(y)))
    assert diff > 0, "train() gives the eval output"


def _check_scripted(m, make_inputs, sizes, scriptable, deterministic):
    """TorchScript (``"script"``) or ``torch.compile(dynamic=True)`` for inference at every size: the eager numbers."""
    compiled = torch.jit.script(m) if scriptable == "script" else torch.compile(m, dynamic=True)
    for b, t in sizes:
        a = make_inputs(b, t, torch.float32)
        with torch.no_grad():
            got, want = compiled(*a), m(*a)
        if deterministic:
            _assert_close(got, want, 1e-5, f"{scriptable} differs at {(b, t)}")


def _deploy_limits(module_cls, export, onnx, compile, deterministic):
    """The deployment pins: the test's (``Limit`` instances or ``None``), else :data:`KNOWN_LIMITS`'; all skipped
    when ``eval()`` is random, export and compile when ``SPEECHBLOCKS_DEPLOY_CHECKS=0``."""
    for name, limit in (("export", export), ("onnx", onnx), ("compile", compile)):
        if limit is not None and not isinstance(limit, Limit):
            raise TypeError(f"{name}= takes None or a Limit with a reason (Skip, StaticTime, Fails, ...); got "
                            f"{limit!r}")
    known = KNOWN_LIMITS.get(module_cls.__name__, {})
    export, onnx, compile = (export or known.get("export"), onnx or known.get("onnx"),
                             compile or known.get("compile"))
    if not deterministic:
        reason = "random in eval(): nothing to compare"
        export, onnx, compile = export or Skip(reason), onnx or Skip(reason), compile or Skip(reason)
    if not DEPLOY_CHECKS:
        export = compile = Skip("SPEECHBLOCKS_DEPLOY_CHECKS=0")
    return export, onnx, compile


def _check_compile(m, make_inputs, sizes, atol, compile):
    """:func:`_compile_check`, or its pinned failure."""
    if isinstance(compile, Fails):
        expect_failure(compile, "torch.compile", lambda: _compile_check(m, make_inputs, sizes, atol, None))
    else:
        _compile_check(m, make_inputs, sizes, atol, compile)


def _check_bad_inputs(m, bad_inputs):
    """Each bad input raises a ``ValueError`` whose message names the argument (contains the fragment)."""
    for bad_args, fragment in bad_inputs:
        try:
            with torch.no_grad():
                m(*bad_args)
        except ValueError as e:
            assert fragment in str(e), f"error message {str(e)!r} does not mention {fragment!r}"
        else:
            raise AssertionError("bad input did not raise ValueError")


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
    export: Limit | None = None,
    onnx: Limit | None = None,
    compile: Limit | None = None,
    deploy_atol: float = 1e-5,
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
        sizes: ``(batch, time)`` pairs to run; the first is the deployment checks' example, the others (other
            batch and time sizes) what the exported / compiled module is compared on.
        export: ``None`` (``torch.export`` with dynamic batch and time, compared at the other sizes), or a pinned
            :class:`StaticTime`, :class:`Fails` or :class:`Skip` (with a reason).
        onnx: ``None`` (the exported program through ``torch.onnx.export(dynamo=True)``, run in ONNX Runtime), or
            :class:`Fails` / :class:`Skip`; follows ``export``'s dynamic axes. ONNX's dynamo exporter goes through
            ``torch.export``: when ``export`` fails, so does ONNX, and the ONNX step is not run.
        compile: ``None`` (``torch.compile`` in ``eval()``: equal outputs, no new compilation at a third length), or
            :class:`RecompilesPerLength`, :class:`Fails`, :class:`Skip`.
        deploy_atol: tolerance of the deployment checks against the eager module.
    """
    export, onnx, compile = _deploy_limits(module_cls, export, onnx, compile, deterministic_in_eval)
    init_kwargs = dict(init_kwargs or {})
    torch.manual_seed(0)
    m = module_cls(*init_args, **init_kwargs).eval()
    args = make_inputs(*sizes[0], torch.float32)
    y = _check_eval(m, args, expected_output_shape, sizes[0], deterministic_in_eval)
    _check_factory_keywords(module_cls, init_args, init_kwargs, m, args, y, deterministic_in_eval)
    _check_state_dict_round_trip(module_cls, init_args, init_kwargs, m, args, y, deterministic_in_eval)
    if changes_in_training:
        _check_training_changes(m, args, y)
    if scriptable:
        _check_scripted(m, make_inputs, sizes, scriptable, deterministic_in_eval)
    if not isinstance(export, Skip):
        _export_check(m, make_inputs, sizes, deploy_atol, export, onnx)
    if not isinstance(compile, Skip):
        _check_compile(m, make_inputs, sizes, deploy_atol, compile)
    _check_bad_inputs(m, bad_inputs)
    return m
