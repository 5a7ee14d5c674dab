"""Parity of ``SpeakerEncoder`` (GE2E, seed 001): Keras <-> torch through the torch state dict.

There is no TF1 graph for this block (``legacy_specs()`` is empty). Rows: embeddings (torch weights
moved to Keras), the torch -> Keras -> torch round trip, the scaled similarity matrix, the GE2E loss
value and the EER, at small and at the upstream default sizes (40 mels, 3 x 256 LSTM, 256-d embedding).
"""
from __future__ import annotations

import numpy as np

from ..report import compare
from ._common import FLOAT32_TOL, randn, to_numpy, torch_tensor

BLOCK = "SpeakerEncoder"
FLOAT64_TOL = 1e-9

# (label, constructor keywords, (batch, frames))
CASES = [
    ("small 2x16", dict(mel_n_channels=8, model_hidden_size=16, model_num_layers=2, model_embedding_size=12), (3, 11)),
    ("default 40/3x256/256", dict(), (4, 40)),
    ("1 layer B1 T1", dict(mel_n_channels=5, model_hidden_size=6, model_num_layers=1, model_embedding_size=4), (1, 1)),
]
# (label, speakers, utterances, embedding size, w, b)
LOSS_CASES = [("8 spk x 5 utt x 256", 8, 5, 256, 10.0, -5.0),
              ("3 spk x 2 utt x 16, trained w/b", 3, 2, 16, 13.5, -7.25)]


def legacy_specs():
    return []


def _torch(config, seed):
    import torch

    import torch_layers

    torch.manual_seed(seed)
    m = torch_layers.SpeakerEncoder(**config).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.startswith("lstm.bias"):
                p.normal_(0.0, 0.3)  # both torch biases non-zero: the Keras sum must hold
    return m


def _keras(config):
    import tf_layers

    return tf_layers.SpeakerEncoder(**config)


def _embeds(n_spk, n_utt, dim, seed):
    e = randn((n_spk, n_utt, dim), seed) + 1.5 * randn((n_spk, 1, dim), seed + 1)
    return (e / np.linalg.norm(e, axis=2, keepdims=True)).astype(np.float32)


def rows(legacy):
    import torch

    out = []
    for i, (label, config, (batch, frames)) in enumerate(CASES):
        tm = _torch(config, i)
        km = _keras(config)
        km.load_torch_state_dict(tm.state_dict())
        mel = config.get("mel_n_channels", 40)
        x = randn((batch, frames, mel), 20 + i)
        with torch.no_grad():
            yt = to_numpy(tm(torch_tensor(x)))
        out.append(compare(BLOCK, "Keras<->torch", f"{label}: embeddings", km(x), yt, FLOAT32_TOL))
        back = _torch(config, 99)
        back.load_state_dict({k: torch_tensor(v) for k, v in km.torch_state_dict().items()})
        with torch.no_grad():
            out.append(compare(BLOCK, "torch->Keras->torch", f"{label}: embeddings", to_numpy(back(torch_tensor(x))),
                               yt, FLOAT32_TOL))

    # float64 mode: separates maths from float32 noise
    config = dict(mel_n_channels=8, model_hidden_size=16, model_num_layers=2, model_embedding_size=12)
    tm = _torch(config, 7).double()
    km = _keras({**config, "dtype": "float64"})
    km.load_torch_state_dict(tm.state_dict())
    x = randn((3, 11, 8), 27).astype(np.float64)
    with torch.no_grad():
        yt = to_numpy(tm(torch_tensor(x)))
    out.append(compare(BLOCK, "Keras<->torch float64", "small 2x16: embeddings", km(x), yt, FLOAT64_TOL))
    e = _embeds(8, 5, 12, 77).astype(np.float64)
    out.append(compare(BLOCK, "Keras<->torch float64", "8 spk x 5 utt x 12: similarity matrix", km.similarity_matrix(e),
                       to_numpy(tm.similarity_matrix(torch_tensor(e))), FLOAT64_TOL))
    out.append(compare(BLOCK, "Keras<->torch float64", "8 spk x 5 utt x 12: loss", km.loss(e)[0],
                       to_numpy(tm.loss(torch_tensor(e), compute_eer=False)[0]), FLOAT64_TOL))

    for j, (label, n_spk, n_utt, dim, w, b) in enumerate(LOSS_CASES):
        tm = _torch(dict(mel_n_channels=4, model_hidden_size=4, model_num_layers=1, model_embedding_size=dim), 50 + j)
        with torch.no_grad():
            tm.similarity_weight.fill_(w)
            tm.similarity_bias.fill_(b)
        km = _keras(dict(mel_n_channels=4, model_hidden_size=4, model_num_layers=1, model_embedding_size=dim))
        km.load_torch_state_dict(tm.state_dict())
        e = _embeds(n_spk, n_utt, dim, 70 + j)
        sim_t = to_numpy(tm.similarity_matrix(torch_tensor(e)))
        out.append(compare(BLOCK, "Keras<->torch", f"{label}: similarity matrix", km.similarity_matrix(e), sim_t,
                           FLOAT32_TOL))
        loss_t, eer_t = tm.loss(torch_tensor(e), compute_eer=True)
        loss_k, eer_k = km.loss(e, compute_eer=True)
        out.append(compare(BLOCK, "Keras<->torch", f"{label}: loss", loss_k, to_numpy(loss_t), FLOAT32_TOL))
        out.append(compare(BLOCK, "Keras<->torch", f"{label}: EER", eer_k, eer_t, FLOAT32_TOL))
    return out
