"""Validating and decoding a TF1 (V2 "tensor bundle") checkpoint in numpy (framework-free).

TensorFlow's C++ reader trusts its files: a bit flip in an index entry's dtype or shape, a truncated data shard or
a hostile file can make it raise an opaque ``OpError``, return wrong numbers (it does not check the index blocks'
checksums by default) or abort the process. Every path of this library that reads a TF1 checkpoint therefore
opens it with :func:`open_checkpoint_files`, which checks, with numpy and the standard library only:

* the path: a checkpoint prefix, its ``.index`` or ``.data-*`` file, or a directory (its ``checkpoint`` state file
  must point to an existing checkpoint); regular files only (a FIFO would block a reader forever);
* the ``.index`` file, a LevelDB-format table: the footer's magic number and block handles, every block inside the
  file, every block's masked CRC-32C trailer, the block entries' prefix-compressed keys in strictly increasing
  order, the ``BundleHeaderProto`` under the empty key (shard count, little-endian), one ``BundleEntryProto`` per
  tensor (a known dtype, a non-negative shape of rank <= 254 whose byte size is the entry's size, a valid shard);
* the data shards ``PREFIX.data-SSSSS-of-NNNNN``: present, regular, and long enough for every entry's
  ``[offset, offset + size)``.

:meth:`CheckpointFiles.verify` then checks, for the tensors actually read, the CRC-32C of their bytes (read in
bounded chunks) against the entry's checksum and counts their non-finite values. Every failure is a
:class:`CheckpointError` (a ``ValueError``) whose one-line message names the file, the tensor when there is one,
and the problem. :meth:`CheckpointFiles.read_array` then decodes a verified tensor in numpy: no TensorFlow is
needed to read a checkpoint (``tf.train.load_checkpoint`` is the cross-check of the tests: every tensor of real
checkpoints equal, bit for bit).
"""
from __future__ import annotations

import dataclasses
import glob
import os
import re
import stat

import numpy as np

from .crc32c import Crc32c, crc32c, unmask
from .errors import InputError

__all__ = ["CheckpointError", "CheckpointNotFoundError", "NonFiniteWeightsError", "NonFiniteWeightsWarning",
           "CheckpointDtypeWarning", "TensorEntry", "CheckpointFiles", "resolve_checkpoint",
           "open_checkpoint_files", "DTYPES", "FLOAT_DTYPES", "decoded_dtype"]

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
_TRAILER = 5  # compression type byte + masked CRC-32C
_MAX_INDEX_BYTES = 1 << 30
_MAX_STATE_FILE_BYTES = 1 << 20
_MAX_RANK = 254  # TensorFlow's TensorShape limit
CHUNK_BYTES = 4 << 20  # data CRCs are computed over chunks of this many bytes (bounded memory)

#: TensorFlow DataType enum -> (name, item size in bytes, or None when the encoding is variable)
DTYPES = {1: ("float32", 4), 2: ("float64", 8), 3: ("int32", 4), 4: ("uint8", 1), 5: ("int16", 2), 6: ("int8", 1),
          7: ("string", None), 8: ("complex64", 8), 9: ("int64", 8), 10: ("bool", 1), 11: ("qint8", 1),
          12: ("quint8", 1), 13: ("qint32", 4), 14: ("bfloat16", 2), 15: ("qint16", 2), 16: ("quint16", 2),
          17: ("uint16", 2), 18: ("complex128", 16), 19: ("float16", 2), 20: ("resource", None),
          21: ("variant", None), 22: ("uint32", 4), 23: ("uint64", 8)}
#: floating dtypes whose values are checked for NaN/inf (numpy dtype, or None for bfloat16: tested on its bits)
FLOAT_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<f8"), 19: np.dtype("<f2"), 14: None}
_STRING = 7
#: DataType code -> numpy dtype name of the bytes (bfloat16 and strings are decoded apart; the quantized dtypes
#: have no numpy equivalent with their meaning)
_NUMPY = {1: "f4", 2: "f8", 3: "i4", 4: "u1", 5: "i2", 6: "i1", 8: "c8", 9: "i8", 10: "?", 17: "u2", 18: "c16",
          19: "f2", 22: "u4", 23: "u8"}


