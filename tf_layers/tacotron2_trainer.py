"""The original Tacotron-2 optimizer step for Keras: Adam (Keras 3's update is TF1's ``ApplyAdam``), the decayed
learning rate, global-norm clipping and the loss of ``add_loss`` -- the Keras backend of ``speechblocks train`` and
``speechblocks gta``."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

import keras
import numpy as np
import tensorflow as tf

from speechblocks.tacotron2_hparams import Tacotron2HParams
from speechblocks.training.backend import StepResult
from speechblocks.training.checkpoint_files import write_keras_model_file
from speechblocks.training.guided_attention import BATCH_KEY as GUIDED_KEY
from speechblocks.training.noise import draw_noise_masks
from speechblocks.training.optimizer_slots import framework_moments, tf1_slots

from .tacotron2 import Tacotron2
from .tacotron2_loss import guided_attention_loss, tacotron2_loss

__all__ = ["Tacotron2Trainer", "clip_by_global_norm"]

_INT_KEYS = ("inputs", "input_lengths", "targets_lengths")


def clip_by_global_norm(tensors: list, clip_norm: float = 1.0) -> tuple[list, tf.Tensor]:
    """``tf.clip_by_global_norm``: every tensor times ``clip_norm / max(global_norm, clip_norm)``; returns the clipped
    tensors and the global norm before clipping (NaN/inf norms give NaN tensors)."""
    return tf.clip_by_global_norm(tensors, clip_norm)


def _signature(batch: Mapping[str, np.ndarray]) -> dict:
    """Batch and time dimensions unknown (channels known): one trace serves every batch of the same structure."""
    def shape(key, value):
        dims = [None] * np.ndim(value)
        if key in ("mel_targets", "speaker_embeddings", "linear_targets"):
            dims[-1] = int(np.shape(value)[-1])
        return dims

    return {k: tf.TensorSpec(shape(k, v), tf.int32 if k in _INT_KEYS else tf.float32) for k, v in batch.items()}


def _noise_signature(masks) -> object:
    return tf.nest.map_structure(lambda m: tf.TensorSpec([None, None, int(np.shape(m)[-1])], tf.float32), masks)


def _batch_tensors(batch: Mapping[str, np.ndarray]) -> dict:
    return {k: tf.convert_to_tensor(np.ascontiguousarray(v), tf.int32 if k in _INT_KEYS else tf.float32)
            for k, v in batch.items()}


class Tacotron2Trainer:
    """One Keras model and its optimizer, stepped as the original ``add_optimizer`` (the Keras backend of
    :func:`speechblocks.training.run.train`).

    Each :meth:`train_step` (one ``tf.function``, traced once: batch and time dimensions are left unknown): the model
    with ``training=True`` on the batch (teacher forced), :func:`tacotron2_loss`, the gradients of every trainable
    variable, ``tf.clip_by_global_norm(gradients, 1.0)`` when ``tacotron_clip_gradients``, one
    ``keras.optimizers.Adam`` update (Keras 3's update is TF1's: epsilon added to ``sqrt(v)`` after the bias
    correction folded into the step size) with the given learning rate. The step's dropout and zoneout keep-masks
    are :func:`speechblocks.training.draw_noise_masks` of the batch, drawn from the step's seed (the torch
    trainer's draws); before every step the state of every ``SeedGenerator`` of the model is set from the seed too.

    Data-parallel (:meth:`mirrored`: ``tf.distribute.MirroredStrategy``): the model and the optimizer live under
    the strategy, every batch norm uses the global batch's statistics (``sync_batch_norm=True``), each replica runs
    its consecutive rows of the global batch (:func:`speechblocks.training.shard_rows`) with its rows of the
    global batch's keep-masks, the loss is the global reduction of :func:`tacotron2_loss` (each replica's share of
    the global batch's loss), the replicas' gradients are summed -- the gradient of the single-process loss on the
    global batch -- and then clipped and applied once: the step equals the single-device step.

    Args:
        model (Tacotron2): the Keras model (trained in place).

    Example:
        >>> trainer = Tacotron2Trainer.new(resolve_hparams("rtvc"), seed=0)
        >>> result = trainer.train_step(prepare_batch(examples, "rtvc"), learning_rate=1e-3, seed=1)
    """

    framework = "keras"
    model_suffix = ".weights.h5"
    #: run the steps eagerly instead of tracing them (no ~5 s trace per trainer; slower per step)
    run_eagerly = False
    #: the ``tf.distribute`` strategy of a data-parallel trainer class (:meth:`mirrored`); ``None``: one device
    strategy = None
    #: ``"fp32"`` (the original) or ``"bf16"`` (:meth:`configured`): the Keras dtype policy its models are built with
    precision = "fp32"

    def __init__(self, model: Tacotron2):
        self.model = model
        self.hparams: Tacotron2HParams = model.hparams
        hp = self.hparams
        specs = model._tf1_variables()
        self._bindings = {k: v for k, v in specs.items() if v.variable.trainable}
        self._variables = [v.variable for v in self._bindings.values()]
        self._seed_states = [v for v in model.variables if v.path.endswith("seed_generator_state")]
        with self._scope():
            self.optimizer = keras.optimizers.Adam(learning_rate=hp.tacotron_initial_learning_rate,
                                                   beta_1=hp.tacotron_adam_beta1, beta_2=hp.tacotron_adam_beta2,
                                                   epsilon=hp.tacotron_adam_epsilon)
            self.optimizer.build(self._variables)
        self._moments = self._slot_variables()
        self._step_fns: dict = {}  # one trace per batch structure (its keys: e.g. with guided-attention weights)
        self._grad_fns: dict = {}
        self._apply_fn = None

    # -- construction ---------------------------------------------------------------------------------------
    @classmethod
    def mirrored(cls, replicas: int | None = None, strategy=None) -> type:
        """A trainer class whose trainers run data-parallel under ``tf.distribute.MirroredStrategy``: ``strategy``,
        or one over the GPUs or, on a machine without one, over ``replicas`` logical CPU devices (default 2;
        TensorFlow must not have initialised its devices yet). See :func:`tf_layers._distribute.mirrored_strategy`."""
        from ._distribute import mirrored_strategy

        strategy = mirrored_strategy(replicas) if strategy is None else strategy
        return type(cls.__name__, (cls,), {"strategy": strategy, "__doc__": cls.__doc__})

    @classmethod
    def configured(cls, device=None, precision: str = "fp32") -> type:
        """A trainer class whose models are built under the Keras dtype policy of ``precision``: ``"fp32"`` (the
        original) or ``"bf16"`` (``mixed_bfloat16``: layers compute in bfloat16, variables -- hence the checkpoints
        and Adam's slots -- stay float32; the losses are float32). ``device`` is TensorFlow's own placement (the
        command line hides the GPUs for ``--device cpu`` before TensorFlow starts); it is accepted for the torch
        trainer's signature and not used here.

        Raises:
            ValueError: a precision other than ``"fp32"``/``"bf16"`` (``fp16``'s loss scaling is the torch trainer's
                for now).
        """
        from speechblocks.devices import check_precision

        precision = check_precision(precision, ("fp32", "bf16"), "--precision (Keras)")
        return type(cls.__name__, (cls,), {"precision": precision, "strategy": cls.strategy, "__doc__": cls.__doc__})

    def precision_state(self) -> dict:
        """What a checkpoint keeps of the precision: ``{"precision"}``."""
        return {"precision": self.precision}

    def load_precision_state(self, state) -> None:
        """Nothing to restore (``bf16`` has no loss scale)."""

    @classmethod
    def distribution(cls) -> None:
        """``None``: a Keras trainer runs in one process (its data-parallel form, :meth:`mirrored`, runs every
        replica in this process)."""
        return None

    @classmethod
    @contextlib.contextmanager
    def _scope(cls):
        """The strategy's scope (if any) and, while models are built, the dtype policy of :attr:`precision`."""
        policy = {"fp32": None, "bf16": "mixed_bfloat16"}[cls.precision]
        saved = keras.config.dtype_policy()
        with contextlib.nullcontext() if cls.strategy is None else cls.strategy.scope():
            if policy is not None:
                keras.config.set_dtype_policy(policy)
            try:
                yield
            finally:
                if policy is not None:
                    keras.config.set_dtype_policy(saved)

    @classmethod
    def _model_kwargs(cls) -> dict:
        return {} if cls.strategy is None else {"sync_batch_norm": True}

    @classmethod
    def new(cls, hparams, seed: int = 0) -> Tacotron2Trainer:
        """A freshly initialised model (TF1's initializers, drawn after ``keras.utils.set_random_seed(seed)``)."""
        keras.utils.set_random_seed(int(seed))
        with cls._scope():
            return cls(Tacotron2(hparams, seed=int(seed), **cls._model_kwargs()))

    @classmethod
    def from_model_file(cls, path: str | os.PathLike, hparams=None) -> Tacotron2Trainer:
        """The model of a migrated ``.weights.h5`` file (e.g. a checkpoint of a run)."""
        with cls._scope():
            return cls(Tacotron2.from_migrated(path, hparams, **cls._model_kwargs()))

    @classmethod
    def from_tf1_checkpoint(cls, path: str | os.PathLike, hparams=None) -> Tacotron2Trainer:
        """The model of a TF1 checkpoint (read in numpy)."""
        with cls._scope():
            return cls(Tacotron2.from_tf1_checkpoint(path, hparams, **cls._model_kwargs()))

    @classmethod
    def with_hparams(cls, trainer: Tacotron2Trainer, hparams: Tacotron2HParams) -> Tacotron2Trainer:
        """A trainer of a model with other (size-compatible) hparams and the same weights (no optimizer state)."""
        with cls._scope():
            model = Tacotron2(hparams, **cls._model_kwargs())
            model.load_tf1_weights(trainer.model.tf1_weights())
            return cls(model)

    def trainable_names(self) -> list[str]:
        """The TF1 names of the trainable variables (relative to ``Tacotron_model/inference/``)."""
        return list(self._bindings)

    # -- steps --------------------------------------------------------------------------------------------------
    def _reseed(self, seed: int) -> None:
        for i, state in enumerate(self._seed_states):
            sub = np.random.SeedSequence([int(seed), i]).generate_state(1)[0]
            state.assign(np.array([int(sub), 0], dtype=state.dtype))

    def _pass(self, b: dict, noise):
        """The losses and raw gradients of a training-mode pass (under a strategy: of this replica's rows, its
        share of the global batch's loss)."""
        with tf.GradientTape() as tape:
            out = self.model(b["inputs"], b["input_lengths"], b.get("speaker_embeddings"), b["mel_targets"],
                             training=True, noise_masks=noise)
            losses = tacotron2_loss(self.model, out, b["mel_targets"], b["stop_token_targets"],
                                    b["targets_lengths"], b.get("linear_targets"))
            if GUIDED_KEY in b:  # the optional guided-attention term (its weight is in the batch's weights)
                guided = guided_attention_loss(out["alignments"], b[GUIDED_KEY], b["targets_lengths"],
                                               self.hparams.outputs_per_step)
                losses = dict(losses, guided_attention_loss=guided, loss=losses["loss"] + guided)
        grads = tape.gradient(losses["loss"], self._variables)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for v, g in zip(self._variables, grads)]
        return losses, grads

    def _replica_pass(self, b: dict, noise, bounds):
        ctx = tf.distribute.get_replica_context()
        index = ctx.replica_id_in_sync_group
        lo, hi = bounds[index], bounds[index + 1]
        rows = lambda x: x[lo:hi]  # noqa: E731
        return self._pass({k: rows(v) for k, v in b.items()}, tf.nest.map_structure(rows, noise))

    def _gradients(self, b: dict, noise):
        if self.strategy is None:
            losses, grads = self._pass(b, noise)
        else:  # each replica its rows (shard_rows' split); the shares of the loss and the gradients summed
            strategy = self.strategy
            replicas = strategy.num_replicas_in_sync
            bounds = tf.range(replicas + 1) * tf.shape(b["inputs"])[0] // replicas
            losses, grads = strategy.run(self._replica_pass, args=(b, noise, bounds))
            total = tf.distribute.ReduceOp.SUM
            losses = {k: strategy.reduce(total, v, axis=None) for k, v in losses.items()}
            grads = [strategy.reduce(total, g, axis=None) for g in grads]
        if self.hparams.tacotron_clip_gradients:
            grads, norm = tf.clip_by_global_norm(grads, 1.0)
        else:
            norm = tf.linalg.global_norm(grads)
        return losses, grads, norm

    def _noise(self, batch: Mapping[str, np.ndarray], seed: int):
        masks = draw_noise_masks(self.hparams, batch["inputs"].shape[0], batch["inputs"].shape[1],
                                 batch["mel_targets"].shape[1], seed)
        return masks, tf.nest.map_structure(tf.convert_to_tensor, masks)

    def compute_gradients(self, batch: Mapping[str, np.ndarray], seed: int) -> tuple[dict, list, float]:
        """The losses and the (clipped, when ``tacotron_clip_gradients``) gradients of a training-mode pass, in
        :meth:`trainable_names` order, and the global norm before clipping (numpy)."""
        masks, noise = self._noise(batch, seed)
        self._reseed(seed)
        losses, grads, norm = self._traced(self._grad_fns, self._gradients, batch, masks)(_batch_tensors(batch), noise)
        return ({k: float(v) for k, v in losses.items()}, [np.asarray(g) for g in grads], float(norm))

    def _update(self, grads, learning_rate):
        self.optimizer.learning_rate.assign(learning_rate)
        self.optimizer.apply_gradients(zip(grads, self._variables))

    def _apply(self, b: dict, noise, learning_rate):
        losses, grads, norm = self._gradients(b, noise)
        finite = tf.math.is_finite(losses["loss"])

        def update():
            self._update(grads, learning_rate)
            return tf.constant(True)

        applied = tf.cond(finite, update, lambda: tf.constant(False))
        return losses, norm, applied

    def train_step(self, batch: Mapping[str, np.ndarray], learning_rate: float, seed: int,
                   rows: tuple[int, int] | None = None) -> StepResult:
        """One optimizer step on ``batch`` (:func:`speechblocks.training.prepare_batch`'s dict) with the given
        learning rate; the update is not applied when the loss is not finite.

        Args:
            rows (tuple[int, int], optional): ``(first row, global batch size)`` of ``batch``: one process runs
                every row of the global batch here (:meth:`mirrored` shares them among its replicas), so only
                ``(0, len(batch))``. (Default: the batch is the global batch)

        Raises:
            ValueError: ``rows`` naming part of a global batch (several processes: the torch backend's form).
        """
        if rows is not None and (int(rows[0]), int(rows[1])) != (0, int(batch["inputs"].shape[0])):
            raise ValueError(f"rows={tuple(rows)}: the Keras trainer steps whole global batches in one process "
                             f"(data-parallel: Tacotron2Trainer.mirrored())")
        masks, noise = self._noise(batch, seed)
        rate = tf.constant(learning_rate, tf.float32)
        self._reseed(seed)
        if self.strategy is not None:  # the update in the cross-replica context, on the summed gradients
            losses, grads, norm = self._distributed_gradients(batch, masks, noise)
            applied = bool(np.isfinite(float(losses["loss"])))
            if applied:
                if self._apply_fn is None:
                    self._apply_fn = self._update if self.run_eagerly else tf.function(self._update)
                self._apply_fn(grads, rate)
            return StepResult({k: float(v) for k, v in losses.items()}, float(norm), applied)
        step = self._traced(self._step_fns, self._apply, batch, masks, tf.TensorSpec([], tf.float32))
        losses, norm, applied = step(_batch_tensors(batch), noise, rate)
        return StepResult({k: float(v) for k, v in losses.items()}, float(norm), bool(applied))

    def _distributed_gradients(self, batch, masks, noise):
        return self._traced(self._grad_fns, self._gradients, batch, masks)(_batch_tensors(batch), noise)

    def _traced(self, cache: dict, fn, batch: Mapping[str, np.ndarray], masks, *specs):
        """``fn`` as a ``tf.function`` traced once per batch structure (batch and time unknown), or ``fn`` itself
        when ``run_eagerly``."""
        if self.run_eagerly:
            return fn
        key = tuple(sorted(batch))
        if key not in cache:
            cache[key] = tf.function(fn, input_signature=[_signature(batch), _noise_signature(masks), *specs])
        return cache[key]

    def evaluate(self, batch: Mapping[str, np.ndarray], seed: int) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        """The original eval model on a test batch: inference mode, teacher forced over every target frame, the loss
        of ``add_loss`` with the stop logits recovered from the probabilities (clipped to ``[1e-7, 1 - 1e-7]``).

        Returns:
            (dict[str, float], numpy.ndarray, numpy.ndarray): the losses, the first example's ``mel_outputs``
            ``(frames, num_mels)`` and ``alignments`` ``(T_in, steps)``.
        """
        b = _batch_tensors(batch)
        self._reseed(seed)
        steps = int(batch["mel_targets"].shape[1]) // self.hparams.outputs_per_step
        out = self.model(b["inputs"], b["input_lengths"], b.get("speaker_embeddings"), b["mel_targets"],
                         max_iters=steps, training=False)
        p = tf.clip_by_value(tf.cast(out["stop_token_prediction"], tf.float32), 1e-7, 1 - 1e-7)
        out = dict(out, stop_token_prediction=tf.math.log(p) - tf.math.log1p(-p))
        losses = tacotron2_loss(self.model, out, b["mel_targets"], b["stop_token_targets"], b["targets_lengths"],
                                b.get("linear_targets"))
        return ({k: float(v) for k, v in losses.items()}, np.asarray(out["mel_outputs"][0], np.float32),
                np.asarray(out["alignments"][0], np.float32))

    def teacher_forced(self, batch: Mapping[str, np.ndarray], max_iters: int | None, seed: int) -> np.ndarray:
        """GTA: the model in inference mode teacher forced by ``mel_targets`` (``max_iters`` caps the steps;
        ``None``: the hparam). Returns ``mel_outputs`` ``(B, steps * r, num_mels)``."""
        b = _batch_tensors(batch)
        self._reseed(seed)
        out = self.model(b["inputs"], b["input_lengths"], b.get("speaker_embeddings"), b["mel_targets"],
                         max_iters=max_iters, training=False)
        return np.asarray(out["mel_outputs"], np.float32)

    # -- state ----------------------------------------------------------------------------------------------
    def save_model(self, path: str | os.PathLike, source: str = "") -> None:
        """Write the model as ``speechblocks migrate --to keras`` does (``Tacotron2.from_migrated`` of either
        framework reads it)."""
        write_keras_model_file(path, self.hparams, self.model.tf1_weights(), source)

    def _slot_variables(self) -> dict[str, tuple]:
        """Each trainable variable's Adam slots ``(m, v)`` by TF1 name, found by their public paths: Keras 3's Adam
        names them ``<optimizer name>/<variable path, "/" -> "_">_momentum`` and ``..._velocity``."""
        by_path: dict = {}
        for v in self.optimizer.variables:
            by_path.setdefault(v.path, []).append(v)
        out = {}
        for name, spec in self._bindings.items():
            stem = f"{self.optimizer.name}/{spec.variable.path.replace('/', '_')}"
            pair = [by_path.get(f"{stem}_{kind}", []) for kind in ("momentum", "velocity")]
            if any(len(found) != 1 for found in pair):
                raise RuntimeError(f"the optimizer holds no single Adam slot pair of {spec.variable.path!r} (by "
                                   f"path {stem}_momentum / _velocity)")
            out[name] = (pair[0][0], pair[1][0])
        return out

    def _slots(self, var):
        """The Adam slot variables ``(m, v)`` of the trainable variable ``var``."""
        (name,) = [n for n, spec in self._bindings.items() if spec.variable is var]
        return self._moments[name]

    def optimizer_state(self) -> tuple[int, dict[str, np.ndarray]]:
        """``(updates, slots)``: the update count and ``{"<TF1 name>/Adam": m, "<TF1 name>/Adam_1": v}`` in TF1
        layout (empty before the first update; :func:`speechblocks.training.optimizer_slots.tf1_slots`)."""
        updates = int(self.optimizer.iterations.numpy())
        if updates == 0:
            return 0, {}
        moments = {name: (m.numpy(), v.numpy()) for name, (m, v) in self._moments.items()}
        return updates, tf1_slots(moments, self._bindings)

    def load_optimizer_state(self, updates: int, slots: Mapping[str, np.ndarray]) -> None:
        """Restore :meth:`optimizer_state` (also a TF1 checkpoint's slots by TF1 name); no slots: zero moments.

        Raises:
            ValueError: slots of some variables only, or of the wrong shape.
        """
        self.optimizer.iterations.assign(int(updates))
        shapes = {name: tuple(spec.variable.shape) for name, spec in self._bindings.items()}
        moments = framework_moments(slots, self._bindings, shapes)
        for name, targets in self._moments.items():
            values = moments.get(name) or [np.zeros(t.shape, np.float32) for t in targets]
            for target, value in zip(targets, values):
                target.assign(value)
