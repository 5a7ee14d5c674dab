"""Hostile and damaged migrated files (issue #13): every reader refuses them with one clear line naming the file,
and nothing half-loaded ever comes out.

Readers: ``tf_layers.checkpoint.load_migrated``, ``tf_layers.Tacotron2.from_migrated`` (Keras ``.weights.h5``),
``torch_layers.load_migrated``, ``torch_layers.Tacotron2.from_migrated`` (``.pt`` and ``.weights.h5``). The files
are real ``speechblocks migrate`` output of small checkpoints, edited the way damage or an attacker would.
"""
from __future__ import annotations

import os
import pickle
import re
import shutil

import h5py
import numpy as np
import pytest
import torch

import tf_layers
import torch_layers
from speechblocks.migration import MigratedFileError
from tests.helpers.migrated_files import (
    CreatesMarker,
    cached_migrated_files,
    flip_tensor_byte,
    write_malicious,
)

KERAS_READERS = {"keras blocks": tf_layers.checkpoint.load_migrated, "keras model": tf_layers.Tacotron2.from_migrated,
                 "torch model": torch_layers.Tacotron2.from_migrated}
TORCH_READERS = {"torch blocks": torch_layers.load_migrated, "torch model": torch_layers.Tacotron2.from_migrated}
ALL_READERS = {**{f"h5 {k}": v for k, v in KERAS_READERS.items()}, **{f"pt {k}": v for k, v in TORCH_READERS.items()}}


@pytest.fixture(scope="module")
def files():
    return cached_migrated_files()


def refused(reader, path, match: str):
    """Calls ``reader(path)``: it must raise one ``MigratedFileError`` line naming the file and matching ``match``."""
    with pytest.raises(ValueError) as err:
        reader(path)
    msg = str(err.value)
    assert isinstance(err.value, MigratedFileError), f"{type(err.value).__name__}: {msg}"
    assert "\n" not in msg, msg
    assert repr(os.fspath(path)) in msg, msg
    assert re.search(match, msg), msg
    return msg


def _copy(src, dst):
    shutil.copyfile(src, dst)
    return str(dst)


def _edit_h5(src, dst, edit, keep_digest: bool = False) -> str:
    """A copy of ``src`` changed by ``edit(h5file)``; its ``sha256`` attribute removed (a file written before the
    attribute existed) so that the check under test, not the digest, answers."""
    path = _copy(src, dst)
    with h5py.File(path, "r+") as f:
        edit(f)
        if not keep_digest and "sha256" in f.attrs:
            del f.attrs["sha256"]
    return path


def _edit_pt(src, dst, edit) -> str:
    payload = torch.load(src, weights_only=True)
    edit(payload)
    torch.save(payload, dst)
    return str(dst)


def _replace(f, name, data):
    del f[name]
    f.create_dataset(name, data=data)


def _external(f, name):
    """``name`` re-created with its bytes in another file (HDF5 external storage): a reader that followed it would
    read whatever file the path names."""
    other = f.filename + ".outside"
    data = np.asarray(f[name][()])
    data.tofile(other)
    del f[name]
    f.create_dataset(name, shape=data.shape, dtype=data.dtype, external=[(other, 0, data.nbytes)])


# -- malicious pickles ------------------------------------------------------------------------------
def test_the_malicious_pickle_is_real(tmp_path):
    """The payload used below does run code when loaded unsafely: it creates the marker file."""
    marker = tmp_path / "pwned"
    for form, load in (("raw", lambda p: pickle.load(open(p, "rb"))),  # noqa: SIM115
                       ("zip", lambda p: torch.load(p, weights_only=False))):
        path = write_malicious(tmp_path / f"evil.{form}", marker, form)
        assert not marker.exists()
        load(path)
        assert marker.exists(), form
        marker.unlink()


@pytest.mark.parametrize("form", ["zip", "legacy", "raw"])
@pytest.mark.parametrize("reader", sorted(ALL_READERS))
def test_malicious_pickles_are_refused_and_never_run(reader, form, tmp_path):
    marker = tmp_path / "pwned"
    payload = {"speechblocks_format": "speechblocks.migrated.torch", "format_version": 2, "blocks": "{}",
               "state_dicts": {}}
    path = write_malicious(tmp_path / "model.pt", marker, form, payload)
    msg = refused(ALL_READERS[reader], path, r"not tensors and plain data|neither HDF5 nor a torch zip|is a torch file")
    if form == "zip" and reader.startswith("pt"):
        assert "weights_only=True" in msg
    assert not marker.exists()


