"""keithito's ``add_optimizer`` in numpy (float32, TF1's kernels), shared by both frameworks' Tacotron-1 trainers,
and the optimizer state of a TF1 checkpoint or a run's sidecar.

One update, as the graph's ``optimize`` op runs it:

* ``lr = learning_rate(global_step, hp)`` at the global step before the update (keithito's warm-up or mimic2's
  ``exponential_decay``; computed in float64, applied as float32);
* ``tf.clip_by_global_norm(gradients, 1.0)``: ``norm = sqrt(sum of squares)``, every gradient times
  ``min(1 / norm, 1)``. The embedding's gradient is TF1's ``IndexedSlices`` (``embedding_lookup``): its part of the
  norm is the sum of squares of the per-position rows (``d loss / d embedded``, padding positions included), not of
  their per-symbol sums;
* TF1 ``AdamOptimizer(lr, beta1, beta2, epsilon=1e-8)``: ``alpha = lr * sqrt(1 - beta2_power) / (1 -
  beta1_power)``; dense variables by the ``ApplyAdam`` kernel (``m += (g - m) * (1 - beta1)``, ``v += (g^2 - v) *
  (1 - beta2)``, ``var -= m * alpha / (sqrt(v) + eps)``); the embedding by ``_apply_sparse`` (duplicate rows summed,
  ``m = m * beta1 + g * (1 - beta1)``, the same for ``v``; every row decays, as in TF1); then ``beta1_power *=
  beta1``, ``beta2_power *= beta2`` (float32 variables, kept as they are: they underflow to 0 after ~1000 steps
  in TF1 too).

Slots are kept in TF1 layout by TF1 name relative to ``model/inference`` (``<name>/Adam`` = m, ``<name>/Adam_1`` =
v), as a TF1 checkpoint and the run's ``.state.npz`` sidecar store them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ..errors import InputError
from ..tacotron1_hparams import learning_rate
from .optimizer_slots import ADAM_SLOTS, slot_name

__all__ = ["EPSILON", "SPARSE_VARIABLES", "AdamState", "apply_tf1_adam", "clip_by_global_norm", "fresh_state",
           "read_tf1_adam_state", "state_arrays", "state_from_arrays", "tf1_update"]

#: TF1 ``AdamOptimizer``'s default epsilon (keithito and mimic2 keep it)
EPSILON = 1e-8
#: variables whose TF1 gradient is ``IndexedSlices`` (``tf.nn.embedding_lookup``)
SPARSE_VARIABLES = ("embedding",)
#: where TF1 puts a slot: keithito creates the optimizer in ``variable_scope('model/optimizer')`` and TF1's
#: ``slot_creator`` opens the slot's scope inside it (``model/optimizer/model/inference/<var>/Adam``; TF's own
#: ``Saver`` restores these names in tests/test_train_tacotron1.py); the first prefix holding every slot is used
_SLOT_PREFIXES = ("model/optimizer/model/inference/", "model/inference/")


@dataclasses.dataclass
class AdamState:
    """The optimizer's state: the update count ``global_step``, the float32 ``beta1_power``/``beta2_power`` and
    the slots ``{name: (m, v)}`` (float32, TF1 layout)."""

    global_step: int
    beta1_power: np.float32
    beta2_power: np.float32
    slots: dict


def fresh_state(params: Mapping[str, np.ndarray], hp, global_step: int = 0) -> AdamState:
    """A new Adam (zero slots, ``beta_power = beta``) at ``global_step``."""
    slots = {k: (np.zeros_like(v, np.float32), np.zeros_like(v, np.float32)) for k, v in params.items()}
    return AdamState(int(global_step), np.float32(hp.adam_beta1), np.float32(hp.adam_beta2), slots)


def clip_by_global_norm(grads: Mapping[str, np.ndarray], sparse_rows: Mapping[str, np.ndarray],
                        clip_norm: float = 1.0) -> tuple[dict, float]:
    """``tf.clip_by_global_norm``: ``(clipped, global_norm)``; ``sparse_rows`` replaces a variable's dense
    gradient in the norm by its ``IndexedSlices`` rows."""
    total = 0.0
    for name, g in grads.items():
        rows = sparse_rows.get(name, g)
        total += float(np.sum(np.square(rows, dtype=np.float64)))
    norm, clip = np.float32(np.sqrt(total)), np.float32(clip_norm)
    inverse = np.float32(1.0) / norm if norm > 0 else np.float32(np.inf)
    scale = np.float32(clip * min(inverse, np.float32(1.0) / clip)) if np.isfinite(norm) else np.float32(np.nan)
    return {k: (np.asarray(g, np.float32) * scale).astype(np.float32) for k, g in grads.items()}, float(norm)


def apply_tf1_adam(params: dict, grads: Mapping[str, np.ndarray], state: AdamState, lr: float, hp) -> None:
    """One TF1 Adam update of ``params`` (``{name: float32 TF1-layout array}``, replaced in the dict) and
    ``state`` (slots, beta powers; ``global_step`` is the caller's)."""
    one = np.float32(1.0)
    b1, b2, eps = np.float32(hp.adam_beta1), np.float32(hp.adam_beta2), np.float32(EPSILON)
    alpha = np.float32(lr) * np.sqrt(one - state.beta2_power) / (one - state.beta1_power)
    for name, g in grads.items():
        m, v = state.slots[name]
        g = np.asarray(g, np.float32)
        if name in SPARSE_VARIABLES:
            m = m * b1 + g * (one - b1)
            v = v * b2 + g * g * (one - b2)
        else:
            m = m + (g - m) * (one - b1)
            v = v + (g * g - v) * (one - b2)
        state.slots[name] = (m, v)
        params[name] = params[name] - (m * alpha) / (np.sqrt(v) + eps)
    state.beta1_power = np.float32(state.beta1_power * b1)
    state.beta2_power = np.float32(state.beta2_power * b2)


def tf1_update(params: dict, grads: Mapping[str, np.ndarray], sparse_rows: Mapping[str, np.ndarray],
               state: AdamState, hp) -> tuple[float, float]:
    """The whole ``optimize`` op: clip, Adam at ``learning_rate(global_step)``, ``global_step += 1``.
    Returns ``(lr, global_norm)``."""
    lr = learning_rate(state.global_step, hp)
    clipped, norm = clip_by_global_norm(grads, sparse_rows)
    apply_tf1_adam(params, clipped, state, lr, hp)
    state.global_step += 1
    return lr, norm


def state_arrays(state: AdamState) -> dict[str, np.ndarray]:
    """The sidecar's arrays: ``<name>/Adam``, ``<name>/Adam_1``, ``beta1_power``, ``beta2_power``."""
    out = {slot_name(k, s): np.asarray(a, np.float32) for k, pair in state.slots.items()
           for s, a in zip(ADAM_SLOTS, pair)}
    out["beta1_power"] = np.asarray(state.beta1_power, np.float32)
    out["beta2_power"] = np.asarray(state.beta2_power, np.float32)
    return out


def _scalar(arrays: Mapping, name: str, source: str) -> np.float32:
    value = np.asarray(arrays[name])
    if value.size != 1 or not np.isfinite(value).all():
        raise InputError(f"{source}: {name} is not a finite scalar")
    return np.float32(value.reshape(()))


def state_from_arrays(arrays: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], global_step: int,
                      source: str) -> AdamState:
    """:class:`AdamState` from slots by :func:`~.optimizer_slots.slot_name` plus ``beta1_power``/``beta2_power``,
    checked against the variables' shapes.

    Raises:
        InputError: a missing or mis-shaped slot, a missing beta power (one line naming ``source``).
    """
    slots = {}
    for name, p in params.items():
        pair = []
        for s in ADAM_SLOTS:
            key = slot_name(name, s)
            if key not in arrays:
                raise InputError(f"{source}: no Adam slot {key!r} (slots of some variables only)")
            a = np.asarray(arrays[key], np.float32)
            if a.shape != p.shape:
                raise InputError(f"{source}: slot {key!r} has shape {list(a.shape)}, the variable {list(p.shape)}")
            pair.append(a.copy())
        slots[name] = tuple(pair)
    for name in ("beta1_power", "beta2_power"):
        if name not in arrays:
            raise InputError(f"{source}: Adam slots without {name}")
    return AdamState(int(global_step), _scalar(arrays, "beta1_power", source), _scalar(arrays, "beta2_power", source),
                     slots)


