"""Legacy builder of the CBHG block (``BUILDERS``: name -> build function)."""
from __future__ import annotations

from .tf1_cbhg import cbhg


def build_cbhg(config, inputs, training, options):
    scope = config.get("tf1_scope") or "CBHG"
    out, masks = cbhg(inputs["inputs"], inputs.get("input_lengths"), config, training)
    outputs = {"outputs": out}
    outputs.update({f"mask/{i}": m for i, m in enumerate(masks)})
    return scope, outputs


BUILDERS = {"CBHG": build_cbhg}
