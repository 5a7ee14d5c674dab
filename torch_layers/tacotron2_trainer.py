"""The original Tacotron-2 optimizer step for PyTorch: TF1's Adam, the decayed learning rate, global-norm clipping
and the loss of ``add_loss`` -- the torch backend of ``speechblocks train`` and ``speechblocks gta``."""
from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from speechblocks.atomic_files import atomic_path
from speechblocks.devices import check_precision
from speechblocks.errors import UsageError
from speechblocks.tacotron2_hparams import Tacotron2HParams
from speechblocks.tacotron2_schema import tf1_variable_shapes
from speechblocks.training.backend import StepResult
from speechblocks.training.checkpoint_files import torch_model_payload
from speechblocks.training.guided_attention import BATCH_KEY as GUIDED_KEY
from speechblocks.training.noise import draw_noise_masks, noise_mask_rows
from speechblocks.training.optimizer_slots import framework_moments, tf1_slots

from .collectives import is_distributed
from .distributed import set_sync_batch_norm
from .tacotron2 import Tacotron2
from .tacotron2_loss import guided_attention_loss, tacotron2_loss

__all__ = ["TF1Adam", "Tacotron2Trainer", "TorchDistributed", "clip_by_global_norm", "LossScale", "AUTOCAST_DTYPES"]

