"""Torch ``Postnet``: Tacotron-2's residual post-processing convolutions."""
from __future__ import annotations

from typing import Optional

from ._validation import activation_name, check_positive_int
from .encoder_convolutions import ConvStack

_SEED_LAST_INDEX = 5


def postnet_scope_indices(num_layers: int, last_layer_scope_index: Optional[int], label: str = "Postnet") -> list[int]:
    """TF1 scope indices ``conv_layer_{i}_<scope>`` of the postnet layers, first to last.

    The seed names layers ``1 .. num_layers - 1`` and hard-codes ``5`` for the last one; with
    ``num_layers > 5`` that collides (TF1 refuses the graph), so a free index must be asked for.
    """
    last = _SEED_LAST_INDEX if last_layer_scope_index is None else last_layer_scope_index
    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise ValueError(f"{label}: `last_layer_scope_index` must be an integer >= 1 or None; got {last_layer_scope_index!r}.")
    if last < num_layers:
        if last_layer_scope_index is None:
            raise ValueError(
                f"{label}: num_layers={num_layers} > 5 cannot be named as the TF1 seed does: its last layer is "
                f"hard-coded as 'conv_layer_5_<scope>', which layer 5 already uses (TF1 refuses to build that "
                f"graph). Pass last_layer_scope_index={num_layers} (or any index >= num_layers) to name the last "
                f"layer 'conv_layer_{num_layers}_<scope>'.")
        raise ValueError(f"{label}: `last_layer_scope_index`={last} collides with the scope of layer {last}; it "
                         f"must be >= num_layers={num_layers}.")
    return list(range(1, num_layers)) + [last]


class Postnet(ConvStack):
    """Tacotron-2 postnet: ``num_layers - 1`` conv blocks with ``activation``, then a linear conv block.

    Every layer is a :class:`~torch_layers.Conv1DBlock` (conv -> TF1 batch norm -> activation ->
    dropout in ``train()``). TF1 scopes as the seed names them: ``conv_layer_{i}_<tf1_scope>`` for
    ``i = 1 .. num_layers - 1``, and the hard-coded ``conv_layer_5_<tf1_scope>`` for the last layer
    (identity activation, still batch norm and dropout) -- also when ``num_layers < 5``. With
    ``num_layers > 5`` the seed's names collide (TF1 refuses that graph): the constructor raises
    ``ValueError`` unless ``last_layer_scope_index`` picks a free index (e.g. ``num_layers``).

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
                 last_layer_scope_index: Optional[int] = None, bn_position: str = "before", device=None, dtype=None):
        super().__init__()
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.activation = activation_name(activation, self.block_label)
        n = check_positive_int(num_layers, "num_layers", self.block_label)
        self.last_layer_scope_index = last_layer_scope_index
        indices = postnet_scope_indices(n, last_layer_scope_index)
        acts = [self.activation] * (n - 1) + ["linear"]
        self._init_stack(in_channels, kernel_size, channels, n, drop_rate, bn_position, list(zip(indices, acts)),
                         device, dtype)
