"""Small real migrated files (``speechblocks migrate`` machinery on the checkpoints of
:mod:`tests.helpers.tacotron2_checkpoint`) and hostile files made from them, for the hostile-file and fuzz tests."""
from __future__ import annotations

import atexit
import functools
import os
import pickle
import shlex
import shutil
import tempfile

from speechblocks.migration import migrate_checkpoint

from .tacotron2_checkpoint import save_model_checkpoint, small_variables

#: the blocks of the block-by-block checkpoint (a Prenet and a Postnet)
BLOCK_PREFIXES = ("decoder/decoder_prenet/", "postnet_convolutions/")


def make_migrated_files(directory) -> dict[str, str]:
    """Migrates a small whole RTVC-like model and a checkpoint of two blocks to both formats.

    Returns:
        ``{"model.h5", "model.pt", "blocks.h5", "blocks.pt": path}`` (plus ``"ckpt"``, ``"blocks_ckpt"``).
    """
    directory = os.fspath(directory)
    _, variables = small_variables("rtvc", seed=5)
    model_dir, block_dir = os.path.join(directory, "model"), os.path.join(directory, "blocks")
    os.makedirs(model_dir)
    os.makedirs(block_dir)
    ckpt = save_model_checkpoint(model_dir, variables)
    blocks_ckpt = save_model_checkpoint(block_dir, {k: v for k, v in variables.items() if k.startswith(BLOCK_PREFIXES)})
    out = {"ckpt": ckpt, "blocks_ckpt": blocks_ckpt}
    for stem, source in (("model", ckpt), ("blocks", blocks_ckpt)):
        for ext, to in (("h5", "keras"), ("pt", "torch")):
            out[f"{stem}.{ext}"] = os.path.join(directory, f"{stem}.weights.h5" if ext == "h5" else f"{stem}.pt")
            migrate_checkpoint(source, to, out[f"{stem}.{ext}"])
    return out


@functools.lru_cache(maxsize=1)
def cached_migrated_files() -> dict[str, str]:
    """:func:`make_migrated_files` once per process (the test modules only read them; they edit copies)."""
    directory = tempfile.mkdtemp(prefix="speechblocks-migrated-")
    atexit.register(shutil.rmtree, directory, True)
    return make_migrated_files(directory)


class CreatesMarker:
    """A pickled object that runs ``touch <marker>`` when unpickled by an unsafe loader (``pickle.load``,
    ``torch.load(weights_only=False)``): a real malicious pickle, harmless in a temporary directory."""

    def __init__(self, marker: str):
        self.marker = os.fspath(marker)

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(self.marker)}",)


def write_malicious(path, marker, form: str, payload: dict | None = None) -> str:
    """Writes ``payload`` (default: a dict) with a :class:`CreatesMarker` inside it.

    Args:
        form: ``"zip"`` (``torch.save``), ``"legacy"`` (``torch.save`` in torch's pre-1.6 format), ``"raw"``
            (``pickle.dump``).
    """
    import torch

    path = os.fspath(path)
    data = dict(payload or {})
    data["evil"] = CreatesMarker(marker)
    if form == "raw":
        with open(path, "wb") as f:
            pickle.dump(data, f, protocol=2)
    else:
        torch.save(data, path, _use_new_zipfile_serialization=(form == "zip"))
    return path


def flip_tensor_byte(path, at: int = 17, mask: int = 0x01) -> None:
    """Flips bits of byte ``at`` of the first tensor storage (``<archive>/data/<n>``, >= 64 bytes) of a ``torch.save``
    zip file in place: the zip's CRC-32 no longer matches; ``torch.load`` alone does not notice."""
    import struct
    import zipfile

    path = os.fspath(path)
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 64)
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)  # the local header's own name and extra-field lengths (torch pads the latter)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        pos = info.header_offset + 30 + name_len + extra_len + at
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ mask]))
