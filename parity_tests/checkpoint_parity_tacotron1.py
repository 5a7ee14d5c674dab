"""Parity of a user's own keithito/tacotron or mimic2 checkpoint: the TF1 reference graph, Keras and torch on its
real weights.

``speechblocks parity --checkpoint CKPT`` runs :func:`run_tacotron1_checkpoint_parity` when the checkpoint holds a
Tacotron-1 model (``model/inference/``): it reads every variable (layout and sizes from the shapes, as
``Tacotron1.from_tf1_checkpoint`` does), then runs three implementations on exactly those weights -- the TF1 legacy
reference (``parity_tests/legacy/tf1_tacotron1.py`` in its ``TF_USE_LEGACY_KERAS=1`` subprocess; the weights reach
it as one ``.npz`` file that must fill every variable of the graph), ``tf_layers.Tacotron1`` and
``torch_layers.Tacotron1`` -- on seeded random text of the model's symbols (``batch`` rows, the later ones shorter:
the original attention has no memory mask, so the padding is read, identically, by all three):

* teacher forced, inference mode, over ``steps`` decoder steps (``steps * r`` random target frames);
* free running for exactly ``steps`` steps (``max_iters=steps``; a row checks that all three ran as many steps --
  the original stop, a decoder step of exact zeros, does not fire on real weights);
* teacher forced in training mode (batch statistics) with the pre-net keep-masks injected, and the original loss
  (``mel_loss``, ``linear_loss``, ``loss``) on random linear targets.

Rows ``TF1->Keras``, ``TF1->torch`` and ``Keras<->torch`` (only the last with ``skip_legacy``) for ``mel_outputs``,
``linear_outputs``, ``alignments`` and the losses, at the whole-model tolerance (1e-4, docs/ARCHITECTURE.md).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time
from collections.abc import Callable, Mapping

import numpy as np

from .cases._common import LONG_RECURRENCE_TOL, to_numpy, torch_tensor
from .report import Row, compare

__all__ = ["run_tacotron1_checkpoint_parity", "WHOLE_MODEL"]

MODEL_SCOPE = "model/inference"
WHOLE_MODEL = "Tacotron1"
T_IN = 16  # symbols of the first row (the others are shorter)
OUTPUTS = ("mel_outputs", "linear_outputs", "alignments")
LOSSES = ("mel_loss", "linear_loss", "loss")
PRENET_KEEP = 0.5


@dataclasses.dataclass
class _Run:
    """One whole-model run: ``mode`` ``"teacher"``, ``"free"`` or ``"train"``; ``inputs`` in the legacy spec's
    names."""

    mode: str
    label: str
    inputs: dict


def _runs(hp, batch: int, steps: int, seed: int) -> list[_Run]:
    g = np.random.default_rng(seed + 1)
    lens = np.maximum(T_IN - 5 * np.arange(batch), 2).astype(np.int32)
    ids = g.integers(2, hp.n_symbols, (batch, T_IN)).astype(np.int32)
    ids[np.arange(T_IN)[None, :] >= lens[:, None]] = 0  # the pad id past each length
    ids[np.arange(batch), lens - 1] = 1  # the end-of-sequence id
    base = {"inputs": ids, "input_lengths": lens}
    frames = steps * hp.outputs_per_step
    mel = g.uniform(0.0, 1.0, (batch, frames, hp.num_mels)).astype(np.float32)
    teacher = _Run("teacher", "teacher forced (inference)", dict(base, mel_targets=mel))
    free = _Run("free", f"free running ({steps} steps)", dict(base))
    train = dict(base, mel_targets=mel, linear_targets=g.uniform(0.0, 1.0, (batch, frames, hp.num_freq)).astype(
        np.float32))
    for i, size in enumerate(hp.prenet_depths):
        train[f"noise/encoder_prenet/{i}"] = (g.random((batch, T_IN, size)) < PRENET_KEEP).astype(np.float32)
        train[f"noise/decoder_prenet/{i}"] = (g.random((batch, steps, size)) < PRENET_KEEP).astype(np.float32)
    return [teacher, free, _Run("train", "teacher forced (training, pre-net masks), loss", train)]


def _noise_masks(hp, ins, convert=lambda a: a) -> dict | None:
    if "noise/encoder_prenet/0" not in ins:
        return None
    return {key: [convert(ins[f"noise/{key}/{i}"]) for i in range(len(hp.prenet_depths))]
            for key in ("encoder_prenet", "decoder_prenet")}


def _keras_run(model, hp, run: _Run, steps: int) -> dict:
    ins = run.inputs
    training = run.mode == "train"
    out = model(ins["inputs"], ins["input_lengths"], mel_targets=ins.get("mel_targets"), max_iters=steps,
                noise_masks=_noise_masks(hp, ins), training=training)
    res = {k: np.asarray(out[k]) for k in OUTPUTS}
    if training:
        losses = model.loss(out, ins["mel_targets"], ins["linear_targets"])
        res.update({f"loss/{k}": np.asarray(losses[k]) for k in LOSSES})
    return res


def _torch_run(model, hp, run: _Run, steps: int) -> dict:
    import torch

    ins = run.inputs
    training = run.mode == "train"
    model.train(training)
    try:
        with torch.no_grad():
            mel = None if ins.get("mel_targets") is None else torch_tensor(ins["mel_targets"])
            out = model(torch_tensor(ins["inputs"].astype(np.int64)),
                        input_lengths=torch_tensor(ins["input_lengths"].astype(np.int64)), mel_targets=mel,
                        max_iters=steps, noise_masks=_noise_masks(hp, ins, torch_tensor))
            res = {k: to_numpy(out[k]) for k in OUTPUTS}
            if training:
                losses = model.loss(out, mel, torch_tensor(ins["linear_targets"]))
                res.update({f"loss/{k}": to_numpy(losses[k]) for k in LOSSES})
    finally:
        model.eval()
    return res


def _read_model(checkpoint, hparams, overrides, say) -> tuple[dict, object, str]:
    """``(weights, hparams, layout)`` of the checkpoint's Tacotron-1, read in numpy (TF < 1.2 names mapped)."""
    from speechblocks.migration.tacotron1 import tacotron1_checkpoint_hparams
    from speechblocks.tacotron1_schema import find_tacotron1
    from speechblocks.tf1_checkpoint import read_tf1_weights

    source = f"TF1 checkpoint {os.fspath(checkpoint)!r}"
    say(f"reading {os.fspath(checkpoint)}")
    raw = read_tf1_weights(checkpoint, MODEL_SCOPE)
    found = find_tacotron1({f"{MODEL_SCOPE}/{k}": tuple(np.shape(v)) for k, v in raw.items()}, source)
    if found is None:
        raise ValueError(f"{source} holds no variable under '{MODEL_SCOPE}/'.")
    hp = tacotron1_checkpoint_hparams(found, hparams, overrides, source)
    weights = {k: raw[found.renamed.get(k, k)] for k in found.shapes}
    say(f"model: {len(weights)} variables, {found.parameters() / 1e6:.1f}M parameters; {found.describe()}, "
        f"{hp.attention} attention, r={hp.outputs_per_step}")
    return weights, hp, found.layout


