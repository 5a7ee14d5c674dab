"""The Tacotron-2 text front-end: cleaners, the 66-symbol table and text <-> id conversion.

Reproduces the TF1 Tacotron-2 / Real-Time-Voice-Cloning synthesizer's text processing without any framework
and without ``inflect`` (``unidecode`` is used when installed, see :func:`convert_to_ascii`)::

    >>> from speechblocks.text import text_to_sequence, sequence_to_text
    >>> ids = text_to_sequence("Hi!", ["basic_cleaners"])
    >>> sequence_to_text(ids)
    'hi!~'

Pure Python.
"""
from __future__ import annotations

import operator
import re
from collections.abc import Iterable

from .cleaners import (
    CLEANERS,
    _cleaner_names,
    ascii_fold,
    basic_cleaners,
    clean_text,
    convert_to_ascii,
    english_cleaners,
    expand_abbreviations,
    expand_numbers,
    get_cleaner,
    transliteration_cleaners,
)
from .numbers import MAX_NUMBER, normalize_numbers, number_to_words, read_number
from .symbols import CHARACTERS, EOS, PAD, SYMBOLS, id_to_symbol, symbol_to_id

__all__ = ["CHARACTERS", "CLEANERS", "EOS", "MAX_NUMBER", "PAD", "SYMBOLS", "ascii_fold", "basic_cleaners",
           "clean_text", "convert_to_ascii", "english_cleaners", "expand_abbreviations", "expand_numbers",
           "get_cleaner", "id_to_symbol", "normalize_numbers", "number_to_words", "read_number",
           "sequence_to_text", "symbol_to_id", "text_to_sequence", "transliteration_cleaners",
           "unknown_characters"]

# The first "{...}" group of a text: what precedes it, its (non-empty) content and what follows it. Like the
# original, "." does not cross a newline: a group after a newline is not seen, and text after a newline that
# follows a group is lost.
_BRACED = re.compile(r"(?P<before>.*?)\{(?P<braced>.+?)\}(?P<after>.*)")


def _encodable(char: str) -> bool:
    """Whether a text character gets an id (PAD and EOS are reserved and never taken from the text)."""
    return char in symbol_to_id and char not in (PAD, EOS)


def unknown_characters(cleaned_text: str) -> list[str]:
    """The characters of a cleaned text that :func:`text_to_sequence` cannot encode.

    These are the characters outside :data:`SYMBOLS` plus the reserved ``"_"`` (PAD) and ``"~"`` (EOS),
    which the original front-end also refused to take from text.

    Args:
        cleaned_text (str): text after cleaning (see :func:`clean_text`).

    Returns:
        list[str]: each such character once, in order of first appearance (empty if all are encodable).
    """
    return list(dict.fromkeys(char for char in cleaned_text if not _encodable(char)))


def text_to_sequence(text: str, cleaner_names: str | Iterable[str] = ("english_cleaners",),
                     strict: bool = False) -> list[int]:
    """Clean a text and convert it to symbol ids, ending with the EOS id.

    With ``strict=False`` this is the original front-end's conversion:

    * characters the symbol table cannot encode after cleaning (see :func:`unknown_characters`) are dropped
      silently;
    * ``{...}`` groups were the original's ARPAbet input (``"Turn left on {HH AW1 S S T AH0 N} Street."``).
      The text before and after each group is cleaned separately, and since the 66-symbol table has no
      ARPAbet symbols, the group contributes no ids: it is dropped with its braces (the example gives the ids
      of ``"turn left on  street."``, with two spaces). Braces that do not form a group (``"{}"``, an unclosed
      ``"{"``, or a group after a newline) are cleaned as ordinary text, so the braces are dropped and their
      content kept. Text after a newline that follows a group is lost, as in the original.

    With ``strict=True`` nothing is dropped silently: the call raises ``ValueError`` instead.

    Args:
        text (str): the raw text.
        cleaner_names (str or Iterable[str], optional): cleaners to run (see
            :data:`~speechblocks.text.cleaners.CLEANERS`), or one comma-separated string of names.
            (Default: ``("english_cleaners",)``)
        strict (bool, optional): raise instead of dropping characters. (Default: ``False``)

    Returns:
        list[int]: the ids, the last one being ``symbol_to_id[EOS]`` (1).

    Raises:
        ValueError: if a cleaner name is unknown; with ``strict=True`` also if the text has a ``{...}``
            ARPAbet group, if the cleaned text has characters outside the table (the message names them and
            shows the cleaned text), or if the cleaned text is empty or only whitespace (``"empty text"``).
    """
    cleaners = [get_cleaner(name) for name in _cleaner_names(cleaner_names)]

    def clean(segment: str) -> str:
        for cleaner in cleaners:
            segment = cleaner(segment)
        return segment

    cleaned_parts: list[str] = []
    braced_groups: list[str] = []
    rest = text
    while rest:
        match = _BRACED.match(rest)
        if match is None:
            cleaned_parts.append(clean(rest))
            break
        cleaned_parts.append(clean(match.group("before")))
        braced_groups.append(match.group("braced"))  # ARPAbet: no symbol for it in this table
        rest = match.group("after")

    cleaned = "".join(cleaned_parts)
    if strict:
        if braced_groups:
            groups = ", ".join("{" + group + "}" for group in braced_groups)
            raise ValueError(f"ARPAbet in curly braces is not supported (the symbol table has no ARPAbet "
                             f"symbols): {groups!r} in {text!r}")
        unknown = unknown_characters(cleaned)
        if unknown:
            raise ValueError(f"characters outside the symbol table: {', '.join(map(repr, unknown))} "
                             f"in cleaned text {cleaned!r}")
        if not cleaned.strip():
            raise ValueError(f"empty text: {text!r} cleans to {cleaned!r}")
    return [symbol_to_id[char] for char in cleaned if _encodable(char)] + [symbol_to_id[EOS]]


def sequence_to_text(sequence: Iterable[int]) -> str:
    """Convert symbol ids back to text.

    Every id of the table gives its symbol, PAD (``"_"``) and EOS (``"~"``) included; ids outside the table
    are skipped, as in the original. The round trip gives the cleaned text plus ``"~"``.

    Args:
        sequence (Iterable[int]): ids (Python or numpy integers, or anything with ``__index__``).

    Returns:
        str: the symbols, concatenated.
    """
    symbols = (id_to_symbol.get(operator.index(symbol_id)) for symbol_id in sequence)
    return "".join(symbol for symbol in symbols if symbol is not None)

