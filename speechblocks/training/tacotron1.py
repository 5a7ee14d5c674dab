"""``speechblocks train DATA RUN --from <keithito/mimic2 checkpoint or migrated Tacotron-1 file>``: fine-tuning a
Tacotron-1 with the original recipe (keithito's ``train.py`` + ``add_loss`` + ``add_optimizer``), framework-free.

A step: the next batch of :mod:`.tacotron1_data` (the feeder's order and padding), the pre-nets' dropout masks
drawn from ``(seed, global_step)``, the framework's training-mode teacher-forced pass (batch statistics; the
batch-norm moving statistics updated) with ``loss = mel_loss + linear_loss`` and its gradients, then the
optimizer of :mod:`.tacotron1_optimizer` (clip by global norm 1.0, TF1 Adam at ``learning_rate(global_step)``),
``global_step += 1``. A loss that is NaN, infinite or above 100 stops the run before its update (keithito's
"Loss exploded").

The trainer (``tf_layers.tacotron1_trainer.Tacotron1Trainer`` or ``torch_layers``') gives the model's trainable
variables in TF1 layout, takes them back, computes a step's losses and gradients, and writes the model file.

The run folder::

    RUN/run.json                                    family, framework, hparams, layout, data, source, seed, ...
    RUN/train.log                                   one line a step: loss terms, lr, gradient norm, seconds
    RUN/checkpoints/tacotron1-<step>.pt|.weights.h5 the model as `speechblocks migrate` writes it (from_migrated)
    RUN/checkpoints/tacotron1-<step>.state.npz      global step, batches done, seed, Adam slots and beta powers
    RUN/checkpoints/latest.json                     the last complete checkpoint (written last)

A checkpoint every ``checkpoint_interval`` global steps (keithito's ``--checkpoint_interval``, 1000) and at the
end; the last five are kept (keithito's ``Saver(max_to_keep=5)``). An existing RUN resumes from its last
checkpoint with the same numbers as an uninterrupted run. SIGINT/SIGTERM: the step ends, a checkpoint is written.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

from ..atomic_files import atomic_path
from ..errors import UsageError
from .checkpoint_files import read_state, write_state
from .run import TrainingDivergedError, _write_json
from .tacotron1_data import batch_plan, dropout_masks, load_batch, read_metadata
from .tacotron1_optimizer import (
    AdamState,
    fresh_state,
    read_tf1_adam_state,
    state_arrays,
    state_from_arrays,
    tf1_update,
)

__all__ = ["RUN_FORMAT", "Tacotron1TrainOptions", "Tacotron1TrainResult", "read_tacotron1_run",
           "tacotron1_torch_payload", "train_step", "train_tacotron1", "write_tacotron1_keras_file"]

RUN_FORMAT = "speechblocks.train.tacotron1"
DEFAULT_CHECKPOINT_INTERVAL = 1000
DEFAULT_BATCH_SIZE = 32  # both presets' batch_size
KEEP_CHECKPOINTS = 5
#: keithito's train.py stops when the loss exceeds this
LOSS_LIMIT = 100.0


@dataclasses.dataclass
class Tacotron1TrainOptions:
    """``data``, ``run`` folders; ``source`` (``--from``; required for a new run); ``kind`` of the source
    (``"tf1"``, ``"keras"``, ``"torch"``); ``hparams``/``overrides`` for the model; ``steps`` to train now;
    ``batch_size``, ``seed`` (default 0), ``checkpoint_interval`` (new runs; a resumed run keeps its own)."""

    data: str
    run: str
    source: str | None
    kind: str | None
    steps: int
    hparams: object = None
    overrides: dict = dataclasses.field(default_factory=dict)
    batch_size: int | None = None
    seed: int | None = None
    checkpoint_interval: int | None = None
    progress: bool = True
    handle_signals: bool = True


@dataclasses.dataclass
class Tacotron1TrainResult:
    global_step: int
    checkpoint: str | None
    signal: int | None = None


class _Run:
    """The state of this invocation: record (run.json), trainer, params, optimizer state, batches done."""

    def __init__(self, record: dict, trainer, state: AdamState, batches_done: int):
        self.record, self.trainer, self.state, self.batches_done = record, trainer, state, batches_done
        self.params = trainer.trainable()


def read_tacotron1_run(run_dir: str) -> dict | None:
    """``run.json`` of a Tacotron-1 run folder; ``None`` when the folder holds no run or another family's."""
    path = os.path.join(run_dir, "run.json")
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and info.get("format") == RUN_FORMAT else None


