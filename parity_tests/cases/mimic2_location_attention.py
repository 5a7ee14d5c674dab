"""Parity of mimic2's ``LocationSensitiveAttention`` over several decoder steps: TF1 -> Keras / torch,
Keras <-> torch.

As :mod:`.bahdanau_attention` (``memory_layer`` at the model scope, the step's variables in
``decoder/location_sensitive_attention``, a ``while_loop`` from zero alignments), plus the location features: a
``'same'`` conv (no bias) of the PREVIOUS step's alignments (not their running sum) and ``location_layer``. mimic2
sizes (memory 256, units 256, 20 filters x 7; no memory mask: the padding is attended, shown by the padded-positions
rows), and a small case with an even kernel (TF's 'same' pads one zero fewer before than after) and ``mask_memory``.
"""
from __future__ import annotations

from .bahdanau_attention import case_rows, make_specs

BLOCK = "Mimic2LocationAttention"
STEP_SCOPE = "decoder/location_sensitive_attention"

# (label, config, batch, memory time, memory size, query size, steps, lengths)
CASES = [
    ("mimic2 256-d memory/query/units, 20 filters x 7, 10 steps, padding attended",
     dict(units=256, filters=20, kernel_size=7), 2, 24, 256, 256, 10, [24, 13]),
    ("even kernel 4, 3 filters, mask_memory, 7 steps", dict(units=8, filters=3, kernel_size=4, mask_memory=True),
     3, 9, 6, 5, 7, [9, 5, 2]),
]


def legacy_specs():
    return make_specs(BLOCK, CASES, 970)


def rows(legacy):
    import tf_layers
    import torch_layers

    return case_rows(BLOCK, CASES, legacy, STEP_SCOPE, tf_layers.Mimic2LocationAttention,
                     torch_layers.Mimic2LocationAttention,
                     lambda config: {k: config[k] for k in ("filters", "kernel_size", "mask_memory") if k in config})
