"""The torch side of Tacotron-1 fine-tuning (``speechblocks train --from <keithito/mimic2 source> --framework
torch``): the model's training-mode pass, its gradients in TF1 layout and the model file. The optimizer is
:mod:`speechblocks.training.tacotron1_optimizer` (numpy, shared with Keras)."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from speechblocks.atomic_files import atomic_path
from speechblocks.training.tacotron1 import tacotron1_torch_payload

from .tacotron1 import Tacotron1

__all__ = ["Tacotron1Trainer"]


class Tacotron1Trainer:
    """Binds a torch ``Tacotron1`` to the framework-free loop (:func:`speechblocks.training.tacotron1.
    train_tacotron1`).

    Args:
        model: the ``Tacotron1`` to train (put in ``train()`` mode; its parameters are updated in place).
    """

    framework = "torch"
    extension = ".pt"

    def __init__(self, model: Tacotron1):
        self.model = model.train()
        self.hparams, self.layout = model.hparams, model.layout
        bindings = model._tf1_variables()
        self._bindings = {k: v for k, v in bindings.items() if isinstance(v.tensor, nn.Parameter)}
        self._device = next(model.parameters()).device

    @classmethod
    def load(cls, source: str, kind: str, hparams=None, overrides: dict | None = None) -> Tacotron1Trainer:
        """The trainer of the model in ``source``: a TF1 checkpoint (``kind="tf1"``) or a migrated torch file."""
        overrides = dict(overrides or {})
        if kind == "tf1":
            return cls(Tacotron1.from_tf1_checkpoint(source, hparams, **overrides))
        return cls(Tacotron1.from_migrated(source, hparams, **overrides))

    def trainable(self) -> dict[str, np.ndarray]:
        """The trainable variables ``{TF1 name: float32 array}`` in TF1 layout (copies)."""
        return {k: np.array(v.value(), np.float32) for k, v in self._bindings.items()}

    @torch.no_grad()
    def assign(self, values: dict[str, np.ndarray]) -> None:
        """Set the trainable variables from TF1-layout arrays."""
        for name, binding in self._bindings.items():
            value = values[name] if binding.from_tf1 is None else binding.from_tf1(values[name])
            binding.tensor.copy_(torch.as_tensor(np.ascontiguousarray(value), device=self._device))

    def _tensors(self, batch: dict, masks: dict) -> tuple:
        put = lambda a: torch.as_tensor(a, device=self._device)  # noqa: E731
        noise = {k: [put(m) for m in v] for k, v in masks.items()}
        return (put(batch["inputs"]).long(), put(batch["input_lengths"]).long(), put(batch["mel_targets"]),
                put(batch["linear_targets"]), noise)

    def gradients(self, batch: dict, masks: dict) -> tuple[dict, dict, dict]:
        """One training-mode teacher-forced pass (batch-norm moving statistics updated).

        Returns:
            ``(losses, gradients, sparse_rows)``: python floats ``loss``, ``mel_loss``, ``linear_loss``; the
            gradient of every trainable variable (TF1 name, TF1 layout); ``{"embedding": d loss / d embedded}``
            rows ``(B * T_in, embed_depth)`` (TF1's ``IndexedSlices`` values, for the global norm).
        """
        inputs, lengths, mel, linear, noise = self._tensors(batch, masks)
        model, captured = self.model.train(), []
        hook = model.embedding.register_forward_hook(lambda _m, _i, out: captured.append(out))
        try:
            with torch.enable_grad():
                out = model(inputs, lengths, mel, None, noise)
                losses = model.loss(out, mel, linear)
                wrt = [b.tensor for b in self._bindings.values()] + captured[:1]
                grads = torch.autograd.grad(losses["loss"], wrt, allow_unused=True)
        finally:
            hook.remove()
        out_grads = {}
        for (name, binding), g in zip(self._bindings.items(), grads):
            value = np.zeros(tuple(binding.tensor.shape), np.float32) if g is None else g.detach().cpu().numpy()
            out_grads[name] = np.asarray(binding.to_tf1(value) if binding.to_tf1 is not None else value, np.float32)
        rows = grads[-1].detach().cpu().numpy().reshape(-1, self.hparams.embed_depth)
        return {k: float(v.detach()) for k, v in losses.items()}, out_grads, {"embedding": rows}

    def write_model(self, path: str, source: str = "") -> None:
        """The model as ``speechblocks migrate --to torch`` writes it (``Tacotron1.from_migrated`` reads it)."""
        state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        payload = tacotron1_torch_payload(self.hparams, self.layout, state, source)
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)