def _latest(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, "checkpoints", "latest.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            latest = json.load(f)
        return {"step": int(latest["step"]), "model": str(latest["model"]), "state": str(latest["state"])}
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"RUN {run_dir!r}: checkpoints/latest.json is damaged") from None


def _renamed(source: str) -> dict:
    """``{name: TF < 1.2 spelling}`` of a TF1 checkpoint's Tacotron-1 variables."""
    from ..tacotron1_schema import find_tacotron1
    from ..tf1_checkpoint_reader import TF1CheckpointReader

    found = find_tacotron1(TF1CheckpointReader(source).shapes(), f"checkpoint {source!r}")
    return {} if found is None else dict(found.renamed)


def _new_run(trainer_cls, options: Tacotron1TrainOptions) -> _Run:
    if options.source is None:
        raise UsageError("a new Tacotron-1 run needs --from (a keithito/mimic2 TF1 checkpoint or a migrated "
                         "Tacotron-1 file): training from scratch is not supported")
    trainer = trainer_cls.load(options.source, options.kind, options.hparams, options.overrides)
    params = trainer.trainable()
    if options.kind == "tf1":
        state = read_tf1_adam_state(options.source, params, _renamed(options.source), trainer.hparams)
    else:
        state = fresh_state(params, trainer.hparams)
    record = {"format": RUN_FORMAT, "family": "tacotron1", "framework": trainer_cls.framework,
              "hparams": trainer.hparams.to_dict(), "layout": trainer.layout,
              "data": os.path.abspath(options.data), "source": os.path.abspath(options.source),
              "source_kind": options.kind, "start_step": state.global_step,
              "seed": 0 if options.seed is None else int(options.seed),
              "batch_size": int(options.batch_size or DEFAULT_BATCH_SIZE),
              "checkpoint_interval": int(options.checkpoint_interval or DEFAULT_CHECKPOINT_INTERVAL)}
    return _Run(record, trainer, state, 0)


def _resumed_run(trainer_cls, options: Tacotron1TrainOptions, record: dict, latest: dict) -> _Run:
    ckpt_dir = os.path.join(options.run, "checkpoints")
    trainer = trainer_cls.load(os.path.join(ckpt_dir, latest["model"]), trainer_cls.framework, record["hparams"],
                               None)
    meta, arrays = read_state(os.path.join(ckpt_dir, latest["state"]))
    state = state_from_arrays(arrays, trainer.trainable(), int(meta["global_step"]), f"RUN {options.run!r}")
    return _Run(record, trainer, state, int(meta["batches_done"]))


def _check_resume(options: Tacotron1TrainOptions, record: dict, framework: str) -> None:
    if record.get("framework") != framework:
        raise UsageError(f"RUN {options.run!r} was trained with --framework {record.get('framework')}, not "
                         f"{framework}")
    if options.source is not None and os.path.abspath(options.source) != record.get("source"):
        raise UsageError(f"RUN {options.run!r} already fine-tunes {record.get('source')!r}: resume it without "
                         f"--from, or start another RUN")
    if options.hparams is not None or options.overrides:
        raise UsageError(f"RUN {options.run!r} keeps the hparams of its run.json: resume it without --hparams/--set")
    for name, given in (("batch_size", options.batch_size), ("seed", options.seed)):
        if given is not None and int(given) != record.get(name):
            raise UsageError(f"RUN {options.run!r} uses {name} {record.get(name)}; a resumed run keeps it")


