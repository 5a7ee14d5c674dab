"""Keras ``GumbelVectorQuantizer``: twin of ``torch_layers.GumbelVectorQuantizer`` (NeMo / fairseq numbers)."""
from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np
import tensorflow as tf

from speechblocks.gumbel_vector_quantizer import annealed_temperature, check_quantizer_arguments

from ._validation import check_float_tensor
from .torch_exchange import TorchStateEntry, load_torch_entries

__all__ = ["GumbelVectorQuantizer"]


def _sample_gumbel(shape, seed_generator):
    """Gumbel(0, 1) noise ``-log(E)``, ``E ~ Exponential(1)``, float32."""
    u = keras.random.uniform(shape, minval=0.0, maxval=1.0, seed=seed_generator, dtype="float32")
    return -tf.math.log(-tf.math.log1p(-u))


@keras.saving.register_keras_serializable(package="speechblocks")
class GumbelVectorQuantizer(keras.layers.Layer):
    """Vector quantizer with ``groups`` codebooks of ``num_vars`` entries picked by a Gumbel-softmax.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    Keras twin of ``torch_layers.GumbelVectorQuantizer`` (NeMo / fairseq semantics):
    logits ``weight_proj(x)`` (``groups * num_vars``, kernel ~ N(0, 1), bias 0); in inference each group
    takes the one-hot argmax, in training the straight-through hard Gumbel-softmax at ``curr_temp``
    (forward: one-hot of ``argmax((logits + g) / curr_temp)``, backward: the softmax gradient); the
    output concatenates the chosen entries of ``vars`` (``(1, V or G*V, vq_dim/G)``, U(0, 1)).
    ``prob_ppl_loss = (V*G - ppl) / (V*G)`` with ``ppl = sum_g exp(-sum_v p log(p + 1e-7))``, ``p`` the
    softmax (float32) averaged over all frames. ``set_num_updates(n)`` sets
    ``curr_temp = max(start * decay**n, min)`` (a non-trainable variable, read at run time by
    ``tf.function``). ids combine the group argmaxes as ``((id_0 * V) + id_1) * V + ...``.

    Args:
        dim: input channels.
        num_vars: entries per group (``V``).
        temp: ``(start, min, decay)`` of the temperature.
        groups: number of groups (``G``).
        combine_groups: one codebook shared by all groups.
        vq_dim: output channels (divisible by ``groups``); ``None`` means ``dim``.
        time_first: ``(batch, time, dim)`` inputs; else ``(batch, dim, time)``.
        seed: optional int seed of the Gumbel noise.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        x: float tensor ``(batch, time, dim)`` (``(batch, dim, time)`` if not ``time_first``).
        training: bool; Gumbel noise when True.
        return_ids: also return the ids.
        gumbel_noise: optional Gumbel noise ``(batch, time, groups, num_vars)`` replacing the draw.

    Returns:
        ``(quantized, prob_ppl_loss, curr_temp)`` (+ ``ids (batch, time)`` int64 with ``return_ids``):
        quantized ``(batch, time, vq_dim)`` in the compute dtype, the two scalars float32.

    Masking: not mask-aware; the perplexity averages over every frame, padding included, as upstream.

    Example:
    >>> q = GumbelVectorQuantizer(40, 320, groups=2, vq_dim=128)
    >>> x, ppl_loss, temp = q(tf.zeros((2, 7, 40)))
    >>> x.shape
    TensorShape([2, 7, 128])
    """

    def __init__(self, dim: int, num_vars: int, temp=(2.0, 0.5, 0.999995), groups: int = 2,
                 combine_groups: bool = True, vq_dim: int | None = None, time_first: bool = True,
                 seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        vq_dim = check_quantizer_arguments(dim, num_vars, temp, groups, vq_dim)
        self.input_dim = int(dim)
        self.num_vars = int(num_vars)
        self.groups = int(groups)
        self.combine_groups = bool(combine_groups)
        self.vq_dim = int(vq_dim)
        self.var_dim = self.vq_dim // self.groups
        self.time_first = bool(time_first)
        self.max_temp, self.min_temp, self.temp_decay = (float(t) for t in temp)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.weight_proj = keras.layers.Dense(
            self.groups * self.num_vars, kernel_initializer=keras.initializers.RandomNormal(0.0, 1.0),
            bias_initializer="zeros", dtype=self.dtype_policy, name="weight_proj")

    def build(self, input_shape=None):
        books = 1 if self.combine_groups else self.groups
        self.vars = self.add_weight(shape=(1, books * self.num_vars, self.var_dim), name="vars",
                                    initializer=keras.initializers.RandomUniform(0.0, 1.0))
        self._curr_temp = self.add_weight(shape=(), name="curr_temp", trainable=False,
                                          initializer=keras.initializers.Constant(self.max_temp))
        self.weight_proj.build((None, self.input_dim))

    @property
    def curr_temp(self) -> float:
        return float(self._curr_temp.numpy()) if self.built else self.max_temp

    def set_num_updates(self, num_updates: int) -> None:
        """Sets ``curr_temp = max(start * decay ** num_updates, min)``."""
        if not self.built:
            self.build()
        self._curr_temp.assign(annealed_temperature(self.max_temp, self.min_temp, self.temp_decay, num_updates))

    def codebook(self):
        """``(groups, num_vars, vq_dim / groups)``: each group's entries (shared ones repeated)."""
        books = tf.reshape(tf.convert_to_tensor(self.vars), (-1, self.num_vars, self.var_dim))
        if self.combine_groups:
            books = tf.repeat(books, self.groups, axis=0)
        return books

    def codebook_size(self) -> int:
        return self.num_vars ** self.groups

    def codebook_rows(self, flat_index):
        """Rows of ``vars`` per group, ``flat_index.shape + (groups,)``, for indices in ``[0, V**G)``."""
        rest = tf.cast(flat_index, tf.int64)
        digits = []
        for _ in range(self.groups):
            digits.append(rest % self.num_vars)
            rest = rest // self.num_vars
        rows = tf.stack(digits[::-1], axis=-1)
        if not self.combine_groups:
            rows = rows + tf.range(self.groups, dtype=tf.int64) * self.num_vars
        return rows

    def sample_from_codebook(self, b: int, n: int, indices=None):
        """``(b, n, vq_dim)`` codebook vectors, uniform with replacement, or at ``indices (b, n)``."""
        size = self.codebook_size()
        if isinstance(n, int) and n >= size:
            raise ValueError(f"GumbelVectorQuantizer.sample_from_codebook: {n} targets but the codebook holds only "
                             f"{size} vectors (num_vars ** groups); upstream requires fewer targets than vectors.")
        if indices is None:
            u = keras.random.uniform((b, n), seed=self.seed_generator, dtype="float32")
            indices = tf.minimum(tf.cast(u * size, tf.int64), size - 1)
        rows = self.codebook_rows(indices)
        flat = tf.gather(self.vars[0], tf.reshape(rows, [-1]))
        return tf.reshape(flat, tf.concat([tf.shape(rows)[:-1], [self.vq_dim]], 0))

    def quantize_frames(self, x, training=None, gumbel_noise=None):
        """``(quantized, prob_ppl_loss, ids)``; see the class docstring."""
        shape_doc = f"(batch, time, {self.input_dim})" if self.time_first else f"(batch, {self.input_dim}, time)"
        check_float_tensor(x, "x", "GumbelVectorQuantizer", rank=3, shape_doc=shape_doc)
        if not self.time_first:
            x = tf.transpose(x, (0, 2, 1))
        if x.shape[-1] is not None and x.shape[-1] != self.input_dim:
            raise ValueError(f"GumbelVectorQuantizer: argument `x` must have shape {shape_doc}; got shape {x.shape}.")
        x = tf.cast(x, self.compute_dtype)
        shape = tf.shape(x)
        bsz, tsz = shape[0], shape[1]
        groups, num_vars = self.groups, self.num_vars
        logits = self.weight_proj(tf.reshape(x, (-1, self.input_dim)))
        logits = tf.reshape(logits, (-1, groups, num_vars))
        hard_idx = tf.argmax(logits, axis=-1)

        avg_probs = tf.reduce_mean(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1), axis=0)
        ppl = tf.reduce_sum(tf.exp(-tf.reduce_sum(avg_probs * tf.math.log(avg_probs + 1e-7), axis=-1)))
        total = float(num_vars * groups)
        prob_ppl_loss = (total - ppl) / total

        if training:
            if gumbel_noise is None:
                noise = _sample_gumbel(tf.shape(logits), self.seed_generator)
            else:
                gumbel_noise = tf.convert_to_tensor(gumbel_noise)
                if gumbel_noise.shape.rank is not None and gumbel_noise.shape.rank != 4:
                    raise ValueError("GumbelVectorQuantizer: argument `gumbel_noise` must have shape (batch, time, "
                                     f"groups={groups}, num_vars={num_vars}); got shape {gumbel_noise.shape}.")
                if gumbel_noise.shape[-2:].is_fully_defined() and tuple(gumbel_noise.shape[-2:]) != (groups, num_vars):
                    raise ValueError("GumbelVectorQuantizer: argument `gumbel_noise` must have shape (batch, time, "
                                     f"groups={groups}, num_vars={num_vars}); got shape {gumbel_noise.shape}.")
                noise = tf.reshape(tf.cast(gumbel_noise, tf.float32), tf.shape(logits))
            y_soft = tf.nn.softmax((tf.cast(logits, tf.float32) + noise) / tf.cast(self._curr_temp, tf.float32), -1)
            y_hard = tf.one_hot(tf.argmax(y_soft, axis=-1), num_vars, dtype=tf.float32)
            onehot = tf.cast(y_hard - tf.stop_gradient(y_soft) + y_soft, self.compute_dtype)
        else:
            onehot = tf.one_hot(hard_idx, num_vars, dtype=self.compute_dtype)

        codebook = tf.cast(self.codebook(), self.compute_dtype)
        quantized = tf.reshape(tf.einsum("ngv,gvd->ngd", onehot, codebook), (bsz, tsz, self.vq_dim))
        if not self.time_first:
            quantized = tf.transpose(quantized, (0, 2, 1))
        ids = tf.zeros_like(hard_idx[:, 0])
        for g in range(groups):
            ids = ids * num_vars + hard_idx[:, g]
        return quantized, prob_ppl_loss, tf.reshape(ids, (bsz, tsz))

    def call(self, x, training=None, return_ids=False, gumbel_noise=None):
        quantized, prob_ppl_loss, ids = self.quantize_frames(x, training=training, gumbel_noise=gumbel_noise)
        temp = tf.identity(tf.cast(self._curr_temp, tf.float32))
        if return_ids:
            return quantized, prob_ppl_loss, temp, ids
        return quantized, prob_ppl_loss, temp

    def get_config(self):
        config = super().get_config()
        config.update(dim=self.input_dim, num_vars=self.num_vars, temp=(self.max_temp, self.min_temp, self.temp_decay),
                      groups=self.groups, combine_groups=self.combine_groups, vq_dim=self.vq_dim,
                      time_first=self.time_first, seed=self.seed)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["temp"] = tuple(config["temp"])
        return cls(**config)

    # -- torch state dict -----------------------------------------------------------------------
    def _torch_entries(self) -> dict[str, TorchStateEntry]:
        return {
            "vars": TorchStateEntry(self.vars),
            "weight_proj.weight": TorchStateEntry(self.weight_proj.kernel, transpose=True),
            "weight_proj.bias": TorchStateEntry(self.weight_proj.bias),
        }

    def torch_state_dict(self) -> dict[str, np.ndarray]:
        """``{torch key: array in torch layout}`` (``weight_proj.weight`` is ``(out, in)``)."""
        if not self.built:
            self.build()
        return {k: e.value() for k, e in self._torch_entries().items()}

    def load_torch_state_dict(self, state_dict: Mapping, strict: bool = True):
        """Loads torch weights (arrays or tensors), all or nothing.

        Args:
            state_dict: ``{key: array}`` with keys ``vars``, ``weight_proj.weight``, ``weight_proj.bias``.
            strict: every key present, no unknown key.

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)``.

        Raises:
            TorchStateDictError: (a ``ValueError``) listing every problem; nothing assigned then.
        """
        if not self.built:
            self.build()
        return load_torch_entries(f"GumbelVectorQuantizer(name={self.name!r})", self._torch_entries(), state_dict,
                                  strict)