def _unsafe_calls(source: str) -> list[str]:
    """Calls that could unpickle arbitrary objects: torch.load without weights_only=True, pickle.load(s),
    np.load(allow_pickle=True), eval/exec."""
    import ast

    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else (
            f.id if isinstance(f, ast.Name) else "")
        kw = {k.arg: k.value for k in node.keywords}
        const = {k: v.value for k, v in kw.items() if isinstance(v, ast.Constant)}
        if name == "torch.load" and const.get("weights_only") is not True:
            out.append(f"torch.load without weights_only=True (line {node.lineno})")
        elif name in ("pickle.load", "pickle.loads", "eval", "exec"):
            out.append(f"{name} (line {node.lineno})")
        elif name in ("np.load", "numpy.load") and ("allow_pickle" in kw and const.get("allow_pickle") is not False):
            out.append(f"np.load with allow_pickle (line {node.lineno})")
    return out


def test_every_file_read_of_the_library_is_safe():
    """Every torch.load of the library passes weights_only=True; nothing calls pickle.load, eval or exec, nor
    np.load with allow_pickle (the source, parsed); and the detector itself flags each unsafe form."""
    assert len(_unsafe_calls("torch.load(p)\ntorch.load(p, weights_only=False)\npickle.loads(b)\neval(s)\n"
                             "np.load(p, allow_pickle=True)\ntorch.load(p, weights_only=True)\n")) == 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found, loads = [], 0
    for package in ("speechblocks", "tf_layers", "torch_layers"):
        for dirpath, _, names in os.walk(os.path.join(root, package)):
            for name in sorted(n for n in names if n.endswith(".py")):
                with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                    source = fh.read()
                loads += source.count("torch.load(path, map_location=map_location, weights_only=True)")
                found += [f"{package}/{name}: {c}" for c in _unsafe_calls(source)]
    assert found == []
    assert loads == 1  # the one reader every torch file goes through (torch_layers/_state_dict.safe_torch_load)



def test_both_readers_know_every_block_class_a_table_may_name():
    """A block table may name the classes of ``BLOCK_CLASSES`` (the table is validated first); each framework's
    reader builds them from its own dict of directly imported classes."""
    from speechblocks.migration.schema import BLOCK_CLASSES
    from torch_layers.migrated import MIGRATED_BLOCK_CLASSES

    assert set(MIGRATED_BLOCK_CLASSES) == set(tf_layers.checkpoint.MIGRATED_BLOCK_CLASSES) == set(BLOCK_CLASSES)
    assert all(cls is getattr(torch_layers, name) for name, cls in MIGRATED_BLOCK_CLASSES.items())

# -- format version, foreign and damaged files ------------------------------------------------------
@pytest.mark.parametrize("version", [3, 0, "2"])
def test_wrong_format_version(files, tmp_path, version):
    def h5(f):
        f.attrs["format_version"] = version

    def pt(p):
        p["format_version"] = version

    for key, readers, edit in (("model.h5", KERAS_READERS, lambda s, d: _edit_h5(s, d, h5)),
                               ("model.pt", TORCH_READERS, lambda s, d: _edit_pt(s, d, pt))):
        path = edit(files[key], tmp_path / os.path.basename(files[key]))
        for reader in readers.values():
            refused(reader, path, "format version|format_version")


def test_each_format_refused_by_the_other_reader(files):
    refused(tf_layers.checkpoint.load_migrated, files["blocks.pt"], "is a torch file")
    refused(torch_layers.load_migrated, files["blocks.h5"], "is a Keras file")


def test_the_digest_catches_a_changed_tensor_and_an_edited_table(files, tmp_path):
    """A flipped bit inside a tensor's bytes reads back as a different number (HDF5 has no checksum): the file's
    sha256 refuses it. An edit that keeps the structure valid (a config value) is refused the same way."""
    path = _copy(files["model.h5"], tmp_path / "flipped.weights.h5")
    with h5py.File(path, "r") as f:
        offset = f["inputs_embedding"].id.get_offset()
    with open(path, "r+b") as fh:
        fh.seek(offset + 5)
        byte = fh.read(1)
        fh.seek(offset + 5)
        fh.write(bytes([byte[0] ^ 0x10]))
    with h5py.File(path, "r") as f, h5py.File(files["model.h5"], "r") as g:
        assert not np.array_equal(f["inputs_embedding"][()], g["inputs_embedding"][()])  # silently different data
    for reader in KERAS_READERS.values():
        refused(reader, path, "does not match its sha256")

    def retune(f):
        f.attrs["blocks"] = f.attrs["blocks"].replace('"drop_rate": 0.5', '"drop_rate": 0.25')

    edited = _edit_h5(files["blocks.h5"], tmp_path / "retuned.weights.h5", retune, keep_digest=True)
    refused(tf_layers.checkpoint.load_migrated, edited, "does not match its sha256")


