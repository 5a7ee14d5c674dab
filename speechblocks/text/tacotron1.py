"""The Tacotron-1 front-ends: keithito/tacotron's and MycroftAI/mimic2's symbol tables and cleaners.

Both originals use the same 149-symbol table (keithito ``text/symbols.py`` at d26c763; mimic2's file is the same
at 9fd123c): id 0 is the pad ``"_"``, id 1 the end of sequence ``"~"``, ids 2..64 the 63 characters
``A..Z``, ``a..z``, ``!'(),-.:;?`` and the space (no double quote, unlike the Tacotron-2 table), ids 65..148 the
84 ARPAbet symbols of CMUdict, each written with a leading ``"@"`` (``"@AA"`` is 65, ``"@ZH"`` 148). keithito's
2017 code (``util/textinput.py``, the ``tacotron-20170720`` checkpoint) numbered the same symbols in the same
order (its ARPAbet ids follow the characters, without the ``"@"``), so the ids of both checkpoints agree; its
cleaning differed (no cleaner names: ``force_lowercase``/``expand_abbreviations`` hparams, characters outside
the table turned into spaces) and is not reproduced here.

A ``{...}`` group in the text is ARPAbet (``"Turn left on {HH AW1 S S T AH0 N} Street."``): the text around it is
cleaned, the group's space-separated symbols are looked up with their ``"@"`` (unknown ones dropped), and the
braces give no id (:func:`speechblocks.text.text_to_sequence` with ``symbols="keithito"`` or ``"mimic2"``).

The cleaner names are the same in both originals but mimic2's code differs: its ``convert_to_ascii`` deletes every
non-ASCII character (keithito's transliterates with ``unidecode``), and its numbers are spelled by its own table
(:func:`mimic2_normalize_numbers`). keithito's cleaners are Tacotron-2's (:mod:`speechblocks.text.cleaners`:
the two originals' ``cleaners.py`` and ``numbers.py`` differ only in quoting). Pure Python.
"""
from __future__ import annotations

import re

from .cleaners import CLEANERS, collapse_whitespace, expand_abbreviations, lowercase
from .numbers import (
    _DECIMAL,
    _DIGITS,
    _DIGITS_WITH_COMMAS,
    _DOLLARS,
    _ONES,
    _ORDINAL,
    _POUNDS,
    _SCALES,
    _TEENS,
    _TENS,
    _spell_dollars,
    _to_ordinal,
)

__all__ = ["ARPABET", "TACOTRON1_CHARACTERS", "KEITHITO_SYMBOLS", "MIMIC2_SYMBOLS", "MIMIC2_CLEANERS",
           "mimic2_convert_to_ascii", "mimic2_normalize_numbers", "mimic2_number_to_words"]

#: CMUdict's 84 ARPAbet symbols in the originals' order (``text/cmudict.py``'s ``valid_symbols``)
ARPABET: tuple[str, ...] = tuple("""
    AA AA0 AA1 AA2 AE AE0 AE1 AE2 AH AH0 AH1 AH2 AO AO0 AO1 AO2 AW AW0 AW1 AW2 AY AY0 AY1 AY2
    B CH D DH EH EH0 EH1 EH2 ER ER0 ER1 ER2 EY EY0 EY1 EY2 F G HH IH IH0 IH1 IH2 IY IY0 IY1 IY2 JH K L M N NG
    OW OW0 OW1 OW2 OY OY0 OY1 OY2 P R S SH T TH UH UH0 UH1 UH2 UW UW0 UW1 UW2 V W Y Z ZH""".split())

_LETTERS = "".join(chr(c) for c in range(ord("A"), ord("Z") + 1))
#: the 63 text characters of both Tacotron-1 tables, in id order (ids 2..64)
TACOTRON1_CHARACTERS: str = _LETTERS + _LETTERS.lower() + "!'(),-.:;? "

