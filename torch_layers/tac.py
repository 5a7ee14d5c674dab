"""Torch ``TAC``: transform-average-concatenate across microphones (FasNet-TAC), asteroid-compatible."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechblocks.tac import check_tac_sizes, tac_activation

from . import activations, norms
from ._state_dict import CheckedLoadStateDict
from ._validation import check_float_tensor

__all__ = ["TAC", "make_activation"]


class PReLU(nn.PReLU):
    """``nn.PReLU`` (same ``weight`` key) with an in-place variant for inference.

    ``inplace(x)`` applies the activation in place when autograd is off (a single-parameter PReLU is a
    leaky ReLU with slope ``weight``: identical values), and out of place otherwise.
    """

    def inplace(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.numel() == 1 and not torch.is_grad_enabled():
            return F.leaky_relu_(x, float(self.weight))
        return self.forward(x)


class Activation(nn.Module):
    """A parameter-free activation by name (``relu, tanh, sigmoid, linear, elu, gelu``) with an in-place
    variant for inference; values as the ``torch.nn`` module of the same name (gelu: exact erf form)."""

    def __init__(self, name: str):
        super().__init__()
        activations.get(name)
        self.name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.name == "relu":
            return torch.relu(x)
        if self.name == "tanh":
            return torch.tanh(x)
        if self.name == "sigmoid":
            return torch.sigmoid(x)
        if self.name == "elu":
            return F.elu(x)
        if self.name == "gelu":
            return F.gelu(x)
        return x

    def inplace(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return self.forward(x)
        if self.name == "relu":
            return x.relu_()
        if self.name == "tanh":
            return x.tanh_()
        if self.name == "sigmoid":
            return x.sigmoid_()
        if self.name == "elu":
            return F.elu_(x)
        return self.forward(x)

    def extra_repr(self) -> str:
        return self.name


def make_activation(name: str, device=None, dtype=None) -> nn.Module:
    """An activation module; ``"prelu"`` is a ``nn.PReLU()`` (one parameter, init 0.25) as asteroid's.

    Args:
        name: one of ``prelu, relu, tanh, sigmoid, linear, elu, gelu``.
        device: factory keyword (PReLU's parameter).
        dtype: factory keyword (PReLU's parameter).

    Returns:
        an ``nn.Module`` with ``forward(x)`` and ``inplace(x)``.
    """
    key = tac_activation(name)
    if key == "prelu":
        return PReLU(num_parameters=1, init=0.25, device=device, dtype=dtype)
    return Activation(key)


class TAC(CheckedLoadStateDict, nn.Module):
    r"""Transform-Average-Concatenate inter-microphone block (Luo et al., ICASSP 2020), asteroid's layout.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    For every time position (``chunk_size`` x ``n_chunks``) and every microphone, the features go
    through ``input_tf`` (Linear ``input_dim -> hidden_dim`` + activation); the transformed features
    are averaged over each example's **valid** microphones and go through ``avg_tf`` (Linear
    ``hidden_dim -> hidden_dim`` + activation); ``concat_tf`` (Linear ``2*hidden_dim -> input_dim`` +
    activation) maps ``concat([own, average])`` back to ``input_dim``; a norm (gLN by default, over
    ``(features, chunk_size, n_chunks)`` of each microphone separately) and a residual connection close
    the block. The state-dict keys are asteroid's: ``input_tf.0.weight``, ``input_tf.0.bias``,
    ``input_tf.1.weight`` (PReLU), ``avg_tf.*``, ``concat_tf.*``, ``norm.gamma``, ``norm.beta``.

    Implementation: ``concat_tf``'s weight is applied as two halves, so the averaged branch is projected
    once per position instead of once per microphone (same maths, no ``(…, 2*hidden_dim)``
    concatenation). At inference (no autograd) every Linear works on the input's own features-major
    layout: the weight sits on the left of a batched GEMM over ``(mics, features,
    chunk_size*n_chunks)``, so neither the input nor the output is permuted; biases are fused into the
    GEMMs (``baddbmm``/``addmm``), the activations, the valid-mic mean, gLN (statistics per mic slot,
    folded with the residual into one scale and one shift per (mic slot, feature)) run in place, and
    ``concat_tf``'s GEMM writes the output buffer. On CPU this runs one example at a time on buffers
    reused across the batch (cache blocking: the ``(mics, hidden_dim, positions)`` activations are
    touched once instead of a fresh batch-sized buffer); on other devices over the whole batch at once
    (padded slots zeroed for the mean after ``concat_tf`` used them). With autograd the same maths runs
    out of place on the rows layout.

    ``valid_mics``: ``None`` means every mic slot is valid. Upstream treats ``valid_mics.max() == 0``
    as "fixed geometry" but then averages over the wrong axis (the ``chunk_size`` axis); here an
    all-zero ``valid_mics`` also means "every mic is valid" and is averaged over the microphones
    (corrected). A zero entry next to non-zero ones, a negative entry, or one above ``mics`` is a
    ``ValueError``. Outputs in padded mic slots are computed as upstream does (from the padded inputs
    and the example's valid-mic mean) and are meaningless; padded inputs never influence valid slots,
    even when they are NaN or inf.

    Export (tested by ``run_torch_module_test``): the ``valid_mics`` check reads its values, so ``torch.export``
    (and ONNX) fail with ``valid_mics``; ``torch.compile`` runs without recompiling per length.

    Args:
        input_dim: number of input features ``F``.
        hidden_dim: size of the hidden transforms.
        activation: ``"prelu"`` (default), ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"linear"``,
            ``"elu"`` or ``"gelu"``.
        norm_type: ``"gLN"`` (default) or ``"cLN"``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> tac = TAC(64, hidden_dim=32).eval()
        >>> tac(torch.randn(2, 4, 64, 10, 3), torch.tensor([4, 2])).shape
        torch.Size([2, 4, 64, 10, 3])
    """

    def __init__(self, input_dim: int, hidden_dim: int = 384, activation: str = "prelu", norm_type: str = "gLN",
                 device=None, dtype=None):
        super().__init__()
        check_tac_sizes(input_dim, hidden_dim)
        norm_cls = norms.get(norm_type)
        self.input_dim = int(input_dim)
        self.hidden_dim = int(hidden_dim)
        self.activation = activation.lower() if isinstance(activation, str) else activation
        self.norm_type = norm_type
        f = dict(device=device, dtype=dtype)
        self.input_tf = nn.Sequential(nn.Linear(self.input_dim, self.hidden_dim, **f),
                                      make_activation(self.activation, **f))
        self.avg_tf = nn.Sequential(nn.Linear(self.hidden_dim, self.hidden_dim, **f),
                                    make_activation(self.activation, **f))
        self.concat_tf = nn.Sequential(nn.Linear(2 * self.hidden_dim, self.input_dim, **f),
                                       make_activation(self.activation, **f))
        self.norm = norm_cls(self.input_dim, **f)
        self._shape_doc = f"(batch, mics, {self.input_dim}, chunk_size, n_chunks)"

    def _mic_counts(self, valid_mics: Optional[torch.Tensor], batch: int, mics: int) -> Optional[torch.Tensor]:
        """Validated ``(batch,)`` valid-mic counts, or None when every mic is valid."""
        if valid_mics is None:
            return None
        if valid_mics.is_floating_point() or valid_mics.is_complex() or valid_mics.dtype == torch.bool:
            raise ValueError("TAC: argument `valid_mics` must be an integer tensor of shape (batch,) = ("
                             + str(batch) + ",); got dtype " + str(valid_mics.dtype) + ".")
        if valid_mics.dim() != 1 or valid_mics.shape[0] != batch:
            raise ValueError("TAC: argument `valid_mics` must have shape (batch,) = (" + str(batch)
                             + ",); got shape " + str(list(valid_mics.shape)) + ".")
        if batch == 0:
            return None
        lo = int(valid_mics.min())
        hi = int(valid_mics.max())
        if hi == 0:
            return None  # upstream's "fixed geometry": every mic, averaged over the mic axis (corrected)
        if lo < 1 or hi > mics:
            raise ValueError("TAC: argument `valid_mics` entries must lie in [1, mics] = [1, " + str(mics)
                             + "] (or all be 0 for a fixed geometry); got entries from " + str(lo) + " to " + str(hi)
                             + ".")
        if lo == mics:
            return None
        return valid_mics

    def forward(self, x: torch.Tensor, valid_mics: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            x: multi-channel features ``(batch, mics, input_dim, chunk_size, n_chunks)``.
            valid_mics: optional integer ``(batch,)``: number of valid (leading) mic slots of each
                example; the rest is padding. ``None`` (or all zeros): every mic is valid.

        Returns:
            ``(batch, mics, input_dim, chunk_size, n_chunks)``: the TAC output plus ``x``.
        """
        check_float_tensor(x, "x", "TAC", 5, -1, self._shape_doc)
        if x.shape[2] != self.input_dim:
            raise ValueError("TAC: argument `x` has " + str(x.shape[2]) + " features on axis 2, expected shape "
                             + self._shape_doc + "; got shape " + str(list(x.shape)) + ".")
        batch, mics, feats, chunk_size, n_chunks = x.shape
        counts = self._mic_counts(valid_mics, batch, mics)
        if not torch.is_grad_enabled():
            if x.device.type == "cpu":
                return self._forward_blocked(x, counts)
            return self._forward_inference(x, counts)
        hid = self.hidden_dim
        lin_in, lin_avg, lin_cat = self.input_tf[0], self.avg_tf[0], self.concat_tf[0]
        # rows (batch, chunk_size, n_chunks, mics) x features: every Linear is one GEMM on the last axis.
        # (Autograd path; without autograd `_forward_inference` runs instead.)
        rows = x.permute(0, 3, 4, 1, 2).reshape(-1, feats)
        h = self.input_tf[1].inplace(torch.addmm(lin_in.bias, rows, lin_in.weight.t()))  # (B*K*L*M, H)
        # concat_tf(concat([h, avg])) = h W[:, :H]^T + avg W[:, H:]^T + b: the own half per mic ...
        own = torch.mm(h, lin_cat.weight[:, :hid].t())  # (B*K*L*M, F)

        # mean over each example's valid mics: one masked reduction over the mic axis
        h5 = h.view(batch, chunk_size, n_chunks, mics, hid)
        if counts is None:
            mean = h5.mean(dim=3)
        else:
            pad = torch.arange(mics, device=x.device).unsqueeze(0) >= counts.to(x.device).unsqueeze(1)
            pad = pad.view(batch, 1, 1, mics, 1)
            # no autograd: h is not needed any more, mask it in place (no second hidden-size buffer)
            h5 = h5.masked_fill(pad, 0.0) if torch.is_grad_enabled() else h5.masked_fill_(pad, 0.0)
            mean = h5.sum(dim=3).div_(counts.to(device=x.device, dtype=h5.dtype).view(batch, 1, 1, 1))
        avg = self.avg_tf[1].inplace(torch.addmm(lin_avg.bias, mean.reshape(-1, hid), lin_avg.weight.t()))
        # ... and the average half once per position, broadcast over the mics
        shared = torch.addmm(lin_cat.bias, avg, lin_cat.weight[:, hid:].t())  # (B*K*L, F)
        y = own.view(batch, chunk_size, n_chunks, mics, feats).add_(shared.view(batch, chunk_size, n_chunks, 1, feats))
        y = self.concat_tf[1].inplace(y)
        y = self.norm(y.permute(0, 3, 4, 1, 2).reshape(batch * mics, feats, chunk_size, n_chunks))
        y = y.view(batch, mics, feats, chunk_size, n_chunks)
        return y + x if torch.is_grad_enabled() else y.add_(x)

    def _forward_blocked(self, x: torch.Tensor, counts: Optional[torch.Tensor]) -> torch.Tensor:
        """CPU inference: the steps of ``_forward_inference`` one example at a time, on per-example buffers
        reused across the batch (cache-sized, touched once), ``concat_tf`` writing into the output."""
        batch, mics, feats, chunk_size, n_chunks = x.shape
        hid = self.hidden_dim
        pos = chunk_size * n_chunks
        lin_in, lin_avg, lin_cat = self.input_tf[0], self.avg_tf[0], self.concat_tf[0]
        xv = x.reshape(batch, mics, feats, pos)  # a view of the input's own layout: no permute
        out = torch.empty((batch, mics, feats, pos), dtype=x.dtype, device=x.device)
        valid: list[int] = [mics] * batch if counts is None else counts.tolist()
        h = torch.empty((mics, hid, pos), dtype=x.dtype, device=x.device)
        mean = torch.empty((hid, pos), dtype=x.dtype, device=x.device)
        avg = torch.empty((hid, pos), dtype=x.dtype, device=x.device)
        shared = torch.empty((feats, pos), dtype=x.dtype, device=x.device)
        w_in = lin_in.weight.expand(mics, hid, feats)
        b_in = lin_in.bias.view(1, hid, 1).expand(mics, hid, pos)
        w_own = lin_cat.weight[:, :hid].expand(mics, feats, hid)
        for b in range(batch):
            v = valid[b]
            torch.baddbmm(b_in, w_in, xv[b], out=h)  # input_tf on every mic slot, bias fused
            self.input_tf[1].inplace(h)
            if v == 1:
                mean.copy_(h[0])
            else:
                torch.sum(h[:v], dim=0, out=mean).div_(v)  # the valid mics are the leading slots
            torch.addmm(lin_avg.bias.view(hid, 1), lin_avg.weight, mean, out=avg)
            self.avg_tf[1].inplace(avg)
            torch.addmm(lin_cat.bias.view(feats, 1), lin_cat.weight[:, hid:], avg, out=shared)  # once per position
            y = out[b]
            torch.baddbmm(shared.expand(mics, feats, pos), w_own, h, out=y)  # own half + broadcast average
            self.concat_tf[1].inplace(y)
            if self.norm_type == "gLN":  # folded with the residual as in _forward_inference
                var, mu = torch.var_mean(y.view(mics, feats * pos), dim=1, correction=0, keepdim=True)
                scale = self.norm.gamma.view(1, feats) * (var + self.norm.eps).rsqrt()
                shift = self.norm.beta.view(1, feats) - mu * scale
                torch.addcmul(xv[b], y, scale.unsqueeze(2), out=y).add_(shift.unsqueeze(2))
            else:
                y.copy_(self.norm(y).add_(xv[b]))
        return out.view(x.shape)

    def _forward_inference(self, x: torch.Tensor, counts: Optional[torch.Tensor]) -> torch.Tensor:
        """Inference (no autograd) off CPU: features-major batched GEMMs over the whole batch, every
        elementwise step in place (see the class docstring). Same maths as the autograd path."""
        batch, mics, feats, chunk_size, n_chunks = x.shape
        hid = self.hidden_dim
        pos = chunk_size * n_chunks
        rows = batch * mics
        lin_in, lin_avg, lin_cat = self.input_tf[0], self.avg_tf[0], self.concat_tf[0]
        xs = x.reshape(rows, feats, pos)  # a view of the input's own layout: no permute
        # input_tf on every mic slot: weight on the left, bias fused into the GEMM
        h = torch.baddbmm(lin_in.bias.view(1, hid, 1).expand(rows, hid, pos),
                          lin_in.weight.expand(rows, hid, feats), xs)
        h = self.input_tf[1].inplace(h)
        # concat_tf's own half on every mic slot, written into the output buffer
        y = torch.bmm(lin_cat.weight[:, :hid].expand(rows, feats, hid), h)
        # mean over each example's valid (leading) mics; padded h has served concat_tf: zero it in place
        h3 = h.view(batch, mics, hid * pos)
        if counts is None:
            mean = h3.sum(dim=1).div_(mics)
        else:
            pad = torch.arange(mics, device=x.device).unsqueeze(0) >= counts.to(x.device).unsqueeze(1)
            h3[pad] = 0.0  # writes the padded slots only
            mean = h3.sum(dim=1)
            mean = mean.div_(counts.to(device=x.device, dtype=x.dtype).unsqueeze(1))
        avg = torch.baddbmm(lin_avg.bias.view(1, hid, 1), lin_avg.weight.expand(batch, hid, hid),
                            mean.view(batch, hid, pos))
        avg = self.avg_tf[1].inplace(avg)
        # concat_tf's averaged half: once per position, broadcast over the mics
        shared = torch.baddbmm(lin_cat.bias.view(1, feats, 1), lin_cat.weight[:, hid:].expand(batch, feats, hid), avg)
        y.view(batch, mics, feats, pos).add_(shared.unsqueeze(1))
        y = self.concat_tf[1].inplace(y)
        if self.norm_type == "gLN":
            # gLN per mic slot over (features, positions), folded with the residual:
            # (y - mu) / sqrt(var + eps) * gamma + beta + x = x + y * scale + shift,
            # scale = gamma / sqrt(var + eps), shift = beta - mu * scale (per mic slot and feature)
            var, mu = torch.var_mean(y.view(rows, feats * pos), dim=1, correction=0, keepdim=True)
            scale = self.norm.gamma.view(1, feats) * (var + self.norm.eps).rsqrt()
            shift = self.norm.beta.view(1, feats) - mu * scale
            y = torch.addcmul(xs, y, scale.unsqueeze(2), out=y).add_(shift.unsqueeze(2))
        else:
            y = self.norm(y).add_(xs)
        return y.view(x.shape)

    def extra_repr(self) -> str:
        return f"input_dim={self.input_dim}, hidden_dim={self.hidden_dim}, norm_type={self.norm_type!r}"
