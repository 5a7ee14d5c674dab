"""Reading a ``torch.save`` file without torch: tensors become numpy arrays (for the Keras twins).

:func:`read_torch_file` reads both formats ``torch.save`` writes: the zip archive (torch >= 1.6; the CRC-32 of
every member is checked first, :func:`speechblocks.state_dict.verify_torch_zip`) and the legacy stream (torch < 1.6,
or ``_use_new_zipfile_serialization=False``; e.g. Resemblyzer's ``pretrained.pt``). Like ``torch.load(...,
weights_only=True)`` it unpickles only plain data: the pickle may name dense tensors and their storages
(``torch._utils._rebuild_tensor_v2``, ``_rebuild_parameter``, ``torch.<Type>Storage``) and
``collections.OrderedDict``, nothing else -- any other global is refused before anything of it runs.
"""
from __future__ import annotations

import io
import os
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np

from .state_dict import ZIP_MAGIC, verify_torch_zip

__all__ = ["read_torch_file"]

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_STORAGE_DTYPES = {
    "DoubleStorage": np.dtype("<f8"), "FloatStorage": np.dtype("<f4"), "HalfStorage": np.dtype("<f2"),
    "BFloat16Storage": np.dtype("<u2"), "LongStorage": np.dtype("<i8"), "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"), "CharStorage": np.dtype("i1"), "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}


class _Refused(Exception):
    pass


class _StorageType:
    def __init__(self, name: str):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


class _Storage:
    """A storage named by the pickle; its bytes are attached once read (``data``: 1-D array)."""

    def __init__(self, storage_type: _StorageType, key: str, numel: int):
        self.type = storage_type
        self.key = key
        self.numel = numel
        self.data: np.ndarray | None = None


def _rebuild_tensor(storage: _Storage, offset, size, stride, *_ignored):
    size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), int(offset)
    if len(size) != len(stride) or offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise _Refused(f"a tensor of size {size}, stride {stride}, offset {offset}")
    return ("tensor", storage, offset, size, stride)


def _rebuild_parameter(data, *_ignored):
    return data


_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, storages: dict[str, _Storage]):
        super().__init__(file)
        self.storages = storages

    def find_class(self, module, name):
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        raise _Refused(f"the global {module}.{name}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise _Refused(f"the persistent id {str(pid)[:80]}")
        if len(pid) > 5 and pid[5] is not None:
            raise _Refused("a storage view (legacy view_metadata)")
        key = str(pid[2])
        if key not in self.storages:
            self.storages[key] = _Storage(pid[1], key, int(pid[4]))
        return self.storages[key]


def _materialise(obj):
    """Tensors (``("tensor", storage, ...)`` placeholders) as numpy arrays, through lists, tuples and dicts."""
    if isinstance(obj, tuple) and len(obj) == 5 and obj[0] == "tensor" and isinstance(obj[1], _Storage):
        _, storage, offset, size, stride = obj
        data = storage.data
        if data is None:
            raise _Refused(f"storage {storage.key} without data")
        n = int(np.prod(size))
        if n and offset + sum((d - 1) * s for d, s in zip(size, stride)) >= len(data):
            raise _Refused(f"a tensor of size {size} beyond its storage of {len(data)} elements")
        view = np.lib.stride_tricks.as_strided(data[offset:] if n else data[:0], shape=size,
                                               strides=tuple(s * data.itemsize for s in stride))
        arr = np.array(view)
        if storage.type.name == "BFloat16Storage":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return arr
    if isinstance(obj, dict):
        out = type(obj)() if isinstance(obj, OrderedDict) else {}
        for k, v in obj.items():
            out[k] = _materialise(v)
        return out
    if isinstance(obj, list):
        return [_materialise(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_materialise(v) for v in obj)
    return obj


def _read_zip(path: str) -> object:
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            raise _Refused("a zip file without exactly one data.pkl")
        prefix = pkl[0][:-len("data.pkl")]
        order = prefix + "byteorder"
        if order in names and z.read(order).strip() not in (b"little", b""):
            raise _Refused("a big-endian file")
        storages: dict[str, _Storage] = {}
        obj = _Unpickler(io.BytesIO(z.read(pkl[0])), storages).load()
        for key, st in storages.items():
            raw = z.read(f"{prefix}data/{key}")
            if len(raw) < st.numel * st.type.dtype.itemsize:
                raise _Refused(f"storage {key} shorter than its {st.numel} elements")
            st.data = np.frombuffer(raw, dtype=st.type.dtype, count=st.numel)
    return obj


def _read_legacy(path: str) -> object:
    with open(path, "rb") as f:
        if _Unpickler(f, {}).load() != _LEGACY_MAGIC:
            raise _Refused("no torch file (wrong magic number)")
        if _Unpickler(f, {}).load() != 1001:
            raise _Refused("an unknown legacy protocol version")
        _Unpickler(f, {}).load()  # sys_info: a dict of plain data
        storages: dict[str, _Storage] = {}
        obj = _Unpickler(f, storages).load()
        keys = _Unpickler(f, {}).load()
        if not isinstance(keys, list):
            raise _Refused("no list of storage keys")
        for key in keys:
            st = storages.get(str(key))
            head = f.read(8)
            if st is None or len(head) != 8:
                raise _Refused(f"storage {key} unknown or truncated")
            numel = struct.unpack("<q", head)[0]
            raw = f.read(numel * st.type.dtype.itemsize)
            if numel < st.numel or len(raw) != numel * st.type.dtype.itemsize:
                raise _Refused(f"storage {key} truncated")
            st.data = np.frombuffer(raw, dtype=st.type.dtype, count=numel)
    return obj


def read_torch_file(path: str | os.PathLike, what: str = "torch file") -> object:
    """Reads a ``torch.save`` file without torch: plain data, every tensor a numpy array.

    Args:
        path: a ``torch.save`` file (zip archive or the legacy stream).
        what: how messages name the file.

    Returns:
        the saved object (dicts, lists, tuples, numbers, strings), dense tensors as numpy arrays (a copy, in
        their dtype; bfloat16 as float32).

    Raises:
        FileNotFoundError: no such file.
        ValueError: one line naming the file: a directory, a damaged or truncated file, no torch file, or a pickle
            naming anything else than tensors and plain data (refused before anything of it runs).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"{what} {path!r} is a directory, not a file")
    with open(path, "rb") as f:
        is_zip = f.read(4) == ZIP_MAGIC
    try:
        if is_zip:
            verify_torch_zip(path, what)
        return _materialise(_read_zip(path) if is_zip else _read_legacy(path))
    except _Refused as e:
        raise ValueError(f"{what} {path!r} refused: it holds {e} (only tensors and plain data are read)") from None
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 -- EOFError, UnpicklingError, zipfile errors, ...: one clear line
        raise ValueError(f"{what} {path!r} is damaged or no torch file ({type(e).__name__}: {e})"[:400]) from None
