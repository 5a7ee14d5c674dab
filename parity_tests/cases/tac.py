"""Parity of ``TAC`` (FasNet-TAC, seed 004): Keras <-> torch through asteroid's state-dict keys.

There is no TF1 graph for this block (``legacy_specs()`` is empty). Rows: outputs with mixed
``valid_mics``, ``valid_mics=None`` and all-zero ``valid_mics`` (fixed geometry, averaged over mics),
for PReLU + gLN at the default hidden size and ReLU + cLN, plus the torch -> Keras -> torch round trip.
"""
from __future__ import annotations

import numpy as np

from ..report import compare
from ._common import FLOAT32_TOL, randn, to_numpy, torch_tensor

BLOCK = "TAC"
FLOAT64_TOL = 1e-9

# (label, constructor keywords, x shape (batch, mics, features, chunk_size, n_chunks))
CASES = [
    ("prelu gLN hidden 384", dict(input_dim=64, hidden_dim=384), (3, 4, 64, 10, 3)),
    ("prelu gLN small", dict(input_dim=8, hidden_dim=12), (4, 3, 8, 6, 5)),
    ("relu cLN", dict(input_dim=8, hidden_dim=10, activation="relu", norm_type="cLN"), (3, 4, 8, 5, 2)),
    ("B1 1 mic", dict(input_dim=5, hidden_dim=7), (1, 1, 5, 1, 1)),
]


def legacy_specs():
    return []


def _torch(config, seed):
    import torch

    import torch_layers

    torch.manual_seed(seed)
    m = torch_layers.TAC(**config).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith(".1.weight"):
                p.uniform_(0.05, 0.5)
            elif name.startswith("norm."):
                p.normal_(1.0 if name.endswith("gamma") else 0.0, 0.3)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.2)
    return m


def rows(legacy):
    import torch

    import tf_layers

    out = []
    for i, (label, config, shape) in enumerate(CASES):
        tm = _torch(config, i)
        km = tf_layers.TAC(**config)
        km.load_torch_state_dict(tm.state_dict())
        back = _torch(config, 100 + i)
        back.load_state_dict({k: torch_tensor(v) for k, v in km.torch_state_dict().items()})
        x = randn(shape, 30 + i)
        batch, mics = shape[:2]
        mixed = ((np.arange(batch) * 2) % mics + 1).astype(np.int64)
        for tag, vm in (("mixed valid_mics " + str(mixed.tolist()), mixed), ("valid_mics=None", None),
                        ("valid_mics all 0", np.zeros(batch, np.int64))):
            vt = None if vm is None else torch_tensor(vm)
            with torch.no_grad():
                yt = to_numpy(tm(torch_tensor(x), vt))
                yb = to_numpy(back(torch_tensor(x), vt))
            yk = km(x, None if vm is None else vm.astype(np.int32))
            out.append(compare(BLOCK, "Keras<->torch", f"{label}, {tag}: outputs", yk, yt, FLOAT32_TOL))
            if vm is mixed:
                out.append(compare(BLOCK, "torch->Keras->torch", f"{label}, {tag}: outputs", yb, yt, FLOAT32_TOL))

    # float64 mode at the default hidden size: separates maths from float32 noise
    label, config, shape = CASES[0]
    tm = _torch(config, 0).double()
    km = tf_layers.TAC(**config, dtype="float64")
    km.load_torch_state_dict(tm.state_dict())
    x = randn(shape, 30).astype(np.float64)
    vm = np.array([1, 3, 4], np.int64)
    with torch.no_grad():
        yt = to_numpy(tm(torch_tensor(x), torch_tensor(vm)))
    out.append(compare(BLOCK, "Keras<->torch float64", f"{label}, mixed valid_mics [1, 3, 4]: outputs",
                       km(x, vm.astype(np.int32)), yt, FLOAT64_TOL))
    return out