#: the autocast dtype of each ``--precision`` (``fp32``: no autocast)
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class TF1Adam(torch.optim.Optimizer):
    """TF1's ``tf.train.AdamOptimizer`` update (``ApplyAdam``), which differs from ``torch.optim.Adam`` in where
    epsilon goes (TF1 adds it to ``sqrt(v)`` after the bias correction folded into the step size)::

        t = updates + 1
        lr_t = lr * sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        m += (g - m) * (1 - beta1);  v += (g * g - v) * (1 - beta2)
        param -= lr_t * m / (sqrt(v) + epsilon)

    Args:
        params: the parameters (or parameter groups).
        lr (float): the learning rate (set it before every step: ``param_groups[i]["lr"]``).
        betas (tuple[float, float]): ``(beta1, beta2)``. (Default: ``(0.9, 0.999)``)
        eps (float): epsilon. (Default: ``1e-8``; the originals use ``1e-6``)

    The number of updates applied so far is :attr:`updates` (TF1 stores it as ``beta1_power = beta1 ** (updates +
    1)``); the slots are ``state[p]["m"]`` and ``state[p]["v"]``.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        self.updates = 0

    @torch.no_grad()
    def step(self, closure=None):
        """Apply one update with the gradients in ``.grad`` (a parameter without one counts as a zero gradient,
        as TF1 applies the update to every variable)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        t = self.updates + 1
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr_t = group["lr"] * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["m"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["v"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                m, v = state["m"], state["v"]
                m.add_((g - m) * (1.0 - beta1))
                v.add_((g * g - v) * (1.0 - beta2))
                p.sub_(lr_t * m / (v.sqrt() + group["eps"]))
        self.updates = t
        return loss

    def state_dict(self):  # noqa: D102 -- torch's, plus the update count
        out = super().state_dict()
        out["updates"] = self.updates
        return out

    def load_state_dict(self, state_dict):  # noqa: D102
        state_dict = dict(state_dict)
        self.updates = int(state_dict.pop("updates", 0))
        super().load_state_dict(state_dict)


def clip_by_global_norm(tensors: list[Tensor], clip_norm: float = 1.0) -> tuple[list[Tensor], Tensor]:
    """TF's ``tf.clip_by_global_norm``: every tensor times ``clip_norm / max(global_norm, clip_norm)``.

    Args:
        tensors (list[Tensor]): the gradients.
        clip_norm (float): the largest global norm kept. (Default: 1.0, the originals')

    Returns:
        (list[Tensor], Tensor): the clipped tensors and the global norm before clipping (NaN or inf norms give
        NaN tensors, as TF's).
    """
    norm = torch.sqrt(sum((t.float() ** 2).sum() for t in tensors))
    scale = clip_norm * torch.minimum(1.0 / norm, norm.new_tensor(1.0 / clip_norm))
    scale = torch.where(torch.isfinite(norm), scale, norm.new_tensor(float("nan")))  # no host sync on a GPU
    return [t * scale.to(t.dtype) for t in tensors], norm


class LossScale:
    """The dynamic loss scale of ``--precision fp16`` (``torch.amp.GradScaler``'s and Keras' ``LossScaleOptimizer``'s
    rule, kept in plain numbers so that a checkpoint holds it and a resumed run continues it exactly): the loss is
    multiplied by :attr:`scale` before the backward pass and the gradients divided by it; a step whose gradients
    are not finite is skipped and the scale halved; after :attr:`growth_interval` finite steps in a row it doubles.

    Attributes:
        scale (float): the current scale (initially ``2 ** 15``).
        good_steps (int): finite steps since the last change.
    """

    growth_interval = 2000

    def __init__(self, scale: float = 2.0 ** 15, good_steps: int = 0):
        self.scale, self.good_steps = float(scale), int(good_steps)

    def update(self, finite: bool) -> None:
        """After a step: back off (not finite) or count towards growth."""
        if not finite:
            self.scale, self.good_steps = max(self.scale * 0.5, 1.0), 0
            return
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            self.scale, self.good_steps = self.scale * 2.0, 0

    def state(self) -> dict:
        """``{"loss_scale", "good_steps"}`` (JSON: the checkpoint's sidecar)."""
        return {"loss_scale": self.scale, "good_steps": self.good_steps}


def _to_device(t: Tensor, device: torch.device) -> Tensor:
    """A host tensor on ``device``: on a GPU through pinned memory, copied without blocking the host (the batch and
    its keep-masks of a step reach the GPU while the previous step's kernels still run)."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _mask_tensors(masks, device):
    if isinstance(masks, dict):
        return {k: _mask_tensors(v, device) for k, v in masks.items()}
    if isinstance(masks, (list, tuple)):
        return type(masks)(_mask_tensors(v, device) for v in masks)
    return _to_device(torch.from_numpy(np.ascontiguousarray(masks)), device)


def _batch_tensors(batch: Mapping[str, np.ndarray], device) -> dict[str, Tensor]:
    device = torch.device(device)
    out = {}
    for k, v in batch.items():
        t = torch.from_numpy(np.ascontiguousarray(v))
        out[k] = _to_device(t.long() if k in ("inputs", "input_lengths", "targets_lengths") else t, device)
    return out


def _launched_ranks() -> int:
    """``WORLD_SIZE`` of a ``torchrun`` launch (1 without one)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise UsageError(f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} is not a number of processes") from None


class TorchDistributed:
    """The processes of a data-parallel run (``torchrun --nproc-per-node N -m speechblocks train ...``): what the
    framework-free loop of :func:`speechblocks.training.run.train` needs of them.

    Attributes:
        rank (int): this process's rank; rank 0 writes the run folder.
        world_size (int): the number of processes.
    """

    def __init__(self, owned: bool, device: str | torch.device = "cpu"):
        import torch.distributed as dist

        self._dist = dist
        self._owned = owned
        self._device = torch.device(device)  # NCCL's collectives take tensors on the rank's GPU, gloo's on the CPU
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def barrier(self) -> None:
        """Wait for every rank."""
        self._dist.barrier()

    def max(self, values: list[int]) -> list[int]:
        """The element-wise maximum of ``values`` over the ranks."""
        t = torch.tensor([int(v) for v in values], dtype=torch.int64, device=self._device)
        self._dist.all_reduce(t, op=self._dist.ReduceOp.MAX)
        return [int(v) for v in t.tolist()]

    def close(self) -> None:
        """Ends the process group when :meth:`Tacotron2Trainer.distribution` started it."""
        if self._owned and self._dist.is_initialized():
            self._dist.destroy_process_group()


class Tacotron2Trainer:
    """One model and its optimizer, stepped as the original ``add_optimizer`` (the torch backend of
    :func:`speechblocks.training.run.train`).

    Each :meth:`train_step`: the model in ``train()`` on the batch (teacher forced), :func:`tacotron2_loss`,
    gradients of every trainable variable, ``clip_by_global_norm(gradients, 1.0)`` when
    ``tacotron_clip_gradients``, one :class:`TF1Adam` update with the given learning rate. The step's random draws
    (pre-net dropout, zoneout, conv dropout) are the keep-masks of
    :func:`speechblocks.training.draw_noise_masks` for the global batch, drawn from the step's seed.

    Data-parallel (an initialised ``torch.distributed`` process group of several ranks, e.g. under ``torchrun``):
    every batch norm uses the global batch's statistics (:func:`~torch_layers.distributed.set_sync_batch_norm`),
    the model runs under ``DistributedDataParallel`` (the ranks start from rank 0's weights), each rank passes its
    rows of the global batch (padded to the global batch's lengths) and the loss is the global reduction of
    :func:`tacotron2_loss` (the masked terms normalised over the whole global batch): DDP's averaged gradients are
    the gradients of the single-process loss on the global batch, and every rank applies the same update.

    Devices and precision (``speechblocks train --device``, ``--precision``; :meth:`configured` makes the trainer
    class of both): the model, its optimizer state and every step's tensors live on :attr:`device` (the batch and its
    keep-masks copied there through pinned memory without blocking on a GPU; one read of the step's losses and norm
    per step, for the non-finite check and the progress line). ``precision="bf16"``/``"fp16"``: the forward pass
    under ``torch.autocast`` (autocast's own lists decide which operations run in the lower precision), the losses
    computed in float32 from its outputs, gradients, master weights and Adam's slots float32; ``fp16`` multiplies
    the loss by a dynamic :class:`LossScale` (a step whose gradients overflow is skipped and reported as such, the
    scale halved), which a checkpoint keeps so that a resumed run continues exactly.

    Args:
        model (Tacotron2): the model (trained in place).
        device (str or torch.device, optional): where it runs. (Default: the class's :attr:`default_device`,
            ``"cpu"``)

    Example:
        >>> trainer = Tacotron2Trainer.new(resolve_hparams("rtvc"), seed=0)
        >>> result = trainer.train_step(prepare_batch(examples, "rtvc"), learning_rate=1e-3, seed=1)
        >>> result.losses["loss"], result.grad_norm
    """

    framework = "torch"
    model_suffix = ".pt"
    #: where the trainers of this class run (:meth:`configured`)
    default_device = "cpu"
    #: ``"fp32"`` (the original), ``"bf16"`` or ``"fp16"`` (:meth:`configured`)
    precision = "fp32"

    def __init__(self, model: Tacotron2, device: str | torch.device | None = None):
        self.device = torch.device(self.default_device if device is None else device)
        self.model = model.to(self.device).train()
        self.loss_scale = LossScale() if self.precision == "fp16" else None
        self.hparams: Tacotron2HParams = model.hparams
        self._bindings = model._tf1_trainable_bindings()
        hp = self.hparams
        self.optimizer = TF1Adam([b.tensor for b in self._bindings.values()], lr=hp.tacotron_initial_learning_rate,
                                 betas=(hp.tacotron_adam_beta1, hp.tacotron_adam_beta2), eps=hp.tacotron_adam_epsilon)
        self.ddp = None
        if is_distributed():
            from torch.nn.parallel import DistributedDataParallel

            set_sync_batch_norm(self.model, True)
            ids = [self.device.index] if self.device.type == "cuda" and self.device.index is not None else None
            self.ddp = DistributedDataParallel(self.model, device_ids=ids)  # broadcasts rank 0's weights and buffers

    @classmethod
    def configured(cls, device: str | torch.device | None = None, precision: str = "fp32") -> type:
        """A trainer class whose trainers run on ``device`` (default the CPU) in ``precision`` (``"fp32"``,
        ``"bf16"``, ``"fp16"``): what ``speechblocks train --device --precision`` and ``gta --device`` run.

        Raises:
            ValueError: a precision that is not one of those three.
        """
        precision = check_precision(precision)
        device = str(torch.device(cls.default_device if device is None else device))
        return type(cls.__name__, (cls,), {"default_device": device, "precision": precision, "__doc__": cls.__doc__})

    def _autocast(self):
        """The forward pass's autocast context (``fp32``: none)."""
        dtype = AUTOCAST_DTYPES[self.precision]
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=dtype)

    @classmethod
    def distribution(cls) -> TorchDistributed | None:
        """The data-parallel processes this one belongs to, or ``None`` (one process).

        Under ``torchrun`` (``WORLD_SIZE > 1`` in the environment) the process group is started here (NCCL when the
        class's device is a GPU -- ``cuda:LOCAL_RANK``, :meth:`configured` --, else gloo; the
        ``env://`` rendezvous of ``torchrun``; :meth:`TorchDistributed.close` ends it); an already initialised
        group of several ranks is used as it is.
        """
        import torch.distributed as dist

        owned = False
        if not (dist.is_available() and dist.is_initialized()):
            if _launched_ranks() <= 1:
                return None
            cuda = torch.device(cls.default_device).type == "cuda"
            if cuda:
                torch.cuda.set_device(torch.device(cls.default_device))
            dist.init_process_group("nccl" if cuda else "gloo")
            owned = True
        if dist.get_world_size() <= 1:
            if owned:
                dist.destroy_process_group()
            return None
        return TorchDistributed(owned, cls.default_device)

    # -- construction ---------------------------------------------------------------------------------------
    @classmethod
    def new(cls, hparams, seed: int = 0) -> Tacotron2Trainer:
        """A freshly initialised model (TF1's initializers, drawn after ``torch.manual_seed(seed)``)."""
        torch.manual_seed(int(seed))
        return cls(Tacotron2(hparams))

    @classmethod
    def from_model_file(cls, path: str | os.PathLike, hparams=None) -> Tacotron2Trainer:
        """The model of a migrated file (``.pt`` or ``.weights.h5``), e.g. a checkpoint of a run."""
        return cls(Tacotron2.from_migrated(path, hparams))

    @classmethod
    def from_tf1_checkpoint(cls, path: str | os.PathLike, hparams=None) -> Tacotron2Trainer:
        """The model of a TF1 checkpoint (read in numpy)."""
        return cls(Tacotron2.from_tf1_checkpoint(path, hparams))

    @classmethod
    def with_hparams(cls, trainer: Tacotron2Trainer, hparams: Tacotron2HParams) -> Tacotron2Trainer:
        """A trainer of a model with other (size-compatible) hparams and the same weights (no optimizer state)."""
        model = Tacotron2(hparams)
        model.load_state_dict(trainer.model.state_dict())
        return cls(model, trainer.device)

    def precision_state(self) -> dict:
        """What a checkpoint keeps of the precision: ``{"precision"}`` and, for ``fp16``, the loss scale's state
        (:meth:`LossScale.state`) so that a resumed run continues it exactly."""
        return {"precision": self.precision, **({} if self.loss_scale is None else self.loss_scale.state())}

    def load_precision_state(self, state: Mapping | None) -> None:
        """Restore :meth:`precision_state`'s loss scale (a checkpoint of another precision: the fresh scale)."""
        if self.loss_scale is not None and state and "loss_scale" in state:
            self.loss_scale = LossScale(state["loss_scale"], state.get("good_steps", 0))

    def trainable_names(self) -> list[str]:
        """The TF1 names of the trainable variables (relative to ``Tacotron_model/inference/``)."""
        return list(self._bindings)

    # -- steps --------------------------------------------------------------------------------------------------
    def noise_masks(self, batch: Mapping[str, np.ndarray], seed: int, rows: tuple[int, int] | None = None) -> dict:
        """The keep-masks of ``batch``'s rows: :func:`~speechblocks.training.draw_noise_masks` of the global batch
        (``rows = (first row, global batch size)``; default the batch is the global batch), cut to these rows."""
        n = batch["inputs"].shape[0]
        first, total = (0, n) if rows is None else (int(rows[0]), int(rows[1]))
        masks = draw_noise_masks(self.hparams, total, batch["inputs"].shape[1], batch["mel_targets"].shape[1], seed)
        if (first, total) != (0, n):
            masks = noise_mask_rows(masks, first, first + n)
        return _mask_tensors(masks, self.device)

    def compute_gradients(self, batch: Mapping[str, np.ndarray], seed: int, rows: tuple[int, int] | None = None
                          ) -> tuple[dict[str, Tensor], list, Tensor]:
        """The losses and the (clipped, when ``tacotron_clip_gradients``) gradients of a training-mode pass.

        Args:
            batch: :func:`speechblocks.training.prepare_batch`'s dict (a rank's rows of the global batch, padded
                to its lengths, when data-parallel).
            seed (int): the step's seed (the keep-masks of the global batch).
            rows (tuple[int, int], optional): ``(first row, global batch size)`` of ``batch`` in the global batch.
                (Default: the batch is the global batch)

        Returns:
            (dict[str, Tensor], list[Tensor], Tensor): the losses (of the global batch), the gradients in
            :meth:`trainable_names` order (data-parallel: DDP's average, the global batch's), the global norm
            before clipping.
        """
        b = _batch_tensors(batch, self.device)
        noise = self.noise_masks(batch, seed, rows)
        self.model.train()
        torch.manual_seed(int(seed))
        params = [v.tensor for v in self._bindings.values()]
        net = self.model if self.ddp is None else self.ddp
        with torch.enable_grad():
            with self._autocast():  # the losses below are float32 whatever autocast produced
                out = net(b["inputs"], b["input_lengths"], b.get("speaker_embeddings"), b["mel_targets"], None, noise)
            losses = tacotron2_loss(self.model, out, b["mel_targets"], b["stop_token_targets"], b["targets_lengths"],
                                    b.get("linear_targets"))
            if GUIDED_KEY in b:  # the optional guided-attention term (its weight is in the batch's weights)
                guided = guided_attention_loss(out["alignments"], b[GUIDED_KEY], b["targets_lengths"],
                                               self.hparams.outputs_per_step)
                losses = dict(losses, guided_attention_loss=guided, loss=losses["loss"] + guided)
            scaled = losses["loss"] if self.loss_scale is None else losses["loss"] * self.loss_scale.scale
            if self.ddp is None:
                grads = torch.autograd.grad(scaled, params, allow_unused=True)
            else:  # DDP all-reduces (averages) the gradients as backward accumulates them
                for p in params:
                    p.grad = None
                scaled.backward()
                grads = [p.grad for p in params]
                for p in params:
                    p.grad = None
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        if self.loss_scale is not None:  # fp16: the gradients of the loss itself (float32, as the weights)
            grads = [g.float() / self.loss_scale.scale for g in grads]
        if self.hparams.tacotron_clip_gradients:
            grads, norm = clip_by_global_norm(grads, 1.0)
        else:
            norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads))
        return {k: v.detach() for k, v in losses.items()}, grads, norm

    def train_step(self, batch: Mapping[str, np.ndarray], learning_rate: float, seed: int,
                   rows: tuple[int, int] | None = None) -> StepResult:
        """One optimizer step on ``batch`` (:func:`speechblocks.training.prepare_batch`'s dict) with the given
        learning rate (``rows`` as :meth:`compute_gradients`); the update is not applied when the loss is not
        finite."""
        losses, grads, norm = self.compute_gradients(batch, seed, rows)
        read = torch.stack([v.float() for v in losses.values()] + [norm.float()]).tolist()  # one host read a step
        values, norm = dict(zip(losses, read[:-1])), read[-1]
        if not math.isfinite(values["loss"]):
            return StepResult(values, norm, applied=False)
        if self.loss_scale is not None:
            finite = math.isfinite(norm)
            self.loss_scale.update(finite)
            if not finite:  # fp16 overflow: the step is skipped, the scale backed off (not a divergence)
                return StepResult(values, norm, applied=False, skipped=True)
        for v, g in zip(self._bindings.values(), grads):
            v.tensor.grad = g
        for group in self.optimizer.param_groups:
            group["lr"] = float(learning_rate)
        self.optimizer.step()
        for v in self._bindings.values():
            v.tensor.grad = None
        return StepResult(values, norm)

    @torch.no_grad()
    def evaluate(self, batch: Mapping[str, np.ndarray], seed: int) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        """The original eval model on a test batch: inference mode (moving statistics, no conv dropout,
        deterministic zoneout), teacher forced over every target frame, the loss of ``add_loss`` with the stop
        logits recovered from the probabilities (clipped to ``[1e-7, 1 - 1e-7]``). Runs on one process (rank 0 of a
        data-parallel run), without collectives.

        Returns:
            (dict[str, float], numpy.ndarray, numpy.ndarray): the losses, the first example's ``mel_outputs``
            ``(frames, num_mels)`` and ``alignments`` ``(T_in, steps)``.
        """
        b = _batch_tensors(batch, self.device)
        self.model.eval()
        try:
            torch.manual_seed(int(seed))
            steps = b["mel_targets"].shape[1] // self.hparams.outputs_per_step
            with self._autocast():
                out = self.model(b["inputs"], b["input_lengths"], b.get("speaker_embeddings"), b["mel_targets"], steps)
            p = out["stop_token_prediction"].float().clamp(1e-7, 1 - 1e-7)
            out = dict(out, stop_token_prediction=torch.log(p) - torch.log1p(-p))
            # one rank evaluates (data-parallel runs too): its own loss, no collective (in one process the same)
            losses = tacotron2_loss(self.model, out, b["mel_targets"], b["stop_token_targets"], b["targets_lengths"],
                                    b.get("linear_targets"), reduction="per_replica")
        finally:
            self.model.train()
        return ({k: float(v) for k, v in losses.items()}, out["mel_outputs"][0].float().cpu().numpy(),
                out["alignments"][0].float().cpu().numpy())

    @torch.no_grad()
    def teacher_forced(self, batch: Mapping[str, np.ndarray], max_iters: int | None, seed: int) -> np.ndarray:
        """GTA: the model in ``eval()`` teacher forced by ``mel_targets`` (``max_iters`` caps the steps; ``None``:
        the hparam). Returns ``mel_outputs`` ``(B, steps * r, num_mels)``."""
        b = _batch_tensors(batch, self.device)
        was_training = self.model.training
        self.model.eval()
        try:
            torch.manual_seed(int(seed))
            out = self.model(b["inputs"], b["input_lengths"], b.get("speaker_embeddings"), b["mel_targets"], max_iters)
        finally:
            self.model.train(was_training)
        return out["mel_outputs"].float().cpu().numpy()

    # -- state ----------------------------------------------------------------------------------------------
    def save_model(self, path: str | os.PathLike, source: str = "") -> None:
        """Write the model as ``speechblocks migrate --to torch`` does (``Tacotron2.from_migrated`` reads it)."""
        state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        payload = torch_model_payload(self.hparams, state, tf1_variable_shapes(self.hparams), source)
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)

    def optimizer_state(self) -> tuple[int, dict[str, np.ndarray]]:
        """``(updates, slots)``: the update count and ``{"<TF1 name>/Adam": m, "<TF1 name>/Adam_1": v}`` in TF1
        layout (empty before the first update; :func:`speechblocks.training.optimizer_slots.tf1_slots`)."""
        moments = {}
        for name, var in self._bindings.items():
            state = self.optimizer.state.get(var.tensor)
            if state:
                moments[name] = (state["m"].detach().cpu().numpy(), state["v"].detach().cpu().numpy())
        return self.optimizer.updates, tf1_slots(moments, self._bindings)

    def load_optimizer_state(self, updates: int, slots: Mapping[str, np.ndarray]) -> None:
        """Restore :meth:`optimizer_state` (also a TF1 checkpoint's slots by TF1 name); no slots: zero moments
        (:class:`TF1Adam` starts them at the next step).

        Raises:
            ValueError: slots of some variables only, or of the wrong shape.
        """
        self.optimizer.updates = int(updates)
        self.optimizer.state.clear()
        shapes = {name: tuple(var.tensor.shape) for name, var in self._bindings.items()}
        moments = framework_moments(slots, self._bindings, shapes)
        for name, (m, v) in moments.items():
            tensor = self._bindings[name].tensor
            self.optimizer.state[tensor] = {key: torch.from_numpy(np.ascontiguousarray(value)).to(tensor)
                                            for key, value in (("m", m), ("v", v))}
