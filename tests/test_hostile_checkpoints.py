"""Corrupted, truncated and hostile TF1 checkpoints (issue #13): every case is one clean ``CheckpointError`` line
naming the file and the problem -- through ``read_tf1_checkpoint``, ``Tacotron2.from_tf1_checkpoint`` and the
command line (exit 2, nothing written) -- before TensorFlow's C++ reader, which aborts the process on several of
them (the crafted entries below: SIGABRT in TensorFlow 2.21), touches the bytes. Each test is bounded by an alarm.

The checkpoints are small real ones (``tf.raw_ops.SaveV2``, the op TF1's ``Saver`` runs), damaged here; the
hostile indexes are written by ``tests/helpers/tf1_index_writer.py`` with valid block checksums.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tf_layers
from speechblocks.cli import main as cli_main
from speechblocks.crc32c import crc32c, mask
from speechblocks.tf1_checkpoint_file import (
    CheckpointDtypeWarning,
    CheckpointError,
    CheckpointNotFoundError,
    NonFiniteWeightsError,
    NonFiniteWeightsWarning,
)
from tests.helpers import tf1_index_writer as iw
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables
from tf_layers.checkpoint import read_tf1_checkpoint

SCOPE = "Tacotron_model/inference/"
DATA = ".data-00000-of-00001"


@pytest.fixture(autouse=True)
def _bounded_time():
    """No case may hang: each test is interrupted after 120 s (a deadline, not a timing assertion)."""
    def fail(*_):
        raise TimeoutError("the test exceeded its 120 s deadline: a checkpoint read hangs")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    _, variables = small_variables("rtvc", seed=3)
    prefix = save_model_checkpoint(tmp_path_factory.mktemp("good"), variables)
    return prefix, variables


def _copy(good_prefix: str, directory) -> str:
    directory = os.fspath(directory)
    for suffix in (".index", DATA):
        shutil.copyfile(good_prefix + suffix, os.path.join(directory, "model.ckpt-100" + suffix))
    shutil.copyfile(os.path.join(os.path.dirname(good_prefix), "checkpoint"), os.path.join(directory, "checkpoint"))
    return os.path.join(directory, "model.ckpt-100")


def _flip(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x10]))


def _hostile(directory, entries, num_shards: int = 1, big_endian: bool = False) -> str:
    """A checkpoint whose index (valid checksums) holds crafted entries over 24 bytes of float32 data."""
    prefix = os.path.join(os.fspath(directory), "hostile.ckpt")
    with open(prefix + ".index", "wb") as f:
        f.write(iw.table([(b"", iw.header(num_shards, big_endian))] + entries))
    with open(prefix + DATA, "wb") as f:
        f.write(np.arange(6, dtype=np.float32).tobytes())
    return prefix


_SIX = crc32c(np.arange(6, dtype=np.float32).tobytes())
_KEY = (SCOPE + "inputs_embedding").encode()


def _damage(case: str, good_prefix: str, d) -> tuple[str, list[str]]:
    """``(path to give, [substrings the one-line error must hold])``; the file it names is in the list."""
    p = _copy(good_prefix, d)
    index, data = p + ".index", p + DATA
    if case == "truncated data":
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) // 2)
        return p, [data, "truncated"]
    if case == "data truncated by one byte":
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) - 1)
        return p, [data, "truncated"]
    if case == "bit-flipped data":
        _flip(data, os.path.getsize(data) // 3)
        return p, [data, "fails its CRC-32C check", "tensor '" + SCOPE]
    if case == "bit-flipped index":
        _flip(index, 40)
        return p, [index, "CRC-32C"]
    if case == "bit-flipped index footer magic":
        _flip(index, os.path.getsize(index) - 3)
        return p, [index, "magic number"]
    if case == "truncated index":
        with open(index, "r+b") as f:
            f.truncate(os.path.getsize(index) // 2)
        return p, [index, "magic number"]
    if case == "missing index":
        os.remove(index)
        return p, [index, "is missing"]
    if case == "missing data file":
        os.remove(data)
        return p, [data, "is missing"]
    if case == "empty index":
        open(index, "w").close()
        return p, [index, "is empty"]
    if case == "empty file given as the checkpoint":
        empty = os.path.join(os.fspath(d), "empty.ckpt")
        open(empty, "w").close()
        return empty, [empty, "is not a TF1 checkpoint"]
    if case == "index is a directory":
        os.remove(index)
        os.mkdir(index)
        return p, [index, "is a directory, not a file"]
    if case == "data file is a directory":
        os.remove(data)
        os.mkdir(data)
        return p, [data, "is a directory, not a file"]
    if case == "index is a FIFO":
        os.remove(index)
        os.mkfifo(index)
        return p, [index, "not a regular file"]
    if case == "state file pointing nowhere":
        with open(os.path.join(os.fspath(d), "checkpoint"), "w") as f:
            f.write('model_checkpoint_path: "model.ckpt-999"\nall_model_checkpoint_paths: "model.ckpt-999"\n')
        return os.fspath(d), [os.path.join(os.fspath(d), "checkpoint"), "points to 'model.ckpt-999'"]
    if case == "garbage state file":
        with open(os.path.join(os.fspath(d), "checkpoint"), "wb") as f:
            f.write(b"\x00\xff garbage")
        return os.fspath(d), [os.path.join(os.fspath(d), "checkpoint"), "model_checkpoint_path"]
    if case == "directory without a checkpoint":
        empty_dir = os.path.join(os.fspath(d), "nothing")
        os.mkdir(empty_dir)
        return empty_dir, [empty_dir, "no TF1 checkpoint in directory"]
    # crafted entries with valid block checksums: TensorFlow 2.21 aborts (SIGABRT) on the first four
    if case == "hostile: unknown dtype":
        return _hostile(d, [(_KEY, iw.entry(99, [2, 3], 0, 24, _SIX))]), ["hostile.ckpt.index", "unknown dtype code 99"]
    if case == "hostile: negative dimension":
        return _hostile(d, [(_KEY, iw.entry(1, [-1, 6], 0, 24, _SIX))]), ["hostile.ckpt.index", "invalid shape [-1, 6]"]
    if case == "hostile: 2**80 elements":
        return (_hostile(d, [(_KEY, iw.entry(1, [1 << 40, 1 << 40], 0, 24, _SIX))]),
                ["hostile.ckpt.index", "impossible shape"])
    if case == "hostile: rank 300":
        return _hostile(d, [(_KEY, iw.entry(1, [1] * 300, 0, 4, _SIX))]), ["hostile.ckpt.index", "rank 300"]
    if case == "hostile: size disagrees with the shape":
        return _hostile(d, [(_KEY, iw.entry(1, [2, 3], 0, 8, _SIX))]), ["hostile.ckpt.index", "needs 24 bytes"]
    if case == "hostile: bytes past the data file":
        return (_hostile(d, [(_KEY, iw.entry(1, [2, 3], 1 << 30, 24, _SIX))]),
                ["hostile.ckpt" + DATA, "which has only 24 bytes"])
    if case == "hostile: shard 3 of 1":
        return _hostile(d, [(_KEY, iw.entry(1, [2, 3], 0, 24, _SIX, shard=3))]), ["hostile.ckpt.index", "data shard 3"]
    if case == "hostile: keys out of order":
        e = iw.entry(1, [2, 3], 0, 24, _SIX)
        return _hostile(d, [(_KEY + b"b", e), (_KEY + b"a", e)]), ["hostile.ckpt.index", "out of order"]
    if case == "hostile: zero shards":
        return (_hostile(d, [(_KEY, iw.entry(1, [2, 3], 0, 24, _SIX))], num_shards=0),
                ["hostile.ckpt.index", "0 data shards"])
    if case == "hostile: big-endian":
        return (_hostile(d, [(_KEY, iw.entry(1, [2, 3], 0, 24, _SIX))], big_endian=True),
                ["hostile.ckpt.index", "big-endian"])
    if case == "hostile: string lengths past the entry":
        return (_hostile(d, [(_KEY, iw.entry(7, [3], 0, 24, _SIX))]),
                ["hostile.ckpt" + DATA, "string tensor", "corrupted"])
    raise AssertionError(case)


CASES = ["truncated data", "data truncated by one byte", "bit-flipped data", "bit-flipped index",
         "bit-flipped index footer magic", "truncated index", "missing index", "missing data file", "empty index",
         "empty file given as the checkpoint", "index is a directory", "data file is a directory", "index is a FIFO",
         "state file pointing nowhere", "garbage state file", "directory without a checkpoint",
         "hostile: unknown dtype", "hostile: negative dimension", "hostile: 2**80 elements", "hostile: rank 300",
         "hostile: size disagrees with the shape", "hostile: bytes past the data file", "hostile: shard 3 of 1",
         "hostile: keys out of order", "hostile: zero shards", "hostile: big-endian",
         "hostile: string lengths past the entry"]
NOT_FOUND = {"missing index", "missing data file", "state file pointing nowhere", "directory without a checkpoint"}


def _assert_one_line(message: str, expected: list[str]) -> None:
    assert "\n" not in message.strip(), message
    for part in expected:
        assert part in message, (part, message)


@pytest.mark.parametrize("case", CASES)
def test_every_reader_refuses_with_one_line(case, good, tmp_path, capsys):
    """Python API and command line, same file: a CheckpointError naming it; exit 2; nothing written."""
    path, expected = _damage(case, good[0], tmp_path)
    with pytest.raises(CheckpointError) as info:
        read_tf1_checkpoint(path)
    _assert_one_line(str(info.value), expected)
    assert (isinstance(info.value, CheckpointNotFoundError) == isinstance(info.value, FileNotFoundError)
            == (case in NOT_FOUND))
    with pytest.raises(CheckpointError) as info:
        tf_layers.Tacotron2.from_tf1_checkpoint(path)
    if case == "hostile: string lengths past the entry":  # refused before its bytes are read: not a float weight
        expected_model = [path, "has dtype string; model weights must be floating point"]
    else:
        expected_model = expected
    _assert_one_line(str(info.value), expected_model)

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for argv in (["migrate", path, "--to", "keras", str(out_dir / "m.weights.h5")], ["inspect", path]):
        capsys.readouterr()
        assert cli_main(argv) == 2
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"speechblocks {argv[0]}: error: "), captured.err
        _assert_one_line(lines[0], expected)
        assert captured.out == ""
    assert os.listdir(out_dir) == []  # no output, no temporary file


def test_the_checkpoints_own_checksums_are_what_the_validator_computes(good):
    """The CRC-32C of this module is TensorFlow's: the standard check value, and the masked checksums TensorFlow
    wrote into a real index (every block trailer) reproduced from the bytes."""
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283
    data = open(good[0] + ".index", "rb").read()
    footer = data[-48:]
    pos, handles = 0, []
    for _ in range(4):
        n = shift = 0
        while True:
            b = footer[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        handles.append(n)
    for offset, size in ((handles[0], handles[1]), (handles[2], handles[3])):
        stored = int.from_bytes(data[offset + size + 1:offset + size + 5], "little")
        assert stored == mask(crc32c(data[offset:offset + size + 1]))
    big = np.random.default_rng(0).integers(0, 256, 300_001, dtype=np.uint8).tobytes()
    reference = 0xFFFFFFFF
    for byte in big[:20_000]:  # the bitwise definition, on a prefix: the vectorised path must agree
        reference ^= byte
        for _ in range(8):
            reference = (reference >> 1) ^ (0x82F63B78 if reference & 1 else 0)
    assert crc32c(big[:20_000]) == reference ^ 0xFFFFFFFF
    assert crc32c(big[150_000:], crc32c(big[:150_000])) == crc32c(big)


def test_a_good_checkpoint_reads_identically_by_every_path(good, tmp_path):
    prefix, variables = good
    for path in (prefix, prefix + ".index", prefix + DATA, os.path.dirname(prefix)):
        got = read_tf1_checkpoint(path, SCOPE)
        assert sorted(got) == sorted(variables)
        assert all(np.array_equal(got[k], variables[k]) for k in variables)


def _save(directory, variables: dict, name="model.ckpt-1") -> str:
    return save_model_checkpoint(directory, variables, name)


def test_unrelated_tf1_model(tmp_path, capsys):
    prefix = os.path.join(tmp_path, "resnet.ckpt")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["resnet/conv1/kernel", "resnet/fc/bias", "global_step"],
                      shape_and_slices=[""] * 3,
                      tensors=[np.ones((3, 3, 3, 4), np.float32), np.zeros(10, np.float32), np.array(7, np.int64)])
    assert sorted(read_tf1_checkpoint(prefix)) == ["resnet/conv1/kernel", "resnet/fc/bias"]  # a generic reader
    with pytest.raises(ValueError, match="holds no variable under 'Tacotron_model/inference/'") as info:
        tf_layers.Tacotron2.from_tf1_checkpoint(prefix)
    assert prefix in str(info.value)
    assert cli_main(["migrate", prefix, "--to", "keras", str(tmp_path / "x.weights.h5")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds no Tacotron-2 block" in err and prefix in err
    assert not os.path.exists(tmp_path / "x.weights.h5")


def test_nan_and_inf_are_refused_unless_allowed(tmp_path, capsys):
    """Default: an error naming the variables and the count; ``allow_nonfinite`` / ``--allow-nonfinite``: a
    warning, and the NaN/inf land in the migrated file where they were."""
    import h5py

    _, variables = small_variables("rtvc", seed=4)
    nan_name, inf_name = "memory_layer/kernel", "decoder/decoder_prenet/dense_1/bias"
    variables[nan_name][0, 1] = np.nan
    variables[inf_name][2] = -np.inf
    prefix = _save(tmp_path, variables)
    with pytest.raises(NonFiniteWeightsError) as info:
        tf_layers.Tacotron2.from_tf1_checkpoint(prefix)
    message = str(info.value)
    _assert_one_line(message, [prefix, "2 variable(s) hold NaN or inf", SCOPE + nan_name + "' (1 of",
                               SCOPE + inf_name + "' (1 of", "allow_nonfinite=True"])
    with pytest.warns(NonFiniteWeightsWarning, match="hold NaN or inf"):
        weights = read_tf1_checkpoint(prefix, SCOPE, allow_nonfinite=True)
    assert np.isnan(weights[nan_name][0, 1]) and weights[inf_name][2] == -np.inf

    out = tmp_path / "m.weights.h5"
    assert cli_main(["migrate", prefix, "--to", "keras", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hold NaN or inf" in err and "--allow-nonfinite" in err
    assert not out.exists()
    assert cli_main(["inspect", prefix]) == 2
    capsys.readouterr()
    assert cli_main(["migrate", prefix, "--to", "keras", str(out), "--allow-nonfinite"]) == 0
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if "warning" in ln] == [
        ln for ln in err.splitlines() if ln.startswith("speechblocks migrate: warning: ") and "hold NaN or inf" in ln]
    assert "warning" in err
    with h5py.File(out, "r") as f:
        stored_nan, stored_inf = f[nan_name][()], f[inf_name][()]
    np.testing.assert_array_equal(stored_nan, variables[nan_name])  # NaN positions included
    np.testing.assert_array_equal(stored_inf, variables[inf_name])


def test_float16_and_float64_variables_are_cast_with_a_warning(tmp_path, capsys):
    import h5py

    _, variables = small_variables("rtvc", seed=5)
    half, double = "inputs_embedding", "memory_layer/kernel"
    variables[half] = variables[half].astype(np.float16)
    variables[double] = variables[double].astype(np.float64) + 1e-9  # not representable in float32
    prefix = _save(tmp_path, variables)
    with pytest.warns(CheckpointDtypeWarning, match=r"2 variable\(s\) cast to float32") as record:
        weights = read_tf1_checkpoint(prefix, SCOPE)
    assert "(float16)" in str(record[0].message) and "(float64)" in str(record[0].message)
    assert weights[half].dtype == np.float32 and weights[double].dtype == np.float32
    np.testing.assert_array_equal(weights[half], variables[half].astype(np.float32))  # exact
    np.testing.assert_array_equal(weights[double], variables[double].astype(np.float32))  # rounded to nearest
    out = tmp_path / "m.weights.h5"
    assert cli_main(["migrate", prefix, "--to", "keras", str(out)]) == 0
    err = capsys.readouterr().err
    assert any(ln.startswith("speechblocks migrate: warning: ") and "cast to float32" in ln for ln in err.splitlines())
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f[double][()], variables[double].astype(np.float32))
        assert f[half].dtype == np.float32


def test_float64_beyond_float32_and_integer_weights_are_refused(tmp_path, capsys):
    _, variables = small_variables("rtvc", seed=6)
    variables["memory_layer/kernel"] = variables["memory_layer/kernel"].astype(np.float64)
    variables["memory_layer/kernel"][0, 0] = 1e39
    prefix = _save(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None, variables)
    with pytest.raises(CheckpointError, match=r"holds values beyond float32's range") as info, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", CheckpointDtypeWarning)
        tf_layers.Tacotron2.from_tf1_checkpoint(prefix)
    assert prefix in str(info.value) and "memory_layer/kernel" in str(info.value)

    _, variables = small_variables("rtvc", seed=6)
    variables["memory_layer/kernel"] = np.ones_like(variables["memory_layer/kernel"], dtype=np.int32)
    prefix = _save(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None, variables)
    assert cli_main(["migrate", prefix, "--to", "keras", str(tmp_path / "x.weights.h5")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has dtype int32; model weights must be floating point" in err
    assert not (tmp_path / "x.weights.h5").exists()


def test_torch_from_tf1_checkpoint_refuses_the_same_way(good, tmp_path):
    import torch_layers

    path, expected = _damage("bit-flipped data", good[0], tmp_path)
    with pytest.raises(CheckpointError) as info:
        torch_layers.Tacotron2.from_tf1_checkpoint(path)
    _assert_one_line(str(info.value), expected)


def test_command_line_in_a_fresh_process(good, tmp_path):
    """The console script itself (no in-process state): exit 2, one line on stderr, nothing written."""
    path, expected = _damage("hostile: unknown dtype", good[0], tmp_path)
    out = tmp_path / "x.weights.h5"
    proc = subprocess.run([sys.executable, "-m", "speechblocks.cli", "migrate", path, "--to", "keras", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("speechblocks migrate: error: "), proc.stderr
    _assert_one_line(lines[0], expected)
    assert not out.exists() and proc.stdout == ""
