"""The Tacotron-2 input alphabet: 66 symbols, ids fixed by their position.

Id 0 is the padding symbol ``"_"`` and id 1 the end-of-sequence symbol ``"~"``; ids 2..65 are the 26 upper-case
letters, the 26 lower-case letters, the punctuation ``!'"(),-.:;?`` and the space, in that order. This is the
table the TF1 Real-Time-Voice-Cloning synthesizer was trained with (its embedding has 66 rows): it has no
ARPAbet entries, so phoneme groups written in curly braces cannot be encoded (see
:func:`speechblocks.text.text_to_sequence`). Pure Python.
"""
from __future__ import annotations

__all__ = ["PAD", "EOS", "CHARACTERS", "SYMBOLS", "symbol_to_id", "id_to_symbol"]

PAD: str = "_"
"""Padding symbol, id 0."""

EOS: str = "~"
"""End-of-sequence symbol, id 1; :func:`~speechblocks.text.text_to_sequence` appends it."""

_LETTERS = "".join(chr(c) for c in range(ord("A"), ord("Z") + 1))
CHARACTERS: str = _LETTERS + _LETTERS.lower() + "!'\"(),-.:;? "
"""The 64 text characters after PAD and EOS, in id order (ids 2..65)."""

SYMBOLS: tuple[str, ...] = (PAD, EOS, *CHARACTERS)
"""All 66 symbols; ``SYMBOLS[i]`` is the symbol with id ``i``."""

symbol_to_id: dict[str, int] = {symbol: index for index, symbol in enumerate(SYMBOLS)}
"""Symbol -> id."""

id_to_symbol: dict[int, str] = dict(enumerate(SYMBOLS))
"""Id -> symbol."""