def _open_run(trainer_cls, options: Tacotron1TrainOptions) -> _Run:
    record = read_tacotron1_run(options.run)
    if record is None:
        if os.path.isdir(options.run) and os.listdir(options.run):
            raise UsageError(f"RUN {options.run!r} is not empty and holds no Tacotron-1 run.json")
        return _new_run(trainer_cls, options)
    _check_resume(options, record, trainer_cls.framework)
    latest = _latest(options.run)
    if latest is None:  # stopped before its first checkpoint: start again from its source
        again = dataclasses.replace(options, source=record["source"], kind=record["source_kind"],
                                    hparams=record["hparams"], batch_size=record["batch_size"], seed=record["seed"],
                                    checkpoint_interval=record["checkpoint_interval"])
        run = _new_run(trainer_cls, again)
        run.record = record
        return run
    return _resumed_run(trainer_cls, options, record, latest)


def write_tacotron1_keras_file(path: str, hp, layout: str, tf1_weights: dict, source: str = "") -> None:
    """The whole model as ``speechblocks migrate --to keras`` writes a Tacotron-1 (empty block table, the
    ``model`` entry of :func:`~speechblocks.migration.tacotron1.tacotron1_model_entry`), atomically."""
    import h5py
    import numpy as np

    from ..migration.migrated_file import FORMAT_VERSION, KERAS_FORMAT, content_digest, tensor_digest
    from ..migration.tacotron1 import tacotron1_model_entry

    model_json, blocks, digests = tacotron1_model_entry(hp, layout), json.dumps({}, sort_keys=True), {}
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            for name, value in (("speechblocks_format", KERAS_FORMAT), ("format_version", FORMAT_VERSION),
                                ("source_checkpoint", source), ("use_ema", False), ("model", model_json)):
                f.attrs[name] = value
            for name in sorted(tf1_weights):
                value = np.asarray(tf1_weights[name])
                f.create_dataset(name, data=value)
                digests[name] = tensor_digest(name, value)
            f.attrs["blocks"] = blocks
            f.attrs["sha256"] = content_digest(blocks, model_json, digests)


def tacotron1_torch_payload(hp, layout: str, state_dict: dict, source: str = "") -> dict:
    """The dict ``speechblocks migrate --to torch`` saves for a Tacotron-1 (pass it to ``torch.save``)."""
    from ..migration.migrated_file import FORMAT_VERSION, TORCH_FORMAT
    from ..migration.tacotron1 import tacotron1_model_entry

    return {"speechblocks_format": TORCH_FORMAT, "format_version": FORMAT_VERSION, "blocks": json.dumps({}),
            "state_dicts": {}, "source_checkpoint": source, "use_ema": False,
            "model": tacotron1_model_entry(hp, layout), "model_state_dict": dict(state_dict)}


def _prune(ckpt_dir: str, keep: list[str]) -> None:
    stems = sorted({n.split(".")[0] for n in os.listdir(ckpt_dir) if n.startswith("tacotron1-")})
    for stem in stems[:-KEEP_CHECKPOINTS]:
        for name in os.listdir(ckpt_dir):
            if name.split(".")[0] == stem and name not in keep:
                os.remove(os.path.join(ckpt_dir, name))


def _checkpoint(run: _Run, run_dir: str) -> str:
    """The model file, the sidecar, then ``latest.json``; the oldest past :data:`KEEP_CHECKPOINTS` removed."""
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    step = run.state.global_step
    stem = f"tacotron1-{step:08d}"
    model_name, state_name = stem + run.trainer.extension, stem + ".state.npz"
    run.trainer.write_model(os.path.join(ckpt_dir, model_name), run.record["source"])
    meta = {"global_step": step, "batches_done": run.batches_done, "seed": run.record["seed"],
            "batch_size": run.record["batch_size"], "framework": run.record["framework"], "model": model_name,
            "rng": "pre-net dropout drawn from (seed, global_step)"}
    write_state(os.path.join(ckpt_dir, state_name), meta, state_arrays(run.state))
    _write_json(os.path.join(ckpt_dir, "latest.json"), {"step": step, "model": model_name, "state": state_name})
    _prune(ckpt_dir, [model_name, state_name])
    return os.path.join(ckpt_dir, model_name)


