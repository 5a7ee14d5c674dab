"""Torch ``CBHG``: convolution bank, highway net and bidirectional TF1 GRU (Tacotron-2's post-net CBHG)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechblocks.cbhg import check_cbhg_arguments
from speechblocks.distributed import check_sync_batch_norm
from speechblocks.tf1_names import (
    cbhg_gru_scope,
    cbhg_highway_scope,
    cbhg_projection_scopes,
    cbhg_tf1_variables,
    check_cbhg_naming,
)

from ._functional import tf_same_padding
from ._validation import check_float_tensor, check_lengths
from .conv1d_block import Conv1DBlock
from .highway_net import HighwayNet
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1
from .tf1_gru_cell import TF1GRUCell, _bigru


def _lowest(dtype: torch.dtype) -> float:
    """The lowest finite value of a floating dtype (``torch.finfo(dtype).min``, which TorchScript lacks)."""
    if dtype == torch.float64:
        return -1.7976931348623157e308
    if dtype == torch.float16:
        return -65504.0
    if dtype == torch.bfloat16:
        return -3.3895313892515355e38
    return -3.4028234663852886e38


def max_pool_same(x: torch.Tensor, pool_size: int) -> torch.Tensor:
    """TF ``max_pooling1d(pool_size, strides=1, padding='same')`` on ``(batch, time, channels)``.

    TF pads ``(pool_size − 1)//2`` frames before and the rest after; padded frames never win. Non-finite values
    as TF's CPU kernel: its running maximum starts at the lowest finite value and takes a value only when
    greater, so NaN and -inf never win (a window of only NaN/-inf gives ``finfo.min``); +inf does.
    """
    before, after = tf_same_padding(pool_size)
    lowest = _lowest(x.dtype)
    y = torch.where(x >= lowest, x, torch.full_like(x, lowest)).transpose(1, 2)  # NaN, -inf -> lowest
    if before > 0 or after > 0:
        y = F.pad(y, (before, after), value=lowest)
    return F.max_pool1d(y, pool_size, stride=1).transpose(1, 2)


class CBHG(TF1WeightsMixin, nn.Module):
    """CBHG as in TF1 Tacotron-2: conv bank -> max-pool -> 2 projections -> residual -> highways -> BiGRU.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Conv bank of widths ``1..K`` (:class:`Conv1DBlock`: conv -> TF1 batch norm -> relu, TF ``'same'``
    padding; with ``bn_position="after"``, Rayhane's later code, conv -> relu -> batch norm, likewise for both
    projections), concatenated on channels; max-pool (stride 1, TF ``'same'``); ``proj1`` (relu) and ``proj2``
    (identity); residual ``proj2 + inputs``; a dense layer to ``highway_units`` (no activation) only when
    ``projections[1] != highway_units``; ``n_highwaynet_layers`` :class:`HighwayNet`; bidirectional TF1 GRU
    (reset before the candidate matmul, ``bidirectional_dynamic_rnn`` length semantics). ``train()`` makes
    batch norm use batch statistics (CBHG has no dropout).

    Reads padding, as the original: the bank, the max-pool and the projections see the frames past each length
    (``K // 2 + pool_size // 2 + 2 * (projection_kernel_size // 2)`` of them reach the last valid output), and
    batch statistics in training see every frame; frames further past a length change nothing (the GRU stops
    at each length) and the outputs past a length are zeros.

    Export (tested by ``run_torch_module_test``): with ``input_lengths`` the input check reads their values, so
    ``torch.export`` fails; without them the bidirectional GRU's loop over time is unrolled: exported (and ONNX)
    with time fixed, batch dynamic. ``torch.compile`` compiles again for every new length.

    Args:
        input_size: input channels; must equal ``projections[1]`` (residual connection).
        K: number of bank convolutions (widths 1..K).
        conv_channels: channels of each bank convolution.
        pool_size: max-pool width.
        projections: two sizes, channels of ``proj1`` and ``proj2``.
        projection_kernel_size: width of the projection convolutions.
        n_highwaynet_layers: number of highway layers.
        highway_units: highway width.
        rnn_units: GRU units per direction.
        tf1_scope: TF1 scope (default ``"CBHG"``); inner names as TF1 (``conv_bank/conv1d_{k}/...``,
            ``proj1``, ``proj2``, ``dense``, ``<scope>_highwaynet_{n}``,
            ``bidirectional_rnn/{fw,bw}/<scope>_{forward,backward}_RNN/{gates,candidate}/{kernel,bias}``).
        bn_position: ``"before"`` (seed: conv -> batch norm -> activation) or ``"after"`` (Rayhane's
            ``batch_norm_position='after'``: conv -> activation -> batch norm) for the bank and both projections.
        sync_batch_norm: batch statistics of the global batch under ``DistributedDataParallel`` (see
            :class:`~torch_layers.tf_batch_norm.TFBatchNorm`); default False: each rank's own batch.
        tf1_naming: ``"tacotron2"`` (the names above) or ``"keithito"`` (keithito/tacotron's and mimic2's
            ``modules.py``: ``proj_1``, ``proj_2``, ``highway_{n}/{H,T}``, ``bidirectional_rnn/{fw,bw}/gru_cell``;
            use it with ``bn_position="after"``, keithito's ReLU-before-BN order).
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> cbhg = CBHG(80, 8, 128, 2, [256, 80], 3, 4, 128, 128).eval()
        >>> cbhg(torch.zeros(2, 50, 80), torch.tensor([50, 20])).shape
        torch.Size([2, 50, 256])
    """

    default_tf1_scope = "CBHG"

    def __init__(self, input_size: int, K: int, conv_channels: int, pool_size: int, projections: Sequence[int],
                 projection_kernel_size: int, n_highwaynet_layers: int, highway_units: int, rnn_units: int,
                 tf1_scope: Optional[str] = None, bn_position: str = "before", sync_batch_norm: bool = False,
                 tf1_naming: str = "tacotron2", device=None, dtype=None):
        super().__init__()
        self.tf1_naming = check_cbhg_naming(tf1_naming)
        proj_scopes = cbhg_projection_scopes(tf1_naming)
        projections = check_cbhg_arguments(K, conv_channels, pool_size, projections, projection_kernel_size,
                                           n_highwaynet_layers, highway_units, rnn_units, bn_position, input_size)
        factory = {"device": device, "dtype": dtype}
        self.input_size = input_size
        self.K = K
        self.conv_channels = conv_channels
        self.pool_size = pool_size
        self.projections = projections
        self.projection_kernel_size = projection_kernel_size
        self.n_highwaynet_layers = n_highwaynet_layers
        self.highway_units = highway_units
        self.rnn_units = rnn_units
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.bn_position = bn_position
        self.sync_batch_norm = sync = check_sync_batch_norm(sync_batch_norm, "CBHG")
        self.conv_bank = nn.ModuleList([Conv1DBlock(input_size, k, conv_channels, "relu", 0.0, bn_position,
                                                    tf1_scope=f"conv1d_{k}", sync_batch_norm=sync, **factory)
                                        for k in range(1, K + 1)])
        self.proj1 = Conv1DBlock(K * conv_channels, projection_kernel_size, projections[0], "relu", 0.0, bn_position,
                                 tf1_scope=proj_scopes[0], sync_batch_norm=sync, **factory)
        self.proj2 = Conv1DBlock(projections[0], projection_kernel_size, projections[1], None, 0.0, bn_position,
                                 tf1_scope=proj_scopes[1], sync_batch_norm=sync, **factory)
        self.has_dense = projections[1] != highway_units
        self.dense = nn.Linear(input_size, highway_units, **factory) if self.has_dense else nn.Identity()
        self.highwaynets = nn.ModuleList([
            HighwayNet(highway_units, tf1_scope=cbhg_highway_scope(self.tf1_scope, i + 1, tf1_naming), **factory)
            for i in range(n_highwaynet_layers)])
        self.fw_cell = TF1GRUCell(highway_units, rnn_units, cbhg_gru_scope(self.tf1_scope, "fw", tf1_naming),
                                  **factory)
        self.bw_cell = TF1GRUCell(highway_units, rnn_units, cbhg_gru_scope(self.tf1_scope, "bw", tf1_naming),
                                  **factory)
        self._shape_doc = f"(batch, time, {input_size})"
        if self.has_dense:
            nn.init.xavier_uniform_(self.dense.weight)
            nn.init.zeros_(self.dense.bias)

    def forward(self, inputs: torch.Tensor, input_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, time, input_size)``.
            input_lengths: optional integer ``(batch,)`` lengths in ``[0, time]``; ``None`` means full length.

        Returns:
            ``(batch, time, 2 * rnn_units)``: forward and backward GRU outputs, zeros past each length.
        """
        check_float_tensor(inputs, "inputs", "CBHG", 3, self.input_size, self._shape_doc)
        if input_lengths is not None:
            check_lengths(input_lengths, "input_lengths", "CBHG", inputs.shape[0])
            if input_lengths.numel() > 0:
                lo, hi = int(input_lengths.min()), int(input_lengths.max())
                if lo < 0 or hi > inputs.shape[1]:
                    raise ValueError("CBHG: argument `input_lengths` must lie in [0, time=" + str(inputs.shape[1])
                                     + "]; got values in [" + str(lo) + ", " + str(hi) + "].")
        x = torch.cat([conv(inputs) for conv in self.conv_bank], dim=-1)
        x = max_pool_same(x, self.pool_size)
        x = self.proj2(self.proj1(x))
        x = x + inputs
        if self.has_dense:
            x = self.dense(x)
        for hw in self.highwaynets:
            x = hw(x)
        fw, bw = _bigru(x, self.fw_cell.gates.weight, self.fw_cell.gates.bias, self.fw_cell.candidate.weight,
                        self.fw_cell.candidate.bias, self.bw_cell.gates.weight, self.bw_cell.gates.bias,
                        self.bw_cell.candidate.weight, self.bw_cell.candidate.bias, input_lengths)
        return torch.cat([fw, bw], dim=-1)

    def _tf1_variables(self):
        dense = None
        if self.has_dense:
            dense = {"kernel": TF1Variable(self.dense.weight, dense_to_tf1, dense_from_tf1),
                     "bias": TF1Variable(self.dense.bias)}
        return cbhg_tf1_variables(self.conv_bank, self.proj1, self.proj2, dense, self.highwaynets, self.fw_cell,
                                  self.bw_cell)
