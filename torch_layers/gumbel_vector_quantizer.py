"""Torch ``GumbelVectorQuantizer``: wav2vec-style product quantization with a Gumbel-softmax, without NeMo."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechblocks.gumbel_vector_quantizer import annealed_temperature, check_quantizer_arguments

from ._state_dict import CheckedLoadStateDict
from ._validation import check_float_tensor


class GumbelVectorQuantizer(CheckedLoadStateDict, nn.Module):
    """Vector quantizer with ``groups`` codebooks of ``num_vars`` entries, picked by a Gumbel-softmax.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    The state-dict keys and the numbers are those of NeMo's / fairseq's ``GumbelVectorQuantizer``
    (``vars``, ``weight_proj.weight``, ``weight_proj.bias``), so their checkpoints load as they are.

    * ``weight_proj`` maps every frame to ``groups * num_vars`` logits (weight ~ N(0, 1), bias 0).
    * eval: each group takes the one-hot argmax of its logits; training: the straight-through hard
      Gumbel-softmax at temperature ``curr_temp`` (argmax of ``(logits + g) / curr_temp`` in the
      forward pass, softmax gradient in the backward pass).
    * the output concatenates the chosen entries of each group: ``vq_dim`` channels.
    * ``prob_ppl`` loss: with ``p`` the softmax of the logits averaged over all frames,
      ``ppl = sum_g exp(-sum_v p log(p + 1e-7))`` and the loss is ``(V*G - ppl) / (V*G)``.
    * the temperature follows ``max(t0 * decay ** num_updates, t_min)`` through :meth:`set_num_updates`.
    * ids: the argmax of each group (of the noiseless logits) combined as ``((id_0 * V) + id_1) * V + ...``.

    Export (tested by ``run_torch_module_test``): ``torch.export`` works with dynamic batch and time and
    ``torch.compile`` without recompiling per length; torch 2.13's ONNX translation of the exported program fails
    (``'float' object has no attribute 'name'``).

    Args:
        dim: input channels.
        num_vars: codebook entries per group (``V``).
        temp: ``(start, min, decay)`` of the Gumbel temperature.
        groups: number of groups (``G``).
        combine_groups: one codebook shared by all groups (``vars`` is ``(1, V, vq_dim/G)``) instead of
            one per group (``(1, G*V, vq_dim/G)``).
        vq_dim: output channels, divisible by ``groups``; ``None`` means ``dim``.
        time_first: inputs are ``(batch, time, dim)``; else ``(batch, dim, time)`` (output likewise).
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> q = GumbelVectorQuantizer(40, 320, groups=2, vq_dim=128).eval()
        >>> x, ppl_loss, temp = q(torch.randn(2, 7, 40))
        >>> x.shape
        torch.Size([2, 7, 128])
    """

    def __init__(self, dim: int, num_vars: int, temp: tuple[float, float, float] = (2.0, 0.5, 0.999995),
                 groups: int = 2, combine_groups: bool = True, vq_dim: Optional[int] = None,
                 time_first: bool = True, device=None, dtype=None):
        super().__init__()
        vq_dim = check_quantizer_arguments(dim, num_vars, temp, groups, vq_dim)
        self.input_dim = int(dim)
        self.num_vars = int(num_vars)
        self.groups = int(groups)
        self.combine_groups = bool(combine_groups)
        self.vq_dim = int(vq_dim)
        self.var_dim = self.vq_dim // self.groups
        self.time_first = bool(time_first)
        self.max_temp, self.min_temp, self.temp_decay = (float(t) for t in temp)
        self.curr_temp = self.max_temp
        self.codebook_indices = None
        num_books = 1 if self.combine_groups else self.groups
        self.vars = nn.Parameter(torch.empty(1, num_books * self.num_vars, self.var_dim, device=device, dtype=dtype))
        self.weight_proj = nn.Linear(self.input_dim, self.groups * self.num_vars, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``vars`` ~ U(0, 1), ``weight_proj.weight`` ~ N(0, 1), ``weight_proj.bias`` = 0 (as upstream)."""
        nn.init.uniform_(self.vars)
        nn.init.normal_(self.weight_proj.weight, mean=0.0, std=1.0)
        nn.init.zeros_(self.weight_proj.bias)

    def set_num_updates(self, num_updates: int) -> None:
        """Sets ``curr_temp = max(start * decay ** num_updates, min)``."""
        self.curr_temp = annealed_temperature(self.max_temp, self.min_temp, self.temp_decay, num_updates)

    def codebook(self) -> torch.Tensor:
        """The codebook of every group, ``(groups, num_vars, vq_dim / groups)`` (shared ones repeated)."""
        books = self.vars.view(-1, self.num_vars, self.var_dim)
        if self.combine_groups:
            books = books.expand(self.groups, self.num_vars, self.var_dim)
        return books

    @torch.jit.export
    def quantize_frames(self, x: torch.Tensor, gumbel_noise: Optional[torch.Tensor] = None,
                 generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The quantizer as one TorchScript-able function.

        Args:
            x: ``(batch, time, dim)`` (``(batch, dim, time)`` when ``time_first`` is False).
            gumbel_noise: optional Gumbel(0, 1) noise ``(batch, time, groups, num_vars)`` used in training
                instead of fresh noise (ignored in eval).
            generator: optional ``torch.Generator`` for the training noise.

        Returns:
            ``(quantized, prob_ppl_loss, ids)``: quantized ``(batch, time, vq_dim)`` (or
            ``(batch, vq_dim, time)``), the scalar perplexity loss (float32), ids ``(batch, time)`` int64.
        """
        shape_doc = ("(batch, time, " + str(self.input_dim) + ")") if self.time_first else (
            "(batch, " + str(self.input_dim) + ", time)")
        check_float_tensor(x, "x", "GumbelVectorQuantizer", 3, -1, shape_doc)
        if not self.time_first:
            x = x.transpose(1, 2)
        if x.shape[-1] != self.input_dim:
            raise ValueError("GumbelVectorQuantizer: argument `x` must have shape " + shape_doc + "; got shape "
                             + str(list(x.shape)) + ".")
        bsz, tsz = x.shape[0], x.shape[1]
        groups, num_vars = self.groups, self.num_vars
        logits = self.weight_proj(x.reshape(-1, self.input_dim)).view(bsz * tsz, groups, num_vars)
        hard_idx = logits.argmax(-1)  # (frames, groups)

        avg_probs = torch.softmax(logits.float(), dim=-1).mean(dim=0)
        ppl = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-7), dim=-1)).sum()
        total = float(num_vars * groups)
        prob_ppl_loss = (total - ppl) / total

        if self.training:
            if gumbel_noise is None:
                noise = -torch.empty(logits.shape, dtype=torch.float32, device=logits.device).exponential_(
                    generator=generator).log()
            else:
                if gumbel_noise.numel() != logits.numel() or gumbel_noise.dim() != 4:
                    raise ValueError("GumbelVectorQuantizer: argument `gumbel_noise` must have shape (batch, time, "
                                     "groups, num_vars) = " + str([bsz, tsz, groups, num_vars]) + "; got shape "
                                     + str(list(gumbel_noise.shape)) + ".")
                noise = gumbel_noise.reshape(logits.shape).float()
            y_soft = torch.softmax((logits.float() + noise) / self.curr_temp, dim=-1)
            y_hard = F.one_hot(y_soft.argmax(-1), num_vars).to(y_soft.dtype)
            onehot = (y_hard - y_soft.detach() + y_soft).to(logits.dtype)
        else:
            onehot = F.one_hot(hard_idx, num_vars).to(logits.dtype)

        quantized = torch.einsum("ngv,gvd->ngd", onehot, self.codebook()).reshape(bsz, tsz, self.vq_dim)
        if not self.time_first:
            quantized = quantized.transpose(1, 2)

        ids = torch.zeros(bsz * tsz, dtype=torch.long, device=x.device)
        for g in range(groups):
            ids = ids * num_vars + hard_idx[:, g]
        return quantized, prob_ppl_loss, ids.view(bsz, tsz)

    @torch.jit.ignore
    def forward(self, x: torch.Tensor, return_ids: bool = False, gumbel_noise: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None):
        """
        Args:
            x: ``(batch, time, dim)`` (``(batch, dim, time)`` when ``time_first`` is False).
            return_ids: also return the combined codebook ids.
            gumbel_noise: optional Gumbel noise ``(batch, time, groups, num_vars)`` (training only).
            generator: optional ``torch.Generator`` for the training noise.

        Returns:
            ``(quantized, prob_ppl_loss, curr_temp)`` or, with ``return_ids``,
            ``(quantized, prob_ppl_loss, curr_temp, ids)`` with ids ``(batch, time)`` -- as upstream.
            TorchScript: the tuple length depends on ``return_ids`` (as upstream), so ``forward`` stays
            Python; a scripted module runs :meth:`quantize_frames` compiled.
        """
        quantized, prob_ppl_loss, ids = self.quantize_frames(x, gumbel_noise, generator)
        if return_ids:
            return quantized, prob_ppl_loss, self.curr_temp, ids
        return quantized, prob_ppl_loss, self.curr_temp

    # -- negatives from the codebook ------------------------------------------------------------
    def codebook_size(self) -> int:
        """Number of distinct quantized vectors, ``num_vars ** groups``."""
        size = 1
        for _ in range(self.groups):
            size = size * self.num_vars
        return size

    @torch.jit.unused
    def get_codebook_indices(self) -> torch.Tensor:
        """Every combination of group entries, flattened, as upstream (rows of ``vars``)."""
        if self.codebook_indices is None:
            grids = torch.meshgrid([torch.arange(self.num_vars, device=self.vars.device)] * self.groups, indexing="ij")
            idx = torch.stack([g.reshape(-1) for g in grids], dim=-1)
            if not self.combine_groups:
                idx = idx + torch.arange(self.groups, device=idx.device) * self.num_vars
            self.codebook_indices = idx.flatten()
        return self.codebook_indices

    def codebook_rows(self, flat_index: torch.Tensor) -> torch.Tensor:
        """Rows of ``vars`` of each group for indices into the ``num_vars ** groups`` combinations.

        Args:
            flat_index: int64 tensor of any shape, values in ``[0, num_vars ** groups)``.

        Returns:
            int64 tensor ``flat_index.shape + (groups,)``; the first group is the most significant digit.
        """
        digits: list[torch.Tensor] = []
        rest = flat_index
        for _ in range(self.groups):
            digits.insert(0, torch.remainder(rest, self.num_vars))
            rest = torch.div(rest, self.num_vars, rounding_mode="floor")
        rows = torch.stack(digits, dim=-1)
        if not self.combine_groups:
            rows = rows + torch.arange(self.groups, device=rows.device) * self.num_vars
        return rows

    def sample_from_codebook(self, b: int, n: int, generator: Optional[torch.Generator] = None,
                             indices: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``b x n`` codebook vectors drawn uniformly (with replacement) from all combinations.

        Args:
            b: number of negatives.
            n: number of targets; upstream requires ``n < num_vars ** groups``.
            generator: optional ``torch.Generator``.
            indices: optional ``(b, n)`` indices in ``[0, num_vars ** groups)`` replacing the draw.

        Returns:
            ``(b, n, vq_dim)``.
        """
        size = self.codebook_size()
        if n >= size:
            raise ValueError("GumbelVectorQuantizer.sample_from_codebook: " + str(n) + " targets but the codebook "
                             "holds only " + str(size) + " vectors (num_vars ** groups); upstream requires fewer "
                             "targets than codebook vectors.")
        if indices is None:
            indices = torch.randint(0, size, [b, n], generator=generator, device=self.vars.device)
        elif indices.dim() != 2 or indices.shape[0] != b or indices.shape[1] != n or indices.is_floating_point():
            raise ValueError("GumbelVectorQuantizer.sample_from_codebook: argument `indices` must be an integer tensor "
                             "of shape (num_negatives, num_targets) = (" + str(b) + ", " + str(n) + "); got "
                             + str(list(indices.shape)) + ".")
        elif indices.numel() > 0 and (int(indices.min()) < 0 or int(indices.max()) >= size):
            raise ValueError("GumbelVectorQuantizer.sample_from_codebook: argument `indices` must lie in [0, "
                             + str(size) + ").")
        rows = self.codebook_rows(indices.long())
        return self.vars[0].index_select(0, rows.flatten()).view(b, n, self.vq_dim)

    def extra_repr(self) -> str:
        return (f"dim={self.input_dim}, num_vars={self.num_vars}, groups={self.groups}, "
                f"combine_groups={self.combine_groups}, vq_dim={self.vq_dim}, time_first={self.time_first}, "
                f"temp=({self.max_temp}, {self.min_temp}, {self.temp_decay})")

