"""Subprocess side of ``tests/test_fuzz_migrated_files.py``: reads every mutated migrated file of a manifest with
the library's readers and prints one JSON line per case (``{"start": i}`` before it, so that a crash or a hang is
pinned to its case). Imports torch, h5py and the framework-free core only (no TensorFlow: seconds, not tens).

Usage: ``python -m tests.helpers.fuzz_reader MANIFEST.json``; the manifest is ``{"sources": {kind: path},
"cases": [{"path", "kind"}]}`` with kinds ``model.pt``, ``blocks.pt``, ``model.h5``, ``blocks.h5``.
"""
from __future__ import annotations

import hashlib
import json
import sys

import numpy as np


def _fingerprint(arrays: dict, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def read(kind: str, path: str) -> str:
    """The fingerprint of what the library reads from ``path`` (raises what the reader raises)."""
    import torch_layers
    from speechblocks.migration.migrated_file import read_keras_file

    if kind in ("model.pt", "model.h5"):
        model = torch_layers.Tacotron2.from_migrated(path)
        return _fingerprint({k: v.numpy() for k, v in model.state_dict().items()})
    if kind == "blocks.pt":
        blocks = torch_layers.load_migrated(path)
        return _fingerprint({f"{b}/{k}": v.numpy() for b, m in blocks.items() for k, v in m.state_dict().items()},
                            json.dumps({b: repr(m) for b, m in blocks.items()}, sort_keys=True))
    mf = read_keras_file(path)  # what tf_layers.checkpoint.load_migrated runs before it builds a layer
    mf.check_blocks(path)
    return _fingerprint(mf.weights, json.dumps(mf.table, sort_keys=True))


def main(manifest_path: str) -> None:
    with open(manifest_path) as f:
        manifest = json.load(f)
    refs = {kind: read(kind, path) for kind, path in manifest["sources"].items()}
    print(json.dumps({"references": sorted(refs)}), flush=True)
    for i, case in enumerate(manifest["cases"]):
        print(json.dumps({"start": i}), flush=True)
        try:
            same = read(case["kind"], case["path"]) == refs[case["kind"]]
            out = {"i": i, "outcome": "identical" if same else "DIFFERENT"}
        except Exception as e:  # noqa: BLE001 -- every exception is reported to the test, which judges it
            from speechblocks.migration import MigratedFileError

            out = {"i": i, "outcome": "error", "type": type(e).__name__, "message": str(e),
                   "documented": isinstance(e, MigratedFileError)}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
