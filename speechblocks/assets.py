"""Fetches the real pretrained GE2E speaker-encoder weights at install time:
``python -m speechblocks.assets ge2e DEST``.

The weights are the ones of resemblyzer's wheel (``resemblyzer/pretrained.pt``: the GE2E network of the Real-Time
Voice Cloning encoder, the same state-dict keys). ``pip download resemblyzer==0.1.4 --no-deps`` takes only the
wheel from PyPI (none of its dependencies); the file is checked against its SHA-256 and written atomically
(a temporary file renamed into place), so an interrupted run never leaves a half-written ``DEST``. ``make install``
runs it; nothing in the library downloads anything at run time.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .atomic_files import atomic_path

__all__ = ["GE2E_WHEEL", "GE2E_MEMBER", "GE2E_SHA256", "fetch_ge2e_weights"]

GE2E_WHEEL = "resemblyzer==0.1.4"
GE2E_MEMBER = "resemblyzer/pretrained.pt"
#: SHA-256 of ``resemblyzer/pretrained.pt`` inside resemblyzer 0.1.4's wheel
GE2E_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_ge2e_weights(dest: str | os.PathLike) -> Path:
    """Writes resemblyzer's pretrained GE2E weights to ``dest`` (no-op when a verified copy is already there).

    Args:
        dest: the output file (its directory is created).

    Returns:
        ``dest`` as a ``Path``.

    Raises:
        RuntimeError: pip could not download the wheel, or the file's SHA-256 is not the expected one.
    """
    dest = Path(dest)
    if dest.is_file() and _sha256(dest) == GE2E_SHA256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp,
                               GE2E_WHEEL], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise RuntimeError(f"could not download {GE2E_WHEEL}: {proc.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as zf, atomic_path(dest) as part:  # a wrong file is removed, not renamed
            Path(part).write_bytes(zf.read(GE2E_MEMBER))
            if _sha256(Path(part)) != GE2E_SHA256:
                raise RuntimeError(f"{GE2E_MEMBER} of {GE2E_WHEEL} does not have the expected SHA-256")
    return dest


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "ge2e":
        print("usage: python -m speechblocks.assets ge2e DEST", file=sys.stderr)
        return 2
    try:
        path = fetch_ge2e_weights(argv[1])
    except (RuntimeError, OSError) as e:
        print(f"speechblocks.assets: {e}", file=sys.stderr)
        return 1
    print(f"GE2E weights: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
