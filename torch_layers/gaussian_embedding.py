"""Torch ``GaussianEmbedding``: TalkNet's Gaussian upsampling of token embeddings, without NeMo.

Two variants share the upsampling:

* ``blank_free=True`` (default, the seed's variant): the input interleaves ``<blank>`` tokens with the
  real tokens, ``(blank, tok_1, blank, tok_2, ..., tok_n, blank)``; every blank except the first is
  dropped and its duration is added to the token before it.
* ``blank_free=False``: standard TalkNet, every input token (blank or not) is kept.

The upsampling then follows standard TalkNet: two ``pad`` tokens of duration 0 are appended; token ``j``
becomes a Gaussian over frames centred at ``d_j / 2 + sum_{i<j} d_i`` with standard deviation
``d_j / sigma_c + 1e-6``; frame ``t`` is evaluated at ``t + 0.5``; the densities of ``pad`` tokens are
zeroed and each frame's weights are normalised by their sum ``+ 1e-6``; frames past the end of an
utterance (frames whose merged token is ``pad``) take the embedding of the last column. With
``merge_blanks=True`` only the odd columns (the tokens between blanks) take part.

Implementation (same numbers as the seed within float32 rounding, without its ``[batch, frames, tokens]``
temporaries): the log-density is written in closed form as ``torch.distributions.Normal.log_prob``
computes it; densities at or below 2e-38 are flushed to exactly 0 (``exp`` of huge negative numbers and
denormal results are very slow on CPUs, and such weights move no output by more than ~1e-36). That
makes each token's weights exactly zero beyond a known radius of its centre, so ``u = w @ embed(text)``
is computed in blocks of frames, each multiplying only the band of tokens that can reach it; the weights
of a block are built in place in one small buffer. With autograd, the backward recomputes the banded
weights (they depend on the integer durations only) instead of saving the full tensor. Under
TorchScript with autograd, a plain dense path is used.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from speechblocks import gaussian_embedding as _shared
from speechblocks.gaussian_embedding import (
    check_gaussian_embedding_arguments,
    interleave_message,
    outside_vocabulary_message,
    text_shape_doc,
)

from ._state_dict import CheckedLoadStateDict

__all__ = ["GaussianEmbedding", "repeat_merge"]

# a block of weights holds at most this many elements (1 MiB in float32, cache-sized); settable per
# module as ``chunk_elements``
_CHUNK_ELEMENTS = 1 << 18
# Literals used in the TorchScript-compiled helpers below: blocks of at most 256 frames in the banded
# product; log-densities clamped at -87.0 before exp() (exp(-87) ~ 1.6e-38) and densities <= 2e-38
# flushed to 0.


def _is_integer(x: torch.Tensor) -> bool:
    return (not x.is_floating_point()) and (not x.is_complex()) and x.dtype != torch.bool


def _check_reps(x: torch.Tensor, reps: torch.Tensor, block: str, x_name: str, reps_name: str) -> None:
    if x.dim() != 2:
        raise ValueError(block + ": argument `" + x_name + "` must have shape (batch, length); got shape "
                         + str(list(x.shape)) + ".")
    if not _is_integer(reps):
        raise ValueError(block + ": argument `" + reps_name + "` must be an integer tensor of shape (batch, length); "
                         + "got dtype " + str(reps.dtype) + ".")
    if reps.shape != x.shape:
        raise ValueError(block + ": argument `" + reps_name + "` must have the shape of `" + x_name + "` "
                         + str(list(x.shape)) + "; got shape " + str(list(reps.shape)) + ".")
    if reps.numel() > 0 and bool((reps < 0).any()):
        raise ValueError(block + ": argument `" + reps_name + "` must be non-negative; got minimum "
                         + str(int(reps.min())) + ".")


def _merge_indices(reps: torch.Tensor) -> torch.Tensor:
    """For ``reps`` ``(batch, n)`` (checked), the index of the element covering each frame, ``n`` past the end.

    Returns ``(batch, max_total)`` int64.
    """
    reps = reps.to(torch.int64)
    batch, n = reps.shape[0], reps.shape[1]
    ends = torch.cumsum(reps, dim=1)
    total_time = int(ends[:, -1].max()) if batch > 0 and n > 0 else 0
    frames = torch.arange(total_time, device=reps.device, dtype=torch.int64).unsqueeze(0).expand(batch, total_time)
    # the element covering frame f is the number of elements that end at or before f
    return torch.searchsorted(ends.contiguous(), frames.contiguous(), right=True)


def _gather_or_pad(x: torch.Tensor, idx: torch.Tensor, pad: int) -> torch.Tensor:
    n = x.shape[1]
    if n == 0:
        return torch.full(idx.shape, pad, dtype=x.dtype, device=x.device)
    out = torch.gather(x, 1, idx.clamp(max=n - 1))
    return out.masked_fill(idx >= n, pad)


def repeat_merge(x: torch.Tensor, reps: torch.Tensor, pad: int) -> torch.Tensor:
    """Repeats every element of each row ``reps`` times, then right-pads the rows to a common length.

    NeMo's ``AudioToCharWithDursF0Dataset.repeat_merge``: row ``b`` becomes
    ``repeat_interleave(x[b], reps[b])``, padded with ``pad`` to the longest row. Vectorised: one
    ``searchsorted`` over the cumulative repeats instead of a Python loop over the batch.

    Args:
        x: ``(batch, length)`` values (token ids, or any dtype ``pad`` fits).
        reps: ``(batch, length)`` non-negative integer repeat counts.
        pad: value of the padding frames.

    Returns:
        ``(batch, max_b sum(reps[b]))`` tensor of the dtype of ``x``.

    Example:
        >>> repeat_merge(torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[2, 0, 1], [1, 1, 0]]), 0)
        tensor([[1, 1, 3],
                [4, 5, 0]])
    """
    _check_reps(x, reps, "repeat_merge", "x", "reps")
    return _gather_or_pad(x, _merge_indices(reps), pad)


class GaussianEmbedding(CheckedLoadStateDict, nn.Module):
    """TalkNet Gaussian embedding: token embeddings upsampled to frames by Gaussian weights.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    Numbers equal the seed's (the blank-free TalkNet ``GaussianEmbedding``) and, with
    ``blank_free=False``, standard TalkNet's; NeMo is not needed. The ``[batch, frames, tokens]``
    weights are never materialised in full (see the module docstring); at 16 x 1200 frames x 150
    tokens the peak memory is ~0.25x and the time ~0.2x of the seed's (``bench/bench_gaussian_embedding.py``).
    Densities at or below 2e-38 are flushed to 0.

    Export (tested by ``run_torch_module_test``): the output has ``max(sum(durs))`` frames, a value of the input,
    and the durations are checked by value: ``torch.export`` (and ONNX) fail. ``torch.compile`` runs (graph breaks
    at those reads) without recompiling per length.

    Args:
        num_labels: vocabulary size (``len(vocab.labels)`` in NeMo), rows of ``embed.weight``.
        d_emb: embedding size.
        pad: id of the padding token (``vocab.pad``), in ``[0, num_labels)``.
        sigma_c: the standard deviation of a token of duration ``d`` is ``d / sigma_c + 1e-6``.
        merge_blanks: use only the odd columns (after blank removal, if any) for the weights. Quirk kept
            from the seed: with ``blank_free=True`` the odd columns of the blank-free sequence are every
            other real token, not the tokens between blanks.
        blank_free: drop the interleaved blanks (keeping the first) and add each blank's duration to
            the token before it (the seed's variant); ``False`` is standard TalkNet.
        device: factory keyword.
        dtype: factory keyword (the weights are computed in this dtype).

    State dict: ``embed.weight`` ``(num_labels, d_emb)``, as upstream.

    Example:
        >>> emb = GaussianEmbedding(10, 4, pad=0)
        >>> text = torch.tensor([[1, 5, 1, 6, 1]])   # blank, tok, blank, tok, blank
        >>> durs = torch.tensor([[1, 2, 0, 3, 1]])
        >>> emb(text, durs).shape
        torch.Size([1, 7, 4])
    """

    EPS = _shared.EPS

    def __init__(self, num_labels: int, d_emb: int, pad: int, sigma_c: float = 2.0, merge_blanks: bool = False,
                 blank_free: bool = True, device=None, dtype=None):
        super().__init__()
        check_gaussian_embedding_arguments(num_labels, d_emb, pad, sigma_c)
        self.num_labels = int(num_labels)
        self.d_emb = int(d_emb)
        self.pad = int(pad)
        self.sigma_c = float(sigma_c)
        self.merge_blanks = bool(merge_blanks)
        self.blank_free = bool(blank_free)
        self._eps = _shared.EPS
        self._log_sqrt_2pi = _shared.LOG_SQRT_2PI
        self.chunk_elements = _CHUNK_ELEMENTS
        self.embed = nn.Embedding(self.num_labels, self.d_emb, device=device, dtype=dtype)

    def extra_repr(self) -> str:
        return (f"num_labels={self.num_labels}, d_emb={self.d_emb}, pad={self.pad}, sigma_c={self.sigma_c}, "
                f"merge_blanks={self.merge_blanks}, blank_free={self.blank_free}")

    def _check_inputs(self, text: torch.Tensor, durs: torch.Tensor) -> None:
        block = "GaussianEmbedding"
        odd = self.blank_free or self.merge_blanks
        doc = text_shape_doc(odd)
        if not _is_integer(text):
            raise ValueError(block + ": argument `text` must be an integer tensor of token ids, expected shape " + doc
                             + "; got dtype " + str(text.dtype) + ".")
        if text.dim() != 2:
            raise ValueError(block + ": argument `text` must have rank 2, expected shape " + doc + "; got shape "
                             + str(list(text.shape)) + ".")
        if odd and text.shape[1] % 2 != 1:
            raise ValueError(interleave_message() + " with an odd length; got shape " + str(list(text.shape)) + ".")
        _check_reps(text, durs, block, "text", "durs")
        if text.numel() > 0:
            lo, hi = int(text.min()), int(text.max())
            if lo < 0 or hi >= self.num_labels:
                raise ValueError(outside_vocabulary_message(self.num_labels) + ": min " + str(lo) + ", max " + str(hi)
                                 + ".")

    def forward(self, text: torch.Tensor, durs: torch.Tensor) -> torch.Tensor:
        """
        Args:
            text: ``(batch, 2n+1)`` int token ids with blanks interleaved (``(batch, length)`` when
                ``blank_free=False`` and ``merge_blanks=False``); padded rows use ``pad`` ids.
            durs: ``(batch, 2n+1)`` (same shape as ``text``) non-negative int durations in frames;
                padded entries 0.

        Returns:
            ``(batch, frames, d_emb)`` with ``frames = max_b sum(durs[b])``, in the dtype of
            ``embed.weight``.
        """
        self._check_inputs(text, durs)
        text = text.to(torch.int64)
        durs = durs.to(torch.int64)
        if self.blank_free:
            text = torch.cat((text[:, :1], text[:, 1::2]), dim=1)
            durs = torch.cat((durs[:, :1], durs[:, 1::2] + durs[:, 2::2]), dim=1)
        batch = text.shape[0]
        text = torch.cat((text, torch.full((batch, 2), self.pad, dtype=text.dtype, device=text.device)), dim=1)
        durs = torch.cat((durs, torch.zeros((batch, 2), dtype=torch.int64, device=durs.device)), dim=1)

        idx = _merge_indices(durs)  # (B, T): column covering each frame, N past the end
        repeats = _gather_or_pad(text, idx, self.pad)

        dtype = self.embed.weight.dtype
        d = durs.to(dtype)
        # per-column parameters (B, N); the [B, T, N] weights are built block by block, banded
        centres = d / 2.0 + (torch.cumsum(durs, dim=1) - durs).to(dtype)
        sigmas = d / self.sigma_c + self._eps
        if self.merge_blanks:
            centres, sigmas, text = centres[:, 1::2], sigmas[:, 1::2], text[:, 1::2]
        # log N(t; c, s) = -(t - c)^2 / (2 s^2) - (log s + log sqrt(2 pi)), as torch's Normal.log_prob.
        # Pad columns get an offset of +inf: their density is exactly 0 (the seed's masked_fill).
        neg_two_var = -(2.0 * sigmas ** 2)
        offset = (torch.log(sigmas) + self._log_sqrt_2pi).masked_fill(text == self.pad, float("inf"))
        frame_pad = repeats == self.pad
        emb = self.embed(text)

        if not (torch.is_grad_enabled() and emb.requires_grad):
            return _upsample_banded(emb, centres, neg_two_var, offset, frame_pad, self._eps, self.chunk_elements)
        if torch.jit.is_scripting():
            w = _gaussian_weights(centres, neg_two_var, offset, frame_pad, self._eps)
            return torch.bmm(w, emb)
        return self._upsample_autograd(emb, centres, neg_two_var, offset, frame_pad)

    @torch.jit.unused
    def _upsample_autograd(self, emb: torch.Tensor, centres: torch.Tensor, neg_two_var: torch.Tensor,
                           offset: torch.Tensor, frame_pad: torch.Tensor) -> torch.Tensor:
        return _GaussianUpsample.apply(emb, centres, neg_two_var, offset, frame_pad, self._eps, self.chunk_elements)


def _unnormalised_log_weights(centres: torch.Tensor, neg_two_var: torch.Tensor, offset: torch.Tensor, t0: int,
                              frames: int) -> torch.Tensor:
    """``log N(t + 0.5; c, s)`` of frames ``t0 .. t0 + frames``, ``(batch, frames, columns)``, one buffer."""
    times = torch.arange(t0, t0 + frames, device=centres.device, dtype=centres.dtype) + 0.5
    w = times.view(1, -1, 1) - centres.unsqueeze(1)
    w.square_()
    w.div_(neg_two_var.unsqueeze(1))
    w.sub_(offset.unsqueeze(1))
    return w


def _normalised_weights(centres: torch.Tensor, neg_two_var: torch.Tensor, offset: torch.Tensor, t0: int,
                        frames: int, eps: float) -> torch.Tensor:
    """Normalised Gaussian weights of frames ``t0 .. t0 + frames`` (pad frames not handled).

    Args:
        centres, neg_two_var, offset: ``(batch, columns)`` per-column ``c``, ``-2 s^2`` and
            ``log s + log sqrt(2 pi)`` (``+inf`` for pad columns).
        t0: index of the first frame.
        frames: number of frames.
        eps: the seed's ``EPS``.

    Returns:
        ``(batch, frames, columns)``, computed in place in one buffer.
    """
    w = _unnormalised_log_weights(centres, neg_two_var, offset, t0, frames)
    # Densities at or below 2e-38 (float32's normal range ends at 1.18e-38) are flushed to exactly 0:
    # exp() of huge negative arguments and denormal results are many times slower on CPUs, and such
    # weights cannot move any output by more than ~1e-36.
    w.clamp_(min=-87.0)
    w.exp_()
    torch.threshold_(w, 2e-38, 0.0)
    w.div_(w.sum(dim=-1, keepdim=True) + eps)
    return w


def _gaussian_weights(centres: torch.Tensor, neg_two_var: torch.Tensor, offset: torch.Tensor,
                      frame_pad: torch.Tensor, eps: float) -> torch.Tensor:
    """The full ``(batch, frames, columns)`` weights, pad frames one-hot on the last column."""
    w = _normalised_weights(centres, neg_two_var, offset, 0, frame_pad.shape[1], eps)
    w[frame_pad] = 0.0
    w[:, :, -1][frame_pad] = 1.0
    return w


def _band_plan(centres: torch.Tensor, neg_two_var: torch.Tensor, offset: torch.Tensor, frame_pad: torch.Tensor,
               block: int) -> torch.Tensor:
    """Column band of every block of ``block`` frames: ``(batch, blocks, 3)`` int64 ``(j0, j1, pad frames)``.

    A column's weight is exactly 0 (flushed) where its log-density is below -87, i.e. farther than
    ``s * sqrt(2 * (87 - offset))`` from its centre; the band ``[j0, j1)`` holds every
    column that is non-zero somewhere in the block (a superset: margins of half a frame and 0.5 nats).
    Columns outside the band contribute exact zeros, so dropping them changes no number.
    """
    frames = frame_pad.shape[1]
    radius = torch.sqrt(-neg_two_var * torch.clamp(87.5 - offset, min=0.0)) + 0.5
    live = torch.isfinite(offset)
    lo = (centres - radius).unsqueeze(1)
    hi = (centres + radius).unsqueeze(1)
    t0 = torch.arange(0, frames, block, device=centres.device, dtype=centres.dtype)
    t1 = torch.clamp(t0 + block, max=float(frames))
    active = (lo <= (t1 - 0.5).view(1, -1, 1)) & (hi >= (t0 + 0.5).view(1, -1, 1)) & live.unsqueeze(1)
    columns = active.shape[2]
    any_active = active.any(dim=2)
    j0 = torch.where(any_active, active.to(torch.int8).argmax(dim=2), 0)
    j1 = torch.where(any_active, columns - active.flip(2).to(torch.int8).argmax(dim=2), 0)
    pad_cum = torch.nn.functional.pad(torch.cumsum(frame_pad.to(torch.int64), dim=1), [1, 0])
    starts = torch.arange(0, frames, block, device=centres.device)
    ends = torch.clamp(starts + block, max=frames)
    n_pad = pad_cum[:, ends] - pad_cum[:, starts]
    return torch.stack((j0, j1, n_pad), dim=2)


def _block_frames(columns: int, budget: int) -> int:
    return max(1, min(256, budget // max(1, columns)))


def _upsample_banded(emb: torch.Tensor, centres: torch.Tensor, neg_two_var: torch.Tensor, offset: torch.Tensor,
                     frame_pad: torch.Tensor, eps: float, budget: int) -> torch.Tensor:
    """``u = w @ emb`` without autograd: per block of frames, only the band of columns that can be non-zero."""
    batch, frames = frame_pad.shape[0], frame_pad.shape[1]
    u = torch.empty((batch, frames, emb.shape[2]), dtype=emb.dtype, device=emb.device)
    if frames == 0:
        return u
    block = _block_frames(centres.shape[1], budget)
    plan = _band_plan(centres, neg_two_var, offset, frame_pad, block)
    for b in range(batch):
        for k in range(plan.shape[1]):
            j0, j1, n_pad = int(plan[b, k, 0]), int(plan[b, k, 1]), int(plan[b, k, 2])
            t0 = k * block
            t1 = min(frames, t0 + block)
            out = u[b, t0:t1]
            if j1 > j0:
                w = _normalised_weights(centres[b:b + 1, j0:j1], neg_two_var[b:b + 1, j0:j1],
                                        offset[b:b + 1, j0:j1], t0, t1 - t0, eps)
                torch.mm(w[0], emb[b, j0:j1], out=out)
            else:
                out.zero_()
            if n_pad > 0:  # frames of pad: exactly the last column's embedding
                out[frame_pad[b, t0:t1]] = emb[b, -1]
    return u


class _GaussianUpsample(torch.autograd.Function):
    """``u = w @ emb`` whose backward recomputes the banded weights instead of saving ``[B, T, N]``."""

    @staticmethod
    def forward(ctx, emb, centres, neg_two_var, offset, frame_pad, eps, budget):
        ctx.save_for_backward(centres, neg_two_var, offset, frame_pad)
        ctx.eps, ctx.budget = eps, budget
        return _upsample_banded(emb, centres, neg_two_var, offset, frame_pad, eps, budget)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_u):
        centres, neg_two_var, offset, frame_pad = ctx.saved_tensors
        batch, frames = frame_pad.shape
        grad_emb = grad_u.new_zeros((batch, centres.shape[1], grad_u.shape[2]))
        if frames == 0:
            return grad_emb, None, None, None, None, None, None
        block = _block_frames(centres.shape[1], ctx.budget)
        plan = _band_plan(centres, neg_two_var, offset, frame_pad, block).tolist()
        for b in range(batch):
            for k, (j0, j1, n_pad) in enumerate(plan[b]):
                t0 = k * block
                t1 = min(frames, t0 + block)
                g = grad_u[b, t0:t1]
                if n_pad > 0:
                    rows = frame_pad[b, t0:t1]
                    grad_emb[b, -1] += g[rows].sum(dim=0)
                    g = g.masked_fill(rows.unsqueeze(1), 0.0)
                if j1 > j0:
                    w = _normalised_weights(centres[b:b + 1, j0:j1], neg_two_var[b:b + 1, j0:j1],
                                            offset[b:b + 1, j0:j1], t0, t1 - t0, ctx.eps)
                    grad_emb[b, j0:j1].addmm_(w[0].t(), g)
        return grad_emb, None, None, None, None, None, None
