"""Spelling out numbers the way the TF1 Tacotron-2 English front-end did, without ``inflect``.

The original front-end rewrote digits with the ``inflect`` package. :func:`number_to_words` is a small
stand-alone speller that gives the same words as ``inflect.engine().number_to_words`` for non-negative
integers (cardinals with any ``andword``, and the ordinal form used for ``"21st"``-style tokens), so the library
does not depend on ``inflect``. :func:`normalize_numbers` applies the original's rewriting rules to a text, in
the original's order:

1. digits separated by commas are joined (``"1,000"`` -> ``"1000"``);
2. ``£`` amounts become ``"<digits> pounds"`` (always plural);
3. ``$`` amounts become dollars and cents (see :func:`normalize_numbers`);
4. a decimal point between digits is read ``"point"``;
5. ordinals (digits followed by ``st``, ``nd``, ``rd`` or ``th``) are spelled as ordinals;
6. every remaining run of digits is spelled as a cardinal, with year-style reading between 1000 and 3000.

Pure Python.
"""
from __future__ import annotations

import operator
import re

__all__ = ["MAX_NUMBER", "normalize_numbers", "number_to_words", "read_number"]

_ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS = ("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
          "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
# One name per power of 1000; the largest spellable number is just below 1000 ** len(_SCALES).
_SCALES = ("", "thousand", "million", "billion", "trillion", "quadrillion", "quintillion", "sextillion",
           "septillion", "octillion", "nonillion", "decillion")

MAX_NUMBER: int = 1000 ** len(_SCALES) - 1
"""Largest integer :func:`number_to_words` spells (just below 10**36, as ``inflect``)."""

# Ending of the last word -> its ordinal ending; any other last word just takes "th".
_ORDINAL_ENDINGS = (("ty", "tieth"), ("one", "first"), ("two", "second"), ("three", "third"),
                    ("five", "fifth"), ("eight", "eighth"), ("nine", "ninth"), ("twelve", "twelfth"))


def _two_digits(n: int) -> str:
    """Words for 1 <= n <= 99 (hyphenated compound tens, e.g. ``"forty-two"``)."""
    if n < 10:
        return _ONES[n]
    if n < 20:
        return _TEENS[n - 10]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def _three_digits(n: int, andword: str) -> str:
    """Words for 1 <= n <= 999; ``andword`` joins the hundreds to a non-zero remainder."""
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        return _two_digits(rest)
    words = f"{_ONES[hundreds]} hundred"
    return f"{words} {andword} {_two_digits(rest)}" if rest else words


def _to_ordinal(words: str) -> str:
    for ending, replacement in _ORDINAL_ENDINGS:
        if words.endswith(ending):
            return words[: -len(ending)] + replacement
    return words + "th"


def number_to_words(number: int, andword: str = "and", ordinal: bool = False) -> str:
    """Spell a non-negative integer in English words.

    The result equals ``inflect.engine().number_to_words(number, andword=andword)`` (or, with
    ``ordinal=True``, inflect's result for the string ``f"{number}th"``): groups of three digits are named with
    the short-scale words up to "decillion" and separated by ``", "``; ``andword`` goes between "hundred" and a
    non-zero rest; when the last three digits are 1..99 and a higher group precedes them, they are attached
    with ``andword`` instead of a comma (``1001`` -> ``"one thousand and one"``). An empty ``andword`` leaves
    a single space. Tens and ones are hyphenated (``"twenty-one"``).

    Args:
        number (int): the integer to spell, ``0 <= number <= MAX_NUMBER``.
        andword (str, optional): the word joining hundreds and the final small group. (Default: ``"and"``)
        ordinal (bool, optional): spell the ordinal (``"twenty-first"``) instead of the cardinal.
            (Default: ``False``)

    Returns:
        str: the words, lower case.

    Raises:
        ValueError: if ``number`` is negative or larger than :data:`MAX_NUMBER`.
    """
    n = operator.index(number)
    if n < 0:
        raise ValueError(f"number_to_words: negative numbers are not supported, got {n}")
    if n > MAX_NUMBER:
        raise ValueError(f"number_to_words: {n} is too large to spell (the largest is 10**36 - 1)")
    if n == 0:
        words = "zero"
    else:
        groups = []  # the non-zero three-digit groups, highest first
        rest, scale = n, 0
        while rest:
            rest, group = divmod(rest, 1000)
            if group:
                groups.append(" ".join(filter(None, (_three_digits(group, andword), _SCALES[scale]))))
            scale += 1
        groups.reverse()
        if len(groups) > 1 and 0 < n % 1000 < 100:
            words = ", ".join(groups[:-1]) + f" {andword} " + groups[-1]
        else:
            words = ", ".join(groups)
        words = " ".join(words.split())  # an empty andword leaves one space, not two
    return _to_ordinal(words) if ordinal else words


def read_number(number: int) -> str:
    """Spell an integer the way the front-end reads plain numbers, with year-style reading for 1001..2999.

    Strictly between 1000 and 3000: ``2000`` is "two thousand", ``2001``..``2009`` are "two thousand one"..
    "two thousand nine", whole hundreds are read in hundreds (``1900`` -> "nineteen hundred"), and any other
    number is read as two pairs of digits (``1984`` -> "nineteen eighty-four", ``1905`` -> "nineteen oh five").
    Every other number is an ordinary cardinal without "and" (``101`` -> "one hundred one",
    ``1000`` -> "one thousand", ``3000`` -> "three thousand").

    Args:
        number (int): the integer, ``0 <= number <= MAX_NUMBER``.

    Returns:
        str: the words.
    """
    n = operator.index(number)
    if not 1000 < n < 3000:
        return number_to_words(n, andword="")
    if n == 2000:
        return "two thousand"
    if 2000 < n < 2010:
        return "two thousand " + number_to_words(n - 2000)
    high, low = divmod(n, 100)
    if low == 0:
        return _two_digits(high) + " hundred"
    low_words = _two_digits(low) if low >= 10 else "oh " + _ONES[low]
    return f"{_two_digits(high)} {low_words}"


_DIGITS_WITH_COMMAS = re.compile(r"[0-9][0-9,]+[0-9]")
_POUNDS = re.compile(r"£(?P<amount>[0-9,]*[0-9]+)")
_DOLLARS = re.compile(r"\$(?P<amount>[0-9.,]*[0-9]+)")
_DECIMAL = re.compile(r"[0-9]+\.[0-9]+")
_ORDINAL = re.compile(r"(?P<digits>[0-9]+)(?:st|nd|rd|th)")
_DIGITS = re.compile(r"[0-9]+")


def _amount_int(digits: str) -> int:
    # Stray commas can survive the comma rule (e.g. "$1,.5"); the original's int() failed on them.
    digits = digits.replace(",", "")
    return int(digits) if digits else 0


def _unit(count: int, singular: str) -> str:
    return f"{count} {singular if count == 1 else singular + 's'}"


def _spell_dollars(match: re.Match) -> str:
    amount = match.group("amount")
    pieces = amount.split(".")
    if len(pieces) > 2:  # more than one point: left as digits followed by "dollars"
        return f"{amount} dollars"
    dollars = _amount_int(pieces[0])
    cents = _amount_int(pieces[1]) if len(pieces) == 2 else 0
    if dollars and cents:
        return f"{_unit(dollars, 'dollar')}, {_unit(cents, 'cent')}"
    if dollars:
        return _unit(dollars, "dollar")
    if cents:
        return _unit(cents, "cent")
    return "zero dollars"


def normalize_numbers(text: str) -> str:
    """Rewrite the numbers of a text as words, with the TF1 Tacotron-2 English rules.

    The rules run one after the other over the whole text (each sees the previous one's output):

    * commas inside a digit run are removed: ``"1,234"`` -> ``"1234"``;
    * ``"£<digits>"`` -> ``"<digits> pounds"`` (plural even for 1);
    * ``"$<amount>"``: the amount is split at the point into dollars and cents, each read as a whole
      number (so ``"$1.5"`` is 1 dollar and 5 cents) and named in the singular when it is 1:
      ``"$3.50"`` -> "three dollars, fifty cents", ``"$1"`` -> "one dollar", ``"$0.01"`` -> "one cent",
      ``"$0"`` -> "zero dollars"; an amount with two or more points is kept as ``"<amount> dollars"``;
    * ``"<digits>.<digits>"`` -> ``"<digits> point <digits>"`` (each side then read as a whole number);
    * digits followed by ``st``/``nd``/``rd``/``th`` become the ordinal of the digits, whatever the suffix,
      with "and" (``"101st"`` -> "one hundred and first", ``"1999th"`` ->
      "one thousand, nine hundred and ninety-ninth");
    * every other digit run is read by :func:`read_number` (no "and"; year-style between 1000 and 3000).

    Matching is on ASCII digits and lower-case ordinal suffixes only. Where the original raised on a dollar
    amount with a stray comma (``"$1,.5"``), the comma is ignored here.

    Args:
        text (str): the text.

    Returns:
        str: the text with its numbers spelled out.

    Raises:
        ValueError: if a digit run is larger than :data:`MAX_NUMBER` (the original failed there too).
    """
    text = _DIGITS_WITH_COMMAS.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _POUNDS.sub(lambda m: m.group("amount") + " pounds", text)
    text = _DOLLARS.sub(_spell_dollars, text)
    text = _DECIMAL.sub(lambda m: m.group(0).replace(".", " point "), text)
    text = _ORDINAL.sub(lambda m: number_to_words(int(m.group("digits")), ordinal=True), text)
    return _DIGITS.sub(lambda m: read_number(int(m.group(0))), text)
