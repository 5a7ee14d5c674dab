"""The Tacotron-1 front-ends (keithito/tacotron, MycroftAI/mimic2): ids worked out by hand from the originals'
``text/symbols.py`` (``_pad``, ``_eos``, ``A..Z``, ``a..z``, ``!'(),-.:;?``, space, then ``"@" +`` CMUdict's 84
ARPAbet symbols) and mimic2's own number rules."""
from __future__ import annotations

import pytest

from speechblocks.text import SYMBOL_TABLES, sequence_to_text, text_to_sequence, unknown_characters
from speechblocks.text.tacotron1 import ARPABET, MIMIC2_CLEANERS, mimic2_normalize_numbers

# by hand: "_" 0, "~" 1, "A" 2 .. "Z" 27, "a" 28 .. "z" 53, "!" 54, "'" 55, "(" 56, ")" 57, "," 58, "-" 59,
# "." 60, ":" 61, ";" 62, "?" 63, " " 64, then the ARPAbet from 65 in CMUdict's order
HAND = {"_": 0, "~": 1, "A": 2, "H": 9, "Z": 27, "a": 28, "e": 32, "i": 36, "z": 53, "!": 54, "'": 55, ",": 58,
        ".": 60, "?": 63, " ": 64, "@AA": 65, "@AH0": 74, "@AW1": 83, "@HH": 107, "@L": 118, "@N": 120,
        "@OW1": 124, "@S": 132, "@T": 134, "@ZH": 148}


@pytest.mark.parametrize("table", ["keithito", "mimic2"])
def test_the_149_symbol_tables(table):
    symbols = SYMBOL_TABLES[table]
    assert len(symbols) == 2 + 63 + 84 == 149
    for symbol, i in HAND.items():
        assert symbols[i] == symbol
    assert '"' not in symbols  # the Tacotron-2 table has it, these do not
    assert len(ARPABET) == 84 and ARPABET[0] == "AA" and ARPABET[-1] == "ZH"


def test_ids_by_hand():
    assert text_to_sequence("Hi!", [], symbols="keithito") == [9, 36, 54, 1]
    assert text_to_sequence("{HH AH0 L OW1}", [], symbols="keithito") == [107, 74, 118, 124, 1]
    # "turn left on " + {HH AW1 S S T AH0 N} + " street." (english_cleaners lower-cases around the group)
    turn_left_on = [47, 48, 45, 41, 64, 39, 32, 33, 47, 64, 42, 41, 64]
    arpabet = [107, 83, 132, 132, 134, 74, 120]
    street = [64, 46, 47, 45, 32, 32, 47, 60]
    assert text_to_sequence("Turn left on {HH AW1 S S T AH0 N} Street.", "english_cleaners", symbols="keithito") \
        == turn_left_on + arpabet + street + [1]
    assert text_to_sequence("A {AW1 S}  B", ["english_cleaners"], symbols="mimic2") == [28, 64, 83, 132, 64, 29, 1]
    # the double quote: no id in keithito's table (dropped), 56 in Tacotron-2's, whose space is 65
    assert text_to_sequence('"A"', [], symbols="keithito") == [2, 1]
    assert text_to_sequence('"A" ', []) == [56, 2, 56, 65, 1]
    assert unknown_characters('say "hi"', symbols="keithito") == ['"']


def test_arpabet_back_to_braces_and_refusals():
    assert sequence_to_text([2, 64, 107, 74, 118, 124, 64, 3, 1], symbols="keithito") == "A {HH AH0 L OW1} B~"
    assert sequence_to_text([9, 36, 54, 1, 149, -1], symbols="mimic2") == "Hi!~"
    assert text_to_sequence("{HH XX} hi", [], symbols="keithito") == [107, 64, 35, 36, 1]  # unknown symbol dropped
    with pytest.raises(ValueError, match="ARPAbet symbols outside the symbol table: 'XX'"):
        text_to_sequence("{HH XX} hi", [], strict=True, symbols="keithito")
    assert text_to_sequence("{HH}", [], strict=True, symbols="keithito") == [107, 1]  # ARPAbet alone is not empty
    with pytest.raises(ValueError, match="ARPAbet in curly braces is not supported"):  # Tacotron-2: as before
        text_to_sequence("{HH}", [], strict=True)
    with pytest.raises(ValueError, match="unknown symbol table 'tacotron3'"):
        text_to_sequence("hi", [], symbols="tacotron3")
    with pytest.raises(ValueError, match="unknown cleaner 'nope'"):
        text_to_sequence("hi", ["nope"], symbols="mimic2")


def test_the_cleaners_differ_between_the_originals():
    text = "Mr. Müller paid $3.50 on the 21st, 1999."
    keithito = text_to_sequence(text, "english_cleaners", symbols="keithito")
    assert sequence_to_text(keithito, symbols="keithito") == \
        "mister muller paid three dollars, fifty cents on the twenty-first, nineteen ninety-nine.~"
    mimic2 = text_to_sequence(text, "english_cleaners", symbols="mimic2")
    assert sequence_to_text(mimic2, symbols="mimic2") == \
        "mister mller paid three dollars, fifty cents on the twenty first, one thousand nine hundred ninety nine.~"
    assert MIMIC2_CLEANERS["transliteration_cleaners"]("Ça  Va") == "a va"  # non-ASCII deleted, not transliterated
    assert MIMIC2_CLEANERS["basic_cleaners"]("Ça  Va") == "ça va"


@pytest.mark.parametrize("digits, words", [
    ("0", "zero"), ("15", "fifteen"), ("24", "twenty four"), ("101", "one hundred one"), ("1000", "one thousand"),
    ("1800", "eighteen hundred"), ("2000", "two thousand"), ("2500", "twenty five hundred"),
    ("3000", "three thousand"), ("1,200,000,000", "one billion two hundred million"),
    ("712000000000000000", "seven hundred twelve quadrillion"), ("1" + "0" * 18, "1" + "0" * 18),
    ("212th street", "two hundred twelfth street"), ("1000000th", "one millionth"), ("2nd", "second"),
    ("$0.25", "twenty five cents"), ("£2500!", "twenty five hundred pounds!"), ("6.4 s", "six point four s")])
def test_mimic2_numbers(digits, words):
    """mimic2 spells by its own table: no hyphens, no "and", no year reading, hundreds only below 3000, and 10**18
    and above left as digits."""
    assert mimic2_normalize_numbers(digits) == words
