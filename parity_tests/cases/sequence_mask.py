"""Parity of ``sequence_mask``: TF1 graph (``tf.sequence_mask`` over the length rounded up to a multiple of
``r``) -> Keras / torch, Keras <-> torch, for int32 and int64 lengths."""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import compare
from ._common import to_numpy, torch_tensor

BLOCK = "sequence_mask"
TOL = 1e-6  # 0/1 values: any real difference is 1; shape differences fail the row

# (label, lengths, r, expand)
CASES = [
    ("r2 lengths not multiple of r", [5, 3, 2], 2, True),
    ("r3 length equal to padded", [9, 4, 7], 3, False),
    ("r3 longest length 1", [1, 1, 0], 3, True),
    ("r1", [7, 2, 5, 6], 1, False),
    ("r5 batch 1", [4], 5, True),
    ("r2 all lengths 0", [0, 0], 2, False),
]


def legacy_specs():
    return [LegacySpec(BLOCK, {"r": r, "expand": expand}, {"lengths": np.asarray(lengths, np.int32)}, scope="", seed=i)
            for i, (_, lengths, r, expand) in enumerate(CASES)]


def rows(legacy):
    import torch

    import tf_layers
    import torch_layers

    out = []
    for (label, lengths, r, expand), result in zip(CASES, legacy):
        ref = result.outputs["mask"]
        for dtype in (np.int32, np.int64):
            lens = np.asarray(lengths, dtype)
            name = f"{label}: mask ({np.dtype(dtype).name} lengths)"
            km = np.asarray(tf_layers.sequence_mask(lens, r, expand=expand))
            tm = to_numpy(torch_layers.sequence_mask(torch_tensor(lens), r, expand=expand))
            out.append(compare(BLOCK, "TF1->Keras", name, km, ref, TOL))
            out.append(compare(BLOCK, "TF1->torch", name, tm, ref, TOL))
            out.append(compare(BLOCK, "Keras<->torch", name, tm, km, TOL))
        scripted = torch.jit.script(torch_layers.sequence_mask)
        out.append(compare(BLOCK, "TF1->torch script", f"{label}: mask",
                           to_numpy(scripted(torch.tensor(lengths), r, expand)), ref, TOL))
    return out
