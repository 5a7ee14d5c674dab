"""Text cleaners of the TF1 Tacotron-2 front-end: the three pipelines, their steps and a name registry.

A cleaner is a ``str -> str`` function. The pipelines, with their steps in the original's order:

* ``basic_cleaners``: lower case, collapse whitespace (no transliteration);
* ``transliteration_cleaners``: ASCII transliteration, lower case, collapse whitespace;
* ``english_cleaners``: ASCII transliteration, lower case, number expansion, abbreviation expansion,
  collapse whitespace.

The steps (``convert_to_ascii``, ``lowercase``, ``expand_numbers``, ``expand_abbreviations``,
``collapse_whitespace``) are registered under their own names too, as the original looked cleaners up by
attribute name. :func:`get_cleaner` resolves a name and :func:`clean_text` runs a list of them.

Transliteration uses ``unidecode`` when it is installed (as the original did); without it, a built-in
folding is used instead (see :func:`convert_to_ascii`). Pure Python.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable

from .numbers import normalize_numbers

try:  # optional: the original front-end's transliterator
    from unidecode import unidecode as _unidecode
except ImportError:  # pragma: no cover - depends on the environment
    _unidecode = None

__all__ = ["CLEANERS", "ascii_fold", "basic_cleaners", "clean_text", "collapse_whitespace", "convert_to_ascii",
           "english_cleaners", "expand_abbreviations", "expand_numbers", "get_cleaner", "lowercase",
           "transliteration_cleaners"]

Cleaner = Callable[[str], str]

_WHITESPACE = re.compile(r"\s+")

# (abbreviation, expansion); an abbreviation matches as a whole word followed by a period, in any case.
# Applied in this order, so "mrs." is expanded before "mr." can see it.
_ABBREVIATIONS: tuple[tuple[str, str], ...] = (
    ("mrs", "misess"), ("mr", "mister"), ("dr", "doctor"), ("st", "saint"), ("co", "company"),
    ("jr", "junior"), ("maj", "major"), ("gen", "general"), ("drs", "doctors"), ("rev", "reverend"),
    ("lt", "lieutenant"), ("hon", "honorable"), ("sgt", "sergeant"), ("capt", "captain"), ("esq", "esquire"),
    ("ltd", "limited"), ("col", "colonel"), ("ft", "fort"),
)
_ABBREVIATION_PATTERNS = tuple((re.compile(rf"\b{short}\.", re.IGNORECASE), long)
                               for short, long in _ABBREVIATIONS)

# Characters that have no compatibility decomposition but are common in English text, mapped to what
# unidecode gives for them (so both transliteration paths agree on these).
_FOLD_TABLE = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": ",", "\u201c": '"', "\u201d": '"', "\u201e": ",,",
    "\u2013": "-", "\u2014": "--", "\u00ab": "<<", "\u00bb": ">>", "\u00a1": "!", "\u00bf": "?",
    "\u00df": "ss", "\u00e6": "ae", "\u00c6": "AE", "\u0153": "oe", "\u0152": "OE", "\u00f8": "o", "\u00d8": "O",
    "\u0142": "l", "\u0141": "L", "\u0111": "d", "\u0110": "D", "\u00f0": "d", "\u00d0": "D", "\u00fe": "th",
    "\u00de": "Th", "\u0131": "i", "\u00a3": "PS", "\u20ac": "EUR",
})


def ascii_fold(text: str) -> str:
    """Fold a text to ASCII without ``unidecode``: the fallback of :func:`convert_to_ascii`.

    A few common characters without a Unicode decomposition are first replaced as ``unidecode`` does
    (typographic quotes and dashes, ``« » ¡ ¿``, the letters ``ß æ œ ø ł đ ð þ ı`` and their capitals, ``£``
    -> ``"PS"``, ``€`` -> ``"EUR"``). The text is then NFKD-normalised (accents split from their letters,
    compatibility forms such as ligatures, full-width letters and superscripts replaced by plain ones) and
    every non-ASCII code point left is dropped.

    Differences from ``unidecode``: characters that neither the table nor NFKD maps to ASCII are dropped
    instead of transliterated (non-Latin scripts such as Greek, Cyrillic or CJK vanish, and so do symbols such
    as ``©``, which ``unidecode`` writes ``"(c)"``, or ``°``, written ``"deg"``), and some compatibility
    forms decompose differently (``½`` gives ``"12"`` through the fraction slash being dropped, where
    ``unidecode`` gives ``" 1/2"``).

    Args:
        text (str): any text.

    Returns:
        str: an ASCII-only text.
    """
    folded = unicodedata.normalize("NFKD", text.translate(_FOLD_TABLE))
    return folded.encode("ascii", "ignore").decode("ascii")


def convert_to_ascii(text: str) -> str:
    """Transliterate a text to ASCII.

    With ``unidecode`` installed this is ``unidecode.unidecode(text)``, exactly as in the original
    front-end (``"Café"`` -> ``"Cafe"``, ``"“Hi”"`` -> ``'"Hi"'``, ``"£"`` -> ``"PS"``). Without it,
    :func:`ascii_fold` is used: the same result for accented Latin letters and common punctuation, but
    characters it cannot fold are dropped rather than transliterated (see :func:`ascii_fold`).

    Args:
        text (str): any text.

    Returns:
        str: an ASCII-only text.
    """
    if _unidecode is not None:
        return _unidecode(text)
    return ascii_fold(text)


def lowercase(text: str) -> str:
    """Lower-case a text (``str.lower``)."""
    return text.lower()


def collapse_whitespace(text: str) -> str:
    """Replace every run of whitespace with one space; leading and trailing whitespace are kept (as one space)."""
    return _WHITESPACE.sub(" ", text)


def expand_numbers(text: str) -> str:
    """Spell out the numbers of a text; see :func:`speechblocks.text.numbers.normalize_numbers`."""
    return normalize_numbers(text)


def expand_abbreviations(text: str) -> str:
    """Expand English title and place abbreviations written with a period.

    ``mrs.`` -> "misess", ``mr.`` -> "mister", ``dr.`` -> "doctor", ``st.`` -> "saint", ``co.`` -> "company",
    ``jr.`` -> "junior", ``maj.`` -> "major", ``gen.`` -> "general", ``drs.`` -> "doctors", ``rev.`` ->
    "reverend", ``lt.`` -> "lieutenant", ``hon.`` -> "honorable", ``sgt.`` -> "sergeant", ``capt.`` ->
    "captain", ``esq.`` -> "esquire", ``ltd.`` -> "limited", ``col.`` -> "colonel", ``ft.`` -> "fort".
    The abbreviation must start a word and is matched in any case; the period is consumed and the
    expansion is lower case (``"Dr. Who"`` -> ``"doctor Who"``).

    Args:
        text (str): the text.

    Returns:
        str: the text with abbreviations expanded.
    """
    for pattern, expansion in _ABBREVIATION_PATTERNS:
        text = pattern.sub(expansion, text)
    return text


def basic_cleaners(text: str) -> str:
    """Lower-case and collapse whitespace, without transliteration."""
    return collapse_whitespace(lowercase(text))


def transliteration_cleaners(text: str) -> str:
    """Transliterate to ASCII, lower-case and collapse whitespace."""
    return collapse_whitespace(lowercase(convert_to_ascii(text)))


def english_cleaners(text: str) -> str:
    """English pipeline: ASCII, lower case, numbers and abbreviations spelled out, whitespace collapsed.

    Example: ``"Dr. Smith paid $3.50 on Jan 2nd, 1999."`` ->
    ``"doctor smith paid three dollars, fifty cents on jan second, nineteen ninety-nine."``
    """
    text = lowercase(convert_to_ascii(text))
    text = expand_abbreviations(expand_numbers(text))
    return collapse_whitespace(text)


CLEANERS: dict[str, Cleaner] = {
    "basic_cleaners": basic_cleaners,
    "transliteration_cleaners": transliteration_cleaners,
    "english_cleaners": english_cleaners,
    "convert_to_ascii": convert_to_ascii,
    "lowercase": lowercase,
    "expand_numbers": expand_numbers,
    "expand_abbreviations": expand_abbreviations,
    "collapse_whitespace": collapse_whitespace,
}
"""Cleaner name -> function; the names :func:`get_cleaner` knows."""


def get_cleaner(name: str) -> Cleaner:
    """Look up a cleaner by name.

    Args:
        name (str): a key of :data:`CLEANERS`, e.g. ``"english_cleaners"``.

    Returns:
        Callable[[str], str]: the cleaner.

    Raises:
        ValueError: if the name is unknown; the message lists the known names.
    """
    try:
        return CLEANERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown cleaner {name!r}; known cleaners: {', '.join(sorted(CLEANERS))}") from None


def _cleaner_names(cleaner_names: str | Iterable[str]) -> tuple[str, ...]:
    """Accept a sequence of names or one comma-separated string (the hparams form ``"english_cleaners"``)."""
    if isinstance(cleaner_names, str):
        return tuple(name.strip() for name in cleaner_names.split(","))
    return tuple(cleaner_names)


def clean_text(text: str, cleaner_names: str | Iterable[str] = ("english_cleaners",)) -> str:
    """Run a text through cleaners, in the given order.

    Args:
        text (str): the raw text.
        cleaner_names (str or Iterable[str], optional): cleaner names (see :data:`CLEANERS`), or one
            comma-separated string of names. (Default: ``("english_cleaners",)``)

    Returns:
        str: the cleaned text.

    Raises:
        ValueError: if a cleaner name is unknown (checked before any cleaner runs).
    """
    cleaners = [get_cleaner(name) for name in _cleaner_names(cleaner_names)]
    for cleaner in cleaners:
        text = cleaner(text)
    return text
