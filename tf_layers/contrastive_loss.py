"""Keras ``ContrastiveLoss``: twin of ``torch_layers.ContrastiveLoss`` (NeMo's wav2vec-style SSL loss)."""
from __future__ import annotations

import math
from collections.abc import Mapping

import keras
import numpy as np
import tensorflow as tf

# common: the framework-free part (options, checks, message texts), shared with the other framework's twin
from speechblocks import contrastive_loss as common

from ._validation import check_float_tensor, check_lengths
from .gumbel_vector_quantizer import GumbelVectorQuantizer
from .torch_exchange import TorchStateEntry, load_torch_entries


def _torch_linear_initializers(fan_in: int):
    """torch ``nn.Linear`` defaults: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)
    return (keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform"),
            keras.initializers.RandomUniform(-bound, bound))


def _normalize(x):
    """``x / max(||x||, 1e-8)`` in float32 (torch's ``cosine_similarity``)."""
    x = tf.cast(x, tf.float32)
    return x / tf.maximum(tf.norm(x, axis=-1, keepdims=True), 1e-8)


@keras.saving.register_keras_serializable(package="speechblocks")
class ContrastiveLoss(keras.layers.Layer):
    """Contrastive task: find the true latent of every masked spectrogram step among sampled distractors.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    Keras twin of ``torch_layers.ContrastiveLoss`` (NeMo's wav2vec-style loss): targets
    ``spectrograms^T`` zero-padded to a multiple of the decoder length and ``combine_time_steps`` frames
    stacked per step; projected (``target_proj``) or quantized (``quantizer``); a step is masked when the
    mean of its mask values is ``> mask_threshold``; ``num_negatives`` distractors drawn without
    replacement (same time indices for every utterance with ``sample_from_same_utterance_only``, else
    batch-wide; from masked or all steps; or from the codebook / the whole codebook per group with
    ``sample_from_codebook`` / ``group_loss``); logits = cosine similarity (float32) / ``logit_temp``,
    ``-inf`` for a distractor equal to the positive; cross entropy (``reduce``);
    ``+ prob_ppl_weight * prob_ppl_loss * num_targets`` when quantized; ``* multiplier / batch``.
    ``group_loss`` uses each group's codebook (upstream only runs with ``num_groups == 1``, where both agree).
    "Equal to the positive" is decided on the stacked spectrogram steps before ``target_proj`` (quantized:
    on the exact codebook rows), as the torch twin does (upstream's bitwise test of projected duplicates
    depends on BLAS blocking).

    Args:
        in_dim: spectrogram channels.
        proj_dim: decoder output channels (= projected / quantized target channels).
        combine_time_steps: frames stacked into one decoder step.
        num_negatives: distractors per target.
        quantized_targets: quantize the targets (Gumbel vector quantizer) instead of projecting them.
        codebook_size: entries per quantizer group.
        prob_ppl_weight: weight of the perplexity loss.
        logit_temp: temperature of the cosine logits.
        reduce: ``"sum"``, ``"mean"`` or ``"none"``.
        sample_from_same_utterance_only: distractors from the same utterance.
        sample_from_non_masked: distractors from all steps.
        sample_from_codebook: (batch-wide, quantized) distractors from the codebook.
        group_loss: (batch-wide, quantized) contrast each group with its whole codebook.
        num_groups: quantizer groups.
        quantizer_temp_start, quantizer_temp_min, quantizer_temp_decay: temperature schedule.
        mask_threshold: masked-step threshold on the mean mask value.
        store_ids: keep the quantizer ids (eager calls) in ``target_ids``.
        reduce_ids: collapse runs of equal ids (``target_ids``, ``target_lengths``).
        multiplier: factor of the final loss (divided by the batch size).
        seed: optional int seed of the sampling.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        spectrograms: ``(batch, in_dim, time)``.
        spec_masks: ``(batch, in_dim, time)``, 1 where masked (float or bool).
        decoder_outputs: ``(batch, time', proj_dim)`` with ``ceil(time / time') == combine_time_steps``.
        decoder_lengths: optional ``(batch,)``, unused (as upstream).
        training: bool; the quantizer's Gumbel noise when True.
        negative_indices: optional int indices replacing the draw, layouts as the torch module:
            ``(masked steps per utterance, num_negatives)`` (same utterance), ``(masked steps,
            num_negatives)`` (batch-wide), ``(num_negatives, masked steps)`` (``sample_from_codebook``).
        gumbel_noise: optional ``(batch, time', num_groups, codebook_size)`` Gumbel noise.

    Returns:
        the loss, a scalar (``(num_targets,)`` with ``reduce="none"``), in the decoder outputs' dtype.

    Masking: the spectrogram mask *is* the input; padded frames count as unmasked steps and serve as
    distractors with ``sample_from_non_masked``, as upstream. In ``tf.function`` an unequal number of
    masked steps under same-utterance sampling fails with an ``InvalidArgumentError`` (a ``ValueError``
    in eager mode).

    Deployment: SavedModel and XLA. LiteRT conversion needs ``SELECT_TF_OPS``: a new-axis slice
    (``x[:, :, None]``) with unknown dims is no TFLite builtin ``StridedSlice``; the converted model runs only in an
    interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s.

    Example:
    >>> loss = ContrastiveLoss(in_dim=4, proj_dim=8, num_negatives=3)
    >>> masks = np.zeros((2, 4, 10), "float32"); masks[:, :, 2:7] = 1
    >>> loss(np.random.randn(2, 4, 10).astype("float32"), masks, np.random.randn(2, 10, 8).astype("float32")).shape
    TensorShape([])
    """

    def __init__(self, in_dim: int, proj_dim: int = 128, combine_time_steps: int = 1, num_negatives: int = 100,
                 quantized_targets: bool = False, codebook_size: int = 320, prob_ppl_weight: float = 0.1,
                 logit_temp: float = 0.1, reduce: str = "sum", sample_from_same_utterance_only: bool = True,
                 sample_from_non_masked: bool = False, sample_from_codebook: bool = False, group_loss: bool = False,
                 num_groups: int = 2, quantizer_temp_start: float = 2, quantizer_temp_min: float = 0.5,
                 quantizer_temp_decay: float = 0.999995, mask_threshold: float = 0.8, store_ids: bool = True,
                 reduce_ids: bool = False, multiplier: float = 16.0, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        common.check_contrastive_arguments(in_dim, proj_dim, combine_time_steps, num_negatives, codebook_size,
                                           num_groups, reduce, logit_temp, quantized_targets, group_loss,
                                           sample_from_codebook)
        self.in_dim = int(in_dim)
        self.proj_dim = int(proj_dim)
        self.combine_time_steps = int(combine_time_steps)
        self.num_negatives = int(num_negatives)
        self.quantized_targets = bool(quantized_targets)
        self.codebook_size = int(codebook_size)
        self.prob_ppl_weight = float(prob_ppl_weight)
        self.logit_temp = float(logit_temp)
        self.reduce = reduce
        self.sample_from_same_utterance_only = bool(sample_from_same_utterance_only)
        self.sample_from_non_masked = bool(sample_from_non_masked)
        self.sample_from_codebook = bool(sample_from_codebook)
        self.group_loss = bool(group_loss)
        self.num_groups = int(num_groups)
        self.quantizer_temp = (float(quantizer_temp_start), float(quantizer_temp_min), float(quantizer_temp_decay))
        self.mask_threshold = float(mask_threshold)
        self.store_ids = bool(store_ids)
        self.reduce_ids = bool(reduce_ids)
        self.multiplier = float(multiplier)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.target_ids = None
        self.target_lengths = None
        self.negative_indices = None
        fan_in = self.in_dim * self.combine_time_steps
        if self.quantized_targets:
            self.quantizer = GumbelVectorQuantizer(
                fan_in, self.codebook_size, temp=self.quantizer_temp, groups=self.num_groups, combine_groups=True,
                vq_dim=self.proj_dim, time_first=True, seed=None if seed is None else seed + 1,
                dtype=self.dtype_policy, name="quantizer")
        else:
            kernel_init, bias_init = _torch_linear_initializers(fan_in)
            self.target_proj = keras.layers.Dense(self.proj_dim, kernel_initializer=kernel_init,
                                                  bias_initializer=bias_init, dtype=self.dtype_policy,
                                                  name="target_proj")

    def build(self, *input_shapes, **kwargs):
        if self.quantized_targets:
            self.quantizer.build((None, None, self.in_dim * self.combine_time_steps))
        else:
            self.target_proj.build((None, self.in_dim * self.combine_time_steps))

    def set_num_updates(self, num_updates: int) -> None:
        """Advances the quantizer temperature (no-op without quantized targets)."""
        if self.quantized_targets:
            self.quantizer.set_num_updates(num_updates)

    # -- sampling --------------------------------------------------------------------------------------
    def _draw(self, num, high, where: str):
        """``(num, num_negatives)`` indices in ``[0, high)``, distinct within a row (uniform subsets)."""
        if isinstance(num, int) and isinstance(high, int) and num > 0 and self.num_negatives > high:
            raise ValueError(common.too_few_candidates_message(self.num_negatives, high, where))
        checks = []
        if not (isinstance(num, int) and isinstance(high, int)):
            checks.append(tf.debugging.Assert(
                tf.logical_or(tf.equal(num, 0), self.num_negatives <= high),
                [f"ContrastiveLoss: num_negatives={self.num_negatives} exceeds the candidate steps available to "
                 f"{where}; candidates:", high]))
        with tf.control_dependencies(checks):
            u = keras.random.uniform(tf.stack([num, high]), seed=self.seed_generator, dtype="float32")
            return tf.cast(tf.math.top_k(u, k=tf.minimum(self.num_negatives, high)).indices, tf.int64)

    def _indices(self, given, num, high, where: str, layout: str):
        if given is None:
            return self._draw(num, high, where)
        given = tf.convert_to_tensor(given)
        if given.dtype.is_floating or given.shape.rank != 2 or (given.shape[1] is not None
                                                                 and given.shape[1] != self.num_negatives):
            raise ValueError("ContrastiveLoss: argument `negative_indices` must be an integer tensor of shape "
                             f"{layout} with num_negatives={self.num_negatives} for {where}; got {given.dtype.name} "
                             f"{given.shape}.")
        if isinstance(num, int) and given.shape[0] is not None and given.shape[0] != num:
            raise ValueError(f"ContrastiveLoss: argument `negative_indices` must have shape {layout} = "
                             f"{(num, self.num_negatives)} for {where}; got {given.shape}.")
        if tf.executing_eagerly() and isinstance(high, int) and int(tf.size(given)):
            lo, hi = int(tf.reduce_min(given)), int(tf.reduce_max(given))
            if lo < 0 or hi >= high:
                raise ValueError(common.indices_range_message(high, where))
        return tf.cast(given, tf.int64)

    # -- call ------------------------------------------------------------------------------------------
    def call(self, spectrograms, spec_masks, decoder_outputs, decoder_lengths=None, training=None,
             negative_indices=None, gumbel_noise=None):
        spectrograms = tf.convert_to_tensor(spectrograms)
        spec_masks = tf.convert_to_tensor(spec_masks)
        decoder_outputs = tf.convert_to_tensor(decoder_outputs)
        spec_doc = f"(batch, {self.in_dim}, time)"
        check_float_tensor(spectrograms, "spectrograms", "ContrastiveLoss", rank=3, shape_doc=spec_doc)
        if spectrograms.shape[1] is not None and spectrograms.shape[1] != self.in_dim:
            raise ValueError(f"ContrastiveLoss: argument `spectrograms` must have shape {spec_doc}; got shape "
                             f"{spectrograms.shape}.")
        if spec_masks.shape.rank != 3 or not spec_masks.shape.is_compatible_with(spectrograms.shape):
            raise ValueError("ContrastiveLoss: argument `spec_masks` must have the shape of `spectrograms` "
                             f"{spec_doc}; got {spec_masks.shape} for {spectrograms.shape}.")
        check_float_tensor(decoder_outputs, "decoder_outputs", "ContrastiveLoss", rank=3, last_dim=self.proj_dim,
                           shape_doc=f"(batch, time', {self.proj_dim})")
        b_s, b_d = spectrograms.shape[0], decoder_outputs.shape[0]
        if b_s is not None and b_d is not None and b_s != b_d:
            raise ValueError(common.batch_mismatch_message(b_d, b_s))
        steps, t_dec = spectrograms.shape[2], decoder_outputs.shape[1]
        k = self.combine_time_steps
        if steps is not None and t_dec is not None and (t_dec < 1 or math.ceil(steps / t_dec) != k):
            raise ValueError(common.steps_mismatch_message(t_dec, steps, k))
        if decoder_lengths is not None:
            check_lengths(decoder_lengths, "decoder_lengths", "ContrastiveLoss", batch_dim=b_s)

        shape = tf.shape(spectrograms)
        bsz, n_steps = shape[0], shape[2]
        n_dec = tf.shape(decoder_outputs)[1]
        tf.debugging.assert_equal((n_steps + n_dec - 1) // n_dec, k, message=(
            "ContrastiveLoss: ceil(time / time') of `spectrograms` / `decoder_outputs` must equal combine_time_steps"))
        pad = [[0, 0], [0, k * n_dec - n_steps], [0, 0]]
        targets = tf.pad(tf.transpose(spectrograms, (0, 2, 1)), pad)
        targets = tf.reshape(targets, (bsz, n_dec, k * self.in_dim))
        masks = tf.pad(tf.transpose(tf.cast(spec_masks, spectrograms.dtype), (0, 2, 1)), pad)
        masks = tf.reshape(masks, (bsz, n_dec, k * self.in_dim))
        masked = tf.reduce_mean(masks, axis=-1) > tf.cast(self.mask_threshold, masks.dtype)

        prob_ppl_loss = None
        if self.quantized_targets:
            targets, prob_ppl_loss, ids = self.quantizer.quantize_frames(targets, training=training,
                                                                         gumbel_noise=gumbel_noise)
            if self.store_ids and tf.executing_eagerly():
                self._store_ids(ids)
            targets = tf.cast(targets, decoder_outputs.dtype)
            keys = targets  # exact codebook rows
        else:
            keys = targets  # equal steps <=> equal targets, decided before the projection (as the torch twin)
            targets = tf.cast(self.target_proj(targets), decoder_outputs.dtype)

        if self.sample_from_same_utterance_only:
            logits = self._same_utterance_logits(decoder_outputs, targets, keys, masked, negative_indices)
        elif self.group_loss:
            logits = self._group_logits(tf.boolean_mask(decoder_outputs, masked), tf.boolean_mask(targets, masked))
        elif self.sample_from_codebook:
            logits = self._codebook_logits(tf.boolean_mask(decoder_outputs, masked), tf.boolean_mask(targets, masked),
                                           negative_indices)
        else:
            logits = self._batch_logits(decoder_outputs, targets, keys, masked, negative_indices)

        nll = tf.reduce_logsumexp(logits, axis=-1) - logits[:, 0]
        if self.reduce == "sum":
            loss = tf.reduce_sum(nll)
        elif self.reduce == "mean":
            loss = tf.reduce_mean(nll)
        else:
            loss = nll
        if self.prob_ppl_weight != 0 and prob_ppl_loss is not None:
            n_targets = tf.cast(tf.shape(logits)[0], tf.float32)
            loss = loss + tf.cast(self.prob_ppl_weight * prob_ppl_loss * n_targets, loss.dtype)
        return loss * tf.cast(self.multiplier / tf.cast(bsz, tf.float32), loss.dtype)

    def _store_ids(self, ids):
        if not self.reduce_ids:
            self.target_ids, self.target_lengths = ids, None
            return
        ids_np = np.asarray(ids)
        change = np.concatenate([np.zeros_like(ids_np[:, :1]), (ids_np[:, 1:] != ids_np[:, :-1])], axis=1)
        run = np.cumsum(change, axis=1)
        lengths = run[:, -1] + 1 if ids_np.shape[1] else np.zeros(ids_np.shape[0], np.int64)
        reduced = np.zeros_like(ids_np)
        np.put_along_axis(reduced, run, ids_np, axis=1)
        width = int(lengths.max()) if ids_np.size else 0
        self.target_ids = tf.constant(reduced[:, :width])
        self.target_lengths = tf.constant(lengths.astype(np.int64))

    def _logits(self, out, tgt, negs, tgt_keys=None, neg_keys=None):
        """``out, tgt (..., C)``, ``negs (..., N, C)`` -> ``(..., 1+N)`` logits; ``-inf`` where a negative's key
        equals the target's (keys default to the vectors themselves)."""
        o = _normalize(out)
        pos = tf.reduce_sum(o * _normalize(tgt), axis=-1, keepdims=True)
        neg = tf.reduce_sum(_normalize(negs) * o[..., None, :], axis=-1)
        if tgt_keys is None:
            tgt_keys, neg_keys = tgt, negs
        neg_is_pos = tf.reduce_all(tf.equal(neg_keys, tgt_keys[..., None, :]), axis=-1)
        logits = tf.cast(tf.concat([pos, neg], axis=-1), out.dtype) / tf.cast(self.logit_temp, out.dtype)
        neg_logits = tf.where(neg_is_pos, tf.cast(-np.inf, out.dtype), logits[..., 1:])
        return tf.concat([logits[..., :1], neg_logits], axis=-1)

    def _same_utterance_logits(self, out, targets, keys, masked, negative_indices):
        counts = tf.reduce_sum(tf.cast(masked, tf.int32), axis=1)
        if tf.executing_eagerly():
            c = np.asarray(counts)
            if c.size and np.any(c != c[0]):
                raise ValueError("ContrastiveLoss: argument `spec_masks` gives utterances different numbers of masked "
                                 f"steps ({c.tolist()}); sample_from_same_utterance_only=True needs the same number in "
                                 "every utterance (mask a fixed count per utterance or set "
                                 "sample_from_same_utterance_only=False).")
            n_masked = int(c[0]) if c.size else 0
        else:
            check = tf.debugging.assert_equal(counts, counts[:1], message=(
                "ContrastiveLoss: same-utterance sampling needs the same number of masked steps in every utterance"))
            with tf.control_dependencies([check]):  # fail with this message before any reshape does
                n_masked = tf.identity(counts[0])
        bsz = tf.shape(out)[0]
        out_m = tf.reshape(tf.boolean_mask(out, masked), (bsz, n_masked, self.proj_dim))
        tgt_m = tf.reshape(tf.boolean_mask(targets, masked), (bsz, n_masked, self.proj_dim))
        key_m = tf.reshape(tf.boolean_mask(keys, masked), (bsz, n_masked, keys.shape[-1]))
        pool = targets if self.sample_from_non_masked else tgt_m
        pool_keys = keys if self.sample_from_non_masked else key_m
        high = pool.shape[1] if pool.shape[1] is not None else tf.shape(pool)[1]
        where = common.sampling_description(True, self.sample_from_non_masked)
        idx = self._indices(negative_indices, n_masked, high, where, "(masked steps per utterance, num_negatives)")
        if tf.executing_eagerly():
            self.negative_indices = idx
        negs = tf.gather(pool, idx, axis=1)  # (B, Tm, N, C)
        logits = self._logits(out_m, tgt_m, negs, key_m, tf.gather(pool_keys, idx, axis=1))  # (B, Tm, 1+N)
        logits = tf.transpose(logits, (1, 0, 2))  # rows ordered (time, batch) as upstream
        return tf.reshape(logits, (-1, self.num_negatives + 1))

    def _batch_logits(self, out, targets, keys, masked, negative_indices):
        out_m, tgt_m, key_m = (tf.boolean_mask(out, masked), tf.boolean_mask(targets, masked),
                               tf.boolean_mask(keys, masked))
        pool = tf.reshape(targets, (-1, self.proj_dim)) if self.sample_from_non_masked else tgt_m
        pool_keys = tf.reshape(keys, (-1, keys.shape[-1])) if self.sample_from_non_masked else key_m
        num = out_m.shape[0] if out_m.shape[0] is not None else tf.shape(out_m)[0]
        high = pool.shape[0] if pool.shape[0] is not None else tf.shape(pool)[0]
        where = common.sampling_description(False, self.sample_from_non_masked)
        idx = self._indices(negative_indices, num, high, where, "(masked steps, num_negatives)")
        if tf.executing_eagerly():
            self.negative_indices = idx
        return self._logits(out_m, tgt_m, tf.gather(pool, idx), key_m, tf.gather(pool_keys, idx))

    def _group_logits(self, out_m, tgt_m):
        groups = self.num_groups
        if tf.executing_eagerly():
            self.negative_indices = None
        o = tf.reshape(out_m, (-1, groups, self.proj_dim // groups))
        t = tf.reshape(tgt_m, (-1, groups, self.proj_dim // groups))
        book = tf.cast(self.quantizer.codebook(), out_m.dtype)  # (G, V, d)
        negs = tf.broadcast_to(book[None], tf.concat([tf.shape(o)[:1], tf.shape(book)], 0))
        logits = self._logits(o, t, negs)  # (M, G, 1+V): rows ordered (target, group) as upstream
        return tf.reshape(logits, (-1, self.codebook_size + 1))

    def _codebook_logits(self, out_m, tgt_m, negative_indices):
        num = out_m.shape[0] if out_m.shape[0] is not None else tf.shape(out_m)[0]
        size = self.quantizer.codebook_size()
        if isinstance(num, int) and num >= size:
            self.quantizer.sample_from_codebook(self.num_negatives, num)  # raises the ValueError
        if negative_indices is not None:
            negative_indices = tf.convert_to_tensor(negative_indices)
            if negative_indices.shape.rank != 2 or (isinstance(num, int) and tuple(negative_indices.shape) != (
                    self.num_negatives, num)):
                raise ValueError("ContrastiveLoss: argument `negative_indices` must have shape (num_negatives, masked "
                                 f"steps) = {(self.num_negatives, num)} with sample_from_codebook; got "
                                 f"{negative_indices.shape}.")
        negs = self.quantizer.sample_from_codebook(self.num_negatives, num, indices=negative_indices)
        if tf.executing_eagerly():
            self.negative_indices = negative_indices
        negs = tf.transpose(tf.cast(negs, out_m.dtype), (1, 0, 2))  # (M, N, C)
        return self._logits(out_m, tgt_m, negs)

    def get_config(self):
        config = super().get_config()
        config.update(
            in_dim=self.in_dim, proj_dim=self.proj_dim, combine_time_steps=self.combine_time_steps,
            num_negatives=self.num_negatives, quantized_targets=self.quantized_targets,
            codebook_size=self.codebook_size, prob_ppl_weight=self.prob_ppl_weight, logit_temp=self.logit_temp,
            reduce=self.reduce, sample_from_same_utterance_only=self.sample_from_same_utterance_only,
            sample_from_non_masked=self.sample_from_non_masked, sample_from_codebook=self.sample_from_codebook,
            group_loss=self.group_loss, num_groups=self.num_groups, quantizer_temp_start=self.quantizer_temp[0],
            quantizer_temp_min=self.quantizer_temp[1], quantizer_temp_decay=self.quantizer_temp[2],
            mask_threshold=self.mask_threshold, store_ids=self.store_ids, reduce_ids=self.reduce_ids,
            multiplier=self.multiplier, seed=self.seed)
        return config

    # -- torch state dict -------------------------------------------------------------------------
    def _torch_entries(self) -> dict[str, TorchStateEntry]:
        if self.quantized_targets:
            return {f"quantizer.{k}": e for k, e in self.quantizer._torch_entries().items()}
        return {"target_proj.weight": TorchStateEntry(self.target_proj.kernel, transpose=True),
                "target_proj.bias": TorchStateEntry(self.target_proj.bias)}

    def torch_state_dict(self) -> dict[str, np.ndarray]:
        """``{torch key: array in torch layout}``: ``target_proj.*`` or ``quantizer.vars``,
        ``quantizer.weight_proj.*``."""
        if not self.built:
            self.build()
            self.built = True
        return {k: e.value() for k, e in self._torch_entries().items()}

    def load_torch_state_dict(self, state_dict: Mapping, strict: bool = True):
        """Loads a torch ``ContrastiveLoss`` state dict (arrays or tensors), all or nothing.

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)``.

        Raises:
            TorchStateDictError: (a ``ValueError``) listing every problem; nothing assigned then.
        """
        if not self.built:
            self.build()
            self.built = True
        return load_torch_entries(f"ContrastiveLoss(name={self.name!r})", self._torch_entries(), state_dict, strict)
