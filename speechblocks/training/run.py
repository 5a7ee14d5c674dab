"""``speechblocks train``: the original training loop, framework-free (the framework steps come from a backend).

The loop of the originals' ``train.py``: the feeder's batches (:class:`~speechblocks.training.BatchSampler`,
:func:`~speechblocks.training.prepare_batch`), the learning rate of :func:`~speechblocks.training.learning_rate` at
the global step before the update, one optimizer step (the backend: Adam with the original betas and epsilon,
``clip_by_global_norm(gradients, 1.0)`` when ``tacotron_clip_gradients``, the loss of ``add_loss``), the global step
incremented; every ``tacotron_summary_interval`` steps scalars to a TensorBoard event file, every
``tacotron_eval_interval`` steps the test batches' losses, an alignment and mel plot and a Griffin-Lim wav of one
test sentence, every ``tacotron_checkpoint_interval`` steps (and when the run stops) a checkpoint.

The framework comes from a trainer backend (``torch_layers.Tacotron2Trainer``, ``tf_layers.Tacotron2Trainer``):
:class:`~speechblocks.training.backend.TrainerBackend` is its contract (both trainers are held to its signatures by
``tests/test_tacotron2_twin_contract.py``); the Adam slots cross it as numpy arrays in TF1's names and layout
(:mod:`speechblocks.training.optimizer_slots`).

The code: :func:`train` resolves the run (:func:`_resolve_run`: the options checked, ``run.json`` and the last
checkpoint read, the hparams, the trainer and its optimizer state), prepares the data (:func:`_prepare_data`: the
split, the sampler at the run's position, the test batches), records the run (:func:`_record_run`) and runs the
loop (:func:`_run_steps`: one :func:`_step` at a time) with its :class:`TrainingHook` s: ``on_step``, the progress
line, the summaries (TensorBoard), the evaluation, the checkpoints and the signals.

The run folder ``RUN``::

    RUN/run.json                                   framework, hparams (every original name), data folder
    RUN/checkpoints/tacotron2-<step>.pt|.weights.h5   the model, as `speechblocks migrate` writes it
    RUN/checkpoints/tacotron2-<step>.state.npz     global step, sampler state, seed, Adam slots (TF1 names)
    RUN/checkpoints/latest.json                    the last complete checkpoint (written last)
    RUN/events/events.out.tfevents.*               scalars (TensorBoard)
    RUN/plots/step-<step>-{align,mel}.png, RUN/wavs/step-<step>-eval.wav

Randomness (dropout, zoneout) is drawn from a generator re-seeded before every step from ``(seed, global
step)``: a resumed run draws what the uninterrupted run drew, so resuming is exact.

Data-parallel processes (``torchrun --nproc-per-node N -m speechblocks train ...``): every rank follows the same
data order (the sampler of one process) and reads only its rows of each global batch
(:func:`~speechblocks.training.shard_rows`: consecutive slices), padded to the global batch's lengths
(:func:`~speechblocks.training.pad_batch`, the lengths agreed over the ranks); the backend makes the step the
single-process step on the global batch. Rank 0 alone writes the run folder (run.json, checkpoints, events,
evaluations, progress lines); a signal to any rank stops every rank after the same step.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from ..atomic_files import atomic_path
from ..errors import UsageError
from ..tacotron2_hparams import TACOTRON2_PRESETS, Tacotron2HParams, resolve_hparams, tacotron2_hparams
from .backend import Distribution, StepResult, TrainerBackend
from .batches import pad_batch, prepare_batch, shard_rows
from .checkpoint_files import read_state, write_state
from .examples import check_example_files, load_example
from .guided_attention import DEFAULT_SIGMA, add_guided_attention_weights
from .metadata import BatchSampler, MetadataEntry, make_test_batches, read_metadata, split_train_test
from .optimizer_slots import read_tf1_adam_state
from .schedule import learning_rate

__all__ = ["RUN_FORMAT", "StepResult", "TrainOptions", "TrainResult", "TrainingDivergedError", "guided_attention",
           "read_run", "step_seed", "train", "utterance_id"]

RUN_FORMAT = "speechblocks.train.run"
#: hparams a resumed run may change (they change no number of the training)
RESUMABLE_CHANGES = frozenset({"tacotron_checkpoint_interval", "tacotron_eval_interval", "tacotron_summary_interval",
                               "tacotron_train_steps", "griffin_lim_iters"})
KEEP_CHECKPOINTS = 5  # the original Saver's max_to_keep
EVAL_GRIFFIN_LIM_ITERS = 8


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the update was not applied (the last checkpoint is intact)."""


