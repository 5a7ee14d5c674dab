"""Tiny hparams and a tiny preprocessed corpus for the trainer and GTA tests (seconds of CPU per test)."""
from __future__ import annotations

import os

from speechblocks import tacotron2_hparams

from .training_corpus import write_corpus

#: a tiny RTVC-like model: embedding 8, decoder 1 x 16, postnet 2 x 8, r = 2, 8 mels, speaker embedding 4
TINY = dict(embedding_dim=8, enc_conv_channels=8, enc_conv_num_layers=1, encoder_lstm_units=4, attention_dim=4,
            attention_filters=2, attention_kernel=3, prenet_layers=[8, 8], decoder_layers=1, decoder_lstm_units=16,
            postnet_channels=8, postnet_num_layers=2, speaker_embedding_size=4, num_mels=8, outputs_per_step=2,
            tacotron_batch_size=2, tacotron_test_size=4, tacotron_checkpoint_interval=1000,
            tacotron_eval_interval=1000, tacotron_summary_interval=1)


def tiny_full_hparams(**overrides) -> dict:
    """The RTVC preset with :data:`TINY` and ``overrides``."""
    return dict(tacotron2_hparams("rtvc"), **TINY, **overrides)


def set_args(**overrides) -> list[str]:
    """``--set NAME=VALUE`` arguments of :data:`TINY` (and ``overrides``) for the command line."""
    import json

    out = []
    for k, v in dict(TINY, **overrides).items():
        out += ["--set", f"{k}={json.dumps(v)}"]
    return out


def tiny_corpus(root, n: int = 12, seed: int = 0) -> dict:
    """``n`` utterances of random mels (1-8 frames), letter texts and speaker embeddings in ``root``."""
    os.makedirs(root, exist_ok=True)
    return write_corpus(os.fspath(root), tiny_full_hparams(), n=n, seed=seed)
