"""Keras ``TAC``: twin of the torch transform-average-concatenate block, with torch state-dict exchange."""
from __future__ import annotations

import keras
import tensorflow as tf

from speechblocks.tac import check_tac_sizes, tac_activation

from ._validation import check_float_tensor
from .torch_exchange import TorchExchange, TorchStateMixin

__all__ = ["TAC"]

_NORMS = ("gLN", "cLN")
_EPS = 1e-8


def _dense_exchange(kernel, bias, prefix, n_in, n_out):
    return [TorchExchange(kernel, (prefix + ".weight",), ((n_out, n_in),), lambda v: (v.T,), lambda p: p[0].T),
            TorchExchange(bias, (prefix + ".bias",), ((n_out,),))]


@keras.saving.register_keras_serializable(package="speechblocks")
class TAC(TorchStateMixin, keras.layers.Layer):
    """Transform-Average-Concatenate across microphones (FasNet-TAC), the Keras twin of ``torch_layers.TAC``.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    Per time position and microphone: ``input_tf`` (dense ``input_dim -> hidden_dim`` + activation);
    mean over each example's **valid** microphones; ``avg_tf`` (dense ``hidden_dim -> hidden_dim`` +
    activation); ``concat_tf`` (dense ``2*hidden_dim -> input_dim`` + activation) of ``[own, average]``;
    a norm per microphone (``gLN``: ``(y - mean) / sqrt(var + 1e-8)`` over ``(features, chunk_size,
    n_chunks)``, ``cLN``: over the features at each position; per-feature ``gamma``/``beta``); residual.
    PReLU has one parameter (init 0.25), as ``torch.nn.PReLU()``.

    ``valid_mics=None`` (or all zeros, upstream's "fixed geometry", averaged over the microphones here —
    upstream averages over the wrong axis) means every mic is valid. Entries must lie in ``[1, mics]``:
    a ``ValueError`` in eager mode, a ``tf.errors.InvalidArgumentError`` naming ``valid_mics`` inside a
    ``tf.function`` (the values are not known when tracing). Padded mic slots never influence valid
    ones (they are masked with ``where``, so even NaN padding stays out).

    Torch exchange: ``torch_state_dict()`` / ``load_torch_state_dict()`` with asteroid's keys
    (``input_tf.0.weight`` ``(hidden, input_dim)``, ``input_tf.1.weight`` ``(1,)``, ``avg_tf.*``,
    ``concat_tf.*``, ``norm.gamma``, ``norm.beta``).

    Args:
        input_dim: number of input features.
        hidden_dim: size of the hidden transforms.
        activation: ``"prelu"`` (default), ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"linear"``, ``"elu"``,
            ``"gelu"`` (exact erf form, as torch's default).
        norm_type: ``"gLN"`` (default) or ``"cLN"``.
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        x: float tensor ``(batch, mics, input_dim, chunk_size, n_chunks)``.
        valid_mics: optional integer tensor ``(batch,)``: valid (leading) mic slots of each example.
        training: unused (no dropout or batch statistics); accepted for the Keras contract.

    Returns:
        ``(batch, mics, input_dim, chunk_size, n_chunks)``: the TAC output plus ``x`` (norm computed in
        float32 under mixed precision).

    Masking: through ``valid_mics`` only; Keras masks are not used.

    Deployment: SavedModel and XLA. LiteRT conversion needs ``SELECT_TF_OPS``: a new-axis slice
    (``x[:, :, None]``) with unknown dims is no TFLite builtin ``StridedSlice``; the converted model runs only in an
    interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s.

    Example:
    >>> tac = TAC(64, hidden_dim=32)
    >>> tac(tf.zeros((2, 4, 64, 10, 3)), tf.constant([4, 2])).shape
    TensorShape([2, 4, 64, 10, 3])
    """

    def __init__(self, input_dim: int, hidden_dim: int = 384, activation: str = "prelu", norm_type: str = "gLN",
                 **kwargs):
        super().__init__(**kwargs)
        check_tac_sizes(input_dim, hidden_dim)
        act = tac_activation(activation)
        if norm_type not in _NORMS:
            raise ValueError(f"TAC: `norm_type` must be one of {list(_NORMS)}; got {norm_type!r}.")
        self.input_dim = int(input_dim)
        self.hidden_dim = int(hidden_dim)
        self.activation = act
        self.norm_type = norm_type
        self._shape_doc = f"(batch, mics, {self.input_dim}, chunk_size, n_chunks)"

    def build(self, input_shape=None):
        f, h = self.input_dim, self.hidden_dim
        glorot = keras.initializers.GlorotUniform
        self.stages = {}
        for stage, n_in, n_out in (("input_tf", f, h), ("avg_tf", h, h), ("concat_tf", 2 * h, f)):
            kernel = self.add_weight(shape=(n_in, n_out), initializer=glorot(), name=f"{stage}_kernel")
            bias = self.add_weight(shape=(n_out,), initializer="zeros", name=f"{stage}_bias")
            alpha = None
            if self.activation == "prelu":
                alpha = self.add_weight(shape=(1,), initializer=keras.initializers.Constant(0.25),
                                        name=f"{stage}_alpha")
            self.stages[stage] = (kernel, bias, alpha)
        self.gamma = self.add_weight(shape=(f,), initializer="ones", name="norm_gamma")
        self.beta = self.add_weight(shape=(f,), initializer="zeros", name="norm_beta")

    def _act(self, x, alpha):
        a = self.activation
        if a == "prelu":
            return tf.where(x >= 0, x, tf.cast(alpha, x.dtype) * x)
        if a == "linear":
            return x
        if a == "gelu":
            return keras.activations.gelu(x, approximate=False)
        return keras.activations.get(a)(x)

    def _counts(self, valid_mics, batch, mics):
        """Validated float32 mic counts ``(batch,)`` (all-zero -> mics), or None for all mics."""
        if valid_mics is None:
            return None
        valid_mics = tf.convert_to_tensor(valid_mics)
        if not valid_mics.dtype.is_integer:
            raise ValueError(f"TAC: argument `valid_mics` must be an integer tensor of shape (batch,); got dtype "
                             f"{valid_mics.dtype.name}.")
        if valid_mics.shape.rank is not None and valid_mics.shape.rank != 1:
            raise ValueError(f"TAC: argument `valid_mics` must have shape (batch,); got shape {valid_mics.shape}.")
        valid_mics = tf.cast(valid_mics, tf.int32)
        if tf.executing_eagerly():
            v = valid_mics.numpy()
            if v.shape[0] != int(batch):
                raise ValueError(f"TAC: argument `valid_mics` must have shape (batch,) = ({int(batch)},); got shape "
                                 f"{v.shape}.")
            if v.size and v.max() != 0 and (v.min() < 1 or v.max() > int(mics)):
                raise ValueError(f"TAC: argument `valid_mics` entries must lie in [1, mics] = [1, {int(mics)}] "
                                 f"(or all be 0 for a fixed geometry); got {v.tolist()}.")
        else:
            all_zero = tf.equal(tf.reduce_max(tf.concat([valid_mics, [0]], 0)), 0)
            in_range = tf.logical_and(tf.reduce_all(valid_mics >= 1), tf.reduce_all(valid_mics <= mics))
            check = tf.debugging.Assert(
                tf.logical_and(tf.equal(tf.shape(valid_mics)[0], batch), tf.logical_or(all_zero, in_range)),
                ["TAC: argument `valid_mics` must have shape (batch,) with entries in [1, mics] (or all 0); got",
                 valid_mics, "mics =", mics])
            with tf.control_dependencies([check]):
                valid_mics = tf.identity(valid_mics)
        all_zero = tf.equal(tf.reduce_max(tf.concat([valid_mics, [0]], 0)), 0)
        return tf.where(all_zero, tf.fill(tf.shape(valid_mics), mics), valid_mics)

    def _norm(self, y):
        """y: (batch*mics, chunk_size, n_chunks, features) -> normalised, float32 statistics."""
        y32 = tf.cast(y, tf.float64 if y.dtype == tf.float64 else tf.float32)
        axes = [1, 2, 3] if self.norm_type == "gLN" else [3]
        mean, var = tf.nn.moments(y32, axes=axes, keepdims=True)
        normed = (y32 - mean) / tf.sqrt(var + _EPS)
        out = normed * tf.cast(self.gamma, y32.dtype) + tf.cast(self.beta, y32.dtype)
        return tf.cast(out, y.dtype)

    def call(self, x, valid_mics=None, training=None):
        check_float_tensor(x, "x", "TAC", rank=5, shape_doc=self._shape_doc)
        if x.shape[2] is not None and x.shape[2] != self.input_dim:
            raise ValueError(f"TAC: argument `x` has {x.shape[2]} features on axis 2, expected shape "
                             f"{self._shape_doc}; got shape {x.shape}.")
        shape = tf.shape(x)
        batch, mics, chunk_size, n_chunks = shape[0], shape[1], shape[3], shape[4]
        counts = self._counts(valid_mics, batch, mics)
        h_dim = self.hidden_dim
        (k_in, b_in, a_in), (k_avg, b_avg, a_avg), (k_cat, b_cat, a_cat) = (
            self.stages["input_tf"], self.stages["avg_tf"], self.stages["concat_tf"])
        rows = tf.transpose(x, [0, 3, 4, 1, 2])  # (B, K, L, M, F)
        h = self._act(tf.matmul(rows, k_in) + b_in, a_in)  # (B, K, L, M, H)
        if counts is None:
            mean = tf.reduce_mean(h, axis=3)
        else:
            valid = tf.sequence_mask(counts, mics)[:, tf.newaxis, tf.newaxis, :, tf.newaxis]
            total = tf.reduce_sum(tf.where(valid, h, tf.zeros_like(h)), axis=3)
            mean = total / tf.cast(counts, h.dtype)[:, tf.newaxis, tf.newaxis, tf.newaxis]
        avg = self._act(tf.matmul(mean, k_avg) + b_avg, a_avg)  # (B, K, L, H)
        own = tf.matmul(h, k_cat[:h_dim])  # concat([h, avg]) @ kernel, split in its two halves
        shared = tf.matmul(avg, k_cat[h_dim:]) + b_cat
        y = self._act(own + shared[:, :, :, tf.newaxis, :], a_cat)  # (B, K, L, M, F)
        y = tf.transpose(y, [0, 3, 1, 2, 4])  # (B, M, K, L, F)
        y = self._norm(tf.reshape(y, tf.stack([batch * mics, chunk_size, n_chunks, self.input_dim])))
        y = tf.reshape(y, tf.stack([batch, mics, chunk_size, n_chunks, self.input_dim]))
        return tf.transpose(y, [0, 1, 4, 2, 3]) + x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(input_dim=self.input_dim, hidden_dim=self.hidden_dim, activation=self.activation,
                      norm_type=self.norm_type)
        return config

    # -- torch exchange -----------------------------------------------------------------------
    def _build_from_torch_state(self, state):
        self.build()

    def _torch_exchanges(self):
        f, h = self.input_dim, self.hidden_dim
        out = []
        for stage, n_in, n_out in (("input_tf", f, h), ("avg_tf", h, h), ("concat_tf", 2 * h, f)):
            kernel, bias, alpha = self.stages[stage]
            out += _dense_exchange(kernel, bias, f"{stage}.0", n_in, n_out)
            if alpha is not None:
                out.append(TorchExchange(alpha, (f"{stage}.1.weight",), ((1,),)))
        out.append(TorchExchange(self.gamma, ("norm.gamma",), ((f,),)))
        out.append(TorchExchange(self.beta, ("norm.beta",), ((f,),)))
        return out

