"""A tiny preprocessed corpus (``train.txt`` + ``mels/`` + ``embeds/`` [+ ``linear/``]) for the feeder tests.

The arrays are kept in memory next to the files, so a test builds its expected batches from them (and from
ids written out by hand), not by reading the files back through the code under test.
"""
from __future__ import annotations

import os

import numpy as np

from speechblocks import tacotron2_hparams

#: lowercase letters: ids 28.. (a = 28 ... z = 53 in the 66-symbol table), then EOS = 1
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def letter_ids(text: str) -> np.ndarray:
    """The ids of a text of lowercase letters, written out from the table (``_`` ``~`` then the 26 capitals before
    ``a``), independently of ``text_to_sequence``."""
    return np.array([28 + LETTERS.index(c) for c in text] + [1], dtype=np.int32)


def tiny_hparams(preset: str, **overrides) -> dict:
    """The preset with tiny sizes: 3 mel channels, speaker embedding 2 (RTVC), 5 linear bins (Rayhane)."""
    hp = dict(tacotron2_hparams(preset), num_mels=3, tacotron_batch_size=2, tacotron_test_size=4)
    if preset == "rtvc":
        hp["speaker_embedding_size"] = 2
    else:
        hp["num_freq"] = 5
    hp.update(overrides)
    return hp


def write_corpus(root, hparams, n: int = 12, seed: int = 0, linear: bool = False) -> dict:
    """Write ``n`` utterances; return ``{"path": train.txt, "mels": [...], "embeds": [...], "linears": [...],
    "ids": [...]}`` indexed by line (0-based)."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, "mels"), exist_ok=True)
    os.makedirs(os.path.join(root, "embeds"), exist_ok=True)
    if linear:
        os.makedirs(os.path.join(root, "linear"), exist_ok=True)
    out = {"path": os.path.join(root, "train.txt"), "mels": [], "embeds": [], "linears": [], "ids": []}
    lines = []
    for i in range(n):
        frames = int(rng.integers(1, 9))
        text = "".join(rng.choice(list(LETTERS), size=int(rng.integers(1, 6))))
        mel = rng.uniform(-4, 4, size=(frames, hparams["num_mels"])).astype(np.float32)
        np.save(os.path.join(root, "mels", f"mel-{i}.npy"), mel)
        third = f"embed-{i}.npy"
        embed = None
        if hparams.get("speaker_embedding_size"):
            embed = rng.normal(size=hparams["speaker_embedding_size"]).astype(np.float32)
            np.save(os.path.join(root, "embeds", third), embed)
        spec = None
        if linear:
            third = f"linear-{i}.npy"
            spec = rng.uniform(-4, 4, size=(frames, hparams["num_freq"])).astype(np.float32)
            np.save(os.path.join(root, "linear", third), spec)
        lines.append(f"audio-{i}.npy|mel-{i}.npy|{third}|{frames * 200}|{frames}|{text}")
        out["mels"].append(mel)
        out["embeds"].append(embed)
        out["linears"].append(spec)
        out["ids"].append(letter_ids(text))
    with open(out["path"], "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return out
