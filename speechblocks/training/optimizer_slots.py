"""Adam's slots in TF1's names and layout, framework-free (numpy): what a run's checkpoint stores and what a TF1
checkpoint holds.

TF1's ``AdamOptimizer`` keeps two slots per trainable variable, ``<name>/Adam`` (the first moment ``m``) and
``<name>/Adam_1`` (the second moment ``v``), and the update count as ``beta1_power = beta1 ** (updates + 1)``.
A trainer hands its moments over as ``{TF1 name: (m, v)}`` numpy arrays in its own layout with its variables' TF1
bindings (anything with ``to_tf1`` / ``from_tf1``: the ``TF1Variable`` of ``tf_layers.tf1_exchange`` or
``torch_layers.tf1_exchange``, ``None`` for an array already in TF1 layout); :func:`tf1_slots` and
:func:`framework_moments` convert them, :func:`read_tf1_adam_state` reads a TF1 checkpoint's. The run's sidecar
(``.state.npz``) stores the TF1 slots as they are (:func:`speechblocks.training.checkpoint_files.write_state`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["ADAM_SLOTS", "MODEL_SCOPE", "framework_moments", "read_tf1_adam_state", "slot_name", "tf1_slots"]

#: TF1's slot names of ``m`` and ``v``
ADAM_SLOTS = ("Adam", "Adam_1")
#: the scope of the model's variables in the originals' checkpoints
MODEL_SCOPE = "Tacotron_model/inference/"


def slot_name(variable: str, slot: str) -> str:
    """``"<variable>/<slot>"``: a slot's TF1 name (``slot`` one of :data:`ADAM_SLOTS`)."""
    return f"{variable}/{slot}"


def tf1_slots(moments: Mapping[str, tuple[np.ndarray, np.ndarray]], bindings: Mapping) -> dict[str, np.ndarray]:
    """``{"<name>/Adam": m, "<name>/Adam_1": v}`` in TF1 layout from a trainer's ``{name: (m, v)}`` (its layout).

    Args:
        moments: the moments by TF1 variable name (numpy, the framework's layout).
        bindings: the variables' TF1 bindings by name (``.to_tf1``: the layout conversion, or ``None``).
    """
    out = {}
    for name, pair in moments.items():
        to_tf1 = bindings[name].to_tf1
        for slot, value in zip(ADAM_SLOTS, pair):
            value = np.array(value)  # a copy: the caller's buffers stay the caller's
            out[slot_name(name, slot)] = to_tf1(value) if to_tf1 is not None else value
    return out


def framework_moments(slots: Mapping[str, np.ndarray], bindings: Mapping, shapes: Mapping[str, tuple]
                      ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A trainer's ``{name: (m, v)}`` (float32, its layout) from TF1 slots; ``{}`` when ``slots`` is empty.

    Args:
        slots: ``{"<name>/Adam": m, "<name>/Adam_1": v}`` in TF1 layout (a run's sidecar or a TF1 checkpoint).
        bindings: the trainable variables' TF1 bindings by name (``.from_tf1``: the layout conversion, or
            ``None``).
        shapes: each variable's shape in the framework.

    Raises:
        ValueError: slots of some variables only, or of the wrong shape.
    """
    if not slots:
        return {}
    missing = [n for n in bindings if any(slot_name(n, s) not in slots for s in ADAM_SLOTS)]
    if missing:
        raise ValueError(f"optimizer state: no Adam slots for {len(missing)} variable(s), e.g. {missing[0]!r}.")
    out = {}
    for name, binding in bindings.items():
        pair = []
        for slot in ADAM_SLOTS:
            value = np.asarray(slots[slot_name(name, slot)], dtype=np.float32)
            value = binding.from_tf1(value) if binding.from_tf1 is not None else value
            if tuple(value.shape) != tuple(shapes[name]):
                raise ValueError(f"optimizer state: slot {slot_name(name, slot)} has shape {list(value.shape)}, the "
                                 f"variable {list(shapes[name])}.")
            pair.append(value)
        out[name] = (pair[0], pair[1])
    return out


def read_tf1_adam_state(path: str, names: list[str], beta1: float) -> tuple[int, tuple | None]:
    """``global_step`` of a TF1 checkpoint and, when it holds Adam slots of every variable of ``names`` (relative to
    :data:`MODEL_SCOPE`), ``(updates, slots)``: the update count from ``beta1_power = beta1 ** (updates + 1)`` and
    the slots by :func:`slot_name` (TF1 layout)."""
    from ..tf1_checkpoint_reader import TF1CheckpointReader

    reader = TF1CheckpointReader(path)
    shapes = reader.shapes()
    step = 0
    steps = [n for n in shapes if n == "global_step" or n.endswith("/global_step")]
    if steps:
        step = int(np.asarray(reader.read({"s": steps[0]})["s"]).reshape(()))
    wanted = {}
    for name in names:
        for slot in ADAM_SLOTS:
            full = MODEL_SCOPE + slot_name(name, slot)
            if full not in shapes:
                return step, None
            wanted[slot_name(name, slot)] = full
    powers = [n for n in shapes if n.endswith("beta1_power")]
    if not powers:
        return step, None
    slots = reader.read(wanted, allow_nonfinite=False)
    beta1_power = float(np.asarray(reader.read({"p": powers[0]})["p"]).reshape(()))
    updates = max(int(round(math.log(beta1_power) / math.log(beta1))) - 1, 0) if 0 < beta1 < 1 else step
    return step, (updates, slots)
