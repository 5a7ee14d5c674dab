"""Run by ``tests/test_fuzz_checkpoints.py`` in a subprocess (a C++ abort of TensorFlow's reader must not kill the
pytest worker): mutates a real TF1 checkpoint case by case -- truncation at a random offset or 1-3 flipped random
bytes of its ``.index`` or ``.data`` file -- reads it with ``tf_layers.checkpoint.read_tf1_checkpoint`` and prints
one JSON line per case (flushed, so the parent knows the last case even if this process dies).

usage: python -m tests.helpers.fuzz_checkpoint_runner PREFIX REFERENCE.npz SEED CASES
"""
from __future__ import annotations

import json
import sys

import numpy as np

KINDS = ("truncate index", "truncate data", "flip index", "flip data")


def mutations(sizes: dict[str, int], seed: int, n: int):
    """``[(kind, file suffix, description, function(bytes) -> bytes)]``, seeded, ``n`` of them, kinds in turn."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        suffix = ".index" if kind.endswith("index") else ".data-00000-of-00001"
        size = sizes[suffix]
        if kind.startswith("truncate"):
            at = int(rng.integers(0, size))
            out.append((kind, suffix, f"to {at} of {size} bytes", lambda b, at=at: b[:at]))
        else:
            where = sorted(int(x) for x in rng.choice(size, size=int(rng.integers(1, 4)), replace=False))
            xors = [int(x) for x in rng.integers(1, 256, size=len(where))]

            def flip(b, where=where, xors=xors):
                b = bytearray(b)
                for at, x in zip(where, xors):
                    b[at] ^= x
                return bytes(b)

            out.append((kind, suffix, f"bytes {where} xor {xors}", flip))
    return out


def main(prefix: str, reference_path: str, seed: int, n: int) -> None:
    from speechblocks.tf1_checkpoint_file import CheckpointError
    from tf_layers.checkpoint import read_tf1_checkpoint

    reference = dict(np.load(reference_path))
    originals = {s: open(prefix + s, "rb").read() for s in (".index", ".data-00000-of-00001")}
    for i, (kind, suffix, detail, mutate) in enumerate(mutations({s: len(b) for s, b in originals.items()}, seed, n)):
        with open(prefix + suffix, "wb") as f:
            f.write(mutate(originals[suffix]))
        record = {"case": i, "kind": kind, "detail": detail}
        try:
            got = read_tf1_checkpoint(prefix, "Tacotron_model/inference")
            same = sorted(got) == sorted(reference) and all(np.array_equal(got[k], reference[k]) for k in reference)
            record["result"] = "same" if same else "different"
        except CheckpointError as e:
            record.update(result="error", type=type(e).__name__, message=str(e))
        except Exception as e:  # anything else is a defect the parent reports
            record.update(result="unexpected", type=type(e).__name__, message=str(e)[:500])
        with open(prefix + suffix, "wb") as f:
            f.write(originals[suffix])
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