def test_the_zip_checksums_catch_a_changed_tensor(files, tmp_path):
    """torch.load does not check the CRC-32 of a zip member: a flipped byte in a tensor loads as another number.
    The readers check every member first."""
    path = _copy(files["model.pt"], tmp_path / "flipped.pt")
    flip_tensor_byte(path)
    a, b = torch.load(path, weights_only=True), torch.load(files["model.pt"], weights_only=True)
    assert any(not torch.equal(a["model_state_dict"][k], b["model_state_dict"][k]) for k in b["model_state_dict"])
    for reader in TORCH_READERS.values():
        refused(reader, path, "does not match its CRC-32")


@pytest.mark.parametrize("key", ["model.h5", "model.pt", "blocks.pt", "blocks.h5"])
def test_truncated_files(files, tmp_path, key):
    data = open(files[key], "rb").read()  # noqa: SIM115
    readers = KERAS_READERS if key.endswith("h5") else TORCH_READERS
    for cut in (8, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}{os.path.splitext(files[key])[1]}"
        path.write_bytes(data[:cut])
        for reader in readers.values():
            refused(reader, str(path), "truncated|damaged|not a readable")


# -- blocks: missing, extra, mis-shaped, wrong dtype, config contradicting the tensors ---------------
H5_BLOCK_CASES = {
    "missing block group": (lambda f: f.__delitem__("postnet_convolutions"), "has no weight group"),
    "missing tensor": (lambda f: f.__delitem__("decoder/decoder_prenet/dense_2/bias"), "tensor 'dense_2/bias' missing"),
    "extra tensor in a block": (lambda f: f.create_dataset("decoder/decoder_prenet/dense_3/bias", data=np.zeros(8)),
                                "unknown tensor 'dense_3/bias'"),
    "tensor outside every block": (lambda f: f.create_dataset("stray/kernel", data=np.zeros(3, np.float32)),
                                   "tensors outside every block.*stray/kernel"),
    "mis-shaped tensor": (lambda f: _replace(f, "decoder/decoder_prenet/dense_1/kernel", np.zeros((10, 9), np.float32)),
                          r"'dense_1/kernel' has shape \[10, 9\], its config says \[10, 8\]"),
    "integer tensor": (lambda f: _replace(f, "decoder/decoder_prenet/dense_1/bias", np.zeros(8, np.int32)),
                       "dtype int32, expected floating point"),
    "string tensor": (lambda f: _replace(f, "decoder/decoder_prenet/dense_1/bias", np.array([b"x"] * 8)),
                      "expected floating point"),
    "config contradicts tensors": (lambda f: f.attrs.__setitem__(
        "blocks", f.attrs["blocks"].replace('"channels": 16', '"channels": 24')), "has shape .* its config says"),
    "huge layer count": (lambda f: f.attrs.__setitem__(
        "blocks", f.attrs["blocks"].replace('"num_layers": 5', '"num_layers": 1000000')), "num_layers is 1000000"),
    "huge size": (lambda f: f.attrs.__setitem__(
        "blocks", f.attrs["blocks"].replace('"channels": 16', '"channels": 1000000000')), "its config says"),
    "unknown class": (lambda f: f.attrs.__setitem__(
        "blocks", f.attrs["blocks"].replace('"Prenet"', '"os.system"')), "unknown class 'os.system'"),
    "unknown config keyword": (lambda f: f.attrs.__setitem__(
        "blocks", f.attrs["blocks"].replace('"layers_sizes"', '"evil": 1, "layers_sizes"')), "does not build a Prenet"),
    "bad config value": (lambda f: f.attrs.__setitem__(
        "blocks", f.attrs["blocks"].replace('"activation": "relu"', '"activation": "__import__"')),
        "does not build a Prenet"),
    "data in another file": (lambda f: _external(f, "decoder/decoder_prenet/dense_1/bias"),
                             "keeps its data outside the file"),
    "table not JSON": (lambda f: f.attrs.__setitem__("blocks", "{not json"), "not valid JSON"),
    "no format tag": (lambda f: f.attrs.__delitem__("speechblocks_format"), "not a migrated Keras file"),
}