@dataclasses.dataclass
class TrainOptions:
    """The options of ``speechblocks train``.

    Attributes:
        data (str): the preprocessed folder (``train.txt``, ``mels/``, ``embeds/``).
        run (str): the run folder (created; an existing run is resumed).
        hparams: a preset name, a mapping of original names or None (a new run: the preset of ``source`` or
            ``"rtvc"``; a resumed run: the run's).
        overrides (dict): hparams by original name, applied last.
        source (str, optional): ``--from``: a TF1 checkpoint or a migrated file to fine-tune (a new run only).
        steps (int, optional): steps to train in this invocation. (Default: up to ``tacotron_train_steps``)
        batch_size (int, optional): overrides ``tacotron_batch_size``.
        seed (int, optional): the seed of data order and dropout. (Default: ``tacotron_random_seed``)
        progress (bool): a progress line on stderr (``\\r``-updated on a terminal).
        handle_signals (bool): SIGINT/SIGTERM finish the step, write a checkpoint and stop.
        guided_attention (float, optional): ``--guided-attention``: the weight of the guided-attention term
            (:mod:`speechblocks.training.guided_attention`; not in the original recipe). ``None``: a new run
            trains without it, a resumed run keeps its own; ``0`` turns it off.
        guided_attention_sigma (float, optional): the width of its diagonal band. (Default: the run's, else
            :data:`~speechblocks.training.guided_attention.DEFAULT_SIGMA`)
    """

    data: str
    run: str
    hparams: object = None
    overrides: dict = dataclasses.field(default_factory=dict)
    source: str | None = None
    steps: int | None = None
    batch_size: int | None = None
    seed: int | None = None
    progress: bool = True
    handle_signals: bool = True
    guided_attention: float | None = None
    guided_attention_sigma: float | None = None


@dataclasses.dataclass
class TrainResult:
    """What a run did: the global step reached, the losses of every step of this invocation, the last checkpoint,
    and the signal that stopped it (``None`` when it ran its steps)."""

    global_step: int
    losses: list
    checkpoint: str | None
    signal: int | None = None
    eval_losses: dict = dataclasses.field(default_factory=dict)
    #: per step of this invocation: ``(seconds reading and padding the batch, seconds of the optimizer step, real
    #: mel frames of the batch -- this process's rows)``: where the time goes (``bench/bench_training.py``)
    timings: list = dataclasses.field(default_factory=list)


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    """The 32-bit seed of the random draws of global step ``step`` (a function of the run's seed and the step)."""
    return int(np.random.SeedSequence([int(seed), int(step), int(stream)]).generate_state(1)[0])


def utterance_id(entry: MetadataEntry) -> str:
    """The utterance id of a ``train.txt`` line: its mel file name without ``mel-`` and ``.npy``."""
    name = os.path.basename(entry.mel_file)
    if name.endswith(".npy"):
        name = name[:-4]
    return name[4:] if name.startswith("mel-") else name


# -- the run folder -----------------------------------------------------------------------------------------
def _json_value(value):
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _full_hparams(base, model_hp: Tacotron2HParams | None, overrides: dict) -> dict:
    """Every original name: a preset (``base``, or the one of the source model's variant, or ``"rtvc"``) or a
    mapping over it, then the hparams of a source model (its sizes are fixed by its weights), then the overrides."""
    variant = "rtvc" if model_hp is None or model_hp.speaker_embedding_size else "rayhane"
    if isinstance(base, str):
        if base not in TACOTRON2_PRESETS:
            raise UsageError(f"--hparams {base!r} is not a preset ({', '.join(sorted(TACOTRON2_PRESETS))})")
        full = tacotron2_hparams(base)
    else:
        full = tacotron2_hparams(variant)
        full.update(dict(base or {}))
    if model_hp is not None:
        full.update(model_hp.to_dict())
    full.update(overrides)
    return {k: _json_value(v) for k, v in full.items()}


def read_run(run_dir: str) -> dict | None:
    """The ``run.json`` of the run folder ``run_dir`` (``None``: no run there yet).

    Raises:
        UsageError: a non-empty folder without ``run.json``, or a ``run.json`` that is not a training run's.
    """
    path = os.path.join(run_dir, "run.json")
    if not os.path.exists(path):
        if os.path.isdir(run_dir) and os.listdir(run_dir):
            raise UsageError(f"RUN {run_dir!r} is not empty and holds no run.json: not a training run folder")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"RUN {run_dir!r}: run.json is not readable ({exc})") from None
    if not isinstance(info, dict) or info.get("format") != RUN_FORMAT or not isinstance(info.get("hparams"), dict):
        raise UsageError(f"RUN {run_dir!r}: run.json is not a speechblocks training run")
    return info


