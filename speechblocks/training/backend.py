"""What ``speechblocks train`` and ``speechblocks gta`` need of a framework: the trainer backend, framework-free.

:class:`TrainerBackend` is the contract the loop of :mod:`speechblocks.training.run` and
:mod:`speechblocks.training.gta` call; ``torch_layers.Tacotron2Trainer`` and ``tf_layers.Tacotron2Trainer`` satisfy
it (``tests/test_tacotron2_twin_contract.py`` holds both to its signatures: names, parameters, kinds, defaults).
:class:`StepResult` is what a step returns, :class:`Distribution` the data-parallel processes a backend may run in.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from ..tacotron2_hparams import Tacotron2HParams

__all__ = ["Distribution", "StepResult", "TrainerBackend", "PrecisionAware", "precision_state", "load_precision_state"]


@dataclasses.dataclass
class StepResult:
    """What a backend's ``train_step`` returns.

    Attributes:
        losses (dict[str, float]): ``before_loss, after_loss, stop_token_loss, linear_loss, regularization_loss,
            loss``.
        grad_norm (float): the global norm of the gradients before clipping.
        applied (bool): whether the update was applied (False when the loss is not finite).
        learning_rate (float, optional): the rate of the update (set by the training loop).
        skipped (bool): ``--precision fp16``: the gradients overflowed at the current loss scale, the update was
            skipped and the scale backed off (not a divergence: the loop goes on with the next batch).
    """

    losses: dict
    grad_norm: float
    applied: bool = True
    learning_rate: float | None = None
    skipped: bool = False


class Distribution(Protocol):
    """The data-parallel processes a trainer runs in (``torch_layers.tacotron2_trainer.TorchDistributed``)."""

    rank: int  #: this process's rank; rank 0 writes the run folder
    world_size: int  #: the number of processes

    def barrier(self) -> None:
        """Wait for every rank."""

    def max(self, values: list[int]) -> list[int]:
        """The element-wise maximum of ``values`` over the ranks."""

    def close(self) -> None:
        """End the process group when :meth:`TrainerBackend.distribution` started it."""


@runtime_checkable
class TrainerBackend(Protocol):
    """One Tacotron-2 model and its optimizer (TF1's Adam), stepped as the original ``add_optimizer``.

    The optimizer state is exchanged in TF1's names and layout (:mod:`speechblocks.training.optimizer_slots`):
    ``{"<TF1 name>/Adam": m, "<TF1 name>/Adam_1": v}`` by the variable's name relative to
    ``Tacotron_model/inference/``, and the number of updates applied so far.
    """

    framework: ClassVar[str]  #: ``"torch"`` / ``"keras"`` (recorded in ``run.json``)
    model_suffix: ClassVar[str]  #: ``".pt"`` / ``".weights.h5"`` (the checkpoint's model file)
    hparams: Tacotron2HParams  #: the model's hparams

    @classmethod
    def new(cls, hparams, seed: int = 0) -> TrainerBackend:
        """A freshly initialised model (TF1's initializers drawn from ``seed``)."""

    @classmethod
    def from_model_file(cls, path: str | os.PathLike, hparams=None) -> TrainerBackend:
        """The model of a migrated file (e.g. a checkpoint of a run)."""

    @classmethod
    def from_tf1_checkpoint(cls, path: str | os.PathLike, hparams=None) -> TrainerBackend:
        """The model of a TF1 checkpoint."""

    @classmethod
    def with_hparams(cls, trainer: TrainerBackend, hparams: Tacotron2HParams) -> TrainerBackend:
        """A trainer of a model with other (size-compatible) hparams and the same weights (no optimizer state)."""

    @classmethod
    def distribution(cls) -> Distribution | None:
        """The data-parallel processes this one belongs to, or ``None`` (one process)."""

    def trainable_names(self) -> list[str]:
        """The TF1 names of the trainable variables (relative to ``Tacotron_model/inference/``)."""

    def train_step(self, batch: Mapping[str, np.ndarray], learning_rate: float, seed: int,
                   rows: tuple[int, int] | None = None) -> StepResult:
        """One optimizer step on ``batch`` (:func:`~speechblocks.training.prepare_batch`'s dict); not applied when
        the loss is not finite. ``rows = (first row, global batch size)``: the batch is this rank's rows of the
        global batch (data-parallel; default: the batch is the global batch)."""

    def evaluate(self, batch: Mapping[str, np.ndarray], seed: int) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        """The original eval model on a test batch: the losses, the first example's ``mel_outputs`` and
        ``alignments``."""

    def teacher_forced(self, batch: Mapping[str, np.ndarray], max_iters: int | None, seed: int) -> np.ndarray:
        """GTA: inference mode teacher forced by ``mel_targets``; ``mel_outputs`` ``(B, steps * r, num_mels)``."""

    def save_model(self, path: str | os.PathLike, source: str = "") -> None:
        """Write the model as ``speechblocks migrate`` does."""

    def optimizer_state(self) -> tuple[int, dict[str, np.ndarray]]:
        """``(updates, slots)``: the update count and the Adam slots by TF1 name, TF1 layout (empty before the
        first update)."""

    def load_optimizer_state(self, updates: int, slots: Mapping[str, np.ndarray]) -> None:
        """Restore :meth:`optimizer_state` (also a TF1 checkpoint's slots); empty ``slots``: zero moments.

        Raises:
            ValueError: slots of some variables only, or of the wrong shape.
        """


@runtime_checkable
class PrecisionAware(Protocol):
    """Optional members of a :class:`TrainerBackend` that trains in a lower precision (``speechblocks train
    --precision``): what a checkpoint keeps of it. A backend without them trains in float32 and checkpoints nothing
    more; the loop reads them through :func:`precision_state` / :func:`load_precision_state`."""

    def precision_state(self) -> dict:
        """``{"precision": "fp32"|"bf16"|"fp16"}`` and, for ``fp16``, the dynamic loss scale's state."""

    def load_precision_state(self, state: Mapping | None) -> None:
        """Restore :meth:`precision_state` (``None``: a checkpoint without it, the fresh state)."""


def precision_state(trainer) -> dict | None:
    """``trainer.precision_state()`` of a :class:`PrecisionAware` backend, else ``None``."""
    return trainer.precision_state() if isinstance(trainer, PrecisionAware) else None


def load_precision_state(trainer, state: Mapping | None) -> None:
    """``trainer.load_precision_state(state)`` of a :class:`PrecisionAware` backend (else nothing to restore)."""
    if isinstance(trainer, PrecisionAware):
        trainer.load_precision_state(state)
