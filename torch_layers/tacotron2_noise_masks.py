"""The injected dropout / zoneout keep-masks of a Tacotron-2 model (``noise_masks``): their keys and the flat
``Dict[str, List[Tensor]]`` form the TorchScript code takes."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import torch
from torch import Tensor

__all__ = ["NOISE_MASK_KEYS", "flatten_noise_masks"]

#: the keys of ``noise_masks`` (the injected dropout / zoneout keep-masks of a Tacotron-2 model)
NOISE_MASK_KEYS = ("prenet", "encoder_convolutions", "encoder_LSTM", "decoder_LSTM", "postnet_convolutions")


def _as_mask(x, name: str, block: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray) or isinstance(x, (float, int)):
        return torch.as_tensor(np.asarray(x, dtype=np.float32))
    raise ValueError(f"{block}: argument `noise_masks[{name!r}]` must hold 0/1 keep-mask tensors (or numpy arrays); "
                     f"got {type(x).__name__}.")


@torch.jit.unused
def flatten_noise_masks(noise_masks: Optional[dict[str, list[Tensor]]], block: str
                        ) -> Optional[dict[str, list[Tensor]]]:
    """The spec's nested ``noise_masks`` as the flat ``Dict[str, List[Tensor]]`` the TorchScript code takes.

    ``"encoder_LSTM": ((fw_c, fw_h), (bw_c, bw_h))`` becomes ``[fw_c, fw_h, bw_c, bw_h]``; ``"decoder_LSTM"``
    (one ``(c_keep, h_keep)`` pair per layer) becomes ``[c_0, h_0, c_1, h_1, ...]``; the other entries are
    lists of one mask per layer. Already-flat entries pass unchanged, ``None`` entries are dropped, numpy
    arrays become tensors. Eager only (a scripted module takes the flat form directly).

    Raises:
        ValueError: an unknown key, or an entry that is not a (nested) sequence of masks.
    """
    if noise_masks is None:
        return None
    if not isinstance(noise_masks, Mapping):
        raise ValueError(f"{block}: argument `noise_masks` must be a dict with keys among {list(NOISE_MASK_KEYS)}; "
                         f"got {type(noise_masks).__name__}.")
    unknown = sorted(str(k) for k in noise_masks if k not in NOISE_MASK_KEYS)
    if unknown:
        raise ValueError(f"{block}: argument `noise_masks` has unknown key(s) {unknown}; expected keys among "
                         f"{list(NOISE_MASK_KEYS)}.")
    out: dict[str, list[Tensor]] = {}
    for key, value in noise_masks.items():
        if value is None:
            continue
        if isinstance(value, (Tensor, np.ndarray)) or not isinstance(value, Sequence):
            raise ValueError(f"{block}: argument `noise_masks[{key!r}]` must be a list of keep-masks (one per layer"
                             f"{', pairs (c, h)' if key.endswith('LSTM') else ''}); got {type(value).__name__}.")
        flat: list[Tensor] = []
        for item in value:
            if isinstance(item, Sequence) and not isinstance(item, (Tensor, np.ndarray)):
                flat.extend(_as_mask(x, key, block) for x in item)
            else:
                flat.append(_as_mask(item, key, block))
        out[key] = flat
    return out


def _mask_error(block: str, key: str, doc: str, got: str) -> str:
    return block + ": argument `noise_masks['" + key + "']` must be " + doc + "; got " + got + "."