def _resumed_hparams(run_dir: str, info: dict, options: TrainOptions, framework: str) -> dict:
    if info.get("framework") != framework:
        raise UsageError(f"RUN {run_dir!r} was trained with --framework {info.get('framework')}, not {framework}")
    if options.source is not None:
        raise UsageError(f"RUN {run_dir!r} already holds a run (resume it without --from, or give a new RUN)")
    stored = dict(info["hparams"])
    wanted = dict(options.overrides)
    if options.batch_size is not None:
        wanted["tacotron_batch_size"] = options.batch_size
    if options.hparams is not None:
        given = _full_hparams(options.hparams, None, wanted)
        asked = {k: v for k, v in given.items() if k in stored or k in wanted}
    else:
        asked = {k: _json_value(v) for k, v in wanted.items()}
    for name in sorted(asked):
        if name not in RESUMABLE_CHANGES and asked[name] != stored.get(name):
            raise UsageError(f"RUN {run_dir!r} holds another model or recipe: hparam {name} is "
                             f"{stored.get(name)!r} there, {asked[name]!r} here (give a new RUN)")
    stored.update({k: v for k, v in asked.items() if k in RESUMABLE_CHANGES})
    return stored


def guided_attention(options: TrainOptions, info: dict | None) -> dict | None:
    """The guided-attention term of this invocation: ``{"weight", "sigma"}`` or ``None`` (off).

    Raises:
        UsageError: a weight that is not finite and >= 0, a sigma that is not > 0, or a sigma without a weight.
    """
    stored = (info or {}).get("guided_attention") or {}
    weight = options.guided_attention if options.guided_attention is not None else stored.get("weight")
    sigma = options.guided_attention_sigma if options.guided_attention_sigma is not None else \
        stored.get("sigma", DEFAULT_SIGMA)
    if weight is not None and not (math.isfinite(weight) and weight >= 0):
        raise UsageError(f"--guided-attention must be a finite weight >= 0; got {weight}")
    if not (math.isfinite(sigma) and sigma > 0):
        raise UsageError(f"--guided-attention-sigma must be > 0; got {sigma}")
    if not weight:
        if options.guided_attention_sigma is not None:
            raise UsageError("--guided-attention-sigma needs --guided-attention WEIGHT (the term is off)")
        return None
    return {"weight": float(weight), "sigma": float(sigma)}


# the names ``speechblocks/cli.py`` still calls (until it switches to the public ones)
_read_run = read_run
_guided_attention = guided_attention


def _write_json(path: str, value: dict) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True)


