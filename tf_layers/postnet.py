"""Keras ``Postnet``: Tacotron-2's residual post-processing convolutions."""
from __future__ import annotations

import keras

from speechblocks.tf1_names import postnet_scope_indices as _postnet_scope_indices

from .encoder_convolutions import ConvStack


def postnet_scope_indices(num_layers: int, last_layer_scope_index: int | None, label: str = "Postnet") -> list[int]:
    """TF1 scope indices ``conv_layer_{i}_<scope>`` of the postnet layers, first to last (see
    :func:`speechblocks.tf1_names.postnet_scope_indices`; an integral float such as ``6.0`` is accepted)."""
    return _postnet_scope_indices(num_layers, last_layer_scope_index, label, integral_floats=True)


@keras.saving.register_keras_serializable(package="speechblocks")
class Postnet(ConvStack):
    """Tacotron-2 postnet: ``num_layers - 1`` conv blocks with ``activation``, then a linear conv block.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Every layer is a :class:`~tf_layers.Conv1DBlock` (conv -> TF1 batch norm -> activation -> dropout in
    training). TF1 scopes, as the seed names them: ``conv_layer_{i}_<tf1_scope>`` for ``i = 1 ..
    num_layers - 1`` and, for the last layer (identity activation, still batch norm and dropout),
    the hard-coded ``conv_layer_5_<tf1_scope>`` -- also when ``num_layers < 5`` (a 3-layer postnet has
    ``conv_layer_1``, ``conv_layer_2`` and ``conv_layer_5``). With ``num_layers > 5`` the seed's naming
    collides (TF1 refuses to build it), so the constructor raises ``ValueError`` unless
    ``last_layer_scope_index`` chooses a free index (e.g. ``num_layers``).

    The postnet returns ``channels`` features; Tacotron-2 projects them to ``num_mels`` (``FrameProjection``
    with ``tf1_scope="postnet_projection"``) and adds the result to the decoder output.

    Args:
        kernel_size: int, convolution width (seed: ``hparams.postnet_kernel_size``, 5).
        channels: int, channels of every layer (seed: ``hparams.postnet_channels``, 512).
        num_layers: int, number of layers (seed: ``hparams.postnet_num_layers``, 5).
        drop_rate: float in [0, 1), dropout rate in training (seed: ``hparams.tacotron_dropout_rate``).
        activation: Keras activation of all but the last layer (default ``"tanh"``).
        tf1_scope: TF1 scope; ``None`` -> ``"postnet_convolutions"``.
        last_layer_scope_index: ``None`` (the seed's hard-coded 5) or an int >= ``num_layers``: the last
            layer's scope becomes ``conv_layer_{last_layer_scope_index}_<tf1_scope>``.
        bn_position: ``"before"`` (seed) or ``"after"`` (Rayhane's later code).
        seed: optional int seed of the dropout noise (layer ``i`` uses ``seed + i``).
        sync_batch_norm: bool; ``True`` synchronizes the batch statistics over ``tf.distribute`` replicas
            (see :class:`~tf_layers.Conv1DBlock`); default ``False``, per-replica statistics.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, time, in_channels)`` (e.g. ``in_channels = num_mels``).
        training: bool; batch statistics and dropout when True.
        dropout_masks: optional list of ``num_layers`` 0/1 keep-masks ``(batch, time, channels)`` (or
            ``None`` entries), applied whenever given.

    Returns:
        float tensor ``(batch, time, channels)``.

    Masking: not mask-aware, as in TF1: it reads padding -- every ``'same'`` convolution reads the
    ``kernel_size // 2`` frames on each side, so frames past a sequence's length change the outputs of the
    last valid frames (and batch statistics in training).

    Example:
    >>> post = Postnet(kernel_size=5, channels=512, num_layers=5)
    >>> post(tf.zeros((2, 9, 80))).shape
    TensorShape([2, 9, 512])
    """

    block_label = "Postnet"
    default_tf1_scope = "postnet_convolutions"
    _hparam_names = ("postnet_kernel_size", "postnet_channels", "postnet_num_layers")

    def __init__(self, kernel_size: int = 5, channels: int = 512, num_layers: int = 5, drop_rate: float = 0.5,
                 activation="tanh", tf1_scope: str | None = None, last_layer_scope_index: int | None = None,
                 bn_position: str = "before", seed: int | None = None, sync_batch_norm: bool = False, **kwargs):
        super().__init__(kernel_size, channels, num_layers, drop_rate, activation, tf1_scope, bn_position, seed,
                         sync_batch_norm, **kwargs)
        self.last_layer_scope_index = None if last_layer_scope_index is None else int(last_layer_scope_index)
        indices = postnet_scope_indices(self.num_layers, last_layer_scope_index)
        acts = [self.activation] * (self.num_layers - 1) + [None]
        self._make_blocks(list(zip(indices, acts)))

    def get_config(self):
        config = super().get_config()
        config.update(last_layer_scope_index=self.last_layer_scope_index)
        return config
