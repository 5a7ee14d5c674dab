"""TensorBoard event files written without TensorFlow (framework-free): scalar summaries only.

An event file is a TFRecord file -- each record ``uint64 length | uint32 masked CRC-32C(length) | data | uint32
masked CRC-32C(data)`` (little endian, :mod:`speechblocks.crc32c`) -- of serialized ``tensorflow.Event``
protocol buffers. The few fields a scalar needs are encoded here by hand::

    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2; }

The first record is the ``file_version: "brain.Event:2"`` event TensorBoard expects. TensorBoard (and
``tf.compat.v1.train.summary_iterator``) read the files; the name follows TensorFlow's
``events.out.tfevents.<seconds>.<host>`` so TensorBoard finds them in a log directory.
"""
from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Mapping

from .crc32c import crc32c, mask

__all__ = ["EventFileWriter", "encode_scalar_event", "tfrecord"]

FILE_VERSION = "brain.Event:2"


def _varint(value: int) -> bytes:
    """Protocol-buffer base-128 varint of a non-negative int, or a negative int64 as its 10-byte two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


def encode_scalar_event(step: int, scalars: Mapping[str, float], wall_time: float | None = None) -> bytes:
    """A serialized ``Event`` holding one ``Summary`` of ``simple_value`` scalars.

    Args:
        step (int): the event's ``step`` (the global step).
        scalars (Mapping[str, float]): tag -> value (stored as float32, as TensorFlow's ``simple_value``).
        wall_time (float, optional): seconds since the epoch. (Default: now)

    Returns:
        bytes: the ``Event`` message.
    """
    values = b""
    for tag, value in scalars.items():
        value_msg = _bytes_field(1, str(tag).encode("utf-8")) + _field(2, 5) + struct.pack("<f", float(value))
        values += _bytes_field(1, value_msg)
    wall = time.time() if wall_time is None else float(wall_time)
    return (_field(1, 1) + struct.pack("<d", wall) + _field(2, 0) + _varint(int(step))
            + _bytes_field(5, values))


def _version_event(wall_time: float) -> bytes:
    return _field(1, 1) + struct.pack("<d", wall_time) + _bytes_field(3, FILE_VERSION.encode())


def tfrecord(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC-32C of the length, data, masked CRC-32C of the data."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", mask(crc32c(length))) + data + struct.pack("<I", mask(crc32c(data)))


class EventFileWriter:
    """Appends scalar summaries to a new TensorBoard event file in ``log_dir``.

    Args:
        log_dir (str or PathLike): the directory (created when missing).
        filename_suffix (str, optional): appended to the file name. (Default: ``""``)

    Example:
        >>> writer = EventFileWriter("run/events")
        >>> writer.add_scalars(10, {"loss": 0.5, "learning_rate": 1e-3})
        >>> writer.close()
    """

    def __init__(self, log_dir: str | os.PathLike, filename_suffix: str = ""):
        os.makedirs(log_dir, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}{filename_suffix}"
        self.path = os.path.join(os.fspath(log_dir), name)
        self._file = open(self.path, "ab")
        self._file.write(tfrecord(_version_event(now)))
        self._file.flush()

    def add_scalars(self, step: int, scalars: Mapping[str, float], wall_time: float | None = None) -> None:
        """Write one event with every scalar of ``scalars`` at ``step`` (flushed at once)."""
        if self._file is None:
            raise ValueError(f"EventFileWriter: {self.path!r} is closed.")
        self._file.write(tfrecord(encode_scalar_event(step, scalars, wall_time)))
        self._file.flush()

    def close(self) -> None:
        """Close the file (further writes raise ``ValueError``)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> EventFileWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