def _latest(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, "checkpoints", "latest.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# -- resolving the run ---------------------------------------------------------------------------------------
class _Progress:
    def __init__(self, enabled: bool, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()

    def step(self, line: str):
        if self.tty:
            self.stream.write("\r" + line + "\033[K")
            self.stream.flush()

    def say(self, line: str):
        if self.enabled:
            if self.tty:
                self.stream.write("\r\033[K")
            self.stream.write(f"speechblocks train: {line}\n")
            self.stream.flush()


@dataclasses.dataclass
class _Run:
    """A resolved run: its folders, hparams, trainer and the state it continues from."""

    data_dir: str
    run_dir: str
    framework: str
    info: dict | None  # run.json (None: a new run)
    latest: dict | None  # checkpoints/latest.json (None: no checkpoint yet)
    hp_full: dict
    model_hp: Tacotron2HParams
    trainer: TrainerBackend
    start_step: int
    seed: int
    sampler_state: dict | None  # the data order to continue (None: from its start)
    guided: dict | None  # the guided-attention term (None: off)
    progress: _Progress
    ranks: Distribution | None  # the data-parallel processes (None: one process)

    @property
    def rank(self) -> int:
        return 0 if self.ranks is None else int(self.ranks.rank)

    @property
    def world(self) -> int:
        return 1 if self.ranks is None else int(self.ranks.world_size)

    @property
    def writer(self) -> bool:
        """Whether this process writes the run folder (rank 0)."""
        return self.rank == 0


def _check_options(options: TrainOptions) -> tuple[str, str]:
    """The absolute DATA and RUN folders; the options' mistakes refused before anything is read."""
    data_dir, run_dir = os.path.abspath(options.data), os.path.abspath(options.run)
    if not os.path.isfile(os.path.join(data_dir, "train.txt")):
        raise UsageError(f"DATA {options.data!r} holds no train.txt (run `speechblocks preprocess` first)")
    if options.steps is not None and options.steps < 1:
        raise UsageError(f"--steps must be >= 1; got {options.steps}")
    if options.source is not None and not os.path.exists(options.source) \
            and not os.path.exists(options.source + ".index"):
        raise UsageError(f"--from {options.source!r} does not exist")
    return data_dir, run_dir


def _resolve_run(backend_cls, options: TrainOptions, ranks: Distribution | None) -> _Run:
    """The run of this invocation: ``run.json`` and the last checkpoint read (by every rank before rank 0 writes),
    the hparams, the trainer with its optimizer state, the seed and the data order to continue from."""
    data_dir, run_dir = _check_options(options)
    framework = backend_cls.framework
    info = read_run(run_dir)
    hp_full = _resumed_hparams(run_dir, info, options, framework) if info is not None else None
    latest = _latest(run_dir) if info is not None else None
    if ranks is not None:
        ranks.barrier()  # every rank has read the run folder before rank 0 writes to it
    progress = _Progress(options.progress and (ranks is None or int(ranks.rank) == 0))
    sampler_state = None
    if latest is not None:
        trainer, model_hp, start_step, seed, sampler_state = _resume_trainer(backend_cls, run_dir, info, latest,
                                                                             hp_full)
        progress.say(f"resuming {run_dir} at step {start_step} ({latest['model']})")
    else:
        trainer, hp_full, model_hp, start_step, seed = _start_trainer(backend_cls, options, hp_full)
    hp_full = {k: _json_value(v) for k, v in hp_full.items()}
    run = _Run(data_dir, run_dir, framework, info, latest, hp_full, model_hp, trainer, start_step, seed,
               sampler_state, guided_attention(options, info), progress, ranks)
    if run.world > 1 and int(hp_full["tacotron_batch_size"]) < run.world:
        raise UsageError(f"tacotron_batch_size {hp_full['tacotron_batch_size']} is smaller than the {run.world} "
                         f"data-parallel processes (each reads its rows of the global batch)")
    return run


def _resume_trainer(backend_cls, run_dir: str, info: dict, latest: dict, hp_full: dict) -> tuple:
    """The trainer of the run's last checkpoint with its optimizer state: ``(trainer, model hparams, global step,
    seed, sampler state)``."""
    model_hp = resolve_hparams(hp_full, info.get("n_symbols"))
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    trainer = backend_cls.from_model_file(os.path.join(ckpt_dir, latest["model"]), model_hp)
    meta, slots = read_state(os.path.join(ckpt_dir, latest["state"]))
    start_step = int(meta["global_step"])
    trainer.load_optimizer_state(int(meta["adam_updates"]), slots)
    return trainer, model_hp, start_step, int(meta["seed"]), meta["sampler"]


def _start_trainer(backend_cls, options: TrainOptions, hp_full: dict | None) -> tuple:
    """The trainer of a run without a checkpoint: a new model, or ``--from``'s with its global step and Adam state.
    ``hp_full``: a run folder's hparams (``None``: from the options). Returns ``(trainer, hp_full, model hparams,
    global step, seed)``."""
    wanted = dict(options.overrides)
    if options.batch_size is not None:
        wanted["tacotron_batch_size"] = int(options.batch_size)
    start_step, adam = 0, None
    if options.source is not None:
        trainer, start_step, adam = _from_source(backend_cls, options.source)
        hp_full = _full_hparams(options.hparams, trainer.hparams, wanted)
    elif hp_full is None:
        hp_full = _full_hparams(options.hparams, None, wanted)
    try:
        model_hp = resolve_hparams(hp_full)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    seed = options.seed if options.seed is not None else int(hp_full["tacotron_random_seed"])
    if options.source is None:
        trainer = backend_cls.new(model_hp, seed)
    else:
        if trainer.hparams != model_hp:  # --hparams/--set of a rate or flag: the sizes must agree
            trainer = backend_cls.with_hparams(trainer, model_hp)
        if adam is not None:
            trainer.load_optimizer_state(*adam)
    return trainer, hp_full, model_hp, start_step, seed


def _record_run(run: _Run, options: TrainOptions) -> None:
    """Rank 0: the checkpoint folder, and ``run.json`` for a new run or a changed guided-attention term."""
    if not run.writer:
        return
    os.makedirs(os.path.join(run.run_dir, "checkpoints"), exist_ok=True)
    if run.info is None or run.guided != run.info.get("guided_attention"):
        record = run.info or {"format": RUN_FORMAT, "version": 1, "framework": run.framework, "hparams": run.hp_full,
                              "n_symbols": run.model_hp.n_symbols, "data": run.data_dir, "source": options.source}
        _write_json(os.path.join(run.run_dir, "run.json"), dict(record, guided_attention=run.guided))


# -- preparing the data --------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Data:
    """The data of a run: the train/test split, the sampler of the train batches (at the run's position) and the
    test batches."""

    data_dir: str
    hp_full: dict
    n_symbols: int
    train_set: list
    test_set: list
    sampler: BatchSampler
    test_batches: list

    def load(self, entries) -> dict:
        """The padded batch of ``entries`` (:func:`~speechblocks.training.prepare_batch`)."""
        examples = [load_example(e, self.data_dir, self.hp_full, n_symbols=self.n_symbols) for e in entries]
        return prepare_batch(examples, self.hp_full, n_symbols=self.n_symbols)


def _prepare_data(run: _Run, options: TrainOptions) -> _Data:
    """``train.txt`` read and split, every example file checked (before anything is written), the sampler at the
    run's position in its data order."""
    hp_full = run.hp_full
    metadata = read_metadata(os.path.join(run.data_dir, "train.txt"))
    train_set, test_set = split_train_test(metadata, hp_full)
    check_example_files(metadata, run.data_dir, hp_full)
    sampler = BatchSampler(train_set, hp_full, seed=run.seed)
    if run.sampler_state is not None:
        try:
            sampler.load_state_dict(run.sampler_state)
        except ValueError as exc:
            raise UsageError(f"RUN {run.run_dir!r}: its data order does not fit DATA {options.data!r}: {exc}") from None
    test_batches = make_test_batches(test_set, hp_full, seed=run.seed)
    return _Data(run.data_dir, hp_full, run.model_hp.n_symbols, train_set, test_set, sampler, test_batches)


def _next_batch(run: _Run, data: _Data) -> tuple[dict, list, tuple[int, int] | None]:
    """The sampler's next global batch: ``(batch, its entries, rows)``; data-parallel, the batch is this rank's rows
    padded to the global batch's lengths and ``rows = (first row, global batch size)`` (else ``None``)."""
    indices = data.sampler.batch(data.sampler.state_dict()["batches"])
    entries = [data.train_set[i] for i in indices]
    rows = None
    if run.world > 1:
        lo, hi = shard_rows(len(indices), run.world, run.rank)
        batch = data.load(entries[lo:hi])
        t_in, t_out = run.ranks.max([batch["inputs"].shape[1], batch["mel_targets"].shape[1]])
        batch = pad_batch(batch, t_in, t_out, run.hp_full)
        rows = (lo, len(indices))
    else:
        batch = data.load(entries)
    if run.guided is not None:
        batch = add_guided_attention_weights(batch, int(run.hp_full["outputs_per_step"]), run.guided["weight"],
                                             run.guided["sigma"])
    return batch, entries, rows


# -- the loop and its hooks ----------------------------------------------------------------------------------
class TrainingHook:
    """What the training loop calls besides the step (every method a no-op here; a hook overrides its own).

    Before every step :meth:`stop_requested` (a signal number stops the loop before the step), after every step
    :meth:`on_step`, after the last step :meth:`on_end` (not when the loop raised), and :meth:`close` always.
    """

    def stop_requested(self) -> int:
        """A signal number to stop before the next step (0: go on)."""
        return 0

    def on_step(self, step: int, result: StepResult, seconds: float) -> None:
        """After global step ``step`` (the number of updates applied), which took ``seconds``."""

    def on_end(self, step: int) -> None:
        """After the last step of this invocation (``step``: the global step reached)."""

    def close(self) -> None:
        """When the loop ends, also by an exception."""


def _step(run: _Run, data: _Data, step: int, last_checkpoint: str | None) -> tuple[StepResult, tuple, float]:
    """One optimizer step from global step ``step``: the result (its learning rate set), its timing and its start.

    Raises:
        TrainingDivergedError: a NaN or infinite loss (the update was not applied; the sampler stays).
    """
    t0 = time.perf_counter()
    batch, entries, rows = _next_batch(run, data)
    t1 = time.perf_counter()
    lr = learning_rate(step, run.hp_full)
    if rows is None:
        result = run.trainer.train_step(batch, lr, step_seed(run.seed, step))
    else:
        result = run.trainer.train_step(batch, lr, step_seed(run.seed, step), rows)
    timing = (t1 - t0, time.perf_counter() - t1, int(batch["targets_lengths"].sum()))
    result.learning_rate = lr
    loss = float(result.losses["loss"])
    if not result.applied or not math.isfinite(loss):
        ids = ", ".join(utterance_id(e) for e in entries)
        raise TrainingDivergedError(f"the loss is {loss} at step {step + 1} on the batch of utterances [{ids}]; the "
                                    f"update was not applied (last checkpoint: {last_checkpoint or 'none'})")
    data.sampler.load_state_dict({"batches": data.sampler.state_dict()["batches"] + 1})
    return result, timing, t0


def _run_steps(run: _Run, data: _Data, hooks: list[TrainingHook], total: int, out: TrainResult) -> None:
    """Up to ``total`` steps from ``out.global_step``, recorded in ``out``, the hooks called around each."""
    for _ in range(total):
        signum = max(hook.stop_requested() for hook in hooks)
        if signum:
            out.signal = signum
            break
        result, timing, t0 = _step(run, data, out.global_step, out.checkpoint)
        out.global_step += 1
        seconds = time.perf_counter() - t0
        out.timings.append(timing)
        out.losses.append(dict(result.losses))
        for hook in hooks:
            hook.on_step(out.global_step, result, seconds)
    for hook in hooks:
        hook.on_end(out.global_step)


class _Callback(TrainingHook):
    """``train``'s ``on_step(global_step, step_result)``."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def on_step(self, step, result, seconds):
        self.fn(step, result)


class _ProgressLine(TrainingHook):
    """The progress line: seconds a step and the loss averaged over the last 100 steps."""

    def __init__(self, progress: _Progress):
        self.progress = progress
        self.window, self.times = deque(maxlen=100), deque(maxlen=100)

    def on_step(self, step, result, seconds):
        loss = float(result.losses["loss"])
        self.times.append(seconds)
        self.window.append(loss)
        self.progress.step(f"step {step:7d} [{sum(self.times) / len(self.times):.3f} s/step, loss={loss:.5f}, "
                           f"avg_loss={sum(self.window) / len(self.window):.5f}, lr={result.learning_rate:.3g}]")


class _Summaries(TrainingHook):
    """Every ``tacotron_summary_interval`` steps the step's scalars in the run's TensorBoard event file (which the
    evaluation writes to too)."""

    def __init__(self, run: _Run):
        from ..tensorboard_events import EventFileWriter

        self.events = EventFileWriter(os.path.join(run.run_dir, "events"))
        self.every = int(run.hp_full["tacotron_summary_interval"])

    def on_step(self, step, result, seconds):
        if step % self.every == 0:
            scalars = {f"stats/{k}": float(v) for k, v in result.losses.items()}
            scalars.update({"stats/learning_rate": result.learning_rate, "stats/gradient_norm": result.grad_norm,
                            "stats/steps_per_second": 1.0 / max(seconds, 1e-9)})
            self.events.add_scalars(step, scalars)

    def close(self):
        self.events.close()


class _Evaluation(TrainingHook):
    """Every ``tacotron_eval_interval`` steps the losses over every test batch (as the original's eval model), plots
    and a wav of the last batch's first sentence; the scalars under the original's ``Tacotron_eval_model/
    eval_stats/`` tags; the losses in ``out.eval_losses``."""

    def __init__(self, run: _Run, data: _Data, events, out: TrainResult):
        self.run, self.data, self.events, self.out = run, data, events, out
        self.every = int(run.hp_full["tacotron_eval_interval"])

    def on_step(self, step, result, seconds):
        if step % self.every == 0:
            self.out.eval_losses = self.evaluate(step)

    def evaluate(self, step: int) -> dict:
        run, data, progress = self.run, self.data, self.run.progress
        if not data.test_batches:
            progress.say(f"step {step}: no test batch (the test split is empty): evaluation skipped")
            return {}
        sums: dict = {}
        for i, indices in enumerate(data.test_batches):
            batch = data.load([data.test_set[j] for j in indices])
            losses, mel, alignment = run.trainer.evaluate(batch, step_seed(run.seed, step, 1 + i))
            for k, v in losses.items():
                sums[k] = sums.get(k, 0.0) + float(v)
            length = int(batch["targets_lengths"][0])
            target = batch["mel_targets"][0, :length]
        means = {k: v / len(data.test_batches) for k, v in sums.items()}
        self.events.add_scalars(step, {f"Tacotron_eval_model/eval_stats/eval_{k}": v for k, v in means.items()})
        title = f"Tacotron, step={step}, loss={means['loss']:.5f}"
        _plot(run.run_dir, step, mel[:length], target, alignment, run.hp_full, title, progress)
        _eval_wav(run.run_dir, step, mel[:length], run.hp_full, progress)
        progress.say(f"step {step}: eval loss {means['loss']:.5f} over {len(data.test_batches)} test batch(es)")
        return means


class _Checkpoints(TrainingHook):
    """Every ``tacotron_checkpoint_interval`` steps and after the last step a checkpoint (rank 0 writes it; the
    other ranks name it); the last in ``out.checkpoint``."""

    def __init__(self, run: _Run, sampler: BatchSampler, out: TrainResult):
        self.run, self.sampler, self.out = run, sampler, out
        self.every = int(run.hp_full["tacotron_checkpoint_interval"])

    def write(self, step: int) -> str:
        run = self.run
        if run.writer:
            path = _write_checkpoint(run.run_dir, run.trainer, step, self.sampler, run.seed, run.framework)
        else:
            path = os.path.join(run.run_dir, "checkpoints", f"tacotron2-{step:08d}{run.trainer.model_suffix}")
        self.out.checkpoint = path
        return path

    def on_step(self, step, result, seconds):
        if step % self.every == 0:
            path = self.write(step)
            self.run.progress.say(f"step {step}: checkpoint {os.path.basename(path)} "
                                  f"(loss {float(result.losses['loss']):.5f})")

    def on_end(self, step):
        last = self.out.checkpoint
        if last is None or not last.endswith(f"-{step:08d}{self.run.trainer.model_suffix}"):
            self.run.progress.say(f"step {step}: checkpoint {os.path.basename(self.write(step))}")


class _Signals(TrainingHook):
    """SIGINT/SIGTERM handlers that record the signal: the loop finishes its step, checkpoints and stops (every rank
    after the same step); a signal during the last step is ``out.signal`` too."""

    def __init__(self, enabled: bool, ranks: Distribution | None, out: TrainResult):
        self.signal: int | None = None
        self.ranks, self.out = ranks, out
        self._saved = {}
        if enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._saved[sig] = signal.signal(sig, self._handle)
                except ValueError:  # not the main thread
                    pass

    def _handle(self, signum, frame):
        self.signal = signum

    def stop_requested(self):
        signum = self.signal or 0
        if self.ranks is not None and int(self.ranks.world_size) > 1:  # every rank stops after the same step
            signum = self.ranks.max([signum])[0]
        return signum

    def close(self):
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        if self.out.signal is None and self.signal is not None:  # a signal during the last step
            self.out.signal = self.signal


def _hooks(run: _Run, data: _Data, options: TrainOptions, on_step: Callable | None, checkpoints: _Checkpoints,
           out: TrainResult) -> list[TrainingHook]:
    """The hooks in the order the loop calls them: ``on_step``, the progress line, rank 0's summaries and
    evaluation, the checkpoints, the signals (installed last: their handlers are restored by :meth:`close`)."""
    hooks: list[TrainingHook] = [] if on_step is None else [_Callback(on_step)]
    hooks.append(_ProgressLine(run.progress))
    if run.writer:
        summaries = _Summaries(run)
        hooks += [summaries, _Evaluation(run, data, summaries.events, out)]
    return hooks + [checkpoints, _Signals(options.handle_signals, run.ranks, out)]


def train(backend_cls, options: TrainOptions, on_step: Callable | None = None) -> TrainResult:
    """Run (or resume) a training run.

    Args:
        backend_cls: the framework's trainer class, a :class:`~speechblocks.training.backend.TrainerBackend`
            (``torch_layers.Tacotron2Trainer`` or ``tf_layers.Tacotron2Trainer``).
        options (TrainOptions): the command's options.
        on_step (callable, optional): called as ``on_step(global_step, step_result)`` after every step (tests).

    Returns:
        TrainResult: the global step reached, this invocation's step losses, the last checkpoint.

    Raises:
        UsageError: no ``train.txt`` in DATA, a RUN of another model or framework, ``--from`` a missing file,
            ``steps < 1``, a global batch smaller than the number of data-parallel processes.
        ValueError: bad data (naming ``train.txt`` and the line), hparams, checkpoints.
        TrainingDivergedError: a NaN or infinite loss (naming the step and the batch's utterance ids).
    """
    data_dir = os.path.abspath(options.data)
    if not os.path.isfile(os.path.join(data_dir, "train.txt")):  # checked before any process group starts
        raise UsageError(f"DATA {options.data!r} holds no train.txt (run `speechblocks preprocess` first)")
    ranks = backend_cls.distribution()
    try:
        return _train(backend_cls, options, on_step, ranks)
    finally:
        if ranks is not None:
            ranks.close()


def _train(backend_cls, options: TrainOptions, on_step: Callable | None, ranks) -> TrainResult:
    """:func:`train` with the data-parallel processes ``ranks`` (``None``: one process): the run resolved, the data
    prepared, the loop run with its hooks."""
    run = _resolve_run(backend_cls, options, ranks)
    data = _prepare_data(run, options)
    _record_run(run, options)
    out = TrainResult(run.start_step, [], None)
    checkpoints = _Checkpoints(run, data.sampler, out)
    if run.latest is None:
        checkpoints.write(run.start_step)  # as the original: a checkpoint before the first step
    total = options.steps if options.steps is not None else \
        max(int(run.hp_full["tacotron_train_steps"]) - run.start_step, 0)
    hooks = _hooks(run, data, options, on_step, checkpoints, out)
    try:
        _run_steps(run, data, hooks, total, out)
    finally:
        for hook in hooks:
            hook.close()
    return out


def _from_source(backend_cls, source: str):
    """``--from``: the trainer of a migrated file or a TF1 checkpoint (with its stored hparams), the global step to
    continue from and, for a TF1 checkpoint holding them, the Adam slots."""
    from ..migration.migrated_file import MigratedFileError, file_kind

    kind = None
    if os.path.isfile(source):
        try:
            kind = file_kind(source)
        except MigratedFileError:
            kind = None
    if kind is not None:
        return backend_cls.from_model_file(source, None), _migrated_step(source), None
    trainer = backend_cls.from_tf1_checkpoint(source, None)
    step, adam = read_tf1_adam_state(source, trainer.trainable_names(), trainer.hparams.tacotron_adam_beta1)
    return trainer, step, adam


def _migrated_step(path: str) -> int:
    """The global step of a migrated file written by a training run (its sidecar), else 0."""
    for suffix in (".pt", ".weights.h5"):
        if path.endswith(suffix):
            sidecar = path[: -len(suffix)] + ".state.npz"
            if os.path.exists(sidecar):
                return int(read_state(sidecar)[0]["global_step"])
    return 0


def _write_checkpoint(run_dir: str, trainer, step: int, sampler: BatchSampler, seed: int, framework: str) -> str:
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    stem = f"tacotron2-{step:08d}"
    model_name, state_name = stem + trainer.model_suffix, stem + ".state.npz"
    trainer.save_model(os.path.join(ckpt_dir, model_name))
    updates, slots = trainer.optimizer_state()
    write_state(os.path.join(ckpt_dir, state_name),
                {"global_step": step, "sampler": sampler.state_dict(), "seed": seed, "framework": framework,
                 "adam_updates": updates, "model": model_name,
                 "rng": "dropout and zoneout re-seeded every step from (seed, global_step)"}, slots)
    latest = os.path.join(ckpt_dir, "latest.json")
    with atomic_path(latest) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump({"step": step, "model": model_name, "state": state_name}, f)
    kept = sorted(n for n in os.listdir(ckpt_dir) if n.startswith("tacotron2-") and n.endswith(".state.npz"))
    for old in kept[:-KEEP_CHECKPOINTS]:
        for name in (old, old.replace(".state.npz", trainer.model_suffix)):
            try:
                os.remove(os.path.join(ckpt_dir, name))
            except OSError:
                pass
    return os.path.join(ckpt_dir, model_name)


def _plot(run_dir, step, mel, target, alignment, hp_full, title, progress) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress.say("matplotlib is not installed: no plots")
        return
    plots = os.path.join(run_dir, "plots")
    os.makedirs(plots, exist_ok=True)
    r = int(hp_full["outputs_per_step"])
    fig, ax = plt.subplots(figsize=(6, 4))
    steps = max(1, math.ceil(len(mel) / r))
    im = ax.imshow(alignment[:, :steps], aspect="auto", origin="lower", interpolation="none")
    fig.colorbar(im, ax=ax)
    ax.set_xlabel("decoder step")
    ax.set_ylabel("encoder step")
    ax.set_title(title)
    fig.savefig(os.path.join(plots, f"step-{step}-align.png"))
    plt.close(fig)
    fig, axes = plt.subplots(2, 1, figsize=(8, 6))
    for a, spec, name in ((axes[0], target, "target"), (axes[1], mel, "predicted")):
        im = a.imshow(np.asarray(spec).T, aspect="auto", origin="lower", interpolation="none")
        fig.colorbar(im, ax=a)
        a.set_title(f"{name} mel spectrogram")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(plots, f"step-{step}-mel.png"))
    plt.close(fig)


def _eval_wav(run_dir, step, mel, hp_full, progress) -> None:
    from .. import audio

    try:
        params = audio.audio_hparams(hp_full)
        wav = audio.inv_mel_spectrogram(np.asarray(mel, np.float32), params, n_iter=EVAL_GRIFFIN_LIM_ITERS, seed=0)
        wavs = os.path.join(run_dir, "wavs")
        os.makedirs(wavs, exist_ok=True)
        audio.save_wav(wav, os.path.join(wavs, f"step-{step}-eval.wav"), params.sample_rate)
    except (ValueError, ImportError) as exc:  # e.g. mel sizes no audio front-end can invert
        progress.say(f"step {step}: no eval wav ({type(exc).__name__}: {exc})")


def preset_names() -> list[str]:
    """The presets ``--hparams`` accepts."""
    return sorted(TACOTRON2_PRESETS)