def _sd(p, block="decoder/decoder_prenet"):
    return p["state_dicts"][block]


PT_BLOCK_CASES = {
    "missing block": (lambda p: p["state_dicts"].pop("postnet_convolutions"), "has no state dict"),
    "state dicts of unlisted blocks": (lambda p: p["state_dicts"].__setitem__("encoder_LSTM", {}),
                                       "state dicts of blocks its table does not list"),
    "missing key": (lambda p: _sd(p).pop("layers.1.bias"), "missing key 'layers.1.bias'"),
    "extra key": (lambda p: _sd(p).__setitem__("layers.2.bias", torch.zeros(8)), "unexpected key 'layers.2.bias'"),
    "mis-shaped tensor": (lambda p: _sd(p).__setitem__("layers.0.weight", torch.zeros(9, 10)),
                          r"'layers.0.weight' has shape \[9, 10\], expected \[8, 10\]"),
    "integer tensor": (lambda p: _sd(p).__setitem__("layers.0.bias", torch.zeros(8, dtype=torch.int64)),
                       "integer dtype, expected a floating-point tensor"),
    "not a tensor": (lambda p: _sd(p).__setitem__("layers.0.bias", "0" * 8), "holds a str, not a tensor"),
    "state dict not a mapping": (lambda p: p["state_dicts"].__setitem__("decoder/decoder_prenet", [1, 2]),
                                 "not a mapping of names to tensors"),
    "config contradicts tensors": (lambda p: p.__setitem__("blocks", p["blocks"].replace('"channels": 16',
                                                                                         '"channels": 24')),
                                   "does not fit its stored config"),
    "huge size": (lambda p: p.__setitem__("blocks", p["blocks"].replace('"channels": 16', '"channels": 1000000000')),
                  "does not fit its stored config|does not build a Postnet"),
    "huge layer count": (lambda p: p.__setitem__("blocks", p["blocks"].replace('"num_layers": 5',
                                                                               '"num_layers": 1000000')),
                         "num_layers is 1000000"),
    "reserved config key": (lambda p: p.__setitem__("blocks", p["blocks"].replace('"layers_sizes"',
                                                                                  '"device": "cuda", "layers_sizes"')),
                            r"config keys \['device'\] are not allowed"),
    "unknown block path": (lambda p: p.__setitem__("blocks", p["blocks"].replace('"decoder/decoder_prenet"',
                                                                                 '"decoder/evil"')),
                           "unknown block path 'decoder/evil'"),
    "no block table": (lambda p: p.pop("blocks"), "block table is missing"),
    "not the format": (lambda p: p.__setitem__("speechblocks_format", "other"), "not a migrated torch file"),
}


# -- whole models ---------------------------------------------------------------------------------
EMB = "inputs_embedding"
H5_MODEL_CASES = {
    "missing tensor": (lambda f: f.__delitem__("memory_layer/kernel"), "memory_layer/kernel"),
    "extra tensor": (lambda f: f.create_dataset("extra/kernel", data=np.zeros(3, np.float32)), "extra/kernel"),
    "mis-shaped tensor": (lambda f: _replace(f, EMB, np.zeros((66, 15), np.float32)), EMB),
    "integer tensor": (lambda f: _replace(f, EMB, np.zeros((66, 16), np.int64)), "dtype int64"),
    "hparams contradict tensors": (lambda f: f.attrs.__setitem__(
        "model", f.attrs["model"].replace('"postnet_channels": 16', '"postnet_channels": 32')),
        "hparams contradict"),
    "damaged model entry": (lambda f: f.attrs.__setitem__("model", '{"class_name": "os.system"}'),
                            "`model` entry is damaged"),
}


def _msd(p):
    return p["model_state_dict"]