def _diverged(losses: dict, step: int, where: str):
    raise TrainingDivergedError(f"loss exploded to {losses['loss']:.5f} at step {step}{where}; the update was not "
                                f"applied")


def train_step(trainer, params: dict, state: AdamState, batch: dict, masks: dict, where: str = "") -> tuple:
    """One update of ``trainer``'s model: the training-mode pass, then (unless the loss exploded) clip + TF1 Adam
    on ``params`` (its trainable variables, TF1 layout; updated in the dict and assigned to the model) and
    ``state``. Returns ``(losses, lr, global_norm)``.

    Raises:
        TrainingDivergedError: the loss is NaN, infinite or above 100 (nothing updated).
    """
    losses, grads, rows = trainer.gradients(batch, masks)
    if not losses["loss"] <= LOSS_LIMIT:  # NaN too
        _diverged(losses, state.global_step, where)
    lr, norm = tf1_update(params, grads, rows, state, trainer.hparams)
    trainer.assign(params)
    return losses, lr, norm


def _step(run: _Run, examples: list, plan) -> str:
    """One update; returns its log line."""
    hp, t0 = run.trainer.hparams, time.perf_counter()
    chosen = [examples[i] for i in next(plan)]
    batch = load_batch(chosen, hp)
    masks = dropout_masks(batch, hp, run.record["seed"], run.state.global_step)
    where = f" (train.txt lines {', '.join(str(e.line) for e in chosen)})"
    losses, lr, norm = train_step(run.trainer, run.params, run.state, batch, masks, where)
    run.batches_done += 1
    return (f"step {run.state.global_step}: loss={losses['loss']:.5f} mel_loss={losses['mel_loss']:.5f} "
            f"linear_loss={losses['linear_loss']:.5f} lr={lr:.6g} grad_norm={norm:.5f} "
            f"({time.perf_counter() - t0:.2f} s)")


def train_tacotron1(trainer_cls, options: Tacotron1TrainOptions) -> Tacotron1TrainResult:
    """Fine-tune (or resume) for ``options.steps`` steps; see the module docstring.

    Raises:
        UsageError / InputError: the options, the data, the source, the run folder (one line).
        TrainingDivergedError: the loss exploded (the update not applied; the last checkpoint intact).
    """
    from .hooks import Signals

    run = _open_run(trainer_cls, options)
    examples = read_metadata(options.data, run.trainer.hparams)
    os.makedirs(os.path.join(options.run, "checkpoints"), exist_ok=True)
    if read_tacotron1_run(options.run) is None:
        _write_json(os.path.join(options.run, "run.json"), run.record)
    plan = batch_plan([e.frames for e in examples], run.record["batch_size"], run.record["seed"], run.batches_done)
    out = Tacotron1TrainResult(run.state.global_step, None)
    signals = Signals(options.handle_signals, None, out)
    saved_step = run.state.global_step
    try:
        with open(os.path.join(options.run, "train.log"), "a", encoding="utf-8") as log:
            for _ in range(options.steps):
                line = _step(run, examples, plan)
                log.write(line + "\n")
                log.flush()
                if options.progress:
                    print(line, flush=True)
                if run.state.global_step % run.record["checkpoint_interval"] == 0:
                    out.checkpoint, saved_step = _checkpoint(run, options.run), run.state.global_step
                out.signal = signals.stop_requested() or None
                if out.signal:
                    break
    finally:
        signals.close()
    if run.state.global_step != saved_step or out.checkpoint is None:
        out.checkpoint = _checkpoint(run, options.run)
    out.global_step = run.state.global_step
    return out
