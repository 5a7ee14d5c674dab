"""Keras ``Tacotron2Decoder``: the attention decoder loop of TF1 Tacotron-2 (``TacotronDecoderCell`` under
``dynamic_decode`` with the original training and synthesis helpers), as one ``tf.while_loop``."""
from __future__ import annotations

from typing import NamedTuple

import keras
import tensorflow as tf

from . import _native
from ._fan_out import fan_out
from ._validation import check_float_tensor, check_lengths
from .decoder_rnn import DecoderRNN, LoopGates, LSTMStackWeights, stack_step, stack_weights
from .decoding_plan import ProgressRelay, plan_decoding
from .frame_projection import FrameProjection
from .location_sensitive_attention import LocationSensitiveAttention, attention_step
from .prenet import Prenet
from .stop_projection import StopProjection
from .tacotron2_stop_rule import batch_fired, entries_fired
from .tf1_exchange import TF1WeightsMixin
from .zoneout_lstm_cell import check_zoneout, keep_masks


class DecoderState(NamedTuple):
    """The recurrent state of :meth:`Tacotron2Decoder.step` (torch's ``DecoderState``): the previous ``context``
    ``(batch, memory_size)``, ``attention_state`` ``(batch, max_time)`` (cumulative alignments), per decoder LSTM
    layer ``cells`` and ``hiddens`` ``(batch, units)`` (the zoned-out ``c`` and ``h``)."""

    context: tf.Tensor
    attention_state: tf.Tensor
    cells: tuple
    hiddens: tuple


class AttentionMemory(NamedTuple):
    """What the attention reads at every step (torch's ``AttentionMemory``): ``values`` ``(batch, T_in,
    memory_size)`` (the memory zeroed past its lengths with ``mask_encoder``), ``keys`` (its ``memory_layer``
    projection + the attention bias + the folded location bias), ``score_bias`` ``(batch, T_in)`` 0 / -inf past the
    lengths, or None (:meth:`LocationSensitiveAttention.attention_memory`).
    Layout: Keras' keys are ``(batch, T_in, units)``, torch's ``(batch, units, T_in)``."""

    values: tf.Tensor
    keys: tf.Tensor
    score_bias: tf.Tensor | None


def _pack_memory(memory: AttentionMemory) -> tuple:
    """An :class:`AttentionMemory` as a loop variable: ``(values, keys)``, plus ``score_bias`` when given."""
    return tuple(memory[:2]) if memory.score_bias is None else tuple(memory)


def _unpack_memory(packed: tuple) -> AttentionMemory:
    return AttentionMemory(packed[0], packed[1], packed[2] if len(packed) > 2 else None)


class DecoderWeights(NamedTuple):
    """The variables of one step in the compute dtype (:meth:`Tacotron2Decoder.step_weights`; torch's
    ``DecoderWeights``, in Keras' ``(in, out)`` layout).

    ``prenet_weights``/``prenet_biases``: per pre-net layer ``(in, out)``/``(out,)`` (the graph step runs the
    :class:`Prenet` block, whose dropout draws they are; the native step reads them); ``lstm_weights``: the decoder
    LSTMs' :class:`~tf_layers.decoder_rnn.LSTMStackWeights` (per layer TF1's kernel ``(in + units, 4 units)``, gate
    order i, j, f, o, layer 1's split into its new-input and carried rows, the biases with the forget bias);
    ``query_weight`` ``(units, attention_dim)``; ``location_weight`` ``(attention_kernel, attention_dim)``: the
    location convolution and its dense folded into one kernel; ``v_a`` ``(attention_dim,)``;
    ``projection_weight``/``projection_bias``: the frame and stop projections side by side, ``(units +
    memory_size, r * num_mels + r)``."""

    prenet_weights: tuple
    prenet_biases: tuple
    lstm_weights: LSTMStackWeights
    query_weight: tf.Tensor
    location_weight: tf.Tensor
    v_a: tf.Tensor
    projection_weight: tf.Tensor
    projection_bias: tf.Tensor

    @property
    def lstm_biases(self) -> tuple:
        """Per LSTM layer ``(4 units,)`` (the forget bias folded in)."""
        return self.lstm_weights.biases

    def attention(self) -> dict:
        """The attention's weights as :func:`~tf_layers.location_sensitive_attention.attention_step` reads them."""
        return dict(query=self.query_weight, location=self.location_weight, v=self.v_a)


StepWeights = DecoderWeights  # the former name, kept for callers of tf_layers.StepWeights


class StepOutputs(NamedTuple):
    """What one step gives besides the state: ``frames`` ``(batch, r * num_mels)``, ``stop`` ``(batch, r)``
    (probabilities), ``alignments`` ``(batch, max_time)``, ``output`` ``(batch, units)`` the LSTM output."""

    frames: tf.Tensor | None
    stop: tf.Tensor | None
    alignments: tf.Tensor
    output: tf.Tensor
    lstm_inputs: tuple | None = None  # with ``bias_gates``: each LSTM layer's product input (stack_step)


