"""speechblocks.tensorboard_events (no TensorFlow to write) read back by TensorFlow's own reader
(``tf.compat.v1.train.summary_iterator``: TFRecord framing with its CRC checks, the ``Event`` protobuf)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from speechblocks.tensorboard_events import EventFileWriter, encode_scalar_event, tfrecord


def _read(path):
    import tensorflow as tf

    return list(tf.compat.v1.train.summary_iterator(path))


def test_scalars_round_trip_through_tensorflow(tmp_path):
    scalars = [(0, {"stats/loss": 1.5, "stats/learning_rate": 1e-3}), (7, {"stats/loss": -2.25e-8}),
               (2 ** 40, {"eval/é ünïcode": 3.0, "x": float("inf")})]
    with EventFileWriter(tmp_path / "events") as writer:
        for step, values in scalars:
            writer.add_scalars(step, values, wall_time=1234.5 + step)
    (name,) = os.listdir(tmp_path / "events")
    assert name.startswith("events.out.tfevents.")
    events = _read(writer.path)
    assert events[0].file_version == "brain.Event:2"
    assert len(events) == 1 + len(scalars)
    for event, (step, values) in zip(events[1:], scalars):
        assert event.step == step and event.wall_time == 1234.5 + step
        got = {v.tag: v.simple_value for v in event.summary.value}
        assert list(got) == list(values)
        for tag, value in values.items():
            assert got[tag] == np.float32(value)
    with pytest.raises(ValueError, match="closed"):
        writer.add_scalars(1, {"a": 1.0})


def test_damaged_record_is_refused_by_tensorflow(tmp_path):
    record = bytearray(tfrecord(encode_scalar_event(3, {"a": 1.0}, wall_time=1.0)))
    record[-6] ^= 0xFF  # a byte of the data: its CRC no longer matches
    path = tmp_path / "events.out.tfevents.1.damaged"
    path.write_bytes(bytes(record))
    with pytest.raises(Exception, match="(?i)corrupt|checksum|crc|data"):
        _read(str(path))
