"""What every command shares at run time: quiet framework loading, the one-line messages, progress, the boundary
where the user's input meets the library, the checkpoint precheck and the trainer classes.

No framework is imported at module level: each loader imports its framework when a command calls it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings

from ..errors import UsageError, as_input_error
from ..tf1_checkpoint_file import CheckpointDtypeWarning, NonFiniteWeightsWarning

__all__ = ["PROG", "say", "one_line", "set_verbose", "silenced_stderr", "load_tensorflow", "load_torch",
           "trainer_class", "progress", "progress_bar", "user_input", "precheck_checkpoint",
           "checkpoint_warnings_as_lines", "torch_device", "keras_device"]

PROG = "speechblocks"

# -- quiet framework start-up ----------------------------------------------------------------------
_VERBOSE = False


def set_verbose(verbose: bool) -> None:
    """``--verbose``: let the frameworks' start-up lines through (the command line sets it before a command runs)."""
    global _VERBOSE
    _VERBOSE = bool(verbose)


@contextlib.contextmanager
def silenced_stderr():
    """Sends file descriptor 2 to a temporary file while the block runs (C++ logging writes there directly, before
    any Python logging is configured); what was written is shown again if the block raises."""
    if _VERBOSE:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def load_tensorflow(device: str = "auto"):
    """Imports TensorFlow (and Keras) quietly; returns the module. Also quietens its Python-level logging.
    ``device`` (``--device``) is applied before TensorFlow initialises its devices (:func:`keras_device`)."""
    if not _VERBOSE:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        with silenced_stderr():
            import tensorflow as tf

            keras_device(tf, device)
            tf.constant(0.0).numpy()  # device initialisation logs once, here
            import keras  # noqa: F401
    except ImportError:
        raise UsageError("this needs TensorFlow: pip install 'speechblocks[tf]'") from None
    if not _VERBOSE:
        import logging

        tf.get_logger().setLevel(logging.ERROR)
        try:
            from absl import logging as absl_logging

            absl_logging.set_verbosity(absl_logging.ERROR)
        except ImportError:  # pragma: no cover
            pass
        warnings.filterwarnings("ignore", module=r"(keras|tensorflow|tf_keras)(\.|$)")
    return tf


def load_torch():
    """Imports torch quietly; returns the module."""
    try:
        with silenced_stderr():
            import torch
    except ImportError:
        raise UsageError("this needs PyTorch: pip install 'speechblocks[torch]'") from None
    return torch


