"""Writing files so that nobody ever sees half of one: a temporary file beside the target, renamed into place.

:func:`atomic_path` is the one mechanism every writer of the package uses (migrated files, training checkpoints,
preprocessed arrays, wavs, ``train.txt``); :func:`write_all` gives several files all-or-nothing. Framework-free.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable

__all__ = ["atomic_path", "write_all"]


def _umask() -> int:
    """The process umask, read from ``/proc`` (setting it to read it back would race with other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no /proc: read it the portable way
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(out: str | os.PathLike, *, protected: Iterable[str] = (), protected_name: str = "input",
                suffix: str = "", fsync: bool = False):
    """Yields a temporary path in ``out``'s directory; when the block succeeds the file is given the usual
    permissions (``0o666`` less the umask; ``mkstemp`` creates ``0o600``) and replaces ``out`` (``os.replace``);
    on any failure it is removed.

    Args:
        out: the file to write.
        protected: files ``out`` must not be (the input of a command): refused before anything is written.
        protected_name: how the refusal names them.
        suffix: appended to the temporary name (writers that choose a format by extension need it).
        fsync: flush the file to disk before the rename (large files whose loss would cost hours).

    Raises:
        FileNotFoundError: ``out``'s directory does not exist.
        IsADirectoryError: ``out`` is a directory.
        ValueError: ``out`` is one of ``protected``.
    """
    out = os.path.abspath(os.fspath(out))
    directory = os.path.dirname(out)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"output directory {directory!r} does not exist")
    if os.path.isdir(out):
        raise IsADirectoryError(f"output {out!r} is a directory; give a file name")
    real = os.path.realpath(out)
    if os.path.exists(real) and any(os.path.exists(p) and os.path.samefile(real, p) for p in protected):
        raise ValueError(f"output {out!r} is a file of the {protected_name}; refusing to overwrite it")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(out) + ".", suffix=".partial" + suffix)
    os.close(fd)
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def write_all(jobs: Iterable[tuple[str, Callable[[str], object]]]) -> None:
    """``write(tmp)`` for every ``(path, write)``, each into a temporary file beside its path; the files are renamed
    into place only once every write succeeded (a failure removes the temporary files, no path is touched)."""
    with contextlib.ExitStack() as stack:
        for path, write in jobs:
            write(stack.enter_context(atomic_path(path, suffix=os.path.splitext(path)[1])))