def _legacy_specs(hp, layout: str, runs: list[_Run], steps: int, weights_file: str, seed: int):
    from .reference import LegacySpec

    specs = []
    for run in runs:
        options = {"assign_file": weights_file, "assign_file_strict": True, "save_checkpoint": False,
                   "max_iters": steps, "loss": run.mode == "train", "gradients": False}
        specs.append(LegacySpec("Tacotron1", {"hparams": hp.to_dict(), "layout": layout}, run.inputs,
                                scope=MODEL_SCOPE, training=run.mode == "train", seed=seed, options=options))
    return specs


def _model_rows(runs: list[_Run], outputs: dict, legacy: list | None, steps: int) -> list[Row]:
    rows = []
    for j, run in enumerate(runs):
        keras, torch_ = outputs["Keras"][j], outputs["torch"][j]
        pairs = ([("TF1->Keras", keras, legacy[j]), ("TF1->torch", torch_, legacy[j])] if legacy is not None else [])
        pairs.append(("Keras<->torch", torch_, keras))
        if run.mode == "free":
            for comparison, got, ref in pairs:
                n_got, n_ref = got["alignments"].shape[-1], ref["alignments"].shape[-1]
                rows.append(Row(WHOLE_MODEL, comparison, f"{run.label}: decoder steps run", float(abs(n_got - n_ref)),
                                0.0, True, f"{n_got} vs {n_ref} decoder steps (max_iters={steps})"))
        keys = OUTPUTS + (tuple(f"loss/{k}" for k in LOSSES) if run.mode == "train" else ())
        for key in keys:
            for comparison, got, ref in pairs:
                rows.append(compare(WHOLE_MODEL, comparison, f"{run.label}: {key}", got.get(key, np.zeros(0)),
                                    ref.get(key, np.zeros(0)), LONG_RECURRENCE_TOL))
    return rows


def _framework_outputs(hp, layout, weights, runs, steps, say, perturb) -> dict:
    import tf_layers
    import torch_layers

    outputs = {}
    for framework in ("Keras", "torch"):
        w = dict(weights) if perturb is None else perturb(framework, dict(weights))
        say(f"{framework}: building the model and loading the checkpoint's weights")
        model = (tf_layers.Tacotron1(hp, layout) if framework == "Keras"
                 else torch_layers.Tacotron1(hp, layout).eval())
        model.load_tf1_weights(w)
        run_fn = _keras_run if framework == "Keras" else _torch_run
        outputs[framework] = []
        for run in runs:
            t0 = time.perf_counter()
            outputs[framework].append(run_fn(model, hp, run, steps))
            say(f"{framework}: {run.label} in {time.perf_counter() - t0:.1f} s")
    return outputs


