"""The Keras side of Tacotron-1 fine-tuning (``speechblocks train --from <keithito/mimic2 source> --framework
keras``): the model's training-mode pass in one ``tf.function``, its gradients in TF1 layout and the model file.
The optimizer is :mod:`speechblocks.training.tacotron1_optimizer` (numpy, shared with torch)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from speechblocks.training.tacotron1 import write_tacotron1_keras_file

from .tacotron1 import Tacotron1

__all__ = ["Tacotron1Trainer"]


class Tacotron1Trainer:
    """Binds a Keras ``Tacotron1`` to the framework-free loop (:func:`speechblocks.training.tacotron1.
    train_tacotron1`).

    Args:
        model: the ``Tacotron1`` to train (its variables are assigned in place).
    """

    framework = "keras"
    extension = ".weights.h5"

    def __init__(self, model: Tacotron1):
        self.model = model
        self.hparams, self.layout = model.hparams, model.layout
        self._bindings = {k: v for k, v in model._tf1_variables().items() if v.variable.trainable}
        hp, spec = self.hparams, tf.TensorSpec
        masks = [spec((None, None, d), tf.float32) for d in hp.prenet_depths]
        signature = (spec((None, None), tf.int32), spec((None,), tf.int32), spec((None, None, hp.num_mels), tf.float32),
                     spec((None, None, hp.num_freq), tf.float32),
                     {"encoder_prenet": masks, "decoder_prenet": list(masks)})
        self._fn = tf.function(self._pass, input_signature=signature)  # one trace for every batch shape

    @classmethod
    def load(cls, source: str, kind: str, hparams=None, overrides: dict | None = None) -> Tacotron1Trainer:
        """The trainer of the model in ``source``: a TF1 checkpoint (``kind="tf1"``) or a migrated Keras file."""
        overrides = dict(overrides or {})
        if kind == "tf1":
            return cls(Tacotron1.from_tf1_checkpoint(source, hparams, **overrides))
        return cls(Tacotron1.from_migrated(source, hparams, **overrides))

    def trainable(self) -> dict[str, np.ndarray]:
        """The trainable variables ``{TF1 name: float32 array}`` in TF1 layout (copies)."""
        return {k: np.array(v.value(), np.float32) for k, v in self._bindings.items()}

    def assign(self, values: dict[str, np.ndarray]) -> None:
        """Set the trainable variables from TF1-layout arrays."""
        for name, binding in self._bindings.items():
            binding.assign(values[name])

    def _pass(self, inputs, lengths, mel, linear, noise):
        variables = [b.variable for b in self._bindings.values()]
        with tf.GradientTape() as tape:
            out = self.model(inputs, lengths, mel_targets=mel, training=True, noise_masks=noise)
            losses = self.model.loss(out, mel, linear)
        grads = tape.gradient(losses["loss"], variables)
        dense, rows = [], None
        for name, g, v in zip(self._bindings, grads, variables):
            if g is None:
                g = tf.zeros_like(v)
            if name == "embedding":
                rows = g.values if isinstance(g, tf.IndexedSlices) else g
            dense.append(tf.convert_to_tensor(g))
        return losses, dense, rows

    def gradients(self, batch: dict, masks: dict) -> tuple[dict, dict, dict]:
        """One training-mode teacher-forced pass (batch-norm moving statistics updated).

        Returns:
            ``(losses, gradients, sparse_rows)``: python floats ``loss``, ``mel_loss``, ``linear_loss``; the
            gradient of every trainable variable (TF1 name, TF1 layout); ``{"embedding": d loss / d embedded}``
            rows ``(B * T_in, embed_depth)`` (TF1's ``IndexedSlices`` values, for the global norm).
        """
        noise = {k: [tf.constant(m) for m in v] for k, v in masks.items()}
        losses, dense, rows = self._fn(tf.constant(batch["inputs"]), tf.constant(batch["input_lengths"]),
                                       tf.constant(batch["mel_targets"]), tf.constant(batch["linear_targets"]),
                                       noise)
        grads = {}
        for (name, binding), g in zip(self._bindings.items(), dense):
            value = np.asarray(g)
            grads[name] = np.asarray(binding.to_tf1(value) if binding.to_tf1 is not None else value, np.float32)
        rows = np.asarray(rows).reshape(-1, self.hparams.embed_depth)
        return {k: float(v) for k, v in losses.items()}, grads, {"embedding": rows}

    def write_model(self, path: str, source: str = "") -> None:
        """The model as ``speechblocks migrate --to keras`` writes it (``Tacotron1.from_migrated`` reads it)."""
        write_tacotron1_keras_file(path, self.hparams, self.layout, self.model.tf1_weights(), source)
