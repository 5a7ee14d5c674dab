"""A deliberately plain re-statement of the seed's contrastive loss, step by step (bench baseline and
test reference for ``torch_layers.ContrastiveLoss``).

It materialises every negative, concatenates them with the targets and calls ``torch.cosine_similarity``
on the expanded outputs, exactly the sequence of operations of the seed, with a plain Gumbel quantizer
(one-hot by broadcasting and summing). Same state-dict keys as ``torch_layers.ContrastiveLoss``.
Not part of the library.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


class PlainQuantizer(nn.Module):
    """Gumbel vector quantizer written the straightforward way (combined groups, time first)."""

    def __init__(self, dim: int, num_vars: int, temp, groups: int, vq_dim: int):
        super().__init__()
        self.groups, self.num_vars = groups, num_vars
        self.vars = nn.Parameter(torch.rand(1, num_vars, vq_dim // groups))
        self.weight_proj = nn.Linear(dim, groups * num_vars)
        self.max_temp, self.min_temp, self.temp_decay = temp
        self.curr_temp = self.max_temp

    def set_num_updates(self, n):
        self.curr_temp = max(self.max_temp * self.temp_decay ** n, self.min_temp)

    def forward(self, x, gumbel_noise: Optional[torch.Tensor] = None):
        b, t, f = x.shape
        logits = self.weight_proj(x.reshape(-1, f)).view(b * t * self.groups, -1)
        k = logits.max(-1)[1]
        hard = torch.zeros_like(logits).scatter_(-1, k.view(-1, 1), 1.0).view(b * t, self.groups, -1)
        total = self.num_vars * self.groups
        avg = torch.softmax(logits.view(b * t, self.groups, -1).float(), dim=-1).mean(dim=0)
        ppl = torch.exp(-torch.sum(avg * torch.log(avg + 1e-7), dim=-1)).sum()
        ppl_loss = (total - ppl) / total
        if self.training:
            if gumbel_noise is None:
                sel = F.gumbel_softmax(logits.float(), tau=self.curr_temp, hard=True)
            else:
                soft = torch.softmax((logits.float() + gumbel_noise.reshape(logits.shape)) / self.curr_temp, -1)
                onehot = torch.zeros_like(soft).scatter_(-1, soft.argmax(-1, keepdim=True), 1.0)
                sel = onehot - soft.detach() + soft
            sel = sel.type_as(logits)
        else:
            sel = hard
        sel = sel.reshape(b * t, -1)
        vars_ = self.vars.repeat(1, self.groups, 1)
        q = (sel.unsqueeze(-1) * vars_).view(b * t, self.groups, self.num_vars, -1).sum(-2).view(b, t, -1)
        top = hard.argmax(-1).reshape(b, t, -1)
        ids = hard.new_zeros(b, t).long()
        for i in range(self.groups):
            ids = ids * self.num_vars + top[:, :, i]
        return q, ppl_loss, self.curr_temp, ids


class SeedReferenceContrastiveLoss(nn.Module):
    """The seed's computation order; ``negative_indices`` (the same layouts as the library's) replace draws."""

    def __init__(self, in_dim, proj_dim=128, combine_time_steps=1, num_negatives=100, quantized_targets=False,
                 codebook_size=320, prob_ppl_weight=0.1, logit_temp=0.1, reduce="sum",
                 sample_from_same_utterance_only=True, sample_from_non_masked=False, group_loss=False,
                 num_groups=2, quantizer_temp=(2, 0.5, 0.999995), mask_threshold=0.8, multiplier=16.0):
        super().__init__()
        self.quantized_targets = quantized_targets
        self.num_negatives = num_negatives
        self.prob_ppl_weight = prob_ppl_weight
        self.logit_temp = logit_temp
        self.reduce = reduce
        self.combine_time_steps = combine_time_steps
        self.same_utt = sample_from_same_utterance_only
        self.non_masked = sample_from_non_masked
        self.group_loss = group_loss
        self.mask_threshold = mask_threshold
        self.multiplier = multiplier
        if quantized_targets:
            self.quantizer = PlainQuantizer(in_dim * combine_time_steps, codebook_size, quantizer_temp, num_groups,
                                            proj_dim)
        else:
            self.target_proj = nn.Linear(in_dim * combine_time_steps, proj_dim)

    def sample_negatives(self, y, num, idx=None):
        if idx is None:
            idx = torch.multinomial(torch.ones((num, y.shape[0])), self.num_negatives)
        negs = y[idx.reshape(-1)].view((num, self.num_negatives) + y.shape[1:]).transpose(0, 1)
        return negs

    def forward(self, spectrograms, spec_masks, decoder_outputs, negative_indices=None, gumbel_noise=None):
        targets = spectrograms.transpose(-2, -1)
        masks = spec_masks.transpose(-2, -1)
        t_dec = decoder_outputs.shape[1]
        diff = int(math.ceil(targets.shape[1] / t_dec) * t_dec) - targets.shape[1]
        if diff > 0:
            targets = F.pad(targets, (0, 0, 0, diff))
            masks = F.pad(masks, (0, 0, 0, diff))
        targets = targets.reshape(targets.shape[0], t_dec, -1)
        masks = masks.reshape(targets.shape[0], t_dec, -1)
        ppl_loss = None
        if self.quantized_targets:
            targets, ppl_loss, _, self.target_ids = self.quantizer(targets, gumbel_noise)
        else:
            targets = self.target_proj(targets)
        masks = masks.mean(-1) > self.mask_threshold
        if self.same_utt:
            bs = decoder_outputs.shape[0]
            out_m = decoder_outputs[masks].reshape(bs, -1, decoder_outputs.shape[-1]).transpose(0, 1)
            tgt_m = targets[masks].reshape(bs, -1, targets.shape[-1]).transpose(0, 1)
            pool = targets.transpose(0, 1) if self.non_masked else tgt_m
            negatives = self.sample_negatives(pool, tgt_m.size(0), negative_indices)
            out_m = out_m.reshape(-1, out_m.shape[-1])
            tgt_m = tgt_m.reshape(-1, tgt_m.shape[-1])
            negatives = negatives.reshape(self.num_negatives, -1, negatives.shape[-1])
        else:
            out_m = decoder_outputs[masks]
            tgt_m = targets[masks]
            if self.group_loss:
                g = self.quantizer.groups
                negatives = self.quantizer.vars.reshape(g, self.quantizer.num_vars, -1).transpose(0, 1)
                negatives = negatives.unsqueeze(1).expand(-1, out_m.shape[0], -1, -1)
                negatives = negatives.reshape(negatives.shape[0], -1, negatives.shape[-1])
                out_m = out_m.reshape(-1, out_m.shape[-1] // g)
                tgt_m = tgt_m.reshape(-1, tgt_m.shape[-1] // g)
            else:
                pool = targets.reshape(targets.shape[0] * targets.shape[1], -1) if self.non_masked else tgt_m
                negatives = self.sample_negatives(pool, tgt_m.size(0), negative_indices)
        neg_is_pos = (tgt_m == negatives).all(-1)
        cand = torch.cat([tgt_m.unsqueeze(0), negatives], dim=0)
        logits = torch.cosine_similarity(out_m.float().unsqueeze(0).expand(cand.shape[0], -1, -1), cand.float(),
                                         dim=-1).type_as(out_m)
        logits = logits / self.logit_temp
        if neg_is_pos.any():
            logits[1:][neg_is_pos] = float("-inf")
        labels = decoder_outputs.new_zeros(logits.size(1), dtype=torch.long)
        loss = F.cross_entropy(logits.transpose(0, 1), labels, reduction=self.reduce)
        if self.prob_ppl_weight != 0 and self.quantized_targets:
            loss = loss + self.prob_ppl_weight * ppl_loss * labels.numel()
        return loss * (self.multiplier / spectrograms.shape[0])
