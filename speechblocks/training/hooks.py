"""The hooks of the training loop (:func:`speechblocks.training.run.train`): what happens around each step.

The loop calls every :class:`TrainingHook` before each step (:meth:`~TrainingHook.stop_requested`), after it
(:meth:`~TrainingHook.on_step`), after the last step (:meth:`~TrainingHook.on_end`) and when it ends
(:meth:`~TrainingHook.close`). The hooks of ``speechblocks train``, in the order it calls them: :class:`Callback`
(``train``'s ``on_step``), :class:`ProgressLine`, rank 0's :class:`Summaries` (TensorBoard scalars) and
:class:`Evaluation` (test-batch losses, plots, a wav), :class:`Checkpoints`, :class:`Signals` (SIGINT/SIGTERM: a
graceful stop after the step).

A hook reads the run through ``run`` (the loop's resolved run: ``run_dir``, ``trainer``, ``hp_full``, ``seed``,
``framework``, ``writer``, ``progress``) and ``data`` (``load(entries)``, ``test_set``, ``test_batches``), and
records what the run returns in ``out`` (the :class:`~speechblocks.training.run.TrainResult`: ``checkpoint``,
``eval_losses``, ``signal``).
"""
from __future__ import annotations

import json
import math
import os
import signal
import sys
from collections import deque
from collections.abc import Callable

import numpy as np

from ..atomic_files import atomic_path
from .backend import Distribution, StepResult, precision_state
from .checkpoint_files import write_state
from .metadata import BatchSampler
from .noise import step_seed

__all__ = ["EVAL_GRIFFIN_LIM_ITERS", "KEEP_CHECKPOINTS", "Callback", "Checkpoints", "Evaluation", "Progress",
           "ProgressLine", "Signals", "Summaries", "TrainingHook"]

KEEP_CHECKPOINTS = 5  # the original Saver's max_to_keep
EVAL_GRIFFIN_LIM_ITERS = 8


class Progress:
    """Rank 0's lines on stderr: :meth:`step` a ``\\r``-updated line (on a terminal only), :meth:`say` a line."""

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


class Callback(TrainingHook):
    """``train``'s ``on_step(global_step, step_result)``."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def on_step(self, step, result, seconds):
        self.fn(step, result)


class ProgressLine(TrainingHook):
    """The progress line: seconds a step and the loss averaged over the last 100 steps."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.window, self.times = deque(maxlen=100), deque(maxlen=100)

    def on_step(self, step, result, seconds):
        loss = float(result.losses["loss"])
        self.times.append(seconds)
        self.window.append(loss)
        self.progress.step(f"step {step:7d} [{sum(self.times) / len(self.times):.3f} s/step, loss={loss:.5f}, "
                           f"avg_loss={sum(self.window) / len(self.window):.5f}, lr={result.learning_rate:.3g}]")


class Summaries(TrainingHook):
    """Every ``tacotron_summary_interval`` steps the step's scalars in the run's TensorBoard event file (which the
    evaluation writes to too)."""

    def __init__(self, run):
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


class Evaluation(TrainingHook):
    """Every ``tacotron_eval_interval`` steps the losses over every test batch (as the original's eval model), plots
    and a wav of the last batch's first sentence; the scalars under the original's ``Tacotron_eval_model/
    eval_stats/`` tags; the losses in ``out.eval_losses``."""

    def __init__(self, run, data, events, out):
        self.run, self.data, self.events, self.out = run, data, events, out
        self.every = int(run.hp_full["tacotron_eval_interval"])

    def on_step(self, step, result, seconds):
        if step % self.every == 0:
            self.out.eval_losses = self.evaluate(step)

    def evaluate(self, step: int) -> dict:
        """The mean losses over the test batches at global step ``step`` (``{}``: no test batch)."""
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


class Checkpoints(TrainingHook):
    """Every ``tacotron_checkpoint_interval`` steps and after the last step a checkpoint (rank 0 writes it; the
    other ranks name it); the last in ``out.checkpoint``."""

    def __init__(self, run, sampler: BatchSampler, out):
        self.run, self.sampler, self.out = run, sampler, out
        self.every = int(run.hp_full["tacotron_checkpoint_interval"])

    def write(self, step: int) -> str:
        """The checkpoint of global step ``step``: its model file."""
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


class Signals(TrainingHook):
    """SIGINT/SIGTERM handlers that record the signal: the loop finishes its step, checkpoints and stops (every rank
    after the same step); a signal during the last step is ``out.signal`` too."""

    def __init__(self, enabled: bool, ranks: Distribution | None, out):
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


def _write_checkpoint(run_dir: str, trainer, step: int, sampler: BatchSampler, seed: int, framework: str) -> str:
    """The model file, the state sidecar (global step, sampler state, seed, Adam slots), then ``latest.json``; the
    oldest checkpoints past :data:`KEEP_CHECKPOINTS` removed. Returns the model file."""
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    stem = f"tacotron2-{step:08d}"
    model_name, state_name = stem + trainer.model_suffix, stem + ".state.npz"
    trainer.save_model(os.path.join(ckpt_dir, model_name))
    updates, slots = trainer.optimizer_state()
    meta = {"global_step": step, "sampler": sampler.state_dict(), "seed": seed, "framework": framework,
            "adam_updates": updates, "model": model_name,
            "rng": "dropout and zoneout re-seeded every step from (seed, global_step)"}
    precision = precision_state(trainer)  # --precision (and fp16's loss scale, which a resumed run continues)
    if precision is not None:
        meta["precision"] = precision
    write_state(os.path.join(ckpt_dir, state_name), meta, slots)
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
    """``plots/step-<step>-align.png`` and ``-mel.png`` (nothing without matplotlib)."""
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
    """``wavs/step-<step>-eval.wav``: Griffin-Lim of ``mel`` (a line instead when the mel cannot be inverted)."""
    from .. import audio

    try:
        params = audio.audio_hparams(hp_full)
        wav = audio.inv_mel_spectrogram(np.asarray(mel, np.float32), params, n_iter=EVAL_GRIFFIN_LIM_ITERS, seed=0)
        wavs = os.path.join(run_dir, "wavs")
        os.makedirs(wavs, exist_ok=True)
        audio.save_wav(wav, os.path.join(wavs, f"step-{step}-eval.wav"), params.sample_rate)
    except (ValueError, ImportError) as exc:  # e.g. mel sizes no audio front-end can invert
        progress.say(f"step {step}: no eval wav ({type(exc).__name__}: {exc})")