def _reported(progress, step, stop):
    """``step`` once ``progress(step, largest stop probability)`` has run (a ``tf.numpy_function``): the loop's next
    step depends on the report, so the reports come in step order."""
    def report(step, largest):
        progress(int(step), float(largest))
        return step

    token = tf.numpy_function(report, [step, tf.reduce_max(tf.cast(stop, tf.float32))], tf.int32, stateful=True,
                              name="progress")
    with tf.control_dependencies([token]):
        return tf.identity(step)


def _prefixed(prefix: str, variables: dict) -> dict:
    return {f"{prefix}/{k}": v for k, v in variables.items()}


@keras.saving.register_keras_serializable(package="speechblocks")
class Tacotron2Decoder(TF1WeightsMixin, keras.layers.Layer):
    """The Tacotron-2 attention decoder: prenet -> decoder LSTMs -> location-sensitive attention -> projections.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a step whose
    attention energies hold a NaN gives alignments that are NaN at every position of that example, on every CPU.

    One step (TF1 ``TacotronDecoderCell``): ``x = prenet(previous frame)``; ``(out, states) =
    DecoderRNN(concat(x, previous context), states)``; ``(context, alignments) = attention(out)``;
    ``frames = FrameProjection(concat(out, context))`` (``r`` frames of ``num_mels``) and ``stop =
    StopProjection(...)`` (``r`` logits in training, sigmoid probabilities otherwise). The step is written once,
    :meth:`step` (state in, state out: :class:`DecoderState`, :class:`AttentionMemory`, :class:`DecoderWeights`,
    :class:`StepOutputs`), and called by both loops below, eager or traced, and by the exported decoder-step model
    (``Tacotron2.export_litert``).

    The loop (TF1 ``dynamic_decode`` with ``impute_finished=False``) runs inside one ``tf.while_loop``:

    * **teacher forced** (``mel_targets`` given): ``floor(T_out / r)`` steps; step 0 gets a zero go frame, step
      ``t`` the target frame ``r·t − 1``. When not training, ``max_iters`` caps the steps (the original's GTA
      synthesis). The prenet and the first LSTM layer's prenet part run on all steps at once, the projections
      after the loop (the same maths, fewer per-step ops);
    * **free running**: step ``t`` gets the last of the ``r`` frames of step ``t − 1``; decoding stops after the
      step at which, for some frame (``stop_at_any``) or for every frame, every batch entry's stop
      probability rounds to 1 (``tf.round``: 0.5 does not stop), or after ``max_iters`` steps. All entries
      run the same number of steps; the stopping step's frames are kept. At least one step runs.

    Which loop runs is decided in one place, :func:`tf_layers.decoding_plan.plan_decoding` (``str(plan)`` says why):
    eager free-running inference in float32 on the CPU runs the native C step (:mod:`tf_layers._native`); other eager
    inference calls the loop through a cached ``tf.function`` (no Python per step); inside a traced function
    (``fit``, ``predict``, ``tf.function``) it is a plain ``tf.while_loop`` with unknown batch, memory time and number
    of steps. :meth:`decode` is :meth:`call` with the free-running options explicit (``progress``, ``stop_each``).
    Eager *training* calls run the loop eagerly, so a ``GradientTape`` around them works; wrap training
    steps in ``tf.function`` (as ``fit`` does) for speed.

    Args:
        num_mels: int, mel channels per frame.
        outputs_per_step: int, frames per decoder step ``r``.
        prenet_layers: sequence of ints, prenet sizes.
        drop_rate: float in [0, 1), prenet dropout (on at inference too, as the original).
        decoder_layers: int, decoder LSTM layers.
        decoder_lstm_units: int, units per decoder LSTM.
        zoneout: float in [0, 1], zoneout of the decoder LSTMs.
        attention_dim, attention_filters, attention_kernel: :class:`LocationSensitiveAttention` sizes.
        mask_encoder, smoothing, cumulative_weights: :class:`LocationSensitiveAttention` options.
        max_iters: int >= 1, decoding cap when not training.
        stop_at_any: bool, the original stop rule's variant.
        tf1_scope: TF1 scope (default ``"decoder"``); sub-blocks ``decoder_prenet``, ``decoder_LSTM``,
            ``Location_Sensitive_Attention``, ``linear_transform_projection``, ``stop_token_projection`` (the
            attention's ``memory_layer/kernel`` lives at the model scope in TF1).
        seed: optional int seed of the prenet dropout and zoneout noise.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        memory: float ``(batch, max_time, memory_size)``, the encoder outputs (+ speaker embedding).
        memory_lengths: int ``(batch,)`` or None.
        mel_targets: optional float ``(batch, T_out, num_mels)``; teacher forcing when given (required in training).
        max_iters: optional int overriding the constructor's cap.
        training: bool: zoneout noise, stop logits, no step cap.
        noise_masks: optional dict of 0/1 keep-masks replacing random draws: ``"prenet"`` (list per prenet layer,
            ``(batch, steps, prenet_layers[i])``, covering every step that runs) and ``"decoder_LSTM"`` (list per
            layer of ``(c_keep, h_keep)``, each ``(batch, steps, decoder_lstm_units)``).

    Returns:
        ``(frames (batch, steps, r * num_mels), stop (batch, steps, r), alignments (batch, max_time, steps))``.

    Masking: ``memory_lengths`` masks the attention (``mask_encoder``); decoder padding is the loss's business.

    Deployment: exports as a SavedModel (unknown batch and time, the decoder loop inside the graph). Not for XLA:
    the free-running loop collects its steps in dynamic-size ``TensorArray`` s, which ``jit_compile=True`` returns
    empty (zero steps, no error). LiteRT conversion of the loop needs ``SELECT_TF_OPS`` (its TensorList ops): the
    converted model runs only in an interpreter with the flex delegate (TensorFlow kernels), not in
    ``ai_edge_litert``'s. One :meth:`step` converts to TFLite builtins: ``Tacotron2.export_litert`` exports it and
    ``speechblocks.litert.LiteRTTacotron2`` runs the loop on the host.

    Example:
    >>> dec = Tacotron2Decoder(num_mels=4, outputs_per_step=2, prenet_layers=(8,), decoder_layers=1,
    ...                        decoder_lstm_units=8, attention_dim=4, attention_filters=2, attention_kernel=3,
    ...                        max_iters=5)
    >>> frames, stop, alignments = dec(tf.random.normal((2, 6, 10)), tf.constant([6, 3]))
    >>> frames.shape[-1], stop.shape[-1], alignments.shape[1]
    (8, 2, 6)
    """

    default_tf1_scope = "decoder"

    def __init__(self, num_mels: int = 80, outputs_per_step: int = 1, prenet_layers=(256, 256), drop_rate: float = 0.5,
                 decoder_layers: int = 2, decoder_lstm_units: int = 1024, zoneout: float = 0.1,
                 attention_dim: int = 128, attention_filters: int = 32, attention_kernel: int = 31,
                 mask_encoder: bool = True, smoothing: bool = False, cumulative_weights: bool = True,
                 max_iters: int = 2000, stop_at_any: bool = True, tf1_scope: str | None = None,
                 seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_mels", num_mels), ("outputs_per_step", outputs_per_step), ("max_iters", max_iters)):
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ValueError(f"Tacotron2Decoder: `{name}` must be an integer >= 1; got {value!r}.")
        if not isinstance(stop_at_any, bool):
            raise ValueError(f"Tacotron2Decoder: `stop_at_any` must be True or False; got {stop_at_any!r}.")
        self.num_mels = int(num_mels)
        self.outputs_per_step = int(outputs_per_step)
        self.max_iters = int(max_iters)
        self.stop_at_any = stop_at_any
        self.zoneout = check_zoneout(zoneout, "zoneout", "Tacotron2Decoder")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        policy = self.dtype_policy
        self.prenet = Prenet(prenet_layers, drop_rate, tf1_scope="decoder_prenet", seed=seed, dtype=policy,
                             name="decoder_prenet")
        self.attention = LocationSensitiveAttention(attention_dim, attention_filters, attention_kernel, mask_encoder,
                                                    smoothing, cumulative_weights, dtype=policy,
                                                    name="Location_Sensitive_Attention")
        self.decoder_lstm = DecoderRNN(decoder_layers, decoder_lstm_units, self.zoneout, tf1_scope="decoder_LSTM",
                                       seed=None if seed is None else seed + 1, dtype=policy, name="decoder_LSTM")
        self.frame_projection = FrameProjection(self.num_mels * self.outputs_per_step,
                                                tf1_scope="linear_transform_projection", dtype=policy,
                                                name="linear_transform_projection")
        self.stop_projection = StopProjection(self.outputs_per_step, tf1_scope="stop_token_projection", dtype=policy,
                                              name="stop_token_projection")
        self.memory_size = None

    # -- building -----------------------------------------------------------------------------
    def build(self, memory_shape, memory_lengths_shape=None, mel_targets_shape=None):
        if memory_shape[-1] is None:
            raise ValueError("Tacotron2Decoder: argument `memory` needs a known channel axis, expected shape "
                             f"(batch, max_time, memory_size); got shape {memory_shape}.")
        self.build_from_memory_size(int(memory_shape[-1]))

    def build_from_memory_size(self, memory_size: int):
        if self.built:
            return
        self.memory_size = int(memory_size)
        units = self.decoder_lstm.size
        self.prenet.build((None, self.num_mels))
        self.attention.build_from_sizes(units, self.memory_size)
        self.decoder_lstm.build((None, self.prenet.layers_sizes[-1] + self.memory_size))
        self.frame_projection.build((None, units + self.memory_size))
        self.stop_projection.build((None, units + self.memory_size))
        self.built = True

    # -- input checks -------------------------------------------------------------------------
    def _check_max_iters(self, max_iters):
        if max_iters is None:
            return self.max_iters
        if isinstance(max_iters, (int,)) and not isinstance(max_iters, bool):
            if max_iters < 1:
                raise ValueError(f"Tacotron2Decoder: argument `max_iters` must be >= 1; got {max_iters}.")
            return max_iters
        t = tf.convert_to_tensor(max_iters)
        if not t.dtype.is_integer or t.shape.rank not in (None, 0):
            raise ValueError(f"Tacotron2Decoder: argument `max_iters` must be a positive integer; got {max_iters!r}.")
        return t

    def _noise(self, noise_masks, dtype):
        if noise_masks is None:
            return None, None
        if not isinstance(noise_masks, dict):
            raise ValueError("Tacotron2Decoder: argument `noise_masks` must be a dict with optional keys 'prenet', "
                             f"'decoder_LSTM'; got {type(noise_masks).__name__}.")
        prenet = noise_masks.get("prenet")
        if prenet is not None:
            n = len(self.prenet.layers_sizes)
            if not isinstance(prenet, (list, tuple)) or len(prenet) != n:
                raise ValueError(f"Tacotron2Decoder: argument `noise_masks['prenet']` must be a list of {n} keep-masks "
                                 f"(batch, steps, prenet_layers[i]) for prenet_layers={self.prenet.layers_sizes}.")
            out = []
            for i, m in enumerate(prenet):
                m = tf.cast(m, dtype)
                if m.shape.rank not in (None, 3) or (m.shape.rank == 3
                                                     and m.shape[-1] not in (None, self.prenet.layers_sizes[i])):
                    raise ValueError(f"Tacotron2Decoder: argument `noise_masks['prenet'][{i}]` must have shape "
                                     f"(batch, steps, {self.prenet.layers_sizes[i]}); got shape {m.shape}.")
                out.append(m)
            prenet = out
        lstm = noise_masks.get("decoder_LSTM")
        if lstm is not None:
            n, u = self.decoder_lstm.layers, self.decoder_lstm.size
            doc = f"a list of {n} pairs (c_keep, h_keep), each (batch, steps, {u})"
            try:
                pairs = [tuple(p) for p in lstm]
                ok = len(pairs) == n and all(len(p) == 2 for p in pairs)
            except TypeError:
                ok = False
            if not ok:
                raise ValueError(f"Tacotron2Decoder: argument `noise_masks['decoder_LSTM']` must be {doc}.")
            cs, hs = [], []
            for c, h in pairs:
                for m in (c, h):
                    m = tf.convert_to_tensor(m)
                    if m.shape.rank not in (None, 3) or (m.shape.rank == 3 and m.shape[-1] not in (None, u)):
                        raise ValueError(f"Tacotron2Decoder: argument `noise_masks['decoder_LSTM']` must be {doc}; "
                                         f"got shape {m.shape}.")
                cs.append(tf.cast(c, dtype))
                hs.append(tf.cast(h, dtype))
            # (steps, L, batch, u)
            lstm = (tf.transpose(tf.stack(cs, 0), [2, 0, 1, 3]), tf.transpose(tf.stack(hs, 0), [2, 0, 1, 3]))
        return prenet, lstm

    # -- the loop -----------------------------------------------------------------------------
    def call(self, memory, memory_lengths=None, mel_targets=None, max_iters=None, training=None, noise_masks=None):
        return self.decode(memory, memory_lengths, mel_targets, max_iters, training, noise_masks)

    def _check_call(self, memory, memory_lengths, mel_targets, training):
        block = "Tacotron2Decoder"
        check_float_tensor(memory, "memory", block, rank=3, last_dim=self.memory_size,
                           shape_doc=f"(batch, max_time, {self.memory_size})")
        if memory_lengths is not None:
            memory_lengths = tf.cast(check_lengths(memory_lengths, "memory_lengths", block, batch_dim=memory.shape[0]),
                                     tf.int32)
        if mel_targets is not None:
            check_float_tensor(mel_targets, "mel_targets", block, rank=3, last_dim=self.num_mels,
                               shape_doc=f"(batch, T_out, {self.num_mels})")
            if mel_targets.shape[1] is not None and mel_targets.shape[1] < self.outputs_per_step:
                raise ValueError(f"{block}: argument `mel_targets` must hold at least outputs_per_step="
                                 f"{self.outputs_per_step} frames; got shape {mel_targets.shape}.")
        elif training:
            raise ValueError(f"{block}: training needs `mel_targets` (the original trains teacher-forced only).")
        return memory_lengths

    def decode(self, memory, memory_lengths=None, mel_targets=None, max_iters=None, training=None, noise_masks=None,
               *, progress=None, stop_each: bool = False):
        """:meth:`call` with the free-running loop's options explicit: ``progress(step, largest stop probability)``
        after every step and ``stop_each`` (each entry leaves the loop at its own stop: ``synthesize_batch``; its
        outputs after it are zeros). :func:`tf_layers.decoding_plan.plan_decoding` chooses the loop."""
        memory_lengths = self._check_call(memory, memory_lengths, mel_targets, training)
        training = bool(training)
        max_iters = self._check_max_iters(max_iters)
        dtype = self.compute_dtype
        prenet_masks, lstm_masks = self._noise(noise_masks, dtype)
        memory = tf.cast(memory, dtype)
        plan = plan_decoding(self, memory, mel_targets=mel_targets, training=training, max_iters=max_iters,
                             noise_masks={"prenet": prenet_masks, "decoder_LSTM": lstm_masks}, progress=progress,
                             stop_each=stop_each)
        if plan.native:
            decoded = _native.free_running(self, memory, memory_lengths, int(max_iters), prenet_masks, plan=plan)
            if decoded is not None:
                return decoded
        if isinstance(max_iters, int):
            max_iters = tf.constant(max_iters, tf.int32)  # a tensor: a new cap does not retrace the compiled loop
        args = (memory, memory_lengths, None if mel_targets is None else tf.cast(mel_targets, dtype), max_iters,
                prenet_masks, lstm_masks)
        if tf.executing_eagerly() and not training:
            # inference: one cached graph instead of Python per step (training stays eager, so an eager
            # GradientTape sees the loop op by op -- TF's gradient of a compiled while loop, called again and again
            # from eager code, can fail with AlreadyExistsError on its AddN temporaries; fit() traces anyway)
            fn, relay = self._compiled_loop(plan.progress is not None, plan.stop_each)
            with relay.reporting(plan.progress):
                return fn(*args)
        return self._decode(*args, training=training, progress=plan.progress, stop_each=plan.stop_each)

    def _compiled_loop(self, progress: bool, stop_each: bool):
        """The cached ``tf.function`` of the inference loop with these options (its progress reports go to the
        relay's callback: :class:`~tf_layers.decoding_plan.ProgressRelay`) and the relay."""
        cache = self.__dict__.get("_compiled")
        if cache is None:
            cache = {}
            object.__setattr__(self, "_compiled", cache)
        key = (progress, stop_each)
        if key not in cache:
            relay = ProgressRelay()
            hook = relay.hook if progress else None

            def loop(*args):
                return self._decode(*args, training=False, progress=hook, stop_each=stop_each)

            cache[key] = tf.function(loop, reduce_retracing=True), relay
        return cache[key]

    # -- one step: the only spelling of the decoder cell ---------------------------------------------------------
    def step_weights(self, dtype=None) -> DecoderWeights:
        """The variables one :meth:`step` reads, cast to ``dtype`` (default the compute dtype) once before a loop; the
        location kernel folded here, once (:meth:`LocationSensitiveAttention.fused_location_weights`)."""
        dtype = dtype or self.compute_dtype
        kf, bf = tf.cast(self.frame_projection.dense.kernel, dtype), tf.cast(self.frame_projection.dense.bias, dtype)
        ks, bs = tf.cast(self.stop_projection.dense.kernel, dtype), tf.cast(self.stop_projection.dense.bias, dtype)
        att = self.attention.weights_in(dtype)
        return DecoderWeights(
            prenet_weights=tuple(tf.cast(d.kernel, dtype) for d in self.prenet.dense_layers),
            prenet_biases=tuple(tf.cast(d.bias, dtype) for d in self.prenet.dense_layers),
            lstm_weights=stack_weights(self.decoder_lstm.cells, dtype, self.prenet.layers_sizes[-1]),
            query_weight=att["query"], location_weight=att["location"], v_a=att["v"],
            projection_weight=tf.concat([kf, ks], 1), projection_bias=tf.concat([bf, bs], 0))

    def attention_memory(self, memory, memory_lengths=None) -> AttentionMemory:
        """The :class:`AttentionMemory` of a loop over ``memory`` ``(batch, max_time, memory_size)``."""
        att = self.attention
        return AttentionMemory(*att.attention_memory(memory, memory_lengths if att.mask_encoder else None,
                                                     att.weights_in(self.compute_dtype)))

    def initial_state(self, batch, max_time, dtype=None) -> DecoderState:
        """The zero :class:`DecoderState` of ``batch`` entries over a memory of ``max_time`` steps."""
        dtype = dtype or self.compute_dtype
        zeros = tuple(tf.zeros(tf.stack([batch, self.decoder_lstm.size]), dtype)
                      for _ in range(self.decoder_lstm.layers))
        return DecoderState(context=tf.zeros(tf.stack([batch, self.memory_size]), dtype),
                            attention_state=tf.zeros(tf.stack([batch, max_time]), dtype), cells=zeros,
                            hiddens=zeros)

    def step(self, frame, state: DecoderState, memory: AttentionMemory, weights: DecoderWeights, *, prenet_masks=None,
             prenet_seed=None, keep_c=None, keep_h=None, input_gates=None, bias_gates=None, project: bool = True,
             for_gradient: bool = False) -> tuple[StepOutputs, DecoderState]:
        """One decoder step (TF1 ``TacotronDecoderCell``): ``prenet(frame)`` -> decoder LSTMs over ``concat(prenet,
        previous context)`` -> attention -> frame and stop projections.

        Every loop of the decoder (teacher forced, free running; graph or eager) and the exported decoder-step model
        (:mod:`tf_layers.tacotron2_litert`) call this method. Two spellings of the same maths, each the
        number-for-number one of its loop (see :func:`tf_layers.decoder_rnn.stack_step`):

        * free running (``input_gates`` None): the prenet block runs on ``frame``, TF1's one product over each LSTM
          kernel, the projections as one matmul over ``concat([frame kernel, stop kernel])``;
        * teacher forced (``input_gates`` given): the prenet and layer 1's prenet rows ran on every step before the
          loop (``input_gates = prenet(frames) @ kernel[:n_prenet] + bias``), TF1's fused kernels for the upper
          layers; with ``project=False`` the projections are left to the caller (one matmul over every step).

        Args:
            frame: ``(batch, num_mels)`` the previous frame (zeros at the first step); None with ``input_gates``.
            state: :class:`DecoderState`.
            memory: :class:`AttentionMemory` (:meth:`attention_memory`).
            weights: :meth:`step_weights`.
            prenet_masks: optional list of per-layer prenet keep-masks ``(batch, prenet_layers[i])``.
            prenet_seed: optional int32 ``(2,)`` stateless seed of this step's prenet dropout (layer ``i`` draws with
                ``prenet_seed + [0, i]``); neither masks nor seed: the prenet's own seed generator.
            keep_c, keep_h: optional per-layer zoneout keep-masks ``(batch, units)`` (training) -- None: inference
                zoneout.
            input_gates: ``(batch, 4 * units)`` layer 1's prenet part, precomputed.
            bias_gates: per LSTM layer ``(batch, 4 * units)`` added instead of its bias (layers after the first), or
                None; given, ``StepOutputs.lstm_inputs`` holds each layer's product input (the teacher-forced
                training loop's weight-gradient taps, :mod:`tf_layers._loop_weight_gradient`).
            project: compute the frames and stop (else ``StepOutputs.frames`` / ``.stop`` are None).
            for_gradient: route the tensors used several times through ``fan_out`` (a training loop's gradient).

        Returns:
            ``(StepOutputs(frames (batch, r * num_mels), stop (batch, r) probabilities, alignments (batch, max_time),
            output (batch, units) the LSTM output), new DecoderState)``.
        """
        x = None
        if input_gates is None:
            x = self.prenet(frame, dropout_masks=prenet_masks, seed=prenet_seed)
        out, cells, hiddens, *recorded = stack_step(x, state.context, state.cells, state.hiddens, weights.lstm_weights,
                                                    self.zoneout, keep_c, keep_h, input_gates=input_gates,
                                                    bias_gates=bias_gates, return_inputs=bias_gates is not None)
        history = out
        if for_gradient:  # the LSTM output feeds the attention, the history and (zoneout) its state
            out, history = fan_out(out, 2)
        att = self.attention
        context, alignments, attention = attention_step(out, state.attention_state, memory.values, memory.keys,
                                                        memory.score_bias, weights.attention(), att.smoothing,
                                                        att.cumulate_weights, for_gradient)
        frames = stop = None
        if project:
            projected = tf.matmul(tf.concat([out, context], -1), weights.projection_weight) + weights.projection_bias
            n_frames = self.num_mels * self.outputs_per_step
            frames, stop = projected[:, :n_frames], self.stop_projection.activation(projected[:, n_frames:])
        return (StepOutputs(frames, stop, alignments, history, recorded[0] if recorded else None),
                DecoderState(context=context, attention_state=attention, cells=cells, hiddens=hiddens))

    def _decode(self, memory, memory_lengths, mel_targets, max_iters, prenet_masks, lstm_masks, training=False,
                progress=None, stop_each: bool = False):
        dtype = memory.dtype
        batch, max_time = tf.shape(memory)[0], tf.shape(memory)[1]
        attention_memory = self.attention_memory(memory, memory_lengths)
        w = self.step_weights(dtype)
        state0 = self.initial_state(batch, max_time, dtype)
        if mel_targets is not None:
            return self._teacher_forced(attention_memory, mel_targets, max_iters, prenet_masks, lstm_masks, training,
                                        w, state0)
        return self._free_running(attention_memory, max_iters, prenet_masks, lstm_masks, w, state0, progress,
                                  stop_each)

    def _teacher_forced(self, memory, mel_targets, max_iters, prenet_masks, lstm_masks, training, w, state0):
        dtype = memory.values.dtype
        r, n_mels = self.outputs_per_step, self.num_mels
        batch = tf.shape(memory.values)[0]
        steps = tf.shape(mel_targets)[1] // r
        if not training:
            steps = tf.minimum(steps, tf.cast(max_iters, tf.int32))
        go = tf.zeros(tf.stack([batch, 1, n_mels]), dtype)
        fed = tf.concat([go, mel_targets[:, r - 1::r][:, :steps - 1]], axis=1)  # (batch, steps, num_mels)
        masks = None if prenet_masks is None else [m[:, :steps] for m in prenet_masks]
        x = self.prenet(fed, dropout_masks=masks)  # every step at once: the prenet does not depend on the loop
        gx = tf.einsum("btp,pg->tbg", x, w.lstm_weights.input_kernel) + w.lstm_biases[0]  # layer 1's prenet part
        z, units, n_layers = self.zoneout, self.decoder_lstm.size, self.decoder_lstm.layers
        keep_c = keep_h = None
        if lstm_masks is not None:
            keep_c, keep_h = lstm_masks[0][:steps], lstm_masks[1][:steps]
        elif training:
            shape = tf.stack([steps, n_layers, batch, units])
            keep_c = keep_masks(shape, z, self.decoder_lstm.seed_generator, dtype)
            keep_h = keep_masks(shape, z, self.decoder_lstm.seed_generator, dtype)
        ta = lambda: tf.TensorArray(dtype, size=steps)  # noqa: E731
        # training: each LSTM kernel's gradient in one product after the loop (_loop_weight_gradient)
        gates = LoopGates(w.lstm_weights, gx, weight_taps=training)
        w = w._replace(lstm_weights=gates.w)

        def body(t, state, outs, contexts, aligns, records):
            input_gates, bias_gates = gates.read(t)
            out, state = self.step(None, state, memory, w, keep_c=None if keep_c is None else keep_c[t],
                                   keep_h=None if keep_h is None else keep_h[t], input_gates=input_gates,
                                   bias_gates=bias_gates, project=False, for_gradient=True)
            return (t + 1, state, outs.write(t, out.output), contexts.write(t, state.context),
                    aligns.write(t, out.alignments), gates.record(records, t, out.lstm_inputs))

        loop = (tf.constant(0), state0, ta(), ta(), ta(), gates.records())
        # one iteration at a time: each step depends on the previous one anyway, and TF's gradient of a while loop
        # with parallel iterations can race on its AddN accumulators (AlreadyExistsError seen on 2 cores)
        _, _, outs, contexts, aligns, records = tf.while_loop(lambda t, *_: t < steps, body, loop,
                                                              parallel_iterations=1)
        gates.finish(records)
        proj_in = tf.transpose(tf.concat([outs.stack(), contexts.stack()], -1), [1, 0, 2])  # (batch, steps, u + D)
        frames = self.frame_projection(proj_in)
        stop = self.stop_projection(proj_in, training=training)
        return frames, stop, tf.transpose(aligns.stack(), [1, 2, 0])

    def _free_running(self, memory, max_iters, prenet_masks, lstm_masks, w, state0, progress=None,
                      stop_each: bool = False):
        """The free-running ``tf.while_loop``; ``progress(step, largest stop probability)`` is called after every
        step (a ``tf.numpy_function``, in step order). With ``stop_each`` the loop carries the rows still running
        (``rows``, indices into the batch) with their decoder state, last frame and attention memory: at a step where
        some rows' own stop rule fires (and not every row's, and not the last step) a ``tf.cond`` gathers the others
        (:meth:`_leave`), so the following steps compute those only; each step's outputs are scattered into
        full-batch rows (zeros for the rows that have left), so the results keep the batch's shape."""
        dtype = memory.values.dtype
        batch = tf.shape(memory.values)[0]
        n_mels = self.num_mels
        seed = (tf.cast(self.prenet.seed_generator.next(), tf.int32)
                if (prenet_masks is None and self.prenet.drop_rate > 0) else None)
        n_pre = len(self.prenet.layers_sizes)
        max_iters = tf.cast(max_iters, tf.int32)
        ta = lambda: tf.TensorArray(dtype, size=0, dynamic_size=True)  # noqa: E731

        def body(t, finished, frame, state, frames_ta, stops_ta, aligns_ta, running):
            step_memory = memory
            pm = None if prenet_masks is None else [m[:, t] for m in prenet_masks]
            kc = None if lstm_masks is None else lstm_masks[0][t]
            kh = None if lstm_masks is None else lstm_masks[1][t]
            if stop_each:  # the running rows' memory and masks
                rows, step_memory = running[0], _unpack_memory(running[1])
                pm = None if pm is None else [tf.gather(m, rows) for m in pm]
                kc = None if kc is None else tf.gather(kc, rows, axis=1)
                kh = None if kh is None else tf.gather(kh, rows, axis=1)
            out, state = self.step(frame, state, step_memory, w, prenet_masks=pm,
                                   prenet_seed=None if seed is None else seed + tf.stack([0, t * n_pre + 1]),
                                   keep_c=kc, keep_h=kh)
            outputs, frame = (out.frames, out.stop, out.alignments), out.frames[:, -n_mels:]
            if stop_each:  # every entry's own rule has fired at some step; the others go on alone
                done, outputs, frame, state, running = self._leave(out, frame, state, running, batch,
                                                                   t + 1 < max_iters)
            else:
                done = batch_fired(out.stop, self.stop_at_any)
            finished = tf.logical_or(done, t + 1 >= max_iters)
            t_next = t + 1 if progress is None else _reported(progress, t + 1, out.stop)
            return (t_next, finished, frame, state, frames_ta.write(t, outputs[0]), stops_ta.write(t, outputs[1]),
                    aligns_ta.write(t, outputs[2]), running)

        go = tf.zeros(tf.stack([batch, n_mels]), dtype)
        running0 = (tf.range(batch), _pack_memory(memory)) if stop_each else ()
        loop = (tf.constant(0), tf.constant(False), go, state0, ta(), ta(), ta(), running0)
        invariants = None
        if stop_each:  # any number of running rows (None: the loop variable's own shape)
            def rows_any(x):
                return tf.TensorShape([None]).concatenate(x.shape[1:])

            invariants = (None, None, rows_any(go), tf.nest.map_structure(rows_any, state0), None, None, None,
                          tf.nest.map_structure(rows_any, running0))
        out = tf.while_loop(lambda t, finished, *_: tf.logical_not(finished), body, loop, parallel_iterations=1,
                            shape_invariants=invariants)
        frames_ta, stops_ta, aligns_ta = out[4:7]
        frames = tf.transpose(frames_ta.stack(), [1, 0, 2])
        stop = tf.transpose(stops_ta.stack(), [1, 0, 2])
        return frames, stop, tf.transpose(aligns_ta.stack(), [1, 2, 0])

    def _leave(self, out: StepOutputs, frame, state, running, batch, more):
        """``stop_each``: the step's outputs scattered into full-batch rows (zeros for the rows not running), and,
        where some running rows' own rule fired (not all, and ``more`` steps follow), the carried rows, frame,
        state and memory of the others only. Returns ``(done, outputs, frame, state, running)``."""
        rows = running[0]
        fired = entries_fired(out.stop, self.stop_at_any)  # (running,)
        done = tf.reduce_all(fired)
        leave = tf.logical_and(tf.logical_and(tf.reduce_any(fired), tf.logical_not(done)), more)
        outputs = tuple(tf.scatter_nd(rows[:, None], x, tf.concat([[batch], tf.shape(x)[1:]], 0))
                        for x in (out.frames, out.stop, out.alignments))
        carried = (rows, running[1], frame, state)

        def select():
            keep = tf.reshape(tf.where(tf.logical_not(fired)), [-1])
            return tf.nest.map_structure(lambda x: tf.gather(x, keep), carried)

        rows, packed, frame, state = tf.cond(leave, select, lambda: carried)
        return done, outputs, frame, state, (rows, packed)

    def compute_output_shape(self, memory_shape, memory_lengths_shape=None, mel_targets_shape=None):
        b, t = memory_shape[0], memory_shape[1]
        r = self.outputs_per_step
        return (b, None, r * self.num_mels), (b, None, r), (b, t, None)

    def get_config(self):
        config = super().get_config()
        att = self.attention
        config.update(num_mels=self.num_mels, outputs_per_step=self.outputs_per_step,
                      prenet_layers=list(self.prenet.layers_sizes), drop_rate=self.prenet.drop_rate,
                      decoder_layers=self.decoder_lstm.layers, decoder_lstm_units=self.decoder_lstm.size,
                      zoneout=self.zoneout, attention_dim=att.units, attention_filters=att.filters,
                      attention_kernel=att.kernel_size, mask_encoder=att.mask_encoder, smoothing=att.smoothing,
                      cumulative_weights=att.cumulate_weights, max_iters=self.max_iters, stop_at_any=self.stop_at_any,
                      tf1_scope=self.tf1_scope, seed=self.seed)
        return config

    # -- TF1 exchange (names relative to the decoder scope; memory_layer relative to the model scope) --------
    def _tf1_variables(self):
        out = {}
        for block in (self.prenet, self.decoder_lstm, self.frame_projection, self.stop_projection):
            out.update(_prefixed(block.tf1_scope, block._tf1_variables()))
        att = self.attention._tf1_variables()
        out["../memory_layer/kernel"] = att.pop("memory_layer/kernel")
        out.update(_prefixed(self.attention.tf1_scope, att))
        return out

    def _tf1_input_shape(self, weights):
        return (None, None, int(weights["../memory_layer/kernel"].shape[0]))

    def load_tf1_weights(self, weights, strict: bool = True):
        """As every block; the attention's ``memory_layer/kernel`` is the key ``../memory_layer/kernel`` (TF1 keeps
        it at the model scope, one level above ``decoder``)."""
        if not self.built and "../memory_layer/kernel" in weights:
            self.build_from_memory_size(int(weights["../memory_layer/kernel"].shape[0]))
        return super().load_tf1_weights(weights, strict)
