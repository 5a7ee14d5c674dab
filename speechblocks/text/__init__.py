"""The Tacotron-2 text front-end: cleaners, the 66-symbol table and text <-> id conversion.

The Tacotron-1 tables (keithito/tacotron, MycroftAI/mimic2: 149 symbols with ARPAbet, :mod:`.tacotron1`) are chosen
by name: ``text_to_sequence(text, cleaners, symbols="keithito")`` (:data:`SYMBOL_TABLES`).

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
from .tacotron1 import KEITHITO_SYMBOLS, MIMIC2_CLEANERS, MIMIC2_SYMBOLS

__all__ = ["CHARACTERS", "CLEANERS", "EOS", "MAX_NUMBER", "PAD", "SYMBOLS", "SYMBOL_TABLES", "ascii_fold",
           "basic_cleaners",
           "clean_text", "convert_to_ascii", "english_cleaners", "expand_abbreviations", "expand_numbers",
           "get_cleaner", "id_to_symbol", "normalize_numbers", "number_to_words", "read_number",
           "sequence_to_text", "symbol_to_id", "text_to_sequence", "transliteration_cleaners",
           "unknown_characters"]

# The first "{...}" group of a text: what precedes it, its (non-empty) content and what follows it. Like the
# original, "." does not cross a newline: a group after a newline is not seen, and text after a newline that
# follows a group is lost.
_BRACED = re.compile(r"(?P<before>.*?)\{(?P<braced>.+?)\}(?P<after>.*)")

#: symbol-table name -> the table (``SYMBOL_TABLES[name][i]`` has id ``i``): ``"tacotron2"`` the 66 symbols of the
#: TF1 Real-Time-Voice-Cloning synthesizer (:data:`SYMBOLS`, the default), ``"keithito"`` and ``"mimic2"`` the 149
#: symbols (ARPAbet included) of keithito/tacotron and MycroftAI/mimic2 (:mod:`.tacotron1`)
SYMBOL_TABLES: dict[str, tuple[str, ...]] = {"tacotron2": SYMBOLS, "keithito": KEITHITO_SYMBOLS,
                                             "mimic2": MIMIC2_SYMBOLS}
# what each table's cleaner names mean: the original project's own cleaners
_TABLE_CLEANERS = {"tacotron2": CLEANERS, "keithito": CLEANERS, "mimic2": MIMIC2_CLEANERS}
_SYMBOL_IDS = {name: {symbol: i for i, symbol in enumerate(table)} for name, table in SYMBOL_TABLES.items()}


def _table_ids(symbols: str) -> dict[str, int]:
    if symbols not in SYMBOL_TABLES:
        raise ValueError(f"unknown symbol table {symbols!r}; known tables: {', '.join(sorted(SYMBOL_TABLES))}")
    return _SYMBOL_IDS[symbols]


def _table_cleaner(symbols: str, name: str):
    table = _TABLE_CLEANERS[symbols]
    if table is CLEANERS:
        return get_cleaner(name)
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown cleaner {name!r}; known cleaners: {', '.join(sorted(table))}") from None


def _encodable(char: str, ids: dict[str, int] = symbol_to_id) -> bool:
    """Whether a text character gets an id (PAD and EOS are reserved and never taken from the text)."""
    return char in ids and char not in (PAD, EOS)


def unknown_characters(cleaned_text: str, symbols: str = "tacotron2") -> list[str]:
    """The characters of a cleaned text that :func:`text_to_sequence` cannot encode.

    These are the characters outside :data:`SYMBOLS` plus the reserved ``"_"`` (PAD) and ``"~"`` (EOS),
    which the original front-end also refused to take from text.

    Args:
        cleaned_text (str): text after cleaning (see :func:`clean_text`).
        symbols (str, optional): the symbol table's name (:data:`SYMBOL_TABLES`). (Default: ``"tacotron2"``)

    Returns:
        list[str]: each such character once, in order of first appearance (empty if all are encodable).
    """
    ids = _table_ids(symbols)
    return list(dict.fromkeys(char for char in cleaned_text if not _encodable(char, ids)))


def text_to_sequence(text: str, cleaner_names: str | Iterable[str] = ("english_cleaners",),
                     strict: bool = False, symbols: str = "tacotron2") -> list[int]:
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

    With a table that has ARPAbet (``symbols="keithito"`` or ``"mimic2"``: keithito/tacotron's and MycroftAI/mimic2's
    149 symbols), a ``{...}`` group gives the ids of its space-separated symbols written with a leading ``"@"``
    (``"{HH AH0 L OW1}"`` -> the ids of ``"@HH"``, ``"@AH0"``, ``"@L"``, ``"@OW1"``), as the originals did; symbols
    the table lacks are dropped (``strict=True`` names them instead). The table also decides what the cleaner names
    mean: each original project's own cleaners (mimic2's ``english_cleaners`` deletes non-ASCII characters and
    spells numbers its own way, see :mod:`speechblocks.text.tacotron1`).

    Args:
        text (str): the raw text.
        cleaner_names (str or Iterable[str], optional): cleaners to run (see
            :data:`~speechblocks.text.cleaners.CLEANERS`), or one comma-separated string of names.
            (Default: ``("english_cleaners",)``)
        strict (bool, optional): raise instead of dropping characters. (Default: ``False``)
        symbols (str, optional): the symbol table's name (:data:`SYMBOL_TABLES`). (Default: ``"tacotron2"``)

    Returns:
        list[int]: the ids, the last one being ``symbol_to_id[EOS]`` (1).

    Raises:
        ValueError: if a cleaner name is unknown; with ``strict=True`` also if the text has a ``{...}``
            ARPAbet group, if the cleaned text has characters outside the table (the message names them and
            shows the cleaned text), or if the cleaned text is empty or only whitespace (``"empty text"``); if the
            symbol table is unknown.
    """
    ids = _table_ids(symbols)
    cleaners = [_table_cleaner(symbols, name) for name in _cleaner_names(cleaner_names)]

    def clean(segment: str) -> str:
        for cleaner in cleaners:
            segment = cleaner(segment)
        return segment

    cleaned_parts: list[str] = []
    braced_groups: list[str] = []
    sequence: list[int] = []
    rest = text
    while rest:
        match = _BRACED.match(rest)
        if match is None:
            cleaned_parts.append(clean(rest))
            sequence += _text_ids(cleaned_parts[-1], ids)
            break
        cleaned_parts.append(clean(match.group("before")))
        sequence += _text_ids(cleaned_parts[-1], ids)
        braced_groups.append(match.group("braced"))
        sequence += [ids["@" + s] for s in match.group("braced").split() if "@" + s in ids]
        rest = match.group("after")

    if strict:
        _check_strict(text, "".join(cleaned_parts), braced_groups, ids, symbols)
    return sequence + [ids[EOS]]


