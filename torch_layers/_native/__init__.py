"""The native decoder step: a Tacotron-2 decoder's free-running inference at batch 1, one C call a step.

At batch 1 a decoder step streams every LSTM weight once (~60 MiB at the RTVC sizes) and does ~100 small things
around those two products; in the TorchScript loop the small ops cost about as much again as the products' distance
from the memory bandwidth. ``decoder_step.c`` runs the whole step (pre-net, zoneout LSTM stack, location-sensitive
attention, the projections and the stop rule) in one OpenMP parallel region, each thread streaming its own rows.
It computes the same maths as :func:`~torch_layers.tacotron2_decoder.decoder_step` in float32 (the order of each
sum is its own; ``tests/test_native_decoder_step.py`` holds it to the TorchScript loop).

The library is compiled on first use with the system C compiler (``$CC``, else ``cc``: ``-O3 -march=native
-fopenmp``, glibc's vector maths when it links) into ``$SPEECHBLOCKS_CACHE/native`` (default
``~/.cache/speechblocks/native``), one file per source, compiler and CPU; the build is atomic (written aside, then
renamed). Without a compiler, on a build error, or with ``SPEECHBLOCKS_NATIVE=0``, :func:`library` returns ``None``
and the decoder runs its TorchScript loop: the native step is an accelerator, never a requirement.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

__all__ = ["library", "available", "enabled", "shapes_fit", "phase_profile", "NativeDecoderLoop", "PHASES",
           "MAX_LAYERS", "MAX_ATTENTION_UNITS"]

SOURCE = Path(__file__).with_name("decoder_step.c")
MAX_LAYERS = 8  # SB_MAX_LAYERS
MAX_ATTENTION_UNITS = 1024  # SB_MAX_UNITS

#: the phases of a native step (``SB_PHASES``), as :func:`phase_profile` names them
PHASES = ("pre-net", "LSTM stack", "attention query", "attention energies", "alignments (softmax)",
          "context + attention state", "projections + stop")

_LOCK = threading.Lock()
_PROFILE = threading.local()
_LIB: dict[str, Optional[ctypes.CDLL]] = {}

_F = ctypes.POINTER(ctypes.c_float)


class _Decoder(ctypes.Structure):
    _fields_ = [("layers", ctypes.c_int), ("units", ctypes.c_int), ("input0", ctypes.c_int),
                ("lstm_w", _F * MAX_LAYERS), ("lstm_b", _F * MAX_LAYERS),
                ("keep_new", ctypes.c_float), ("keep_old", ctypes.c_float), ("zoneout", ctypes.c_int),
                ("prenet_layers", ctypes.c_int), ("num_mels", ctypes.c_int),
                ("prenet_sizes", ctypes.c_int * MAX_LAYERS),
                ("prenet_w", _F * MAX_LAYERS), ("prenet_b", _F * MAX_LAYERS),
                ("drop_rate", ctypes.c_float), ("drop_scale", ctypes.c_float),
                ("att_units", ctypes.c_int), ("max_time", ctypes.c_int), ("memory_size", ctypes.c_int),
                ("kernel", ctypes.c_int), ("pad_before", ctypes.c_int), ("smoothing", ctypes.c_int),
                ("cumulate", ctypes.c_int),
                ("query_w", _F), ("location_wt", _F), ("v_a", _F), ("keys_t", _F), ("values", _F),
                ("score_bias", _F),
                ("proj_rows", ctypes.c_int), ("frame_size", ctypes.c_int), ("r", ctypes.c_int),
                ("stop_at_any", ctypes.c_int), ("proj_w", _F), ("proj_b", _F), ("threads", ctypes.c_int)]


class _State(ctypes.Structure):
    _fields_ = [("cells", _F), ("hiddens", _F), ("context", _F), ("attention", _F), ("frame", _F), ("xin", _F),
                ("nmax", ctypes.c_int), ("gates", _F), ("prenet_buf", _F), ("prenet_max", ctypes.c_int),
                ("query", _F), ("energy", _F), ("out", _F), ("timings", ctypes.POINTER(ctypes.c_double))]


def _cpu_key() -> str:
    """What the build depends on besides the source: the compiler's version and this CPU's instruction sets."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    return platform.machine() + flags