def _find_power(shapes: Mapping, name: str) -> str | None:
    preferred = f"model/optimizer/{name}"
    if preferred in shapes:
        return preferred
    found = sorted(n for n in shapes if n == name or n.endswith("/" + name))
    return found[0] if found else None


def read_tf1_adam_state(path: str, params: Mapping[str, np.ndarray], renamed: Mapping[str, str], hp) -> AdamState:
    """The optimizer state of a keithito/mimic2 checkpoint: its ``global_step`` (0 when absent) and its Adam slots
    and beta powers, or a fresh Adam at that step when it holds no slot (the migrated files and the legacy
    reference's checkpoints hold none).

    Args:
        path: the TF1 checkpoint.
        params: the trainable variables ``{name relative to model/inference: TF1-layout array}`` (for the shapes).
        renamed: ``{name: checkpoint spelling}`` of TF < 1.2 names (``weights``/``biases``).

    Raises:
        InputError: slots of some variables only, mis-shaped ones, slots without beta powers.
    """
    from ..tf1_checkpoint_reader import TF1CheckpointReader

    reader = TF1CheckpointReader(path)
    shapes = reader.shapes()
    step_names = [n for n in shapes if n == "global_step" or n.endswith("/global_step")]
    step = int(np.asarray(reader.read({"s": sorted(step_names)[0]})["s"]).reshape(())) if step_names else 0
    source = f"checkpoint {path!r}"
    for prefix in _SLOT_PREFIXES:
        wanted = {slot_name(k, s): prefix + slot_name(renamed.get(k, k), s) for k in params for s in ADAM_SLOTS}
        present = [w for w in wanted.values() if w in shapes]
        if not present:
            continue
        if len(present) < len(wanted):
            missing = next(w for w in wanted.values() if w not in shapes)
            raise InputError(f"{source}: Adam slots of some variables only (no {missing!r})")
        powers = {n: _find_power(shapes, n) for n in ("beta1_power", "beta2_power")}
        wanted.update({k: v for k, v in powers.items() if v is not None})
        return state_from_arrays(reader.read(wanted), params, step, source)
    return fresh_state(params, hp, step)
