"""Keras ``Tacotron1Decoder``: keithito/tacotron's and mimic2's attention decoder and its two loops."""
from __future__ import annotations

import keras
import tensorflow as tf

from speechblocks.tacotron1_model import PRENET_DROP_RATE, resolve_tacotron1_model, step_limit, teacher_forced_steps
from speechblocks.tacotron1_schema import DECODER_CELL, attention_cell_scopes

from . import _native
from ._validation import check_float_tensor
from .bahdanau_attention import BahdanauAttention
from .decoding_plan import plan_decoding
from .mimic2_location_attention import Mimic2LocationAttention
from .prenet import Prenet
from .tf1_exchange import TF1Variable, TF1WeightsMixin
from .tf1_gru_cell import TF1GRUCell


def _prefixed(prefix: str, variables: dict) -> dict:
    return {f"{prefix}/{k}": v for k, v in variables.items()}


def _dense_variables(dense) -> dict:
    return {"kernel": TF1Variable(dense.kernel), "bias": TF1Variable(dense.bias)}


@keras.saving.register_keras_serializable(package="speechblocks")
class Tacotron1Decoder(TF1WeightsMixin, keras.layers.Layer):
    """The Tacotron-1 decoder (keithito/tacotron, mimic2): pre-net, attention GRU, attention, three-cell decoder
    stack, output projection to ``r`` frames per step, teacher-forced and free-running loops.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    One step from the state ``(h_att, context, prev_align, h1, h2)`` (all zeros at the first step, whose input
    frame ``x`` is the all-zero GO frame)::

        cell_in = concat(prenet(x), context)          # layout keithito-20180906
        cell_in = prenet(concat(x, context))          # layouts keithito-20170720, mimic2
        h_att = GRU(cell_in, h_att)
        context, align = attention(h_att, keys, memory, prev_align)
        out0 = concat(h_att, context) @ W0 + b0        # cell_0 output projection to decoder_depth
        out1 = out0 + GRU1(out0, h1);  out2 = out1 + GRU2(out1, h2)
        frames = out2 @ W_out + b_out                  # (batch, num_mels * r)

    Teacher forcing reads target frame ``t * r - 1`` at step ``t >= 1`` for ``min(T_out // r, max_iters)``
    steps. Free running feeds the step's last frame back; a row is finished once all its ``num_mels * r`` outputs
    are exactly 0.0, and the loop ends when every row is finished or after ``max_iters`` steps (finished rows
    keep being computed, as TF's ``dynamic_decode(impute_finished=False)``). An eager free-running inference call in
    float32 on the CPU (no injected pre-net masks) runs the whole loop in one native C call
    (``speechblocks/native/tacotron1_step.c``, the same numbers to float32 rounding); which loop a call runs, and
    why, is :func:`tf_layers.decoding_plan.plan_decoding`'s (``SPEECHBLOCKS_NATIVE=0`` turns the native loop off).

    Args:
        hparams: anything :func:`speechblocks.resolve_tacotron1_hparams` takes, or a ``Tacotron1HParams``.
        layout: one of ``speechblocks.tacotron1_schema.LAYOUTS``; ``None``: the preset's own.
        mask_memory: bool, mask the attention scores past the input lengths (default False: the original).
        tf1_scope: TF1 scope of the names (default ``"model/inference"``): ``memory_layer/kernel`` and everything
            under ``decoder/`` (:func:`speechblocks.tacotron1_schema.tf1_variable_shapes`).
        seed: optional int seed of the pre-net's random dropout (training without ``prenet_masks``; each step draws
            statelessly from one seed per call).
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        memory: float tensor ``(batch, T_in, memory_size)`` (the encoder outputs).
        memory_lengths: optional int tensor ``(batch,)`` (used only with ``mask_memory``).
        mel_targets: optional float tensor ``(batch, T_out, num_mels)``: teacher forcing; free running when None.
        max_iters: optional int step cap (default ``hparams.max_iters``).
        training: bool, pre-net dropout (random unless ``prenet_masks``).
        prenet_masks: optional list of one 0/1 keep-mask per pre-net layer, ``(batch, steps, prenet_depths[i])``;
            step ``t`` uses ``[:, t]``, in any mode.

    Returns:
        ``(frames (batch, steps, num_mels * r), alignments (batch, T_in, steps))``.

    Masking: see ``mask_memory``; the original attends the padded memory.

    Deployment: exports as a SavedModel (unknown batch and time, the loop inside the graph). Not for XLA: the
    free-running loop collects its steps in dynamic-size ``TensorArray`` s, which ``jit_compile=True`` returns empty
    (zero steps, no error). LiteRT conversion needs ``SELECT_TF_OPS`` (the loop's TensorList ops): the converted
    model runs only in an interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s.
    """

    default_tf1_scope = "model/inference"
    #: what :func:`tf_layers.decoding_plan.plan_decoding` plans this decoder as
    decoder_family = "tacotron1"

    def __init__(self, hparams="keithito", layout: str | None = None, *, mask_memory: bool = False,
                 tf1_scope: str | None = None, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.hparams, self.layout = resolve_tacotron1_model(hparams, layout)
        if not isinstance(mask_memory, bool):
            raise ValueError(f"Tacotron1Decoder: `mask_memory` must be True or False; got {mask_memory!r}.")
        self.mask_memory = mask_memory
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        hp, policy = self.hparams, self.dtype_policy
        self.prenet_inside = self.layout != "keithito-20180906"
        self.prenet = Prenet(hp.prenet_depths, PRENET_DROP_RATE, "relu", tf1_scope="decoder_prenet", seed=seed,
                             dropout="training", dtype=policy, name="decoder_prenet")
        self.attention_gru = TF1GRUCell(hp.attention_depth, dtype=policy, name="attention_gru")
        common = dict(mask_memory=mask_memory, memory_size=hp.memory_size, query_size=hp.attention_depth,
                      dtype=policy)
        if hp.attention == "location_sensitive":
            self.attention = Mimic2LocationAttention(hp.attention_depth, filters=hp.location_filters,
                                                     kernel_size=hp.location_kernel_size,
                                                     name="location_sensitive_attention", **common)
        else:
            self.attention = BahdanauAttention(hp.attention_depth, name="bahdanau_attention", **common)
        self.cell0_projection = keras.layers.Dense(hp.decoder_depth, dtype=policy, name="cell_0_projection")
        self.decoder_grus = [TF1GRUCell(hp.decoder_depth, dtype=policy, name=f"cell_{k}") for k in (1, 2)]
        self.output_projection = keras.layers.Dense(hp.num_mels * hp.outputs_per_step, dtype=policy,
                                                    name="output_projection")
        self._build_all()

    def _build_all(self):
        hp = self.hparams
        mem, pre = hp.memory_size, hp.prenet_depths
        self.prenet.build((None, hp.num_mels + (mem if self.prenet_inside else 0)))
        self.attention_gru.build((None, pre[-1] + (0 if self.prenet_inside else mem)))
        self.cell0_projection.build((None, hp.attention_depth + mem))
        for gru in self.decoder_grus:
            gru.build((None, hp.decoder_depth))
        self.output_projection.build((None, hp.decoder_depth))
        self.built = True

    def build(self, *args, **kwargs):  # every variable exists from the constructor on
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(hparams=self.hparams.to_dict(), layout=self.layout, mask_memory=self.mask_memory,
                      tf1_scope=self.tf1_scope, seed=self.seed)
        return config

    # -- one step -----------------------------------------------------------------------------
    def process_memory(self, memory):
        """The attention keys ``(batch, T_in, attention_depth)`` of ``memory`` ``(batch, T_in, memory_size)``."""
        return self.attention.process_memory(memory)

    def initial_state(self, batch_size, max_time, dtype="float32"):
        """The zero state ``(h_att, context, prev_align, h1, h2)`` of a batch over ``max_time`` memory frames."""
        hp = self.hparams

        def zeros(n):
            return tf.zeros(tf.stack([batch_size, n]), dtype)

        return (zeros(hp.attention_depth), zeros(hp.memory_size), zeros(max_time), zeros(hp.decoder_depth),
                zeros(hp.decoder_depth))

    def step(self, frame, state, memory, keys, memory_lengths=None, training=None, prenet_masks=None,
             prenet_seed=None):
        """One decoder step.

        Args:
            frame: float ``(batch, num_mels)``, the previous frame (GO: zeros).
            state: ``(h_att (batch, A), context (batch, E), prev_align (batch, T_in), h1, h2 (batch, D))``.
            memory: float ``(batch, T_in, E)``; keys: ``(batch, T_in, A)`` (:meth:`process_memory`).
            memory_lengths: optional int ``(batch,)`` (``mask_memory`` only).
            training: bool, pre-net dropout.
            prenet_masks: optional list of keep-masks ``(batch, prenet_depths[i])`` of this step.
            prenet_seed: optional int32 ``(2,)`` stateless seed of this step's dropout (training only).

        Returns:
            ``(frames (batch, num_mels * r), alignments (batch, T_in), next_state)``.
        """
        h_att, context, prev_align, h1, h2 = state
        seed = prenet_seed if training else None
        if self.prenet_inside:
            cell_in = self.prenet(tf.concat([frame, context], -1), training=training, dropout_masks=prenet_masks,
                                  seed=seed)
        else:
            cell_in = tf.concat([self.prenet(frame, training=training, dropout_masks=prenet_masks, seed=seed),
                                 context], -1)
        h_att, _ = self.attention_gru(cell_in, [h_att])
        context, align = self.attention(h_att, keys, memory, prev_align, memory_lengths)
        out0 = self.cell0_projection(tf.concat([h_att, context], -1))
        h1, _ = self.decoder_grus[0](out0, [h1])
        out1 = out0 + h1
        h2, _ = self.decoder_grus[1](out1, [h2])
        frames = self.output_projection(out1 + h2)
        return frames, align, (h_att, context, align, h1, h2)

    # -- the loops ----------------------------------------------------------------------------
    def call(self, memory, memory_lengths=None, mel_targets=None, max_iters=None, training=None, prenet_masks=None):
        hp = self.hparams
        check_float_tensor(memory, "memory", "Tacotron1Decoder", rank=3, last_dim=hp.memory_size,
                           shape_doc=f"(batch, T_in, {hp.memory_size})")
        limit = step_limit(max_iters, hp)
        if tf.executing_eagerly():
            memory = tf.convert_to_tensor(memory)
        keys = self.process_memory(memory)
        if mel_targets is None:
            plan = plan_decoding(self, memory, training=bool(training), noise_masks={"decoder_prenet": prenet_masks})
            if plan.native:
                return _native.tacotron1_free_running(self, memory, keys, memory_lengths, limit)
            return self._loop(memory, keys, memory_lengths, None, limit, training, prenet_masks)
        check_float_tensor(mel_targets, "mel_targets", "Tacotron1Decoder", rank=3, last_dim=hp.num_mels,
                           shape_doc=f"(batch, T_out, {hp.num_mels})")
        r = hp.outputs_per_step
        if mel_targets.shape[1] is not None:
            steps = tf.constant(teacher_forced_steps(int(mel_targets.shape[1]), hp, limit))
        else:
            steps = tf.minimum(tf.shape(mel_targets)[1] // r, limit)
        inputs_tm = tf.transpose(tf.cast(mel_targets[:, r - 1::r], memory.dtype), [1, 0, 2])
        return self._loop(memory, keys, memory_lengths, inputs_tm, steps, training, prenet_masks)

    def _loop(self, memory, keys, lengths, inputs_tm, steps, training, masks):
        """The ``tf.while_loop``: teacher forcing when ``inputs_tm`` (``(steps, batch, num_mels)``, the input of step
        ``t + 1`` at ``t``), else free running with the exact-zero stop; at most ``steps`` steps."""
        m = self.hparams.num_mels
        dt = memory.dtype
        batch = tf.shape(memory)[0]
        n_pre = len(self.hparams.prenet_depths)
        seed = tf.cast(self.prenet.seed_generator.next(), tf.int32) if training and masks is None else None
        teacher = inputs_tm is not None

        def body(t, finished, frame, state, frames_ta, aligns_ta):
            pm = None if masks is None else [tf.gather(mask, t, axis=1) for mask in masks]
            step_seed = None if seed is None else seed + tf.stack([0, t * n_pre + 1])
            frames, align, state = self.step(frame, state, memory, keys, lengths, training, pm, step_seed)
            if teacher:
                frame = inputs_tm[t]
            else:
                frame = frames[:, -m:]
                finished = tf.logical_or(finished, tf.reduce_all(tf.equal(frames, 0.0), axis=1))
            return t + 1, finished, frame, state, frames_ta.write(t, frames), aligns_ta.write(t, align)

        def cond(t, finished, *_):
            return tf.logical_and(t < steps, tf.logical_not(tf.reduce_all(finished)))

        ta = lambda: tf.TensorArray(dt, size=0, dynamic_size=True)  # noqa: E731
        state0 = self.initial_state(batch, tf.shape(memory)[1], dt)
        loop = (tf.constant(0), tf.zeros(tf.reshape(batch, [1]), tf.bool), tf.zeros(tf.stack([batch, m]), dt),
                state0, ta(), ta())
        out = tf.while_loop(cond, body, loop, parallel_iterations=1)
        frames = tf.transpose(out[4].stack(), [1, 0, 2])
        return frames, tf.transpose(out[5].stack(), [1, 2, 0])

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        scopes = attention_cell_scopes(self.layout)
        att = self.attention._tf1_variables()
        out = {"memory_layer/kernel": att.pop("memory_layer/kernel")}
        out.update(_prefixed(scopes["prenet"], self.prenet._tf1_variables()))
        out.update(_prefixed(scopes["gru"], self.attention_gru._tf1_variables()))
        out.update(_prefixed(scopes["attention"], att))
        out.update(_prefixed(f"{DECODER_CELL}/cell_0/output_projection_wrapper",
                             _dense_variables(self.cell0_projection)))
        for k, gru in enumerate(self.decoder_grus, start=1):
            out.update(_prefixed(f"{DECODER_CELL}/cell_{k}/gru_cell", gru._tf1_variables()))
        out.update(_prefixed("decoder/output_projection_wrapper", _dense_variables(self.output_projection)))
        return out

    def _tf1_input_shape(self, weights):  # built at construction
        return None
