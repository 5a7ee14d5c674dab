"""A step-by-step re-statement of the seed's GaussianEmbedding forward, as the baseline.

Not library code: the benchmark measures the library against it and a unit test checks the numbers at
small size. It materialises every ``[batch, frames, tokens]`` tensor the way the seed does
(``.repeat`` of centres, sigmas and times, ``torch.distributions.Normal.log_prob``, repeated boolean
masks), with ``torch_layers.repeat_merge`` standing in for NeMo's ``repeat_merge``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_layers.gaussian_embedding import repeat_merge

EPS = 1e-6


def seed_forward(embed: torch.nn.Embedding, pad: int, text: torch.Tensor, durs: torch.Tensor, sigma_c: float = 2.0,
                 merge_blanks: bool = False, blank_free: bool = True) -> torch.Tensor:
    """The seed's computation, op for op. ``embed`` is the ``nn.Embedding`` holding ``embed.weight``."""
    if blank_free:
        # first blank kept, later blanks dropped; a blank's duration goes to the token before it
        text = torch.cat((text[:, 0].unsqueeze(1), text[:, 1::2]), 1)
        durs = torch.cat((durs[:, 0].unsqueeze(1), durs[:, 1::2] + durs[:, 2::2]), 1)

    text = F.pad(text, [0, 2, 0, 0], value=pad)
    durs = F.pad(durs, [0, 2, 0, 0], value=0)
    repeats = repeat_merge(text, durs, pad)
    frames = repeats.shape[-1]
    n = durs.shape[-1]

    exclusive = F.pad(torch.cumsum(durs, dim=-1)[:, :-1], [1, 0, 0, 0], value=0)
    centres = (durs / 2.0 + exclusive).unsqueeze(1).repeat(1, frames, 1)
    scales = (durs.float() / sigma_c).unsqueeze(1).repeat(1, frames, 1) + EPS
    times = torch.arange(frames, device=centres.device).view(1, -1, 1).repeat(durs.shape[0], 1, n).float()
    times = times + 0.5

    cols = slice(1, None, 2) if merge_blanks else slice(None)
    density = torch.distributions.normal.Normal(centres, scales)
    w = density.log_prob(times).exp()[:, :, cols]
    column_pad = (text == pad)[:, cols].unsqueeze(1).repeat(1, frames, 1)
    w.masked_fill_(column_pad, 0.0)
    w = w / (w.sum(-1, keepdim=True) + EPS)
    frame_pad = (repeats == pad).unsqueeze(-1).repeat(1, 1, text[:, cols].size(1))
    w.masked_fill_(frame_pad, 0.0)
    frame_pad[:, :, :-1] = False
    w.masked_fill_(frame_pad, 1.0)
    return torch.bmm(w, embed(text)[:, cols, :])