PT_MODEL_CASES = {
    "missing key": (lambda p: _msd(p).pop(next(iter(_msd(p)))), "missing key"),
    "extra key": (lambda p: _msd(p).__setitem__("extra.weight", torch.zeros(2)), "unexpected key 'extra.weight'"),
    "mis-shaped tensor": (lambda p: _msd(p).__setitem__("embedding.weight", torch.zeros(66, 15)),
                          r"'embedding.weight' has shape \[66, 15\], expected \[66, 16\]"),
    "integer tensor": (lambda p: _msd(p).__setitem__("embedding.weight", torch.zeros(66, 16, dtype=torch.int32)),
                       "integer dtype"),
    "hparams contradict tensors": (lambda p: p.__setitem__("model", p["model"].replace('"postnet_channels": 16',
                                                                                        '"postnet_channels": 32')),
                                   "does not fit its stored hparams"),
    "huge hparams": (lambda p: p.__setitem__("model", p["model"].replace('"decoder_lstm_units": 16',
                                                                         '"decoder_lstm_units": 100000000')),
                     "does not fit its stored hparams"),
    "huge layer count": (lambda p: p.__setitem__("model", p["model"].replace('"postnet_num_layers": 5',
                                                                             '"postnet_num_layers": 100000000')),
                         "postnet_num_layers is 100000000"),
    "damaged model entry": (lambda p: p.__setitem__("model", "[1, 2"), "`model` entry is damaged"),
    "no state dict": (lambda p: p.pop("model_state_dict"), "state dict is missing"),
}


GROUPS = {  # cases, file, how it is edited, the readers that must refuse it
    "h5 blocks": (H5_BLOCK_CASES, "blocks.h5", _edit_h5, {"keras": tf_layers.checkpoint.load_migrated}),
    "pt blocks": (PT_BLOCK_CASES, "blocks.pt", _edit_pt, {"torch": torch_layers.load_migrated}),
    "h5 model": (H5_MODEL_CASES, "model.h5", _edit_h5, KERAS_READERS),
    "pt model": (PT_MODEL_CASES, "model.pt", _edit_pt, TORCH_READERS),
}


@pytest.mark.parametrize("group,case", [(g, c) for g, spec in GROUPS.items() for c in sorted(spec[0])])
def test_damaged_file_is_refused(files, tmp_path, group, case):
    cases, key, edit_file, readers = GROUPS[group]
    edit, match = cases[case]
    path = edit_file(files[key], tmp_path / os.path.basename(files[key]), edit)
    for reader in readers.values():
        refused(reader, path, match)


def test_intact_files_still_load_and_agree(files):
    """The checks refuse nothing real: the four files load, the torch blocks equal the Keras blocks' TF1 weights."""
    keras_blocks = tf_layers.checkpoint.load_migrated(files["blocks.h5"])
    torch_blocks = torch_layers.load_migrated(files["blocks.pt"])
    assert sorted(keras_blocks) == sorted(torch_blocks) == ["decoder/decoder_prenet", "postnet_convolutions"]
    for name, block in torch_blocks.items():
        kw, tw = keras_blocks[name].tf1_weights(), block.tf1_weights()
        assert sorted(kw) == sorted(tw)
        for k in kw:
            np.testing.assert_array_equal(kw[k], tw[k])
    from_pt = torch_layers.Tacotron2.from_migrated(files["model.pt"])
    from_h5 = torch_layers.Tacotron2.from_migrated(files["model.h5"])
    for k, v in from_pt.state_dict().items():
        assert torch.equal(v, from_h5.state_dict()[k]), k


def test_a_failed_load_changes_no_existing_model(files, tmp_path):
    """Loading a damaged file's weights into an existing model (the API that allows it, load_tf1_weights) assigns
    nothing; the readers return nothing."""
    from speechblocks.migration.migrated_file import read_keras_file

    model = torch_layers.Tacotron2.from_migrated(files["model.pt"])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    weights = read_keras_file(files["model.h5"]).weights
    weights = {k: (v + 1 if k != "memory_layer/kernel" else np.zeros((3, 3), np.float32)) for k, v in weights.items()}
    with pytest.raises(ValueError, match="memory_layer/kernel"):
        model.load_tf1_weights(weights)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    result = None
    path = _edit_pt(files["model.pt"], tmp_path / "m.pt", PT_MODEL_CASES["mis-shaped tensor"][0])
    with pytest.raises(MigratedFileError):
        result = torch_layers.Tacotron2.from_migrated(path)
    assert result is None


def test_unpicklable_pickle_never_reaches_pickle(tmp_path):
    """Raw-pickle bytes of an object (not a torch file) are refused by the file-kind check before any unpickling."""
    marker = tmp_path / "pwned"
    path = tmp_path / "x.pt"
    path.write_bytes(pickle.dumps(CreatesMarker(str(marker))))
    refused(torch_layers.load_migrated, str(path), "neither HDF5 nor a torch zip")
    assert not marker.exists()
