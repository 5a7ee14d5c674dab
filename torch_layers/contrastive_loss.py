"""Torch ``ContrastiveLoss``: the wav2vec-style self-supervised contrastive loss of NeMo, without NeMo."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

# common: the framework-free part (options, checks, message texts), shared with the other framework's twin
from speechblocks import contrastive_loss as common

from ._state_dict import CheckedLoadStateDict
from ._validation import check_float_tensor, check_lengths
from .gumbel_vector_quantizer import GumbelVectorQuantizer


class ContrastiveLoss(CheckedLoadStateDict, nn.Module):
    """Contrastive task: find the true latent of every masked spectrogram step among sampled distractors.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    Same numbers as NeMo's ``ContrastiveLoss`` (``nemo.collections.asr.losses.ssl_losses.contrastive``):

    1. targets ``spectrograms^T`` (and ``spec_masks^T``) are zero-padded at the end to a multiple of the
       decoder length ``T'`` and ``combine_time_steps`` consecutive frames are stacked into one step;
    2. targets go through ``target_proj`` (a Linear) or the :class:`GumbelVectorQuantizer`;
    3. a step is masked when the mean of its mask values is ``> mask_threshold``;
    4. ``num_negatives`` distractors per masked step are drawn without replacement (same time indices for
       every utterance with ``sample_from_same_utterance_only``, else over the whole batch), from the masked
       steps or from all steps (``sample_from_non_masked``), or from the codebook
       (``sample_from_codebook``), or are the whole codebook (``group_loss``);
    5. logits are cosine similarities (computed in float32) divided by ``logit_temp``; a distractor equal to
       the positive gets ``-inf``; cross entropy with the positive at index 0 (``reduce``);
    6. quantized targets add ``prob_ppl_weight * prob_ppl_loss * num_targets``; the total is multiplied by
       ``multiplier / batch``.

    Differences from upstream, all where upstream cannot run: bad shapes and impossible sampling requests
    raise a ``ValueError`` naming the argument (upstream fails deep inside torch or, for same-utterance
    sampling with unequal numbers of masked steps, silently mixes utterances when the total happens to
    divide); ``group_loss`` uses each group's codebook -- upstream reshapes the shared codebook into
    ``(groups, num_vars, vq_dim / groups**2)`` and fails unless ``num_groups == 1``, where both agree.
    The similarities are computed without materialising the negatives (same values to float rounding).
    "Equal to the positive" is decided on the stacked spectrogram steps before ``target_proj`` (on the
    quantized vectors, exact codebook rows, with quantized targets): upstream compares the projected
    vectors, and whether a CPU BLAS gives two identical frames bit-identical projections depends on where
    they fall in its blocking, so upstream's ``-inf`` for duplicated frames is accidental; here it is not.

    Randomness: negatives come from ``generator`` (constructor or ``forward`` keyword; the global RNG when
    both are None, drawing exactly as upstream); ``negative_indices`` and ``gumbel_noise`` replace the draws.
    After each call ``self.negative_indices`` holds the indices used.

    ``DistributedDataParallel``: the loss is a sum over the rank's targets times ``multiplier / batch`` (the
    rank's batch), so with equal batches on every rank DDP's gradient average equals the single-process
    gradient on the global batch when the distractors agree -- same-utterance sampling draws from each
    utterance's own steps, as one process does (inject ``negative_indices`` to reproduce a single-process run).
    Batch-wide sampling draws from the rank's own batch (a smaller pool than one process's), and quantized targets'
    perplexity term is the rank's own (each rank's codebook usage), as upstream under DDP.

    Export (tested by ``run_torch_module_test``): the masked steps per utterance (a count read from
    ``spec_masks``) shape the logits, so ``torch.export`` fails. ``torch.compile`` (``aot_eager``) fails when the
    length turns dynamic (torch 2.13: a view of the masked frames in AOTAutograd); ``dynamic=True`` from the start
    and the ``eager`` backend run.

    Args:
        in_dim: spectrogram channels ``D``.
        proj_dim: channels of the decoder outputs (and of the projected / quantized targets).
        combine_time_steps: spectrogram frames stacked into one decoder step.
        num_negatives: distractors per target.
        quantized_targets: quantize the targets with a Gumbel vector quantizer instead of projecting them.
        codebook_size: codebook entries per group.
        prob_ppl_weight: weight of the quantizer's perplexity loss.
        logit_temp: temperature dividing the cosine similarities.
        reduce: cross-entropy reduction, ``"sum"``, ``"mean"`` or ``"none"``.
        sample_from_same_utterance_only: draw distractors from the same utterance only.
        sample_from_non_masked: draw distractors from all steps, not only the masked ones.
        sample_from_codebook: (batch-wide sampling, quantized) draw distractors from the codebook.
        group_loss: (batch-wide sampling, quantized) contrast each group against its whole codebook.
        num_groups: quantizer groups.
        quantizer_temp_start, quantizer_temp_min, quantizer_temp_decay: Gumbel temperature schedule.
        mask_threshold: a step is masked when the mean of its mask values exceeds this.
        store_ids: keep the quantizer ids in ``self.target_ids``.
        reduce_ids: collapse runs of equal ids (``self.target_ids``, ``self.target_lengths``).
        multiplier: factor of the final loss (divided by the batch size).
        generator: default ``torch.Generator`` of the negative sampling and the Gumbel noise.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> loss_fn = ContrastiveLoss(in_dim=4, proj_dim=8, num_negatives=3)
        >>> spec = torch.randn(2, 4, 10)
        >>> masks = torch.zeros(2, 4, 10); masks[:, :, 2:7] = 1
        >>> loss_fn(spec, masks, torch.randn(2, 10, 8)).shape
        torch.Size([])
    """

    target_ids: Optional[torch.Tensor]
    target_lengths: Optional[torch.Tensor]
    negative_indices: Optional[torch.Tensor]
    generator: Optional[torch.Generator]

    def __init__(
        self,
        in_dim: int,
        proj_dim: int = 128,
        combine_time_steps: int = 1,
        num_negatives: int = 100,
        quantized_targets: bool = False,
        codebook_size: int = 320,
        prob_ppl_weight: float = 0.1,
        logit_temp: float = 0.1,
        reduce: str = "sum",
        sample_from_same_utterance_only: bool = True,
        sample_from_non_masked: bool = False,
        sample_from_codebook: bool = False,
        group_loss: bool = False,
        num_groups: int = 2,
        quantizer_temp_start: float = 2,
        quantizer_temp_min: float = 0.5,
        quantizer_temp_decay: float = 0.999995,
        mask_threshold: float = 0.8,
        store_ids: bool = True,
        reduce_ids: bool = False,
        multiplier: float = 16.0,
        generator: Optional[torch.Generator] = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        common.check_contrastive_arguments(in_dim, proj_dim, combine_time_steps, num_negatives, codebook_size,
                                           num_groups, reduce, logit_temp, quantized_targets, group_loss,
                                           sample_from_codebook)
        self.in_dim = int(in_dim)
        self.proj_dim = int(proj_dim)
        self.quantized_targets = bool(quantized_targets)
        self.num_negatives = int(num_negatives)
        self.codebook_size = int(codebook_size)
        self.num_groups = int(num_groups)
        self.prob_ppl_weight = float(prob_ppl_weight)
        self.logit_temp = float(logit_temp)
        self.reduce = reduce
        self.combine_time_steps = int(combine_time_steps)
        self.sample_from_same_utterance_only = bool(sample_from_same_utterance_only)
        self.sample_from_non_masked = bool(sample_from_non_masked)
        self.sample_from_codebook = bool(sample_from_codebook)
        self.group_loss = bool(group_loss)
        self.mask_threshold = float(mask_threshold)
        self.multiplier = float(multiplier)
        self.store_ids = bool(store_ids)
        self.reduce_ids = bool(reduce_ids)
        self.generator = generator
        self.target_ids = None
        self.target_lengths = None
        self.negative_indices = None
        if self.quantized_targets:
            self.quantizer = GumbelVectorQuantizer(
                dim=in_dim * combine_time_steps, num_vars=codebook_size,
                temp=(quantizer_temp_start, quantizer_temp_min, quantizer_temp_decay), groups=num_groups,
                combine_groups=True, vq_dim=proj_dim, time_first=True, device=device, dtype=dtype)
        else:
            self.target_proj = nn.Linear(in_dim * combine_time_steps, proj_dim, device=device, dtype=dtype)

    def set_num_updates(self, num_updates: int) -> None:
        """Advances the quantizer temperature schedule (no-op without quantized targets)."""
        if self.quantized_targets:
            self.quantizer.set_num_updates(num_updates)

    # -- sampling -----------------------------------------------------------------------------------
    @torch.jit.unused
    def sample_negatives(self, y: torch.Tensor, num: int, generator: Optional[torch.Generator] = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """Upstream's helper: ``num_negatives`` rows of ``y`` per target, without replacement.

        Args:
            y: candidates ``(T, ...)``.
            num: number of targets.
            generator: optional ``torch.Generator``.

        Returns:
            ``(negatives (num_negatives, num, ...), indices (num, num_negatives))``.
        """
        idx = self._draw(num, y.shape[0], generator, "sample_negatives", y.device)
        negs = y[idx.reshape(-1)].view((num, self.num_negatives) + tuple(y.shape[1:])).transpose(0, 1)
        return negs, idx

    def _draw(self, num: int, high: int, generator: Optional[torch.Generator], where: str,
              device: torch.device) -> torch.Tensor:
        if num > 0 and self.num_negatives > high:
            raise ValueError(common.too_few_candidates_message(self.num_negatives, high, where))
        if num == 0:
            return torch.zeros([0, self.num_negatives], dtype=torch.long, device=device)
        return torch.multinomial(torch.ones([num, high], device=device), self.num_negatives, generator=generator)

    def _indices(self, given: Optional[torch.Tensor], num: int, high: int, generator: Optional[torch.Generator],
                 where: str, device: torch.device) -> torch.Tensor:
        if given is None:
            return self._draw(num, high, generator, where, device)
        if (given.is_floating_point() or given.dim() != 2 or given.shape[0] != num
                or given.shape[1] != self.num_negatives):
            raise ValueError("ContrastiveLoss: argument `negative_indices` must be an integer tensor of shape "
                             "(num_targets, num_negatives) = (" + str(num) + ", " + str(self.num_negatives)
                             + ") for " + where + "; got " + str(given.dtype) + " " + str(list(given.shape)) + ".")
        if given.numel() > 0 and (int(given.min()) < 0 or int(given.max()) >= high):
            raise ValueError(common.indices_range_message(high, where))
        return given.to(device=device, dtype=torch.long)

    # -- forward ------------------------------------------------------------------------------------
    def forward(self, spectrograms: torch.Tensor, spec_masks: torch.Tensor, decoder_outputs: torch.Tensor,
                decoder_lengths: Optional[torch.Tensor] = None, negative_indices: Optional[torch.Tensor] = None,
                gumbel_noise: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """
        Args:
            spectrograms: ``(batch, in_dim, time)``.
            spec_masks: ``(batch, in_dim, time)``, 1 where the spectrogram was masked (float or bool).
            decoder_outputs: ``(batch, time', proj_dim)`` with ``ceil(time / time') == combine_time_steps``.
            decoder_lengths: optional ``(batch,)``; accepted and unused, as upstream.
            negative_indices: optional int64 indices replacing the draw: ``(masked steps per utterance,
                num_negatives)`` into the utterance's candidate steps (same-utterance sampling),
                ``(masked steps, num_negatives)`` into the batch's candidates (masked steps or all
                ``batch * time'`` steps, row-major), or ``(num_negatives, masked steps)`` into the
                ``codebook_size ** num_groups`` codebook vectors (``sample_from_codebook``).
            gumbel_noise: optional Gumbel noise ``(batch, time', num_groups, codebook_size)`` for the
                quantizer in training.
            generator: optional ``torch.Generator`` overriding the constructor's.

        Returns:
            the loss: a scalar, or ``(num_targets,)`` with ``reduce="none"``.
        """
        gen = generator if generator is not None else self.generator
        spec_doc = "(batch, " + str(self.in_dim) + ", time)"
        check_float_tensor(spectrograms, "spectrograms", "ContrastiveLoss", 3, -1, spec_doc)
        if spectrograms.shape[1] != self.in_dim:
            raise ValueError("ContrastiveLoss: argument `spectrograms` must have shape " + spec_doc + "; got shape "
                             + str(list(spectrograms.shape)) + ".")
        if list(spec_masks.shape) != list(spectrograms.shape):
            raise ValueError("ContrastiveLoss: argument `spec_masks` must have the shape of `spectrograms` " + spec_doc
                             + " = " + str(list(spectrograms.shape)) + "; got " + str(list(spec_masks.shape)) + ".")
        check_float_tensor(decoder_outputs, "decoder_outputs", "ContrastiveLoss", 3, self.proj_dim,
                           "(batch, time', " + str(self.proj_dim) + ")")
        bsz, steps = spectrograms.shape[0], spectrograms.shape[2]
        t_dec = decoder_outputs.shape[1]
        k = self.combine_time_steps
        if decoder_outputs.shape[0] != bsz:
            raise ValueError(common.batch_mismatch_message(decoder_outputs.shape[0], bsz))
        if t_dec < 1 or (steps + t_dec - 1) // t_dec != k:
            raise ValueError(common.steps_mismatch_message(t_dec, steps, k))
        if decoder_lengths is not None:
            check_lengths(decoder_lengths, "decoder_lengths", "ContrastiveLoss", bsz)

        # (B, D, T) -> (B, T', k*D): pad the end, stack k consecutive frames
        targets = F.pad(spectrograms.transpose(1, 2), [0, 0, 0, k * t_dec - steps])
        masks = spec_masks.to(spectrograms.dtype) if spec_masks.dtype == torch.bool else spec_masks
        masks = F.pad(masks.transpose(1, 2), [0, 0, 0, k * t_dec - steps])
        targets = targets.reshape(bsz, t_dec, k * self.in_dim)
        masked = masks.reshape(bsz, t_dec, k * self.in_dim).mean(-1) > self.mask_threshold

        prob_ppl_loss: Optional[torch.Tensor] = None
        if hasattr(self, "quantizer"):
            targets, prob_ppl_loss, ids = self.quantizer.quantize_frames(targets, gumbel_noise, gen)
            if self.store_ids:
                self._store_ids(ids)
            keys = targets  # quantized targets are exact codebook rows: compare them directly
        else:
            # equal steps <=> equal targets, decided before the projection: the projection's last bits for
            # identical rows depend on the BLAS kernel's blocking (upstream's test is accidental there)
            keys = targets
            targets = self.target_proj(targets)

        if self.sample_from_same_utterance_only:
            logits = self._same_utterance_logits(decoder_outputs, targets, keys, masked, negative_indices, gen)
        else:
            out_m, tgt_m = decoder_outputs[masked], targets[masked]
            codebook_logits: Optional[torch.Tensor] = None
            if hasattr(self, "quantizer"):
                if self.group_loss:
                    self.negative_indices = None
                    codebook_logits = self._group_logits(self.quantizer.codebook(), out_m, tgt_m)
                elif self.sample_from_codebook:
                    n = out_m.shape[0]
                    if n >= self.quantizer.codebook_size():
                        self.quantizer.sample_from_codebook(self.num_negatives, n)  # raises the ValueError
                    if negative_indices is None:
                        negative_indices = torch.randint(0, self.quantizer.codebook_size(), [self.num_negatives, n],
                                                         generator=gen, device=out_m.device)
                    negs = self.quantizer.sample_from_codebook(self.num_negatives, n, gen, negative_indices)
                    self.negative_indices = negative_indices
                    codebook_logits = _explicit_logits(out_m, tgt_m, negs, self.logit_temp)
            if codebook_logits is None:
                logits = self._batch_logits(out_m, tgt_m, targets, keys, masked, negative_indices, gen)
            else:
                logits = codebook_logits

        labels = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
        loss = F.cross_entropy(logits, labels, reduction=self.reduce)
        if self.prob_ppl_weight != 0 and prob_ppl_loss is not None:
            loss = loss + self.prob_ppl_weight * prob_ppl_loss * labels.numel()
        return loss * (self.multiplier / bsz)

    def _store_ids(self, ids: torch.Tensor) -> None:
        if not self.reduce_ids:
            self.target_ids = ids
            self.target_lengths = None
            return
        # run index of every step within its utterance -> collapse runs of equal ids
        change = torch.cat([torch.zeros_like(ids[:, :1]), (ids[:, 1:] != ids[:, :-1]).long()], dim=1)
        run = change.cumsum(1)
        reduced = torch.zeros_like(ids).scatter_(1, run, ids)
        if ids.numel() > 0:
            lengths = run[:, -1] + 1
            self.target_ids = reduced[:, :int(lengths.max())]
        else:
            lengths = torch.zeros(ids.shape[0], dtype=torch.long, device=ids.device)
            self.target_ids = reduced
        self.target_lengths = lengths

    # -- logits ---------------------------------------------------------------------------------------
    def _same_utterance_logits(self, out: torch.Tensor, targets: torch.Tensor, keys: torch.Tensor, masked: torch.Tensor,
                               negative_indices: Optional[torch.Tensor],
                               gen: Optional[torch.Generator]) -> torch.Tensor:
        bsz = out.shape[0]
        counts = masked.sum(1)
        if bsz > 0 and bool((counts != counts[0]).any()):
            raise ValueError("ContrastiveLoss: argument `spec_masks` gives utterances different numbers of masked "
                             "steps (" + ", ".join([str(int(c)) for c in counts])
                             + "); sample_from_same_utterance_only=True "
                             "needs the same number in every utterance (mask a fixed count per utterance or set "
                             "sample_from_same_utterance_only=False).")
        n_masked = int(counts[0]) if bsz > 0 else 0
        out_m = out[masked].view(bsz, n_masked, out.shape[-1])
        tgt_m = targets[masked].view(bsz, n_masked, targets.shape[-1])
        key_m = keys[masked].view(bsz, n_masked, keys.shape[-1])
        pool = targets if self.sample_from_non_masked else tgt_m
        pool_keys = keys if self.sample_from_non_masked else key_m
        where = common.sampling_description(True, self.sample_from_non_masked)
        idx = self._indices(negative_indices, n_masked, pool.shape[1], gen, where, out.device)
        self.negative_indices = idx
        logits = _pool_logits(out_m, tgt_m, pool, idx.unsqueeze(0).expand(bsz, -1, -1), self.logit_temp, key_m,
                              pool_keys)
        # rows ordered (time, batch) as upstream
        return logits.transpose(0, 1).reshape(bsz * n_masked, logits.shape[-1])

    def _batch_logits(self, out_m: torch.Tensor, tgt_m: torch.Tensor, targets: torch.Tensor, keys: torch.Tensor,
                      masked: torch.Tensor, negative_indices: Optional[torch.Tensor],
                      gen: Optional[torch.Generator]) -> torch.Tensor:
        key_m = keys[masked]
        pool = targets.reshape(-1, targets.shape[-1]) if self.sample_from_non_masked else tgt_m
        pool_keys = keys.reshape(-1, keys.shape[-1]) if self.sample_from_non_masked else key_m
        where = common.sampling_description(False, self.sample_from_non_masked)
        idx = self._indices(negative_indices, out_m.shape[0], pool.shape[0], gen, where, out_m.device)
        self.negative_indices = idx
        return _pool_logits(out_m.unsqueeze(0), tgt_m.unsqueeze(0), pool.unsqueeze(0), idx.unsqueeze(0),
                            self.logit_temp, key_m.unsqueeze(0), pool_keys.unsqueeze(0))[0]

    def _group_logits(self, books: torch.Tensor, out_m: torch.Tensor, tgt_m: torch.Tensor) -> torch.Tensor:
        groups, num_vars = books.shape[0], books.shape[1]
        n = out_m.shape[0]
        o = out_m.reshape(n, groups, -1).transpose(0, 1)
        t = tgt_m.reshape(n, groups, -1).transpose(0, 1)
        cand = torch.arange(num_vars, device=out_m.device).expand(groups, n, num_vars)
        logits = _pool_logits(o, t, books, cand, self.logit_temp, t, books)
        # rows ordered (target, group) as upstream
        return logits.transpose(0, 1).reshape(n * groups, num_vars + 1)


def _normalize(x: torch.Tensor) -> torch.Tensor:
    """``x / max(||x||, 1e-8)`` in float32 (torch's ``cosine_similarity`` normalisation)."""
    x = x.float()
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-8)


def _row_hash(rows: torch.Tensor) -> torch.Tensor:
    """An int64 hash of the exact value of every row (``-0.0`` and ``0.0`` alike): equal rows, equal hashes.

    ``frexp`` splits each value exactly into an integer mantissa and an exponent; integer arithmetic
    wraps, so the hash does not depend on the summation order.
    """
    mantissa, exponent = torch.frexp(rows.double())
    bits = (mantissa * 9007199254740992.0).long() * 4096 + exponent.long()  # 2**53
    col = torch.arange(rows.shape[-1], dtype=torch.int64, device=rows.device)
    weights = (col * 6364136223846793005 + 1442695040888963407) | 1
    return (bits * weights).sum(-1)


def _pool_logits(out: torch.Tensor, tgt: torch.Tensor, pool: torch.Tensor, cand: torch.Tensor,
                 logit_temp: float, tgt_keys: torch.Tensor, pool_keys: torch.Tensor) -> torch.Tensor:
    """Logits ``(G, R, 1+N)``: cosine(out, target) then cosine(out, pool[cand]) per group, ``/ logit_temp``.

    ``out (G, R, C)``, ``tgt (G, R, C)``, ``pool (G, P, C)``, ``cand (G, R, N)`` int64 in ``[0, P)``.
    A candidate whose key equals its target's key (exactly; keys ``(G, R, K)`` / ``(G, P, K)``) gets ``-inf``.
    """
    groups, rows, num = cand.shape[0], cand.shape[1], cand.shape[2]
    chunk_entries = 8388608  # score entries per chunk: bounds the memory of the similarity matrix
    n_pool = pool.shape[1]
    o, pn = _normalize(out), _normalize(pool)
    pos = (o * _normalize(tgt)).sum(-1)
    neg = torch.empty(groups, rows, num, dtype=torch.float32, device=out.device)
    if rows > 0 and num > 0:
        if n_pool <= 8 * num:  # similarity to every pool row by matmul, then pick the candidates
            step = max(1, chunk_entries // max(1, groups * n_pool))
            pt = pn.transpose(1, 2)
            for s in range(0, rows, step):
                neg[:, s:s + step] = torch.bmm(o[:, s:s + step], pt).gather(2, cand[:, s:s + step])
        else:  # gather the candidates' vectors
            flat = pn.reshape(groups * n_pool, -1)
            offset = (torch.arange(groups, device=cand.device) * n_pool).view(groups, 1, 1)
            step = max(1, chunk_entries // max(1, groups * num * pn.shape[-1]))
            for s in range(0, rows, step):
                vec = flat[cand[:, s:s + step] + offset]  # (G, r, N, C)
                neg[:, s:s + step] = torch.einsum("grnc,grc->grn", vec, o[:, s:s + step])
    # exact equality of keys: hashes first, then the bits of the (few) pairs whose hashes agree
    pool_hash = _row_hash(pool_keys)
    tgt_hash = _row_hash(tgt_keys)
    neg_is_pos = pool_hash.gather(1, cand.reshape(groups, -1)).view(groups, rows, num) == tgt_hash.unsqueeze(-1)
    hit = neg_is_pos.nonzero()
    if hit.shape[0] > 0:
        g, r, c = hit[:, 0], hit[:, 1], cand[hit[:, 0], hit[:, 1], hit[:, 2]]
        same = (pool_keys[g, c] == tgt_keys[g, r]).all(-1)
        neg_is_pos[g, r, hit[:, 2]] = same
    logits = torch.cat([pos.unsqueeze(-1), neg], dim=-1).to(out.dtype) / logit_temp
    return torch.cat([logits[..., :1], logits[..., 1:].masked_fill(neg_is_pos, float("-inf"))], dim=-1)


def _explicit_logits(out: torch.Tensor, tgt: torch.Tensor, negs: torch.Tensor, logit_temp: float) -> torch.Tensor:
    """Logits ``(R, 1+N)`` against explicit negatives ``negs (N, R, C)``; equal ones get ``-inf``."""
    o = _normalize(out)
    pos = (o * _normalize(tgt)).sum(-1)
    neg = torch.einsum("nrc,rc->rn", _normalize(negs), o)
    neg_is_pos = (negs == tgt.unsqueeze(0)).all(-1).transpose(0, 1)
    logits = torch.cat([pos.unsqueeze(-1), neg], dim=-1).to(out.dtype) / logit_temp
    return torch.cat([logits[:, :1], logits[:, 1:].masked_fill(neg_is_pos, float("-inf"))], dim=-1)
