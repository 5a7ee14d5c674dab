"""Torch ``Tacotron1Decoder``: keithito/tacotron's and mimic2's attention decoder and its ``dynamic_decode`` loops."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechblocks.tacotron1_model import (
    PRENET_DROP_RATE,
    TACOTRON1_SCOPE,
    resolve_tacotron1_model,
    step_limit,
    teacher_forced_steps,
)
from speechblocks.tacotron1_schema import DECODER_CELL, attention_cell_scopes

from . import _mkl_threads, _native
from ._functional import tf1_dropout
from ._validation import check_float_tensor
from .bahdanau_attention import BahdanauAttention, attend, bahdanau_scores, score_mask
from .decoding_plan import plan_decoding
from .location_sensitive_attention import check_memory_lengths
from .mimic2_location_attention import Mimic2LocationAttention, location_term
from .prenet import Prenet
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1
from .tf1_gru_cell import TF1GRUCell, gru_step

__all__ = ["Tacotron1Decoder"]

_BLOCK = "Tacotron1Decoder"


def prenet_apply(x: Tensor, weights: list[Tensor], biases: list[Tensor], masks: list[Tensor], t: int,
                 rate: float) -> Tensor:
    """The decoder pre-net (relu dense layers, kernels ``(in, out)``) of step ``t`` (``t < 0``: of every step,
    ``x`` ``(batch, steps, in)``); layer ``i`` drops out with ``masks[i]`` (``(batch, steps, units)``; empty: a
    random mask at ``rate``, none at rate 0)."""
    for i in range(len(weights)):
        # one step (2-D): the bias inside the product (addmm, one kernel; the same sum in another order)
        x = torch.relu(torch.addmm(biases[i], x, weights[i]) if x.dim() == 2 else torch.matmul(x, weights[i])
                       + biases[i])
        mask = masks[i]
        if mask.numel() > 0:
            mask = mask[:, t] if t >= 0 else mask[:, :x.shape[1]]
            x = tf1_dropout(x, 0.5, mask.to(x.dtype))
        elif rate > 0.0:
            x = tf1_dropout(x, rate)
    return x


def decoder_step(x: Tensor, t: int, state: list[Tensor], memory: Tensor, keys: Tensor, mask: Optional[Tensor],
                 pre: Optional[Tensor], prenet_w: list[Tensor], prenet_b: list[Tensor], masks: list[Tensor],
                 rate: float, w: list[Tensor], loc_kernel: Optional[Tensor], pad_before: int, pad_after: int,
                 prenet_outside: bool) -> tuple[Tensor, list[Tensor]]:
    """One decoder step (the class docstring's maths). ``state``: ``[h_att, context, alignments, h1, h2]``;
    ``pre``: this step's pre-net output when computed ahead; ``w``: the three GRUs' ``[gates_t, gates_b, cand_t,
    cand_b]`` then ``query_t, v, w0_t, b0, wo_t, bo``. Returns ``(frames, new_state)``."""
    h_att, context, align, h1, h2 = state[0], state[1], state[2], state[3], state[4]
    if pre is not None:
        cell_in = torch.cat([pre, context], 1)
    elif prenet_outside:
        cell_in = torch.cat([prenet_apply(x, prenet_w, prenet_b, masks, t, rate), context], 1)
    else:
        cell_in = prenet_apply(torch.cat([x, context], 1), prenet_w, prenet_b, masks, t, rate)
    h_att = gru_step(cell_in, h_att, w[0], w[1], w[2], w[3])
    k = keys
    if loc_kernel is not None:
        k = keys + location_term(align, loc_kernel, pad_before, pad_after)
    context, align = attend(bahdanau_scores(k, torch.mm(h_att, w[12]), w[13]), memory, mask)
    out = torch.addmm(w[15], torch.cat([h_att, context], 1), w[14])
    h1 = gru_step(out, h1, w[4], w[5], w[6], w[7])
    out = out + h1
    h2 = gru_step(out, h2, w[8], w[9], w[10], w[11])
    frames = torch.addmm(w[17], out + h2, w[16])
    return frames, [h_att, context, align, h1, h2]


def decode(memory: Tensor, keys: Tensor, mask: Optional[Tensor], limit: int, inputs: Optional[Tensor],
           pre_all: Optional[Tensor], prenet_w: list[Tensor], prenet_b: list[Tensor], masks: list[Tensor],
           rate: float, w: list[Tensor], loc_kernel: Optional[Tensor], pad_before: int, pad_after: int,
           prenet_outside: bool, state: list[Tensor], num_mels: int) -> tuple[Tensor, Tensor]:
    """``dynamic_decode`` from ``state``: ``limit`` teacher-forced steps over ``inputs`` ``(batch, steps,
    num_mels)``, or up to ``limit`` free-running steps ending when every row has had an all-zero step (one host
    sync a step). Returns ``(frames (batch, steps, num_mels * r), alignments (batch, T_in, steps))``."""
    x = memory.new_zeros(memory.shape[0], num_mels)  # the GO frame
    finished = torch.zeros(memory.shape[0], dtype=torch.bool, device=memory.device)
    frames_out: list[Tensor] = []
    aligns: list[Tensor] = []
    for t in range(limit):
        pre: Optional[Tensor] = None
        if pre_all is not None:
            pre = pre_all[:, t]
        if inputs is not None:
            x = inputs[:, t]
        frames, state = decoder_step(x, t, state, memory, keys, mask, pre, prenet_w, prenet_b, masks, rate, w,
                                     loc_kernel, pad_before, pad_after, prenet_outside)
        frames_out.append(frames)
        aligns.append(state[2])
        if inputs is None:
            x = frames[:, frames.shape[1] - num_mels:]
            finished = finished | (frames == 0).all(1)
            if bool(finished.all()):  # the one host sync of a free-running step
                break
    return torch.stack(frames_out, 1), torch.stack(aligns, 2)


class Tacotron1Decoder(TF1WeightsMixin, nn.Module):
    """The Tacotron-1 decoder as keithito/tacotron and mimic2 build it: decoder pre-net, attention GRU, attention
    (content-only :class:`BahdanauAttention` for the keithito layouts, :class:`Mimic2LocationAttention` for
    mimic2), ``cell_0``'s output projection of ``[h_att, context]``, two residual GRUs and the projection to ``r``
    frames, run by TF contrib's ``dynamic_decode`` (``impute_finished=False``).

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    One step from the state ``(h_att, context, previous alignments, h1, h2)`` (zeros at the start) and the input
    frame ``x`` (the all-zero GO frame first)::

        cell_in = concat(prenet(x), context)      # layout keithito-20180906 (pre-net outside the AttentionWrapper)
        cell_in = prenet(concat(x, context))      # layouts keithito-20170720 and mimic2 (pre-net inside)
        h_att = GRU(cell_in, h_att);  context, alignments = attention(h_att, keys, memory, previous alignments)
        out0 = [h_att, context] @ W0 + b0;  out1 = out0 + GRU1(out0, h1);  out2 = out1 + GRU2(out1, h2)
        frames = out2 @ W_out + b_out             # (batch, num_mels * r)

    Teacher forcing (``mel_targets`` given, any mode): step ``t >= 1`` reads target frame ``t * r - 1``;
    ``min(T_out // r, max_iters)`` steps. Free running: the next input is the step's last frame; a row is finished
    once all its ``num_mels * r`` outputs are exactly 0.0 (and stays finished; finished rows keep being computed and
    returned); the loop ends when every row is finished or after ``max_iters`` steps. The check costs one host sync
    per step (one ``.all()`` of a boolean vector).

    The pre-net's dropout (rate 0.5) is on in ``train()`` only; injected keep-masks replace it in either mode. Keys
    (``memory @ memory_layer``), the location kernel and the teacher-forced 20180906 pre-net are computed once per
    call; the loop (:func:`decode`, TorchScript, compiled once a process on first use; autograd runs through it)
    runs no input checks, its GRU steps :func:`~torch_layers.tf1_gru_cell.gru_step` (:class:`TF1GRUCell`'s own step).
    Free-running inference in float32 on the CPU (``eval()``, no gradient recorded, no injected pre-net masks) runs
    the whole loop in one native C call instead (``speechblocks/native/tacotron1_step.c``, the same numbers to float32
    rounding; :func:`torch_layers.decoding_plan.plan_decoding` says which loop a call runs and why,
    ``SPEECHBLOCKS_NATIVE=0`` turns it off).

    TF1 variables (names relative to ``model/inference``, :attr:`tf1_scope`): ``memory_layer/kernel`` and
    everything under ``decoder/`` of :func:`speechblocks.tacotron1_schema.tf1_variable_shapes`.

    Args:
        hparams: anything :func:`speechblocks.resolve_tacotron1_hparams` takes, or a ``Tacotron1HParams``.
        layout: ``"keithito-20170720"``, ``"keithito-20180906"`` or ``"mimic2"``; ``None``: the variant's own.
        mask_memory: mask the attention scores past ``memory_lengths`` (not the original; default False).
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> dec = Tacotron1Decoder("keithito", num_mels=6, outputs_per_step=2, max_iters=3).eval()
        >>> frames, align = dec(torch.randn(1, 7, 256))
        >>> frames.shape[2], align.shape[:2]
        (12, torch.Size([1, 7]))
    """

    #: what :func:`torch_layers.decoding_plan.plan_decoding` plans this decoder as
    decoder_family = "tacotron1"

    def __init__(self, hparams="keithito", layout: Optional[str] = None, *, mask_memory: bool = False,
                 device=None, dtype=None, **overrides):
        super().__init__()
        hp, layout = resolve_tacotron1_model(hparams, layout, **overrides)
        self.hparams, self.layout, self.tf1_scope = hp, layout, TACOTRON1_SCOPE
        self.mask_memory = bool(mask_memory)
        self.prenet_outside = layout == "keithito-20180906"
        scopes = attention_cell_scopes(layout)
        m, e, a, d = hp.num_mels, hp.memory_size, hp.attention_depth, hp.decoder_depth
        self.num_mels, self.memory_size, self.outputs_per_step = m, e, hp.outputs_per_step
        factory = {"device": device, "dtype": dtype}
        self.prenet = Prenet(m if self.prenet_outside else m + e, hp.prenet_depths, PRENET_DROP_RATE, "relu",
                             tf1_scope=scopes["prenet"], dropout="training", **factory)
        gru_in = hp.prenet_depths[-1] + (e if self.prenet_outside else 0)
        self.attention_gru = TF1GRUCell(gru_in, a, scopes["gru"], **factory)
        if hp.attention == "location_sensitive":
            self.attention = Mimic2LocationAttention(a, memory_size=e, query_size=a, filters=hp.location_filters,
                                                     kernel_size=hp.location_kernel_size, mask_memory=mask_memory,
                                                     tf1_scope=scopes["attention"], **factory)
        else:
            self.attention = BahdanauAttention(a, memory_size=e, query_size=a, mask_memory=mask_memory,
                                               tf1_scope=scopes["attention"], **factory)
        self.cell0_projection = nn.Linear(a + e, d, **factory)
        self.gru1 = TF1GRUCell(d, d, f"{DECODER_CELL}/cell_1/gru_cell", **factory)
        self.gru2 = TF1GRUCell(d, d, f"{DECODER_CELL}/cell_2/gru_cell", **factory)
        self.output_projection = nn.Linear(d, m * hp.outputs_per_step, **factory)
        for lin in (self.cell0_projection, self.output_projection):  # TF1 _linear: Glorot-uniform, zero bias
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, memory: Tensor, memory_lengths: Optional[Tensor] = None, mel_targets: Optional[Tensor] = None,
                max_iters: Optional[int] = None, noise_masks: Optional[dict] = None) -> tuple[Tensor, Tensor]:
        """Runs the decoder loop.

        Args:
            memory: ``(batch, T_in, memory_size)`` encoder outputs.
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``; used only with ``mask_memory``.
            mel_targets: ``(batch, T_out >= r, num_mels)``: teacher forcing; ``None``: free running.
            max_iters: step cap ``>= 1`` (default ``hparams.max_iters``; it caps teacher forcing too).
            noise_masks: optional dict; its ``"decoder_prenet"`` entry is a list of one 0/1 keep-mask per pre-net
                layer (``None`` entries allowed), mask ``i`` of shape ``(batch, >= steps, prenet_depths[i])``; step
                ``t`` uses ``[:, t]`` (free running: at least ``max_iters`` steps). Other keys are ignored.

        Returns:
            ``(frames, alignments)``: ``(batch, steps, num_mels * r)`` and ``(batch, T_in, steps)``.
        """
        limit = self._check_inputs(memory, memory_lengths, mel_targets, max_iters)
        masks = self._prenet_masks(noise_masks, memory.shape[0], limit)
        mask = None
        if self.mask_memory and memory_lengths is not None:
            mask = score_mask(memory_lengths, memory.shape[1], memory.device)
        keys = F.linear(memory, self.attention.memory_layer.weight)
        inputs = None
        if mel_targets is not None:
            r = self.outputs_per_step
            inputs = torch.cat([memory.new_zeros(memory.shape[0], 1, self.num_mels),
                                mel_targets[:, r - 1::r][:, :limit - 1].to(memory.dtype)], 1)
        return self._loop(memory, keys, mask, limit, inputs, masks)

    def _check_inputs(self, memory: Tensor, memory_lengths: Optional[Tensor], mel_targets: Optional[Tensor],
                      max_iters: Optional[int]) -> int:
        """Checks :meth:`forward`'s arguments once; returns the number of steps (teacher forcing) or the cap."""
        e, m = self.memory_size, self.num_mels
        check_float_tensor(memory, "memory", _BLOCK, 3, e, f"(batch, T_in, {e})")
        if memory.shape[1] < 1:
            raise ValueError(f"{_BLOCK}: argument `memory` must have T_in >= 1, expected shape (batch, T_in, {e}); "
                             f"got shape {list(memory.shape)}.")
        if memory_lengths is not None:
            check_memory_lengths(memory_lengths, "memory_lengths", _BLOCK, memory.shape[0], memory.shape[1])
        if mel_targets is None:
            return step_limit(max_iters, self.hparams)
        check_float_tensor(mel_targets, "mel_targets", _BLOCK, 3, m, f"(batch, T_out, {m})")
        if mel_targets.shape[0] != memory.shape[0]:
            raise ValueError(f"{_BLOCK}: argument `mel_targets` must have shape (batch={memory.shape[0]}, T_out, "
                             f"{m}); got shape {list(mel_targets.shape)}.")
        return teacher_forced_steps(mel_targets.shape[1], self.hparams, max_iters)

    def _prenet_masks(self, noise_masks: Optional[dict], batch: int, steps: int) -> list[Optional[Tensor]]:
        """The decoder pre-net's keep-masks per layer (``None`` where not injected), shapes checked."""
        sizes = self.prenet.layers_sizes
        given = None if noise_masks is None else noise_masks.get("decoder_prenet")
        if given is None:
            return [None] * len(sizes)
        if not isinstance(given, (list, tuple)) or len(given) != len(sizes):
            raise ValueError(f"{_BLOCK}: argument `noise_masks['decoder_prenet']` must be a list of {len(sizes)} "
                             f"keep-masks, one per pre-net layer; got {type(given).__name__} of "
                             f"{len(given) if isinstance(given, (list, tuple)) else 'no'} entries.")
        for i, mask in enumerate(given):
            if mask is not None and (not isinstance(mask, Tensor) or mask.dim() != 3 or mask.shape[0] != batch
                                     or mask.shape[1] < steps or mask.shape[2] != sizes[i]):
                got = list(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__
                raise ValueError(f"{_BLOCK}: argument `noise_masks['decoder_prenet'][{i}]` must have shape "
                                 f"(batch={batch}, steps >= {steps}, {sizes[i]}); got {got}.")
        return list(given)

    def _weights(self) -> tuple[list[Tensor], list[Tensor], list[Tensor], Optional[Tensor]]:
        """The loop's weights: pre-net kernels ``(in, out)`` and biases, the ``w`` list of :func:`decoder_step`,
        the fused location kernel (mimic2) or ``None``."""
        prenet_w = [layer.weight.t() for layer in self.prenet.layers]
        prenet_b = [layer.bias for layer in self.prenet.layers]
        w: list[Tensor] = []
        for cell in (self.attention_gru, self.gru1, self.gru2):
            w += [cell.gates.weight.t(), cell.gates.bias, cell.candidate.weight.t(), cell.candidate.bias]
        w += [self.attention.query_layer.weight.t(), self.attention.attention_v,
              self.cell0_projection.weight.t(), self.cell0_projection.bias,
              self.output_projection.weight.t(), self.output_projection.bias]
        loc = None
        if isinstance(self.attention, Mimic2LocationAttention):
            loc = self.attention.fused_location_kernel()
        return prenet_w, prenet_b, w, loc

    def _loop(self, memory: Tensor, keys: Tensor, mask: Optional[Tensor], limit: int, inputs: Optional[Tensor],
              masks: list[Optional[Tensor]]) -> tuple[Tensor, Tensor]:
        """Runs the loop :func:`torch_layers.decoding_plan.plan_decoding` names from the zero state: free-running
        inference in float32 on the CPU (no gradient recorded, no injected pre-net masks) the native loop
        (:func:`torch_layers._native.tacotron1_decode`, ``SPEECHBLOCKS_NATIVE=0`` turns it off), else :func:`decode`
        (TorchScript); returns ``(frames, alignments)``."""
        if inputs is None:
            if plan_decoding(self, memory, noise_masks={"decoder_prenet": masks}).native:
                return _native.tacotron1_decode(self, memory, keys, mask, limit)
        prenet_w, prenet_b, w, loc = self._weights()
        empty = memory.new_zeros(0)
        keeps = [empty if m is None else m for m in masks]
        rate = PRENET_DROP_RATE if self.training else 0.0
        pre_all = None
        if inputs is not None and self.prenet_outside:
            pre_all = _scripted("prenet_apply")(inputs, prenet_w, prenet_b, keeps, -1, rate)
        batch, max_time = memory.shape[0], memory.shape[1]
        state = [memory.new_zeros(batch, self.attention_gru.num_units), memory.new_zeros(batch, self.memory_size),
                 memory.new_zeros(batch, max_time), memory.new_zeros(batch, self.gru1.num_units),
                 memory.new_zeros(batch, self.gru2.num_units)]
        att = self.attention
        before, after = (att.pad_before, att.pad_after) if loc is not None else (0, 0)
        with _mkl_threads.single_threaded_mkl():  # this thread's MKL count 1 during the loop (thread-local, restored)
            return _scripted("decode")(memory, keys, mask, limit, inputs, pre_all, prenet_w, prenet_b, keeps, rate,
                                       w, loc, before, after, self.prenet_outside, state, self.num_mels)

    def extra_repr(self) -> str:
        hp = self.hparams
        return (f"layout={self.layout!r}, num_mels={hp.num_mels}, outputs_per_step={hp.outputs_per_step}, "
                f"attention={hp.attention!r}, mask_memory={self.mask_memory}")

    def _tf1_variables(self) -> dict[str, TF1Variable]:
        out: dict[str, TF1Variable] = {}
        att = self.attention._tf1_variables()
        out["memory_layer/kernel"] = att.pop("memory_layer/kernel")  # made where the mechanism was built
        for module, names in ((self.prenet, self.prenet._tf1_variables()), (self.attention, att),
                              (self.attention_gru, self.attention_gru._tf1_variables()),
                              (self.gru1, self.gru1._tf1_variables()), (self.gru2, self.gru2._tf1_variables())):
            out.update({f"{module.tf1_scope}/{k}": v for k, v in names.items()})
        for scope, lin in ((f"{DECODER_CELL}/cell_0/output_projection_wrapper", self.cell0_projection),
                           ("decoder/output_projection_wrapper", self.output_projection)):
            out[f"{scope}/kernel"] = TF1Variable(lin.weight, dense_to_tf1, dense_from_tf1)
            out[f"{scope}/bias"] = TF1Variable(lin.bias)
        return out


_SCRIPTED: dict = {}


def _scripted(name: str):
    """The TorchScript form of :func:`decode` or :func:`prenet_apply`, compiled on first use (once a process)."""
    if name not in _SCRIPTED:
        _SCRIPTED[name] = torch.jit.script({"decode": decode, "prenet_apply": prenet_apply}[name])
    return _SCRIPTED[name]
