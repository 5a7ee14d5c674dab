"""Keras ``Tacotron1``: keithito/tacotron (both checkpoint layouts) and MycroftAI/mimic2, number for number."""
from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from speechblocks.tacotron1_model import (
    NOISE_MASK_KEYS,
    PRENET_DROP_RATE,
    TACOTRON1_SCOPE,
    fit_tacotron1_hparams,
    resolve_tacotron1_model,
    teacher_forced_steps,
)
from speechblocks.tacotron1_schema import canonical_names

from ._validation import check_float_tensor, check_lengths
from .cbhg import CBHG
from .decoding_plan import native_off_reason, plan_decoding
from .prenet import Prenet
from .tacotron1_decoder import Tacotron1Decoder
from .tf1_exchange import TF1Variable, TF1WeightsMixin

_MODEL_KWARGS = ("name", "dtype", "trainable")
_BLOCK = "Tacotron1"

def _prefixed(prefix: str, variables: dict) -> dict:
    return {f"{prefix}/{k}": v for k, v in variables.items()}


@keras.saving.register_keras_serializable(package="speechblocks")
class Tacotron1(TF1WeightsMixin, keras.Model):
    """TF1 Tacotron-1 (keithito/tacotron, MycroftAI/mimic2) as a Keras model.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    ``embedding`` -> encoder pre-net (relu dense layers, dropout 0.5 in training only) -> encoder :class:`CBHG`
    (K = 16, keithito's ReLU-before-BN order, BiGRU with the input lengths) -> :class:`Tacotron1Decoder`
    (attention GRU, Bahdanau or mimic2 location-sensitive attention, two residual GRUs, ``r`` frames a step;
    teacher-forced or free running until every row's frames are exactly zero or ``max_iters``) -> post
    :class:`CBHG` (K = 8, no lengths) -> ``dense`` to ``num_freq``. Every variable exists from the constructor on
    and has its TF1 name (``tf1_weights()``: exactly ``speechblocks.tacotron1_schema.tf1_variable_shapes``).

    Args:
        hparams: anything :func:`speechblocks.resolve_tacotron1_hparams` takes (preset name, mapping of original
            names, ``Tacotron1HParams``); ``None`` is keithito's preset.
        layout: ``"keithito-20180906"``, ``"keithito-20170720"`` or ``"mimic2"``; ``None``: the preset's own.
            A layout whose attention contradicts the hparams' raises ``ValueError``.
        mask_memory: bool (not the original): mask the attention scores past ``input_lengths``.
        seed: optional int seed of the random dropout draws.
        **overrides: hparams by original name (and ``name``/``dtype``/``trainable`` of ``keras.Model``).

    Call arguments:
        inputs: int ``(batch, T_in)`` symbol ids.
        input_lengths: int ``(batch,)``; ``None`` is full length.
        mel_targets: float ``(batch, T_out, num_mels)``: teacher forcing (``T_out >= r``); free running when None.
        max_iters: int step cap (default ``hparams.max_iters``), teacher forcing included.
        training: bool: dropout, batch statistics.
        noise_masks: optional dict of 0/1 keep-masks replacing the dropout in any mode: ``"encoder_prenet"`` (list
            per layer ``(batch, T_in, prenet_depths[i])``), ``"decoder_prenet"`` (``(batch, steps,
            prenet_depths[i])``).

    Returns:
        dict: ``mel_outputs`` ``(batch, steps * r, num_mels)``, ``linear_outputs`` ``(batch, steps * r,
        num_freq)``, ``alignments`` ``(batch, T_in, steps)``.

    Masking: ``input_lengths`` masks the encoder's BiGRU only (the original attends the padded memory;
    ``mask_memory=True`` masks it); the loss is not masked (the original's).

    Example:
    >>> model = Tacotron1("keithito", num_mels=6, num_freq=9, outputs_per_step=2, max_iters=3)
    >>> out = model(np.array([[10, 20, 30, 1]]), np.array([4]))
    >>> out["mel_outputs"].shape
    TensorShape([1, 6, 6])
    """

    def __init__(self, hparams="keithito", layout: str | None = None, *, mask_memory: bool = False,
                 seed: int | None = None, **overrides):
        model_kwargs = {k: overrides.pop(k) for k in _MODEL_KWARGS if k in overrides}
        super().__init__(**model_kwargs)
        self.hparams, self.layout = resolve_tacotron1_model(hparams, layout, **overrides)
        if not isinstance(mask_memory, bool):
            raise ValueError(f"{_BLOCK}: `mask_memory` must be True or False; got {mask_memory!r}.")
        self.mask_memory, self.seed = mask_memory, seed
        hp, policy = self.hparams, self.dtype_policy
        sub = (lambda i: None) if seed is None else (lambda i: int(seed) + 10 * i)  # noqa: E731
        enc, post = hp.encoder_depth // 2, hp.postnet_depth // 2
        self.embedding = keras.layers.Embedding(
            hp.n_symbols, hp.embed_depth, embeddings_initializer=keras.initializers.TruncatedNormal(stddev=0.5),
            dtype=policy, name="embedding")
        self.encoder_prenet = Prenet(hp.prenet_depths, PRENET_DROP_RATE, "relu", tf1_scope="prenet", seed=sub(1),
                                     dropout="training", dtype=policy, name="prenet")
        self.encoder_cbhg = CBHG(16, 128, 2, [128, hp.prenet_depths[-1]], 3, 4, enc, enc, tf1_scope="encoder_cbhg",
                                 bn_position="after", tf1_naming="keithito", dtype=policy, name="encoder_cbhg")
        self.decoder = Tacotron1Decoder(hp, self.layout, mask_memory=mask_memory, seed=sub(2), dtype=policy,
                                        name="decoder")
        self.post_cbhg = CBHG(8, 128, 2, [256, hp.num_mels], 3, 4, post, post, tf1_scope="post_cbhg",
                              bn_position="after", tf1_naming="keithito", dtype=policy, name="post_cbhg")
        self.linear_projection = keras.layers.Dense(hp.num_freq, dtype=policy, name="dense")
        self._build_all()

    tf1_scope = TACOTRON1_SCOPE

    # -- construction -------------------------------------------------------------------------
    def _build_all(self):
        hp = self.hparams
        self.embedding.build((None, None))
        self.encoder_prenet.build((None, None, hp.embed_depth))
        self.encoder_cbhg.build((None, None, hp.prenet_depths[-1]))
        self.post_cbhg.build((None, None, hp.num_mels))
        self.linear_projection.build((None, None, 2 * (hp.postnet_depth // 2)))
        self.built = True

    def build(self, *args, **kwargs):  # every variable exists from the constructor on
        self.built = True

    def get_config(self):
        config = super().get_config()  # name, trainable, dtype
        config.update(hparams=self.hparams.to_dict(), layout=self.layout, mask_memory=self.mask_memory,
                      seed=self.seed)
        return config

    @classmethod
    def from_config(cls, config):  # a layer's (keras.Model's would look for a functional graph)
        return keras.layers.Layer.from_config.__func__(cls, config)

    # -- input checks -------------------------------------------------------------------------
    def _check_inputs(self, inputs, input_lengths, mel_targets):
        hp = self.hparams
        inputs = tf.convert_to_tensor(inputs)
        if not inputs.dtype.is_integer:
            raise ValueError(f"{_BLOCK}: argument `inputs` must be an integer tensor of symbol ids, expected shape "
                             f"(batch, T_in); got dtype {inputs.dtype.name}.")
        if inputs.shape.rank != 2:
            raise ValueError(f"{_BLOCK}: argument `inputs` must have rank 2, expected shape (batch, T_in); got "
                             f"shape {inputs.shape}.")
        inputs = tf.cast(inputs, tf.int32)
        if tf.executing_eagerly():
            _check_ids_eagerly(inputs.numpy(), hp.n_symbols)
        if input_lengths is not None:
            input_lengths = tf.cast(check_lengths(input_lengths, "input_lengths", _BLOCK, batch_dim=inputs.shape[0]),
                                    tf.int32)
            if tf.executing_eagerly():
                lens, t = input_lengths.numpy(), int(inputs.shape[1])
                if lens.size and (lens.min() < 1 or lens.max() > t):
                    raise ValueError(f"{_BLOCK}: argument `input_lengths` must lie in [1, T_in={t}], expected shape "
                                     f"(batch,); got {lens.tolist()}.")
        if mel_targets is not None:
            mel_targets = tf.convert_to_tensor(mel_targets)
            check_float_tensor(mel_targets, "mel_targets", _BLOCK, rank=3, last_dim=hp.num_mels,
                               shape_doc=f"(batch, T_out, {hp.num_mels})")
            if mel_targets.shape[1] is not None:
                teacher_forced_steps(int(mel_targets.shape[1]), hp)  # ValueError below r frames
        return inputs, input_lengths, mel_targets

    def _check_noise(self, noise_masks, inputs, mel_targets, max_iters) -> dict:
        noise = dict(noise_masks or {})
        unknown = sorted(set(noise) - set(NOISE_MASK_KEYS))
        if unknown:
            raise ValueError(f"{_BLOCK}: argument `noise_masks` has unknown keys {unknown}; known: "
                             f"{list(NOISE_MASK_KEYS)}.")
        sizes = self.hparams.prenet_depths
        steps = None
        if mel_targets is not None and mel_targets.shape[1] is not None:
            steps = teacher_forced_steps(int(mel_targets.shape[1]), self.hparams, max_iters)
        out = {}
        for key, time, axis in (("encoder_prenet", inputs.shape[1], "T_in"), ("decoder_prenet", steps, "steps")):
            if key not in noise:
                continue
            masks = noise[key]
            if not isinstance(masks, (list, tuple)) or len(masks) != len(sizes):
                raise ValueError(f"{_BLOCK}: argument `noise_masks[{key!r}]` must be a list of {len(sizes)} "
                                 f"keep-masks, mask i of shape (batch, {axis}, prenet_depths[i]) with prenet_depths = "
                                 f"{list(sizes)}.")
            out[key] = [_check_mask(m, key, i, inputs.shape[0], time, axis, d) for i, (m, d) in
                        enumerate(zip(masks, sizes))]
        return out

    # -- forward ------------------------------------------------------------------------------
    def call(self, inputs, input_lengths=None, mel_targets=None, max_iters=None, training=None, noise_masks=None):
        inputs, input_lengths, mel_targets = self._check_inputs(inputs, input_lengths, mel_targets)
        noise = self._check_noise(noise_masks, inputs, mel_targets, max_iters)
        training = bool(training)
        if tf.executing_eagerly() and not training:  # what synthesize runs: cached graphs, not op by op
            if input_lengths is None:
                input_lengths = tf.fill(tf.shape(inputs)[:1], tf.shape(inputs)[1])
            return self._infer(inputs, input_lengths, mel_targets, max_iters, noise)
        return self._forward(inputs, input_lengths, mel_targets, max_iters, training, noise)

    def _infer(self, inputs, input_lengths, mel_targets, max_iters, noise: dict) -> dict:
        """An eager inference call. Free running with the native library available and no injected masks:
        the encoder and the post CBHG in cached ``tf.function`` s and the decoder between them in the loop its plan
        names (:func:`tf_layers.decoding_plan.plan_decoding`: the native loop in float32 on the CPU, else its graph
        loop in a cached ``tf.function``); otherwise the whole call in one cached ``tf.function``."""
        if mel_targets is not None or noise or native_off_reason() is not None:
            return self._inference_fn(max_iters)(inputs, input_lengths, mel_targets, noise)
        fns = self.__dict__.setdefault("_split_fns", {})
        if "encode" not in fns:  # unknown batch and time: a static time makes the post CBHG's graph ~2x slower
            hp, dt = self.hparams, self.compute_dtype
            ids, lens = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)
            fns["encode"] = tf.function(lambda i, n: self.encode(i, n, False), input_signature=[ids, lens])
            fns["post"] = tf.function(lambda f: self._postprocess(f), input_signature=[
                tf.TensorSpec([None, None, hp.num_mels * hp.outputs_per_step], dt)])
        memory = fns["encode"](inputs, input_lengths)
        if plan_decoding(self.decoder, memory, tracing=False).native:
            frames, alignments = self.decoder(memory, input_lengths, max_iters=max_iters)
        else:
            if ("decode", max_iters) not in fns:
                fns["decode", max_iters] = tf.function(
                    lambda m, n: self.decoder(m, n, max_iters=max_iters, training=False), input_signature=[
                        tf.TensorSpec([None, None, memory.shape[-1]], memory.dtype), tf.TensorSpec([None], tf.int32)])
            frames, alignments = fns["decode", max_iters](memory, input_lengths)
        return dict(fns["post"](frames), alignments=alignments)

    def _inference_fn(self, max_iters):
        """The cached ``tf.function`` of an inference call with this ``max_iters`` (unknown batch and time)."""
        cache = self.__dict__.setdefault("_inference_fns", {})
        if max_iters not in cache:
            cache[max_iters] = tf.function(
                lambda ids, lens, mel, noise: self._forward(ids, lens, mel, max_iters, False, noise),
                reduce_retracing=True)
        return cache[max_iters]

    def _forward(self, inputs, input_lengths, mel_targets, max_iters, training: bool, noise: dict) -> dict:
        memory = self.encode(inputs, input_lengths, training, noise.get("encoder_prenet"))
        frames, alignments = self.decoder(memory, input_lengths, mel_targets=mel_targets, max_iters=max_iters,
                                          training=training, prenet_masks=noise.get("decoder_prenet"))
        return dict(self._postprocess(frames, training), alignments=alignments)

    def _postprocess(self, frames, training=False) -> dict:
        """The decoder's frames ``(batch, steps, num_mels * r)`` -> ``mel_outputs`` and ``linear_outputs``."""
        mel_outputs = tf.reshape(frames, tf.stack([tf.shape(frames)[0], -1, self.hparams.num_mels]))
        linear_outputs = self.linear_projection(self.post_cbhg(mel_outputs, None, training=training))
        return dict(mel_outputs=mel_outputs, linear_outputs=linear_outputs)

    def encode(self, inputs, input_lengths=None, training=False, prenet_masks=None):
        """The encoder outputs (the attention memory) ``(batch, T_in, memory_size)``.

        Args:
            inputs: int ``(batch, T_in)``; input_lengths: int ``(batch,)`` or None.
            training: bool; prenet_masks: optional list of keep-masks ``(batch, T_in, prenet_depths[i])``.
        """
        x = self.embedding(inputs)
        x = self.encoder_prenet(x, training=training, dropout_masks=prenet_masks)
        return self.encoder_cbhg(x, input_lengths, training=training)

    def synthesize(self, inputs, input_lengths=None, max_iters=None) -> dict:
        """Free-running inference (no dropout, moving statistics): the encoder and the post CBHG in cached
        ``tf.function`` s and the decoder's native loop between them in float32 on the CPU (its plan:
        :func:`tf_layers.decoding_plan.plan_decoding`; the same numbers to float32 rounding), else one cached
        ``tf.function`` per ``max_iters`` (unknown batch and time).

        Args:
            inputs: int ``(batch, T_in)`` symbol ids; input_lengths: int ``(batch,)`` or None (full length).
            max_iters: int ``>= 1`` overriding ``hparams.max_iters``.

        Returns:
            dict of numpy arrays: ``mel_outputs``, ``linear_outputs``, ``alignments`` (see :class:`Tacotron1`).
        """
        inputs, input_lengths, _ = self._check_inputs(inputs, input_lengths, None)
        if input_lengths is None:
            input_lengths = tf.fill(tf.shape(inputs)[:1], tf.shape(inputs)[1])
        out = self._infer(tf.cast(inputs, tf.int32), tf.cast(input_lengths, tf.int32), None, max_iters, {})
        return {k: v.numpy() for k, v in out.items()}

    # -- loss and gradients -------------------------------------------------------------------
    @property
    def loss(self):
        """The bound :meth:`tacotron1_loss` (``model.loss(outputs, mel_targets, linear_targets)``; a property because
        ``keras.Model`` assigns ``self.loss``: what ``compile`` assigns is kept in ``compiled_loss_argument``)."""
        return self.tacotron1_loss

    @loss.setter
    def loss(self, value):
        self.__dict__["compiled_loss_argument"] = value

    def tacotron1_loss(self, outputs, mel_targets, linear_targets) -> dict:
        """The original ``add_loss`` (no masking): ``mel_loss = mean|mel_targets - mel_outputs|``,
        ``linear_loss = 0.5 mean(l1) + 0.5 mean(l1[..., :n_priority_freq])`` of ``l1 = |linear_targets -
        linear_outputs|``, ``loss = mel_loss + linear_loss``.

        Args:
            outputs: the model's output dict; mel_targets: float ``(batch, steps * r, num_mels)``;
            linear_targets: float ``(batch, steps * r, num_freq)`` (the outputs' shapes).

        Returns:
            dict of scalar tensors ``mel_loss``, ``linear_loss``, ``loss``.
        """
        mel, lin = outputs["mel_outputs"], outputs["linear_outputs"]
        mel_targets = _check_target(mel_targets, "mel_targets", mel, self.hparams.num_mels)
        linear_targets = _check_target(linear_targets, "linear_targets", lin, self.hparams.num_freq)
        mel_loss = tf.reduce_mean(tf.abs(mel_targets - mel))
        l1 = tf.abs(linear_targets - lin)
        linear_loss = 0.5 * tf.reduce_mean(l1) + 0.5 * tf.reduce_mean(l1[:, :, :self.hparams.n_priority_freq])
        return dict(mel_loss=mel_loss, linear_loss=linear_loss, loss=mel_loss + linear_loss)

    def tf1_loss_and_gradients(self, inputs, input_lengths, mel_targets, linear_targets, noise_masks=None):
        """One training-mode teacher-forced pass: ``(losses, gradients)`` -- python floats of :meth:`loss` and the
        gradient of ``loss`` for every trainable variable by TF1 name (relative to ``model/inference``), TF1
        layout, zeros where the loss does not depend on it: the TF1 graph's ``tf.gradients(loss, variables)``."""
        variables = self.tf1_trainable_variables()
        self._check_inputs(inputs, input_lengths, mel_targets)  # eager messages first
        fn = self.__dict__.get("_tf1_loss_and_gradients_fn")
        if fn is None:
            def loss_and_grads(ids, lens, mel, lin, noise):
                with tf.GradientTape() as tape:
                    out = self(ids, lens, mel_targets=mel, training=True, noise_masks=noise)
                    losses = self.loss(out, mel, lin)
                return losses, tape.gradient(losses["loss"], list(self.tf1_trainable_variables().values()))

            fn = tf.function(loss_and_grads, reduce_retracing=True)
            object.__setattr__(self, "_tf1_loss_and_gradients_fn", fn)
        as_tensor = lambda a: None if a is None else tf.convert_to_tensor(a)  # noqa: E731
        noise = None if noise_masks is None else tf.nest.map_structure(tf.convert_to_tensor, dict(noise_masks))
        losses, grads = fn(as_tensor(inputs), as_tensor(input_lengths), as_tensor(mel_targets),
                           as_tensor(linear_targets), noise)
        out = {name: np.zeros(v.shape, np.float32) if g is None else np.asarray(tf.convert_to_tensor(g))
               for (name, v), g in zip(variables.items(), grads)}
        return {k: float(v) for k, v in losses.items()}, out

    def tf1_trainable_variables(self) -> dict:
        """``{TF1 name relative to model/inference: keras.Variable}`` of the trainable variables."""
        return {k: v.variable for k, v in self._tf1_variables().items() if v.variable.trainable}

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_describe(self) -> str:
        return f"Tacotron1(name={self.name!r}, layout={self.layout!r})"

    def _tf1_variables(self):
        out = {"embedding": TF1Variable(self.embedding.embeddings)}
        out.update(_prefixed("prenet", self.encoder_prenet._tf1_variables()))
        out.update(_prefixed("encoder_cbhg", self.encoder_cbhg._tf1_variables()))
        out.update(self.decoder._tf1_variables())
        out.update(_prefixed("post_cbhg", self.post_cbhg._tf1_variables()))
        out.update({"dense/kernel": TF1Variable(self.linear_projection.kernel),
                    "dense/bias": TF1Variable(self.linear_projection.bias)})
        return out

    def _tf1_input_shape(self, weights):  # built at construction
        return None

    @classmethod
    def from_tf1_checkpoint(cls, path, hparams=None, **overrides) -> Tacotron1:
        """The model a keithito/mimic2 TF1 checkpoint holds, every variable of ``model/inference/`` loaded.

        The shapes give the layout and every size (:func:`speechblocks.tacotron1_schema.infer_layout_and_hparams`);
        ``hparams``: ``None`` (the checkpoint's sizes on its variant's preset), a preset name (its non-size values,
        the checkpoint's sizes) or a mapping / ``Tacotron1HParams`` taken as given; ``overrides`` apply last; the
        result must fit the shapes. TF < 1.2 ``weights``/``biases`` names are read as
        ``kernel``/``bias``. Keywords ``layout``, ``mask_memory``, ``seed``, ``name``, ``dtype`` go to the model.

        Raises:
            ValueError: hparams contradicting the shapes (one message lists every mismatch), a checkpoint of no
                Tacotron-1 layout; ``CheckpointError``: a damaged checkpoint.
            FileNotFoundError: no checkpoint at ``path``.
        """
        from speechblocks.tf1_checkpoint import read_tf1_weights

        weights = read_tf1_weights(path, TACOTRON1_SCOPE)
        if not weights:
            raise ValueError(f"TF1 checkpoint {os.fspath(path)!r} holds no variable under '{TACOTRON1_SCOPE}/'.")
        shapes, renamed = canonical_names({k: tuple(v.shape) for k, v in weights.items()})
        weights = {k: weights[renamed.get(k, k)] for k in shapes}
        return _model_for(cls, weights, None, hparams, overrides, f"TF1 checkpoint {os.fspath(path)!r}")

    @classmethod
    def from_migrated(cls, path, hparams=None, **overrides) -> Tacotron1:
        """The whole model from a ``speechblocks migrate ... --to keras`` file (HDF5, attribute ``model`` =
        ``{"class_name": "Tacotron1", "hparams": {...}, "layout": str}``, one tensor per TF1 name relative to
        ``model/inference``). ``hparams`` replaces the stored hparams, ``overrides`` apply last (sizes must agree
        with the tensors).

        Raises:
            FileNotFoundError: no such file.
            ValueError (``MigratedFileError``): a torch file, a damaged file, a file of another model, hparams that
                contradict the tensors.
        """
        from speechblocks.migration.tacotron1 import tacotron1_from_keras_file

        model_keys = {k: overrides.pop(k) for k in ("mask_memory", "seed", *_MODEL_KWARGS) if k in overrides}
        return tacotron1_from_keras_file(path, cls, hparams, overrides, **model_keys)


# -- helpers ----------------------------------------------------------------------------------------------------------
def _model_for(cls, weights: dict, layout, hparams, overrides: dict, source: str):
    """``cls`` built for TF1 ``weights`` (relative to model/inference) and loaded strictly: the layout and sizes from
    the shapes, the rest from ``hparams``/``overrides``; ``ValueError`` listing every contradiction."""
    model_keys = {k: overrides.pop(k) for k in ("layout", "mask_memory", "seed", *_MODEL_KWARGS) if k in overrides}
    shapes = {k: tuple(v.shape) for k, v in weights.items()}
    hp, layout = fit_tacotron1_hparams(shapes, hparams, overrides, source, model_keys.pop("layout", None) or layout)
    model = cls(hp, layout, **model_keys)
    model.load_tf1_weights(weights, strict=True)
    return model


def _check_ids_eagerly(ids: np.ndarray, n_symbols: int):
    if ids.shape[1] == 0:
        raise ValueError(f"{_BLOCK}: argument `inputs` must hold at least one symbol per row, expected shape "
                         f"(batch, T_in >= 1); got shape {ids.shape}.")
    if ids.size and (ids.min() < 0 or ids.max() >= n_symbols):
        bad = sorted(set(ids[(ids < 0) | (ids >= n_symbols)].tolist()))[:10]
        raise ValueError(f"{_BLOCK}: argument `inputs` holds ids outside [0, n_symbols={n_symbols}): {bad}.")


def _check_mask(mask, key: str, i: int, batch, time, axis: str, depth: int):
    mask = tf.convert_to_tensor(mask)
    expected = (batch, time, depth)
    doc = f"(batch, {axis}, {depth})"
    if mask.shape.rank != 3 or not mask.shape.is_compatible_with(expected):
        raise ValueError(f"{_BLOCK}: argument `noise_masks[{key!r}][{i}]` must have shape {doc} = {expected}; got "
                         f"shape {mask.shape}.")
    return mask


def _check_target(target, name: str, output, width: int):
    target = tf.convert_to_tensor(target)
    check_float_tensor(target, name, _BLOCK, rank=3, last_dim=width, shape_doc=f"(batch, frames, {width})")
    if not target.shape.is_compatible_with(output.shape):
        raise ValueError(f"{_BLOCK}: argument `{name}` must have the outputs' shape, expected shape "
                         f"{tuple(output.shape)} (batch, steps * r, {width}); got shape {tuple(target.shape)}.")
    return tf.cast(target, output.dtype)