#: keithito/tacotron's 149 symbols; ``KEITHITO_SYMBOLS[i]`` has id ``i``
KEITHITO_SYMBOLS: tuple[str, ...] = ("_", "~", *TACOTRON1_CHARACTERS, *("@" + s for s in ARPABET))
#: MycroftAI/mimic2's table: keithito's, unchanged
MIMIC2_SYMBOLS: tuple[str, ...] = KEITHITO_SYMBOLS

_NON_ASCII = re.compile(r"[^\x00-\x7F]+")


def mimic2_convert_to_ascii(text: str) -> str:
    """mimic2's ``convert_to_ascii``: every non-ASCII character is deleted (``"Müller"`` -> ``"Mller"``)."""
    return _NON_ASCII.sub("", text)


# mimic2 spells numbers of up to 18 digits; larger ones stay digits.
_MIMIC2_LIMIT = 10 ** 18


def _mimic2_group_words(n: int, scale: int) -> str:
    """mimic2's recursive speller: the thousands first, then hundreds, tens and ones, then the scale word."""
    words = []
    if n >= 1000:
        words.append(_mimic2_group_words(n // 1000, scale + 1))
        n %= 1000
    if n >= 100:
        words.append(f"{_ONES[n // 100]} hundred")
    rest = n % 100
    if rest >= 20:
        words += [_TENS[rest // 10], _ONES[rest % 10]]
    else:
        words.append(_ONES[rest] if rest < 10 else _TEENS[rest - 10])
    if n > 0:
        words.append(_SCALES[scale])
    return " ".join(w for w in words if w)


def mimic2_number_to_words(number: int) -> str:
    """Spell a non-negative integer as mimic2 does: no hyphens and no "and" (``124001`` -> "one hundred twenty
    four thousand one"), whole hundreds below 3000 in hundreds (``1800`` -> "eighteen hundred", ``2500`` ->
    "twenty five hundred", but ``2000`` -> "two thousand"), no year reading (``1999`` -> "one thousand nine hundred
    ninety nine"), and numbers of 10**18 or more left as digits."""
    if number >= _MIMIC2_LIMIT:
        return str(number)
    if number == 0:
        return "zero"
    if number % 100 == 0 and number % 1000 != 0 and number < 3000:
        return _mimic2_group_words(number // 100, 0) + " hundred"
    return _mimic2_group_words(number, 0)


def mimic2_normalize_numbers(text: str) -> str:
    """mimic2's number rules, in its order: commas inside digit runs removed, ``£`` amounts, ``$`` amounts (as
    :func:`speechblocks.text.normalize_numbers` reads them), decimal points read "point", ordinals (the cardinal's
    last word given its ordinal ending: ``"212th"`` -> "two hundred twelfth"), then every digit run by
    :func:`mimic2_number_to_words`."""
    text = _DIGITS_WITH_COMMAS.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _POUNDS.sub(lambda m: m.group("amount") + " pounds", text)
    text = _DOLLARS.sub(_spell_dollars, text)
    text = _DECIMAL.sub(lambda m: m.group(0).replace(".", " point "), text)
    text = _ORDINAL.sub(lambda m: _mimic2_ordinal(int(m.group("digits"))), text)
    return _DIGITS.sub(lambda m: mimic2_number_to_words(int(m.group(0))), text)


def _mimic2_ordinal(number: int) -> str:
    return _to_ordinal(mimic2_number_to_words(number))


def _mimic2_transliteration_cleaners(text: str) -> str:
    return collapse_whitespace(lowercase(mimic2_convert_to_ascii(text)))


def _mimic2_english_cleaners(text: str) -> str:
    text = lowercase(mimic2_convert_to_ascii(text))
    return collapse_whitespace(expand_abbreviations(mimic2_normalize_numbers(text)))


#: mimic2's cleaner names -> its functions (``basic_cleaners`` and the unchanged steps are keithito's)
MIMIC2_CLEANERS = dict(CLEANERS, convert_to_ascii=mimic2_convert_to_ascii, expand_numbers=mimic2_normalize_numbers,
                       transliteration_cleaners=_mimic2_transliteration_cleaners,
                       english_cleaners=_mimic2_english_cleaners)