def prefetch_tacotron1_legacy(checkpoint, *, steps: int = 20, batch: int = 2, seed: int = 0,
                              run_legacy: Callable | None = None) -> None:
    """Runs the TF1 reference graphs of ``run_tacotron1_checkpoint_parity(checkpoint, steps=, batch=, seed=)`` now
    (hparams and layout read from the checkpoint), so that the later call finds them memoised in this process
    (``parity_tests.reference.run_legacy``: the specs are keyed by content, the weights file named by its content).
    ``make demo`` calls it in a background thread while the main thread does other work, with a ``run_legacy`` of
    its own legacy subprocess (default: :func:`parity_tests.reference.run_legacy`; either fills the same memo)."""
    from .checkpoint_parity import _weights_file

    if run_legacy is None:
        from .reference import run_legacy
    weights, hp, layout = _read_model(checkpoint, None, None, lambda line: None)
    weights_file = _weights_file(weights, MODEL_SCOPE)
    try:
        run_legacy(_legacy_specs(hp, layout, _runs(hp, int(batch), int(steps), seed), int(steps), weights_file, seed))
    finally:
        if os.path.exists(weights_file):
            os.remove(weights_file)


def run_tacotron1_checkpoint_parity(checkpoint, hparams=None, *, overrides: Mapping | None = None, steps: int = 20,
                                    batch: int = 2, seed: int = 0, progress: Callable[[str], None] | None = None,
                                    skip_legacy: bool = False, _perturb: Callable | None = None) -> list[Row]:
    """Parity of a real keithito/tacotron or mimic2 checkpoint: TF1 reference graph -> Keras / torch, Keras <-> torch.

    Args:
        checkpoint: TF1 checkpoint prefix or a directory with a ``checkpoint`` file; its ``model/inference/``
            variables are the model.
        hparams: ``None`` (the layout's preset with every size read from the shapes), ``"keithito"``/``"mimic2"``
            or a mapping of original hparams (its sizes must agree with the checkpoint).
        overrides: hparams by original name, applied last.
        steps: decoder steps of every run, >= 1.
        batch: rows of the random text (the rows after the first are shorter), >= 1.
        seed: seed of the random text, targets and keep-masks.
        progress: called with one line per stage; ``None`` is silent.
        skip_legacy: compare Keras and torch only (no TF1 reference, no ``tf_keras`` needed).
        _perturb: test hook ``(framework, weights) -> weights`` applied before that framework's model loads them.

    Returns:
        the rows (:class:`parity_tests.report.Row`).

    Raises:
        LegacyReferenceUnavailable: ``tf_keras`` is missing and ``skip_legacy`` is False.
        ValueError: bad ``steps``/``batch``; a checkpoint without a Tacotron-1 model; hparams contradicting it.
        FileNotFoundError: the checkpoint does not exist.
    """
    from .checkpoint_parity import LegacyReferenceUnavailable, _weights_file, legacy_reference_available

    if not skip_legacy and not legacy_reference_available():
        raise LegacyReferenceUnavailable("the TF1 legacy reference needs tf_keras: pip install 'speechblocks[legacy]' "
                                         "(or --skip-legacy to compare Keras and torch only)")
    for name, value in (("steps", steps), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"run_checkpoint_parity: `{name}` must be an integer >= 1; got {value!r}.")
    say = progress or (lambda line: None)
    t_start = time.perf_counter()
    weights, hp, layout = _read_model(checkpoint, hparams, overrides, say)
    runs = _runs(hp, int(batch), int(steps), seed)
    future, executor, weights_file = None, None, None
    if not skip_legacy:
        from .reference import run_legacy

        weights_file = _weights_file(weights, MODEL_SCOPE)
        specs = _legacy_specs(hp, layout, runs, int(steps), weights_file, seed)
        say(f"TF1 legacy reference: {len(specs)} graphs in one subprocess (in the background)")
        executor = concurrent.futures.ThreadPoolExecutor(1)
        future = executor.submit(run_legacy, specs)
    try:
        outputs = _framework_outputs(hp, layout, weights, runs, int(steps), say, _perturb)
        legacy = None
        if future is not None:
            say("TF1 legacy reference: waiting for the subprocess")
            legacy = [res.outputs for res in future.result()]
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
        if weights_file is not None and os.path.exists(weights_file):
            os.remove(weights_file)
    rows = _model_rows(runs, outputs, legacy, int(steps))
    say(f"{len(rows)} rows, {sum(not r.passed for r in rows)} failed ({time.perf_counter() - t_start:.1f} s)")
    return rows