def _compiler() -> Optional[str]:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def _cache_dir() -> Path:
    base = os.environ.get("SPEECHBLOCKS_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "speechblocks") / "native"


def _build(cc: str, target: Path) -> bool:
    """Compiles :data:`SOURCE` into ``target`` (atomic); with glibc's vector maths, else without."""
    target.parent.mkdir(parents=True, exist_ok=True)
    base = [cc, "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", str(SOURCE)]
    for extra in (["-DSB_LIBMVEC", "-lmvec", "-lm"], ["-lm"]):
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            done = subprocess.run(base + ["-o", tmp] + extra, capture_output=True, timeout=120)
            if done.returncode == 0:
                os.replace(tmp, target)
                return True
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return False


def enabled() -> bool:
    """``False`` when ``SPEECHBLOCKS_NATIVE=0`` turns the native step off (read at every call)."""
    return os.environ.get("SPEECHBLOCKS_NATIVE", "1") != "0"


def library() -> Optional[ctypes.CDLL]:
    """The compiled native step (built on first use), or ``None`` when it is disabled or cannot be built."""
    if not enabled():
        return None
    cc = _compiler()
    if cc is None or platform.system() != "Linux":
        return None
    with _LOCK:
        if cc in _LIB:
            return _LIB[cc]
        lib = None
        try:
            version = subprocess.run([cc, "--version"], capture_output=True, timeout=30).stdout
            key = hashlib.sha256(SOURCE.read_bytes() + version + _cpu_key().encode()).hexdigest()[:20]
            target = _cache_dir() / f"decoder_step-{key}.so"
            if target.exists() or _build(cc, target):
                lib = ctypes.CDLL(str(target))
                lib.sb_decoder_step.restype = ctypes.c_int
                lib.sb_decoder_step.argtypes = [ctypes.POINTER(_Decoder), ctypes.POINTER(_State), _F, ctypes.c_int,
                                                _F, _F]
        except (OSError, subprocess.SubprocessError):
            lib = None
        _LIB[cc] = lib
        return lib


def available() -> bool:
    """Whether the native step can run here."""
    return library() is not None


def shapes_fit(w, cfg, memory, num_mels: int) -> bool:
    """Whether a decoder's step weights, config and attention memory have the shapes the C step reads (batch 1):
    the step trusts them, so anything else goes to the TorchScript loop (and its shape errors)."""
    def shape(x: Optional[Tensor]) -> tuple:
        return tuple(x.shape) if x is not None else ()

    layers, n_pre = len(w.lstm_weights), len(w.prenet_weights)
    if not (1 <= layers <= MAX_LAYERS and 1 <= n_pre <= MAX_LAYERS and len(w.lstm_biases) == layers
            and len(w.prenet_biases) == n_pre):
        return False
    values, keys = memory.values, memory.keys
    if values.dim() != 3 or values.shape[0] != 1:
        return False
    _, max_time, memory_size = values.shape
    sizes, n_in = [], num_mels
    for x, b in zip(w.prenet_weights, w.prenet_biases):
        if x.dim() != 2 or x.shape[1] != n_in or shape(b) != (x.shape[0],) or x.shape[0] < 1:
            return False
        sizes.append(int(x.shape[0]))
        n_in = x.shape[0]
    u4 = w.lstm_weights[0].shape[0]
    u = u4 // 4
    if u < 1 or u4 != 4 * u:
        return False
    for k, (x, b) in enumerate(zip(w.lstm_weights, w.lstm_biases)):
        n = (sizes[-1] + memory_size if k == 0 else u) + u
        if shape(x) != (4 * u, n) or shape(b) != (4 * u,):
            return False
    units = w.query_weight.shape[0]
    if not 1 <= units <= MAX_ATTENTION_UNITS or shape(w.query_weight) != (units, u) or shape(w.v_a) != (units,):
        return False
    if w.location_weight.dim() != 3 or w.location_weight.shape[:2] != (units, 1) or shape(keys) != (1, units, max_time):
        return False
    if cfg.pad_before < 0 or cfg.pad_after < 0 or cfg.pad_before + cfg.pad_after != w.location_weight.shape[2] - 1:
        return False
    if memory.score_bias is not None and shape(memory.score_bias) != (1, max_time):
        return False
    rows = w.projection_weight.shape[0]
    if shape(w.projection_weight) != (rows, u + memory_size) or shape(w.projection_bias) != (rows,):
        return False
    return num_mels <= cfg.frame_size < rows and max_time >= 1 and 0.0 <= cfg.prenet_rate < 1.0


@contextlib.contextmanager
def phase_profile():
    """Times the phases of the native steps run in this thread meanwhile (wall time of thread 0 between the step's
    barriers, so the phases add up to the step): yields a dict ``{phase: seconds}`` (:data:`PHASES`) plus
    ``"steps"``, filled as the steps run."""
    totals: dict = dict.fromkeys(PHASES, 0.0)
    totals["steps"] = 0
    old = getattr(_PROFILE, "value", None)
    _PROFILE.value = totals
    try:
        yield totals
    finally:
        _PROFILE.value = old


def _ptr(x: Tensor):
    return ctypes.cast(ctypes.c_void_p(x.data_ptr()), _F)


class NativeDecoderLoop:
    """A free-running decoder loop at batch 1 over the native step, for one utterance's attention memory.

    Built from the forms the TorchScript loop takes (:class:`~torch_layers.tacotron2_decoder.DecoderWeights`,
    :class:`~torch_layers.tacotron2_decoder.DecoderConfig`, :class:`~torch_layers.tacotron2_decoder.AttentionMemory`);
    every tensor it reads is float32, contiguous, on the CPU, and kept referenced for the loop's life.
    """

    def __init__(self, lib: ctypes.CDLL, w, cfg, memory, num_mels: int, stop_at_any: bool, threads: int):
        self.lib = lib
        u = w.lstm_weights[0].shape[0] // 4
        layers = len(w.lstm_weights)
        values = memory.values[0].contiguous()
        max_time, memory_size = values.shape
        keep: list[Tensor] = [values]

        def held(x: Tensor) -> Tensor:
            x = x.detach().contiguous()
            keep.append(x)
            return x

        m = _Decoder()
        m.layers, m.units, m.input0 = layers, u, w.lstm_weights[0].shape[1] - u
        for k in range(layers):
            m.lstm_w[k] = _ptr(held(w.lstm_weights[k]))
            m.lstm_b[k] = _ptr(held(w.lstm_biases[k]))
        m.zoneout = int(cfg.zoneout != 0.0)
        m.keep_new, m.keep_old = 1.0 - cfg.zoneout, cfg.zoneout
        m.prenet_layers, m.num_mels = len(w.prenet_weights), num_mels
        self.prenet_sizes = [int(x.shape[0]) for x in w.prenet_weights]
        for k, x in enumerate(w.prenet_weights):
            m.prenet_sizes[k] = self.prenet_sizes[k]
            m.prenet_w[k] = _ptr(held(x))
            m.prenet_b[k] = _ptr(held(w.prenet_biases[k]))
        m.drop_rate = cfg.prenet_rate
        m.drop_scale = 1.0 / (1.0 - cfg.prenet_rate)
        m.att_units, m.max_time, m.memory_size = w.query_weight.shape[0], max_time, memory_size
        m.kernel, m.pad_before = w.location_weight.shape[2], cfg.pad_before
        m.smoothing, m.cumulate = int(cfg.smoothing), int(cfg.cumulate)
        m.query_w = _ptr(held(w.query_weight))
        m.location_wt = _ptr(held(w.location_weight[:, 0, :].t()))
        m.v_a = _ptr(held(w.v_a))
        m.keys_t = _ptr(held(memory.keys[0].t()))
        m.values = _ptr(values)
        m.score_bias = _ptr(held(memory.score_bias[0])) if memory.score_bias is not None else None
        m.proj_rows, m.frame_size = w.projection_weight.shape[0], cfg.frame_size
        m.r, m.stop_at_any = m.proj_rows - cfg.frame_size, int(stop_at_any)
        m.proj_w, m.proj_b = _ptr(held(w.projection_weight)), _ptr(held(w.projection_bias))
        m.threads = threads

        f32 = dict(dtype=torch.float32)
        nmax = max(m.input0 + u, 2 * u)
        self.buffers = dict(cells=torch.zeros(layers, u, **f32), hiddens=torch.zeros(layers, u, **f32),
                            context=torch.zeros(memory_size, **f32), attention=torch.zeros(max_time, **f32),
                            frame=torch.zeros(num_mels, **f32), xin=torch.zeros(layers + 1, nmax, **f32),
                            gates=torch.zeros(4 * u, **f32), prenet_buf=torch.zeros(2, max(self.prenet_sizes), **f32),
                            query=torch.zeros(m.att_units, **f32), energy=torch.zeros(max_time * m.att_units, **f32),
                            out=torch.zeros(u + memory_size, **f32))
        s = _State()
        for name, x in self.buffers.items():
            setattr(s, name, _ptr(x))
        s.nmax, s.prenet_max = nmax, max(self.prenet_sizes)
        self.m, self.s, self._keep = m, s, keep
        self.rate = float(cfg.prenet_rate)

    def run(self, n_steps: int, prenet_keep: Optional[list[Tensor]] = None,
            progress: Optional[Callable[[int, Tensor], None]] = None) -> tuple[Tensor, Tensor, Tensor, bool]:
        """Runs up to ``n_steps`` steps (the stop rule ends it earlier).

        Args:
            n_steps: the most steps to run.
            prenet_keep: per pre-net layer ``(>= n_steps, 1, size)`` 0/1 keep-masks, or ``None``: the dropout draws
                ``torch.rand`` per step and layer in the order of the TorchScript loop (the same numbers for a seed).
            progress: called after every step with ``(step, stop probabilities (1, r))``.

        Returns:
            ``(frames (1, steps, frame_size), stop probabilities (1, steps, r), alignments (1, T_in, steps),
            finished)``.
        """
        m = self.m
        rows, max_time = m.proj_rows, m.max_time
        projected = torch.empty(n_steps, rows)
        alignments = torch.empty(n_steps, max_time)
        keep_given = prenet_keep is not None
        total = sum(self.prenet_sizes)
        if keep_given:
            masks = torch.cat([k[:n_steps, 0].to(torch.float32) for k in prenet_keep], 1).contiguous()
        zeros = torch.zeros(total)
        step, finished = 0, False
        profile = getattr(_PROFILE, "value", None)
        timings = torch.zeros(len(PHASES), dtype=torch.float64) if profile is not None else None
        self.s.timings = ctypes.cast(ctypes.c_void_p(timings.data_ptr()), ctypes.POINTER(ctypes.c_double)) \
            if timings is not None else None
        ms, ss = ctypes.byref(self.m), ctypes.byref(self.s)
        fn = self.lib.sb_decoder_step
        for step in range(1, n_steps + 1):
            if keep_given:
                draws = masks[step - 1]
            elif self.rate > 0.0:
                draws = torch.rand(total)  # layer by layer, as the loop's rand_like per layer
            else:
                draws = zeros
            fired = fn(ms, ss, _ptr(draws), int(keep_given), _ptr(projected[step - 1]), _ptr(alignments[step - 1]))
            if progress is not None:
                progress(step, projected[step - 1:step, m.frame_size:])
            if fired:
                finished = True
                break
        if profile is not None:
            for name, seconds in zip(PHASES, timings.tolist()):
                profile[name] += seconds
            profile["steps"] += step
        projected, alignments = projected[:step], alignments[:step]
        return (projected[:, :m.frame_size].unsqueeze(0), projected[:, m.frame_size:].unsqueeze(0),
                alignments.t().unsqueeze(0), finished)
