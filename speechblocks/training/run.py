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
loop (:func:`_run_steps`: one :func:`_step` at a time) with the hooks of :mod:`speechblocks.training.hooks`
(:class:`~speechblocks.training.hooks.TrainingHook`): ``on_step``, the progress line, the summaries (TensorBoard),
the evaluation, the checkpoints and the signals.

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
import time
from collections.abc import Callable

import numpy as np

from ..atomic_files import atomic_path
from ..errors import UsageError
from ..tacotron2_hparams import TACOTRON2_PRESETS, Tacotron2HParams, resolve_hparams, tacotron2_hparams
from .backend import Distribution, StepResult, TrainerBackend, load_precision_state
from .batches import pad_batch, prepare_batch, shard_rows
from .checkpoint_files import read_state
from .examples import check_example_files, load_example
from .guided_attention import DEFAULT_SIGMA, add_guided_attention_weights
from .hooks import Callback, Checkpoints, Evaluation, Progress, ProgressLine, Signals, Summaries, TrainingHook
from .metadata import BatchSampler, MetadataEntry, make_test_batches, read_metadata, split_train_test
from .noise import step_seed
from .optimizer_slots import read_tf1_adam_state
from .schedule import learning_rate

__all__ = ["RUN_FORMAT", "StepResult", "TrainOptions", "TrainResult", "TrainingDivergedError", "guided_attention",
           "read_run", "step_seed", "train", "utterance_id"]

RUN_FORMAT = "speechblocks.train.run"
#: hparams a resumed run may change (they change no number of the training)
RESUMABLE_CHANGES = frozenset({"tacotron_checkpoint_interval", "tacotron_eval_interval", "tacotron_summary_interval",
                               "tacotron_train_steps", "griffin_lim_iters"})


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
        precision (str): ``--precision`` of the backend (``fp32``, ``bf16``, ``fp16``), recorded in ``run.json`` of a
            new run (the backend class carries it: ``Tacotron2Trainer.configured``).
        announce (str, optional): a progress line said once the run's checks have passed and its trainer is made
            (``speechblocks train``: where it trains and in which precision).
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
    precision: str = "fp32"
    announce: str | None = None


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
    progress: Progress
    ranks: Distribution | None  # the data-parallel processes (None: one process)

    @property
    def rank(self) -> int:
        """This process's rank (0 in one process)."""
        return 0 if self.ranks is None else int(self.ranks.rank)

    @property
    def world(self) -> int:
        """The number of data-parallel processes (1: one process)."""
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
    progress = Progress(options.progress and (ranks is None or int(ranks.rank) == 0))
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
    if options.announce:
        progress.say(options.announce)
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
    load_precision_state(trainer, meta.get("precision"))  # --precision fp16: the loss scale continues exactly
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
                              "n_symbols": run.model_hp.n_symbols, "data": run.data_dir, "source": options.source,
                              "precision": options.precision}
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
    if (not result.applied and not result.skipped) or not math.isfinite(loss):
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


def _hooks(run: _Run, data: _Data, options: TrainOptions, on_step: Callable | None, checkpoints: Checkpoints,
           out: TrainResult) -> list[TrainingHook]:
    """The hooks in the order the loop calls them: ``on_step``, the progress line, rank 0's summaries and
    evaluation, the checkpoints, the signals (installed last: their handlers are restored by :meth:`close`)."""
    hooks: list[TrainingHook] = [] if on_step is None else [Callback(on_step)]
    hooks.append(ProgressLine(run.progress))
    if run.writer:
        summaries = Summaries(run)
        hooks += [summaries, Evaluation(run, data, summaries.events, out)]
    return hooks + [checkpoints, Signals(options.handle_signals, run.ranks, out)]


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
    checkpoints = Checkpoints(run, data.sampler, out)
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


def preset_names() -> list[str]:
    """The presets ``--hparams`` accepts."""
    return sorted(TACOTRON2_PRESETS)