def torch_device(spec: str = "auto"):
    """``--device`` resolved for torch (a ``torch.device``): ``auto`` = CUDA when torch sees a GPU, else the CPU;
    under ``torchrun`` ``auto``/``cuda`` mean ``cuda:LOCAL_RANK``. ``cuda``/``cuda:N`` on a machine where torch sees
    no such GPU: a :class:`~speechblocks.errors.UsageError` (one line, exit status 2), raised before anything is
    written."""
    from ..devices import local_rank, parse_device

    spec = parse_device(spec)
    torch = load_torch()
    if spec == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if spec == "auto" and not available:
        return torch.device("cpu")
    if not available:
        why = (f"this torch ({torch.__version__}) is a CPU-only build" if torch.version.cuda is None
               else f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU or driver")
        raise UsageError(f"--device {spec}: {why}; use --device cpu or auto")
    count = torch.cuda.device_count()
    rank = local_rank()
    index = int(spec.split(":")[1]) if ":" in spec else (rank if rank is not None else torch.cuda.current_device())
    if index >= count:
        raise UsageError(f"--device {spec}: torch sees {count} CUDA GPU(s) (cuda:0..cuda:{count - 1})")
    return torch.device("cuda", index)


def keras_device(tf, spec: str = "auto") -> None:
    """``--device`` for TensorFlow, before it initialises its devices: ``cpu`` hides the GPUs
    (``tf.config.set_visible_devices([], "GPU")``), ``cuda:N`` shows only GPU N, ``auto``/``cuda`` leave
    TensorFlow's own placement; ``cuda``/``cuda:N`` without such a GPU: a one-line
    :class:`~speechblocks.errors.UsageError`."""
    from ..devices import parse_device

    spec = parse_device(spec)
    if spec == "auto":
        return
    gpus = tf.config.list_physical_devices("GPU")
    if spec.startswith("cuda"):
        index = int(spec.split(":")[1]) if ":" in spec else 0
        if index >= len(gpus):
            raise UsageError(f"--device {spec}: TensorFlow sees {len(gpus)} GPU(s) (the tf extra installs "
                             f"tensorflow-cpu; pip install 'speechblocks[tf-gpu]' for CUDA)")
        visible = gpus if ":" not in spec else [gpus[index]]
    else:
        visible = []
    try:
        tf.config.set_visible_devices(visible, "GPU")
    except RuntimeError:  # already initialised (a second load in the same process): its placement stays
        pass


def trainer_class(framework: str, strategy: str | None = None, replicas: int | None = None, device: str = "auto",
                  precision: str = "fp32"):
    """The framework's trainer (``torch_layers`` / ``tf_layers`` ``Tacotron2Trainer``), loaded quietly, configured
    for ``device`` (``--device``: :func:`torch_device`, or TensorFlow's placement with :func:`keras_device`) and
    ``precision`` (``--precision``, :meth:`~torch_layers.tacotron2_trainer.Tacotron2Trainer.configured`); with
    ``strategy="mirrored"`` the Keras trainer class of :meth:`~tf_layers.Tacotron2Trainer.mirrored`."""
    if framework == "torch":
        resolved = torch_device(device)
        from torch_layers.tacotron2_trainer import Tacotron2Trainer
        return Tacotron2Trainer.configured(resolved, precision)
    if precision == "fp16":
        raise UsageError("--precision fp16 is for --framework torch (its loss scaling); Keras trains in fp32 or bf16")
    mirrored = None
    try:
        with silenced_stderr():
            import tensorflow as tf

            keras_device(tf, device)  # before the strategy's logical devices and TensorFlow's first op
            if strategy == "mirrored":
                from tf_layers._distribute import mirrored_strategy

                mirrored = mirrored_strategy(replicas)
    except ImportError:
        raise UsageError("this needs TensorFlow: pip install 'speechblocks[tf]'") from None
    load_tensorflow(device)
    from tf_layers.tacotron2_trainer import Tacotron2Trainer
    trainer = Tacotron2Trainer if mirrored is None else Tacotron2Trainer.mirrored(strategy=mirrored)
    return trainer if precision == "fp32" else trainer.configured(precision=precision)


# -- messages and progress -------------------------------------------------------------------------
def say(command: str, line: str) -> None:
    """One ``speechblocks COMMAND: line`` on stderr (progress, warnings, errors)."""
    print(f"{PROG} {command}: {line}", file=sys.stderr, flush=True)


def one_line(error: BaseException) -> str:
    """An error's message on one line (a multi-line message's items joined with ``; ``)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    if not lines:
        return type(error).__name__
    return lines[0] + ("" if len(lines) == 1 else " " + "; ".join(ln.lstrip("- ") for ln in lines[1:]))


def progress(command: str, quiet: bool = False):
    """A progress callback writing ``speechblocks COMMAND: line`` on a terminal (None off a terminal or quiet)."""
    return (lambda line: say(command, line)) if sys.stderr.isatty() and not quiet else None


def progress_bar(command: str):
    """A one-line progress bar on stderr: ``bar(done, total)``; ``bar(None, None)`` ends the line."""
    shown = [False]

    def bar(done, total) -> None:
        if done is None:
            if shown[0]:
                sys.stderr.write("\n")
                sys.stderr.flush()
            return
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r{PROG} {command}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        sys.stderr.flush()
        shown[0] = True

    return bar


# -- the user's input meets the library -------------------------------------------------------------
@contextlib.contextmanager
def user_input():
    """The block hands the user's files and values to the library (reads a checkpoint, a model file, a recording,
    a text; resolves hparams): a ``ValueError`` raised there is about that input (the library's messages name the
    argument or the file) and leaves as an :class:`~speechblocks.errors.InputError` (exit status 2). Outside such
    a block a ``ValueError`` is a bug (exit status 3). An ``OSError`` leaves as it is (a missing checkpoint's
    ``CheckpointNotFoundError`` is both): the command line answers it with exit status 2 too."""
    try:
        yield
    except OSError:
        raise
    except ValueError as e:
        converted = as_input_error(e)
        if converted is e:
            raise
        raise converted from e


def precheck_checkpoint(path) -> None:
    """A missing or damaged checkpoint is refused before any framework is imported (the index and the shard sizes are
    checked with numpy alone: the error comes in a fraction of a second, not after TensorFlow's ~8 s start-up)."""
    from ..tf1_checkpoint_file import open_checkpoint_files

    with user_input():
        open_checkpoint_files(path)


@contextlib.contextmanager
def checkpoint_warnings_as_lines(command: str):
    """The checkpoint readers' warnings (NaN/inf let through, dtypes cast) as one ``speechblocks CMD: warning: ...``
    line each on stderr; other warnings as Python shows them."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, (NonFiniteWeightsWarning, CheckpointDtypeWarning)):
                say(command, f"warning: {message}")
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def write_and_report(results, paths: list[str], plots: list[str] | None, wavs, wav_paths, sample_rate,
                     how: str) -> None:
    """``synthesize``'s outputs: writes them (all or nothing: ``speechblocks.synthesis.write_outputs``, then the
    wavs) and prints one line per file; ``how`` says how the wavs were made."""
    from ..audio_commands import write_wavs
    from ..synthesis import write_outputs

    write_outputs(results, paths, plots)
    if wavs is not None:
        write_wavs(wavs, wav_paths, sample_rate)
    for path, res in zip(paths, results):
        stop = f"stop at step {res.steps}" if res.stopped else f"no stop after {res.steps} steps (max_iters)"
        print(f"{path}: {res.mel.shape[0]} frames x {res.mel.shape[1]} mels ({stop}): {res.cleaned!r}")
    for p in plots or ():
        print(f"{p}: alignment and mel spectrogram")
    for p, w in zip(wav_paths or (), wavs or ()):
        print(f"{p}: {w.shape[0] / sample_rate:.2f} s at {sample_rate} Hz ({how})")