class CheckpointError(InputError):
    """A TF1 checkpoint that cannot be read safely: truncated, corrupted, hostile or of the wrong kind.

    The message is one line naming the file (and the tensor, when there is one) and the problem.
    """


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No TF1 checkpoint at the path (also a ``FileNotFoundError``)."""


class NonFiniteWeightsError(CheckpointError):
    """Variables hold NaN or inf (refused unless ``allow_nonfinite=True`` / ``--allow-nonfinite``)."""


class NonFiniteWeightsWarning(RuntimeWarning):
    """Variables hold NaN or inf and ``allow_nonfinite=True`` let them through."""


class CheckpointDtypeWarning(UserWarning):
    """float16 / bfloat16 / float64 variables were cast to float32."""


@dataclasses.dataclass(frozen=True)
class TensorEntry:
    """One ``BundleEntryProto`` of the index.

    Attributes:
        name: the tensor's name (the table key).
        dtype: TensorFlow's DataType code (:data:`DTYPES`).
        shape: the tensor's shape.
        shard: index of the data shard holding its bytes.
        offset, size: its bytes ``[offset, offset + size)`` in that shard.
        crc32c: the unmasked CRC-32C the writer stored.
        sliced: a partitioned variable's full-tensor entry (its data lives in slice entries).
    """

    name: str
    dtype: int
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int
    sliced: bool = False

    @property
    def dtype_name(self) -> str:
        return DTYPES[self.dtype][0]


# -- paths -----------------------------------------------------------------------------------------------------
def _regular_file(path: str, what: str, checkpoint: str | None = None) -> int:
    """The size of ``path``; a :class:`CheckpointError` unless it is a regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if what == "data file":
            raise CheckpointNotFoundError(f"TF1 checkpoint {checkpoint!r} has an index but no data file: {path!r} is "
                                          "missing") from None
        raise CheckpointNotFoundError(f"TF1 checkpoint {checkpoint or path!r}: {what} {path!r} is missing") from None
    except OSError as e:
        raise CheckpointError(f"TF1 checkpoint {checkpoint or path!r}: cannot stat {what} {path!r} "
                              f"({e.strerror or type(e).__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        raise CheckpointError(f"TF1 checkpoint {checkpoint or path!r}: {what} {path!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"TF1 checkpoint {checkpoint or path!r}: {what} {path!r} is not a regular file "
                              "(a pipe, socket or device)")
    return st.st_size


_DATA_SUFFIX = re.compile(r"\.data-\d{5}-of-\d{5}$")
_STATE_LINE = re.compile(r'^\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)"\s*$', re.M)


def _state_file_target(directory: str) -> str | None:
    """The prefix the directory's ``checkpoint`` state file names, or None without a state file."""
    state = os.path.join(directory, "checkpoint")
    if not os.path.lexists(state):
        return None
    size = _regular_file(state, "state file", directory)
    if size > _MAX_STATE_FILE_BYTES:
        raise CheckpointError(f"checkpoint state file {state!r} is {size} bytes: not a checkpoint state file")
    with open(state, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    m = _STATE_LINE.search(text)
    if m is None:
        raise CheckpointError(f"checkpoint state file {state!r} has no 'model_checkpoint_path: \"...\"' line "
                              "(empty or corrupted)")
    target = re.sub(r"\\(.)", r"\1", m.group(1))
    prefix = target if os.path.isabs(target) else os.path.join(directory, target)
    if not os.path.lexists(prefix + ".index"):
        raise CheckpointNotFoundError(f"checkpoint state file {state!r} points to {target!r}, which does not exist "
                                      f"(no {prefix}.index)")
    return prefix


def resolve_checkpoint(path) -> str:
    """The checkpoint prefix ``path`` designates (framework-free).

    Args:
        path: a checkpoint prefix (``model.ckpt-1000``), its ``.index`` or ``.data-SSSSS-of-NNNNN`` file, or a
            directory: its ``checkpoint`` state file's ``model_checkpoint_path``, else its only ``*.index``.

    Returns:
        the prefix (``PREFIX.index`` exists).

    Raises:
        CheckpointNotFoundError: nothing there, a missing ``.index``, a state file pointing nowhere.
        CheckpointError: a directory without a unique checkpoint, a file that is not a checkpoint's.
    """
    path = os.fspath(path)
    if os.path.isdir(path) and not os.path.lexists(path + ".index"):
        prefix = _state_file_target(path)
        if prefix is None:
            found = sorted(glob.glob(os.path.join(glob.escape(path), "*.index")))
            if len(found) != 1:
                raise CheckpointNotFoundError(f"no TF1 checkpoint in directory {path!r}: no 'checkpoint' state file "
                                              f"and {len(found)} '*.index' files (give the checkpoint prefix)")
            prefix = found[0][: -len(".index")]
    elif path.endswith(".index") and not os.path.lexists(path + ".index"):
        prefix = path[: -len(".index")]
    elif _DATA_SUFFIX.search(path) and not os.path.lexists(path + ".index"):
        prefix = _DATA_SUFFIX.sub("", path)
    else:
        prefix = path
    if not os.path.lexists(prefix + ".index"):
        shards = glob.glob(glob.escape(prefix) + ".data-*")
        if shards:
            raise CheckpointNotFoundError(f"TF1 checkpoint {prefix!r}: its index {prefix + '.index'!r} is missing "
                                          f"(found {os.path.basename(sorted(shards)[0])})")
        if os.path.isfile(prefix):
            raise CheckpointError(f"{prefix!r} is not a TF1 checkpoint: give the prefix of PREFIX.index and "
                                  "PREFIX.data-*-of-* (V1 single-file checkpoints are not supported)")
        raise CheckpointNotFoundError(f"TF1 checkpoint {prefix!r} does not exist (no such file or directory, and "
                                      f"no {prefix}.index)")
    return prefix


# -- LevelDB table and protobuf decoding -----------------------------------------------------------------------
class _Corrupt(Exception):
    """Internal: a decoding failure, turned into a CheckpointError naming the file."""


def _varint(buf, pos: int, end: int, bits: int = 64) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise _Corrupt("a varint runs past its field")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= bits + 7:
            raise _Corrupt("a varint is too long")
    if result >> bits:
        raise _Corrupt("a varint overflows")
    return result, pos


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


def _proto_fields(buf: bytes) -> list[tuple[int, int, object]]:
    """``[(field number, wire type, value)]`` of a protobuf message (ints for varint/fixed, bytes for LEN)."""
    out, pos, end = [], 0, len(buf)
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise _Corrupt("a protobuf field number is 0")
        if wire == 0:
            value, pos = _varint(buf, pos, end)
        elif wire == 1:
            if pos + 8 > end:
                raise _Corrupt("a fixed64 field runs past the message")
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 5:
            if pos + 4 > end:
                raise _Corrupt("a fixed32 field runs past the message")
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        elif wire == 2:
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                raise _Corrupt("a length-delimited field runs past the message")
            value, pos = bytes(buf[pos:pos + n]), pos + n
        else:
            raise _Corrupt(f"protobuf wire type {wire} is not allowed here")
        out.append((field, wire, value))
    return out


def _field(fields, number: int, wire: int, default=None):
    value = default
    for f, w, v in fields:
        if f == number:
            if w != wire:
                raise _Corrupt(f"field {number} has wire type {w}, expected {wire}")
            value = v
    return value


def _read_block(data: bytes, offset: int, size: int, what: str) -> bytes:
    limit = len(data) - _FOOTER
    if offset + size + _TRAILER > limit:
        raise _Corrupt(f"the {what} block at bytes [{offset}, {offset + size + _TRAILER}) lies past the end of the "
                       f"table ({limit} bytes before the footer): truncated or corrupted")
    contents = data[offset:offset + size]
    kind = data[offset + size]
    stored = int.from_bytes(data[offset + size + 1:offset + size + _TRAILER], "little")
    if unmask(stored) != crc32c(data[offset:offset + size + 1]):
        raise _Corrupt(f"the {what} block at byte {offset} fails its CRC-32C check: corrupted")
    if kind != 0:
        raise _Corrupt(f"the {what} block at byte {offset} is compressed (type {kind}); only uncompressed tables "
                       "(every TensorFlow release but 1.1) are supported")
    return contents


def _block_entries(block: bytes, what: str) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise _Corrupt(f"the {what} block is shorter than its restart count")
    n_restarts = int.from_bytes(block[-4:], "little")
    end = len(block) - 4 - 4 * n_restarts
    if n_restarts < 1 or end < 0:
        raise _Corrupt(f"the {what} block's restart array ({n_restarts} entries) does not fit in it")
    out, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(block, pos, end, 32)
        unshared, pos = _varint(block, pos, end, 32)
        n_value, pos = _varint(block, pos, end, 32)
        if shared > len(key) or pos + unshared + n_value > end:
            raise _Corrupt(f"an entry of the {what} block runs past it")
        key = key[:shared] + bytes(block[pos:pos + unshared])
        pos += unshared
        out.append((key, bytes(block[pos:pos + n_value])))
        pos += n_value
    return out


def _block_handle(value: bytes) -> tuple[int, int]:
    offset, pos = _varint(value, 0, len(value))
    size, pos = _varint(value, pos, len(value))
    return offset, size


def _table_entries(data: bytes) -> list[tuple[bytes, bytes]]:
    if len(data) < _FOOTER:
        raise _Corrupt(f"it is {len(data)} bytes long, shorter than the {_FOOTER}-byte table footer: truncated")
    footer = data[-_FOOTER:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise _Corrupt("it does not end with the table magic number: truncated, corrupted, or not a checkpoint index")
    meta_offset, pos = _varint(footer, 0, 40)
    meta_size, pos = _varint(footer, pos, 40)
    index_offset, pos = _varint(footer, pos, 40)
    index_size, pos = _varint(footer, pos, 40)
    _read_block(data, meta_offset, meta_size, "metaindex")
    index = _block_entries(_read_block(data, index_offset, index_size, "index"), "index")
    entries: list[tuple[bytes, bytes]] = []
    for _, handle in index:
        offset, size = _block_handle(handle)
        entries += _block_entries(_read_block(data, offset, size, "data"), "data")
    for (a, _), (b, _) in zip(entries, entries[1:]):
        if not a < b:
            raise _Corrupt(f"its keys are out of order ({b[:60]!r} after {a[:60]!r}): corrupted")
    return entries


def _key_name(key: bytes) -> str:
    return key.decode("utf-8", errors="backslashreplace")


def _parse_entry(name: str, value: bytes, n_shards: int) -> TensorEntry:
    fields = _proto_fields(value)
    dtype = _field(fields, 1, 0, 0)
    if dtype not in DTYPES:
        raise _Corrupt(f"tensor {name!r} has an unknown dtype code {dtype}")
    shape_fields = _proto_fields(_field(fields, 2, 2, b""))
    if _field(shape_fields, 3, 0, 0):
        raise _Corrupt(f"tensor {name!r} has an unknown rank")
    dims = []
    for f, w, v in shape_fields:
        if f == 2:
            if w != 2:
                raise _Corrupt(f"tensor {name!r} has a malformed shape")
            dims.append(_signed64(_field(_proto_fields(v), 1, 0, 0)))
    if len(dims) > _MAX_RANK:
        raise _Corrupt(f"tensor {name!r} has rank {len(dims)}, more than TensorFlow's {_MAX_RANK}")
    if any(d < 0 for d in dims):
        raise _Corrupt(f"tensor {name!r} has an invalid shape {dims}")
    shard = _signed64(_field(fields, 3, 0, 0))
    offset = _signed64(_field(fields, 4, 0, 0))
    size = _signed64(_field(fields, 5, 0, 0))
    crc = _field(fields, 6, 5, 0)
    sliced = any(f == 7 for f, _, _ in fields)
    if not 0 <= shard < n_shards:
        raise _Corrupt(f"tensor {name!r} names data shard {shard}, but the checkpoint has {n_shards}")
    if offset < 0 or size < 0:
        raise _Corrupt(f"tensor {name!r} has a negative offset or size ({offset}, {size})")
    n = 1
    for d in dims:
        n *= d
    item = DTYPES[dtype][1]
    if n >= 1 << 62:
        raise _Corrupt(f"tensor {name!r} has an impossible shape {dims} ({n} elements)")
    if item is None and n > size:
        raise _Corrupt(f"tensor {name!r} of shape {dims} and dtype {DTYPES[dtype][0]} cannot fit its {n} elements in "
                       f"{size} bytes")
    if item is not None and not sliced and n * item != size:
        raise _Corrupt(f"tensor {name!r} of shape {dims} and dtype {DTYPES[dtype][0]} needs {n * item} bytes, but "
                       f"its entry says {size}")
    return TensorEntry(name, dtype, tuple(dims), shard, offset, size, unmask(crc), sliced)


@dataclasses.dataclass
class CheckpointFiles:
    """A TF1 checkpoint whose index and shard sizes were validated (see the module docstring).

    Attributes:
        prefix: the checkpoint prefix.
        entries: ``{tensor name: TensorEntry}`` (the header and slice entries left out).
        shards: the data shard paths, by shard number.
    """

    prefix: str
    entries: dict[str, TensorEntry]
    shards: list[str]
    _checked: dict[str, int] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def index_path(self) -> str:
        return self.prefix + ".index"

    def error(self, problem: str) -> CheckpointError:
        return CheckpointError(f"TF1 checkpoint {self.prefix!r}: {problem}")

    def verify(self, names) -> dict[str, int]:
        """Checks the CRC-32C of each named tensor's bytes; counts its non-finite values (floating dtypes).

        Each tensor is read once per :class:`CheckpointFiles`, in chunks of :data:`CHUNK_BYTES`.

        Args:
            names: tensor names of :attr:`entries`.

        Returns:
            ``{name: number of NaN/inf values}`` (0 for non-floating dtypes).

        Raises:
            CheckpointError: an unknown name, or bytes that fail their checksum (the message names the data file,
                the tensor and its byte range).
        """
        out = {}
        for name in names:
            if name not in self._checked:
                if name not in self.entries:
                    raise self.error(f"has no tensor {name!r}")
                self._checked[name] = self._verify_one(self.entries[name])
            out[name] = self._checked[name]
        return out

    def _verify_one(self, e: TensorEntry) -> int:
        if e.sliced or DTYPES[e.dtype][1] is None and e.dtype != _STRING:
            return 0  # slice/variant/resource entries: range-checked only
        if e.dtype == _STRING:
            return self._check_bytes(e, self._read_bytes(e))
        path = self.shards[e.shard]
        crc, nonfinite, left = Crc32c(), 0, e.size
        float_dtype = FLOAT_DTYPES.get(e.dtype, False)
        with open(path, "rb") as f:  # in chunks: bounded memory for tensors that are only checked
            f.seek(e.offset)
            while left:
                chunk = f.read(min(CHUNK_BYTES, left))
                if not chunk:
                    raise self.error(f"data file {path!r} ends inside tensor {e.name!r}: truncated")
                left -= len(chunk)
                crc.update(chunk)
                if float_dtype is not False:
                    nonfinite += _count_nonfinite(chunk, float_dtype)
        self._check_crc(e, crc.value)
        return nonfinite

    def _read_bytes(self, e: TensorEntry) -> bytes:
        path = self.shards[e.shard]
        with open(path, "rb") as f:
            f.seek(e.offset)
            data = f.read(e.size)
        if len(data) != e.size:
            raise self.error(f"data file {path!r} ends inside tensor {e.name!r}: truncated")
        return data

    def _check_bytes(self, e: TensorEntry, data: bytes) -> int:
        """Checks the CRC-32C of a tensor's whole bytes; returns its number of NaN/inf values."""
        if e.dtype == _STRING:
            self._check_crc(e, self._strings(e, data)[0])
            return 0
        self._check_crc(e, crc32c(data))
        float_dtype = FLOAT_DTYPES.get(e.dtype, False)
        return 0 if float_dtype is False else _count_nonfinite(data, float_dtype)

    def _check_crc(self, e: TensorEntry, computed: int) -> None:
        if computed != e.crc32c:
            raise self.error(f"tensor {e.name!r} fails its CRC-32C check in data file {self.shards[e.shard]!r} "
                             f"(bytes [{e.offset}, {e.offset + e.size}), stored {e.crc32c:#010x}, computed "
                             f"{computed:#010x}): the data file is corrupted")

    def read_array(self, name: str) -> np.ndarray:
        """The tensor ``name`` decoded from its bytes in numpy; the bytes are read once and their CRC-32C checked
        (and their NaN/inf counted, as :meth:`verify`) unless :meth:`verify` already did.

        Numeric dtypes come back as the little-endian numpy dtype of the same name (bfloat16 as float32: its 16
        bits are the upper half of a float32, so the widening is exact); strings as an ``object`` array of
        ``bytes``. Variant and resource entries and partitioned variables cannot be decoded.

        Raises:
            CheckpointError: an unknown name, a failed checksum, or a dtype that cannot be decoded.
        """
        e = self.entries.get(name)
        if e is None:
            raise self.error(f"has no tensor {name!r}")
        if e.sliced:
            raise self.error(f"tensor {name!r} is a partitioned variable (saved in slices): not supported")
        if decoded_dtype(e.dtype) == np.dtype(object) and e.dtype != _STRING:
            raise self.error(f"tensor {name!r} has dtype {e.dtype_name}, which cannot be read as an array")
        data = self._read_bytes(e)
        if name not in self._checked:
            self._checked[name] = self._check_bytes(e, data)
        if e.dtype == _STRING:
            values = self._strings(e, data)[1]
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out.reshape(e.shape)
        if e.dtype == 14:  # bfloat16 -> float32, exactly
            bits = np.frombuffer(data, "<u2").astype(np.uint32) << 16
            return bits.view(np.float32).reshape(e.shape)
        dtype = np.dtype(_NUMPY[e.dtype]).newbyteorder("<")
        return np.frombuffer(data, dtype).astype(dtype.newbyteorder("="), copy=True).reshape(e.shape)

    def _strings(self, e: TensorEntry, data: bytes) -> tuple[int, list[bytes]]:
        """``(TensorFlow's checksum, the values)`` of a string tensor's bytes: varint lengths, the lengths'
        checksum (4 bytes), then the bytes. The checksum covers each length (as uint32, or uint64 when larger),
        the stored length checksum, then the bytes."""
        n = int(np.prod(e.shape, dtype=np.int64)) if e.shape else 1
        if e.size == 0:
            return e.crc32c, [b""] * n
        try:
            pos, lengths, crc = 0, [], 0
            for _ in range(n):
                length, pos = _varint(data, pos, len(data))
                lengths.append(length)
                crc = crc32c(length.to_bytes(4 if length <= 0xFFFFFFFF else 8, "little"), crc)
            crc = crc32c(data[pos:pos + 4], crc)
            pos += 4
            if pos + sum(lengths) != e.size:
                raise _Corrupt("the string lengths do not add up to the entry's size")
        except _Corrupt as err:
            raise self.error(f"string tensor {e.name!r} in data file {self.shards[e.shard]!r} is corrupted "
                             f"({err})") from None
        crc = crc32c(data[pos:], crc)
        values = []
        for length in lengths:
            values.append(bytes(data[pos:pos + length]))
            pos += length
        return crc, values


def decoded_dtype(code: int) -> np.dtype:
    """The numpy dtype :meth:`CheckpointFiles.read_array` returns for a TensorFlow DataType code: the dtype of
    the same name, float32 for bfloat16, ``object`` for strings and for what cannot be decoded."""
    if code == 14:
        return np.dtype(np.float32)
    return np.dtype(_NUMPY[code]) if code in _NUMPY else np.dtype(object)


def _count_nonfinite(chunk: bytes, dtype) -> int:
    if dtype is None:  # bfloat16: exponent bits all ones
        bits = np.frombuffer(chunk, "<u2")
        return int(np.count_nonzero((bits & 0x7F80) == 0x7F80))
    return int(np.count_nonzero(~np.isfinite(np.frombuffer(chunk, dtype))))


def open_checkpoint_files(path) -> CheckpointFiles:
    """Resolves ``path`` and validates the checkpoint's index and data shard sizes (no tensor data is read).

    Args:
        path: as for :func:`resolve_checkpoint`.

    Returns:
        a :class:`CheckpointFiles`; call :meth:`CheckpointFiles.verify` on the tensors you will read.

    Raises:
        CheckpointNotFoundError: no checkpoint at ``path`` (a ``FileNotFoundError`` too).
        CheckpointError: anything else wrong with the files, one line naming the file and the problem.
    """
    prefix = resolve_checkpoint(path)
    index_path = prefix + ".index"
    size = _regular_file(index_path, "index", prefix)
    if size == 0:
        raise CheckpointError(f"TF1 checkpoint {prefix!r}: index file {index_path!r} is empty")
    if size > _MAX_INDEX_BYTES:
        raise CheckpointError(f"TF1 checkpoint {prefix!r}: index file {index_path!r} is {size} bytes, larger than "
                              "any checkpoint index")
    try:
        with open(index_path, "rb") as f:
            data = f.read(_MAX_INDEX_BYTES + 1)
    except OSError as e:
        raise CheckpointError(f"TF1 checkpoint {prefix!r}: cannot read {index_path!r} "
                              f"({e.strerror or type(e).__name__})") from None
    try:
        table = _table_entries(data)
        if not table or table[0][0] != b"":
            raise _Corrupt("it has no BundleHeaderProto entry (the empty key)")
        header = _proto_fields(table[0][1])
        n_shards = _signed64(_field(header, 1, 0, 0))
        if not 1 <= n_shards <= 99999:
            raise _Corrupt(f"its header gives {n_shards} data shards")
        if _field(header, 2, 0, 0) != 0:
            raise _Corrupt("its header says the data is big-endian; only little-endian checkpoints are supported")
        entries = {}
        for key, value in table[1:]:
            name = _key_name(key)
            entries[name] = _parse_entry(name, value, n_shards)
    except _Corrupt as e:
        raise CheckpointError(f"TF1 checkpoint {prefix!r}: index file {index_path!r}: {e}") from None
    shards = [f"{prefix}.data-{i:05d}-of-{n_shards:05d}" for i in range(n_shards)]
    sizes = {}
    for e in entries.values():
        if e.shard not in sizes:
            sizes[e.shard] = _regular_file(shards[e.shard], "data file", prefix)
        if e.offset + e.size > sizes[e.shard]:
            raise CheckpointError(f"TF1 checkpoint {prefix!r}: tensor {e.name!r} lies at bytes [{e.offset}, "
                                  f"{e.offset + e.size}) of data file {shards[e.shard]!r}, which has only "
                                  f"{sizes[e.shard]} bytes: the data file is truncated")
    return CheckpointFiles(prefix, entries, shards)