def _check_strict(text: str, cleaned: str, braced_groups: list[str], ids: dict[str, int], symbols: str) -> None:
    """``text_to_sequence(strict=True)``: what the lenient conversion would drop, as one ``ValueError``."""
    arpabet = "@AA" in ids
    unknown_arpabet = [s for group in braced_groups for s in group.split() if "@" + s not in ids]
    if arpabet and unknown_arpabet:
        raise ValueError(f"ARPAbet symbols outside the symbol table: {', '.join(map(repr, unknown_arpabet))} "
                         f"in {text!r}")
    if braced_groups and not arpabet:
        groups = ", ".join("{" + group + "}" for group in braced_groups)
        raise ValueError(f"ARPAbet in curly braces is not supported (the symbol table has no ARPAbet "
                         f"symbols): {groups!r} in {text!r}")
    unknown = unknown_characters(cleaned, symbols)
    if unknown:
        raise ValueError(f"characters outside the symbol table: {', '.join(map(repr, unknown))} "
                         f"in cleaned text {cleaned!r}")
    if not cleaned.strip() and not (arpabet and braced_groups):
        raise ValueError(f"empty text: {text!r} cleans to {cleaned!r}")


def _text_ids(cleaned: str, ids: dict[str, int]) -> list[int]:
    return [ids[char] for char in cleaned if _encodable(char, ids)]


def sequence_to_text(sequence: Iterable[int], symbols: str = "tacotron2") -> str:
    """Convert symbol ids back to text.

    Every id of the table gives its symbol, PAD (``"_"``) and EOS (``"~"``) included; ids outside the table
    are skipped, as in the original. The round trip gives the cleaned text plus ``"~"``. An ARPAbet id gives its
    symbol in braces, and adjacent groups merge (``"{HH AH0}"``), as the originals wrote them back.

    Args:
        sequence (Iterable[int]): ids (Python or numpy integers, or anything with ``__index__``).
        symbols (str, optional): the symbol table's name (:data:`SYMBOL_TABLES`). (Default: ``"tacotron2"``)

    Returns:
        str: the symbols, concatenated.
    """
    _table_ids(symbols)
    table = SYMBOL_TABLES[symbols]
    found = (table[i] if 0 <= i < len(table) else None for i in map(operator.index, sequence))
    text = "".join(f"{{{s[1:]}}}" if len(s) > 1 and s[0] == "@" else s for s in found if s is not None)
    return text.replace("}{", " ")

