"""Reading a block's settings from Rayhane-style Tacotron-2 hparams (``from_hparams`` of both twins).

``hp`` is an hparams object (attributes, e.g. ``tf.contrib.training.HParams`` or
:class:`speechblocks.Tacotron2HParams`) or a mapping; a missing entry is a ``ValueError``. Imports no framework.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["hparam", "conv_stack_hparams", "prenet_hparams"]


def hparam(hp, name: str):
    """Reads ``name`` from an hparams object (attribute) or a mapping (key)."""
    if isinstance(hp, Mapping):
        if name not in hp:
            raise ValueError(f"hparams: missing entry {name!r}")
        return hp[name]
    if not hasattr(hp, name):
        raise ValueError(f"hparams: missing attribute {name!r}")
    return getattr(hp, name)


def conv_stack_hparams(hp, kernel_size: str, channels: str, num_layers: str) -> dict:
    """Keywords of a conv stack (``EncoderConvolutions``, ``Postnet``) from the hparams of those names, plus
    ``drop_rate`` from ``tacotron_dropout_rate``."""
    return dict(kernel_size=hparam(hp, kernel_size), channels=hparam(hp, channels), num_layers=hparam(hp, num_layers),
                drop_rate=hparam(hp, "tacotron_dropout_rate"))


def prenet_hparams(hp) -> dict:
    """Keywords of a ``Prenet``: ``layers_sizes`` from ``prenet_layers``, ``drop_rate`` from
    ``tacotron_dropout_rate``."""
    return dict(layers_sizes=list(hparam(hp, "prenet_layers")), drop_rate=hparam(hp, "tacotron_dropout_rate"))
