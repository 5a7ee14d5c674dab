"""Torch ``Postnet``: Tacotron-2's residual post-processing convolutions."""
from __future__ import annotations

from typing import Optional

# the TF1 layer names of the postnet (re-exported)
from speechblocks.tf1_names import postnet_scope_indices as postnet_scope_indices

from ._validation import activation_name, check_positive_int
from .encoder_convolutions import ConvStack


class Postnet(ConvStack):
    """Tacotron-2 postnet: ``num_layers - 1`` conv blocks with ``activation``, then a linear conv block.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Every layer is a :class:`~torch_layers.Conv1DBlock` (conv -> TF1 batch norm -> activation ->
    dropout in ``train()``). TF1 scopes as the seed names them: ``conv_layer_{i}_<tf1_scope>`` for
    ``i = 1 .. num_layers - 1``, and the hard-coded ``conv_layer_5_<tf1_scope>`` for the last layer
    (identity activation, still batch norm and dropout) -- also when ``num_layers < 5``. With
    ``num_layers > 5`` the seed's names collide (TF1 refuses that graph): the constructor raises
    ``ValueError`` unless ``last_layer_scope_index`` picks a free index (e.g. ``num_layers``).

    Reads padding, as the original: not mask-aware; every ``'same'`` convolution reads the ``kernel_size // 2``
    frames on each side, so frames past a sequence's length (e.g. padded mel frames) change the outputs of the
    last valid frames (and batch statistics in training).

    Args:
        in_channels: input channels (``num_mels``).
        kernel_size: convolution width (seed: ``hparams.postnet_kernel_size``, 5).
        channels: channels of every layer (seed: 512).
        num_layers: number of layers (seed: 5).
        drop_rate: dropout rate in [0, 1) used in training.
        activation: activation of all but the last layer: ``"tanh"`` (default), ``"relu"``, ``"sigmoid"``,
            ``"linear"`` or ``None``.
        tf1_scope: TF1 scope; ``None`` -> ``"postnet_convolutions"``.
        last_layer_scope_index: ``None`` (the seed's 5) or an int >= ``num_layers``.
        bn_position: ``"before"`` (seed) or ``"after"``.
        sync_batch_norm: batch statistics of the global batch under ``DistributedDataParallel`` (see
            :class:`~torch_layers.tf_batch_norm.TFBatchNorm`); default False: each rank's own batch.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> post = Postnet(80).eval()
        >>> post(torch.zeros(2, 9, 80)).shape
        torch.Size([2, 9, 512])
    """

    block_label = "Postnet"
    default_tf1_scope = "postnet_convolutions"
    _hparam_names = ("postnet_kernel_size", "postnet_channels", "postnet_num_layers", "num_mels")

    def __init__(self, in_channels: int, kernel_size: int = 5, channels: int = 512, num_layers: int = 5,
                 drop_rate: float = 0.5, activation: Optional[str] = "tanh", tf1_scope: Optional[str] = None,
                 last_layer_scope_index: Optional[int] = None, bn_position: str = "before",
                 sync_batch_norm: bool = False, device=None, dtype=None):
        super().__init__()
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.activation = activation_name(activation, self.block_label)
        n = check_positive_int(num_layers, "num_layers", self.block_label)
        self.last_layer_scope_index = last_layer_scope_index
        indices = postnet_scope_indices(n, last_layer_scope_index)
        acts = [self.activation] * (n - 1) + ["linear"]
        self._init_stack(in_channels, kernel_size, channels, n, drop_rate, bn_position, list(zip(indices, acts)),
                         device, dtype, sync_batch_norm)
