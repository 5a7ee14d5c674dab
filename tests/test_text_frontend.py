"""speechblocks.text: the Tacotron-2 text front-end (symbols, cleaners, numbers, text <-> ids).

Expected values are written by hand from the front-end's rules, or taken from ``inflect`` / ``unidecode``
(the packages the original front-end used) when they are installed.
"""
import random
import string
import subprocess
import sys

import numpy as np
import pytest

import speechblocks.text as T
from speechblocks.text import cleaners as cleaners_module
from speechblocks.text.numbers import MAX_NUMBER, normalize_numbers, number_to_words, read_number

# The table by its rule: pad, eos, A-Z, a-z, then the punctuation and the space.
EXPECTED_CHARS = string.ascii_uppercase + string.ascii_lowercase + "!'\"(),-.:;? "


def ids_of(text):
    """Ids of already-clean text, by the rule above (independent of the library's table)."""
    return [2 + EXPECTED_CHARS.index(c) for c in text] + [1]


# ----------------------------------------------------------------------------------------------- symbols

def test_symbol_table():
    assert len(T.SYMBOLS) == 66
    assert T.PAD == "_" and T.EOS == "~"
    assert T.SYMBOLS[0] == "_" and T.SYMBOLS[1] == "~"
    assert "".join(T.SYMBOLS[2:]) == EXPECTED_CHARS
    assert T.symbol_to_id == {s: i for i, s in enumerate(["_", "~", *EXPECTED_CHARS])}
    assert (T.symbol_to_id["A"], T.symbol_to_id["Z"], T.symbol_to_id["a"], T.symbol_to_id["z"]) == (2, 27, 28, 53)
    assert [T.symbol_to_id[c] for c in "!'\"(),-.:;? "] == list(range(54, 66))
    assert not any(s.startswith("@") for s in T.SYMBOLS)  # no ARPAbet entries


# ---------------------------------------------------------------------------------------- text_to_sequence

def test_hi_basic_cleaners():
    # basic_cleaners lower-cases: h=35, i=36, !=54, then EOS.
    assert T.text_to_sequence("Hi!", ["basic_cleaners"]) == [35, 36, 54, 1]
    # a cleaner that keeps the case: H=9
    assert T.text_to_sequence("Hi!", ["collapse_whitespace"]) == [9, 36, 54, 1]


@pytest.mark.parametrize("text,names,cleaned", [
    ("Hello, World!", ["basic_cleaners"], "hello, world!"),
    ("Is it 'quoted' (yes); ok: no?", ["basic_cleaners"], "is it 'quoted' (yes); ok: no?"),
    ("Dr. Who has 2 cats.", ["english_cleaners"], "doctor who has two cats."),
    ("Café  au lait", ["transliteration_cleaners"], "cafe au lait"),
])
def test_text_to_sequence_ids(text, names, cleaned):
    assert T.text_to_sequence(text, names) == ids_of(cleaned)


def test_default_cleaners_are_english_and_names_may_be_comma_separated():
    assert T.text_to_sequence("Mr. 5") == ids_of("mister five")
    assert T.text_to_sequence("Mr. 5", "english_cleaners") == ids_of("mister five")
    assert T.text_to_sequence("A  B", "lowercase, collapse_whitespace") == ids_of("a b")


def test_eos_only_for_empty_text():
    assert T.text_to_sequence("", ["basic_cleaners"]) == [1]


def test_unknown_characters_dropped_silently_by_default():
    assert T.text_to_sequence("a+b=c", ["basic_cleaners"]) == ids_of("abc")
    # PAD and EOS characters are never taken from the text
    assert T.text_to_sequence("a_b~c", ["basic_cleaners"]) == ids_of("abc")
    assert T.text_to_sequence("Ωmega", ["basic_cleaners"]) == ids_of("mega")


def test_unknown_characters():
    assert T.unknown_characters("hello, world") == []
    assert T.unknown_characters("héllo wörld é") == ["é", "ö"]
    assert T.unknown_characters("a_b~c{d}") == ["_", "~", "{", "}"]
    assert T.unknown_characters("") == []


def test_strict_unknown_characters_message():
    with pytest.raises(ValueError) as info:
        T.text_to_sequence("Ωmega +\n1", ["basic_cleaners"], strict=True)
    message = str(info.value)
    assert "'ω'" in message and "'+'" in message
    assert "'ωmega + 1'" in message  # the cleaned text
    assert "\n" not in message
    with pytest.raises(ValueError, match="'_'"):
        T.text_to_sequence("snake_case", ["basic_cleaners"], strict=True)


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_strict_empty_text(text):
    with pytest.raises(ValueError, match="empty text"):
        T.text_to_sequence(text, ["basic_cleaners"], strict=True)


def test_strict_accepts_clean_text():
    assert T.text_to_sequence("Hello there.", strict=True) == ids_of("hello there.")


def test_unknown_cleaner():
    with pytest.raises(ValueError) as info:
        T.text_to_sequence("x", ["no_such_cleaner"])
    message = str(info.value)
    assert "no_such_cleaner" in message
    for known in ("basic_cleaners", "transliteration_cleaners", "english_cleaners"):
        assert known in message
    with pytest.raises(ValueError, match="nope"):
        T.get_cleaner("nope")
    with pytest.raises(ValueError, match="nope"):
        T.clean_text("x", ["basic_cleaners", "nope"])


def test_get_cleaner():
    assert T.get_cleaner("basic_cleaners")("A  B") == "a b"
    assert T.get_cleaner("english_cleaners") is T.english_cleaners
    assert T.get_cleaner("transliteration_cleaners") is T.transliteration_cleaners


# ------------------------------------------------------------------------------------------ curly braces

def test_arpabet_group_is_dropped():
    # The text around a group is cleaned on its own; the group has no symbols in this table.
    ids = T.text_to_sequence("Turn left on {HH AW1 S S T AH0 N} Street.")
    assert ids == ids_of("turn left on  street.")
    assert T.text_to_sequence("a{B}c{D E}f", ["basic_cleaners"]) == ids_of("acf")
    assert T.text_to_sequence("{AA}{BB}", ["basic_cleaners"]) == [1]


@pytest.mark.parametrize("text,cleaned", [
    ("x {} y", "x  y"),         # empty braces are no group: the braces alone are dropped
    ("x { y", "x  y"),          # unclosed brace
    ("a\n{B}", "a b"),          # a group after a newline is not seen: its content is kept as text
    ("a {B} c\nd", "a  c"),     # text after a newline following a group is lost
])
def test_braces_that_are_no_group(text, cleaned):
    assert T.text_to_sequence(text, ["basic_cleaners"]) == ids_of(cleaned)


def test_strict_rejects_arpabet():
    with pytest.raises(ValueError, match="ARPAbet") as info:
        T.text_to_sequence("Turn left on {HH AW1 S S T AH0 N} Street.", strict=True)
    assert "{HH AW1 S S T AH0 N}" in str(info.value)
    with pytest.raises(ValueError, match="'\\{', '\\}'"):
        T.text_to_sequence("x {} y", ["basic_cleaners"], strict=True)


# ------------------------------------------------------------------------------------------ round trip

@pytest.mark.parametrize("text,names", [
    ("The quick brown fox, aged 3, jumped!", ["english_cleaners"]),
    ("\"Quoted\" (and) hyphen-ated: yes; no?", ["basic_cleaners"]),
    ("Crème brûlée", ["transliteration_cleaners"]),
])
def test_round_trip(text, names):
    ids = T.text_to_sequence(text, names)
    assert T.sequence_to_text(ids) == T.clean_text(text, names) + "~"


def test_sequence_to_text():
    assert T.sequence_to_text([0, 1, 2, 65, 28]) == "_~A a"
    assert T.sequence_to_text([2, 66, -1, 1000, 3]) == "AB"  # ids outside the table are skipped
    assert T.sequence_to_text(np.array([35, 36, 54, 1], dtype=np.int64)) == "hi!~"
    assert T.sequence_to_text([]) == ""


# ------------------------------------------------------------------------------------------ cleaners

def test_basic_cleaners():
    assert T.basic_cleaners("  Hello   WORLD\t\nagain ") == " hello world again "
    assert T.basic_cleaners("Ünïcode 42") == "ünïcode 42"  # no transliteration, no numbers


def test_transliteration_cleaners():
    assert T.transliteration_cleaners("  Élan   Vital 42 ") == " elan vital 42 "


@pytest.mark.parametrize("text,cleaned", [
    ("Dr. Smith paid $3.50 on Jan 2nd, 1999.", "doctor smith paid three dollars, fifty cents on jan second, "
                                              "nineteen ninety-nine."),
    ("1ST place", "first place"),              # lower case before numbers
    ("2nd St. and Main", "second saint and main"),  # numbers before abbreviations
    ("Ms.  Café,\tno. 7", "ms. cafe, no. seven"),  # transliteration, whitespace collapsed last
    ("It cost $1,234.56!", "it cost twelve thirty-four dollars, fifty-six cents!"),
])
def test_english_cleaners(text, cleaned):
    assert T.english_cleaners(text) == cleaned
    assert T.clean_text(text) == cleaned
    assert T.clean_text(text, ["english_cleaners"]) == cleaned


ABBREVIATIONS = [
    ("mrs", "misess"), ("mr", "mister"), ("dr", "doctor"), ("st", "saint"), ("co", "company"),
    ("jr", "junior"), ("maj", "major"), ("gen", "general"), ("drs", "doctors"), ("rev", "reverend"),
    ("lt", "lieutenant"), ("hon", "honorable"), ("sgt", "sergeant"), ("capt", "captain"), ("esq", "esquire"),
    ("ltd", "limited"), ("col", "colonel"), ("ft", "fort"),
]


@pytest.mark.parametrize("short,long", ABBREVIATIONS)
def test_abbreviations(short, long):
    assert T.expand_abbreviations(f"see {short}. x") == f"see {long} x"
    assert T.expand_abbreviations(f"see {short.upper()}. x") == f"see {long} x"  # any case, lower expansion
    assert T.english_cleaners(f"{short.capitalize()}. Jones") == f"{long} jones"
    assert T.expand_abbreviations(f"see {short} x") == f"see {short} x"  # the period is required
    assert T.expand_abbreviations(f"see x{short}. x") == f"see x{short}. x"  # must start a word


def test_abbreviation_details():
    assert T.expand_abbreviations("Mrs. and Mr. and Drs.") == "misess and mister and doctors"
    assert T.expand_abbreviations("st.louis") == "saintlouis"
    assert T.expand_abbreviations("(Dr.)") == "(doctor)"


def test_transliteration_with_unidecode():
    unidecode = pytest.importorskip("unidecode").unidecode
    assert cleaners_module._unidecode is not None
    for text in ["Café", "Crème brûlée", "“Hi” — it’s…", "Ωmega", "straße", "£5", "½"]:
        assert T.convert_to_ascii(text) == unidecode(text)
    assert T.convert_to_ascii("Crème brûlée") == "Creme brulee"
    assert T.english_cleaners("£5") == "psfive"  # unidecode turns £ into "PS" before the £ rule can see it


def test_fallback_table_agrees_with_unidecode():
    unidecode = pytest.importorskip("unidecode").unidecode
    chars = "‘’‚“”„–—«»¡¿ßæÆœŒøØłŁđĐðÐþÞı£€" + "àéîõüçñÅ" + "ﬁ…\u00a0"
    for char in chars:
        assert T.ascii_fold(char) == unidecode(char), char


def test_transliteration_fallback(monkeypatch):
    monkeypatch.setattr(cleaners_module, "_unidecode", None)
    assert T.convert_to_ascii("Crème brûlée") == "Creme brulee"
    assert T.convert_to_ascii("“Hi” — it’s…") == "\"Hi\" -- it's..."
    assert T.convert_to_ascii("straße, Æsop, Łódź") == "strasse, AEsop, Lodz"
    assert T.convert_to_ascii("ﬁne x²") == "fine x2"
    assert T.convert_to_ascii("Ωmega 中文") == "mega "  # no fold: dropped
    assert T.convert_to_ascii("½") == "12"
    assert T.transliteration_cleaners("Ça  VA") == "ca va"
    assert T.english_cleaners("£5 for Zoë") == "psfive for zoe"
    assert T.text_to_sequence("Ωmega", ["transliteration_cleaners"], strict=True) == ids_of("mega")


# ------------------------------------------------------------------------------------------ numbers

@pytest.mark.parametrize("n,words", [
    (0, "zero"), (1, "one"), (7, "seven"), (10, "ten"), (13, "thirteen"), (20, "twenty"), (42, "forty-two"),
    (99, "ninety-nine"), (100, "one hundred"), (101, "one hundred one"), (110, "one hundred ten"),
    (999, "nine hundred ninety-nine"), (1000, "one thousand"),
    (3000, "three thousand"), (3001, "three thousand one"), (3100, "three thousand, one hundred"),
    (12345, "twelve thousand, three hundred forty-five"), (100000, "one hundred thousand"),
    (101000, "one hundred one thousand"), (1000001, "one million one"), (1001000, "one million, one thousand"),
    (1234567, "one million, two hundred thirty-four thousand, five hundred sixty-seven"),
    (2 * 10**9, "two billion"), (10**33, "one decillion"),
])
def test_cardinals(n, words):
    assert read_number(n) == words
    assert number_to_words(n, andword="") == words
    assert normalize_numbers(str(n)) == words


@pytest.mark.parametrize("n,words", [
    (1001, "ten oh one"), (1005, "ten oh five"), (1010, "ten ten"), (1100, "eleven hundred"),
    (1234, "twelve thirty-four"), (1900, "nineteen hundred"), (1905, "nineteen oh five"),
    (1984, "nineteen eighty-four"), (1999, "nineteen ninety-nine"), (2000, "two thousand"),
    (2001, "two thousand one"), (2009, "two thousand nine"), (2010, "twenty ten"), (2019, "twenty nineteen"),
    (2100, "twenty-one hundred"), (2999, "twenty-nine ninety-nine"),
])
def test_year_like_numbers(n, words):
    assert read_number(n) == words
    assert normalize_numbers(str(n)) == words


def test_and_word():
    assert number_to_words(101) == "one hundred and one"
    assert number_to_words(1001) == "one thousand and one"
    assert number_to_words(1100) == "one thousand, one hundred"
    assert number_to_words(1234) == "one thousand, two hundred and thirty-four"
    assert number_to_words(1001001) == "one million, one thousand and one"


@pytest.mark.parametrize("text,words", [
    ("1st", "first"), ("2nd", "second"), ("3rd", "third"), ("4th", "fourth"), ("5th", "fifth"),
    ("8th", "eighth"), ("9th", "ninth"), ("11th", "eleventh"), ("12th", "twelfth"), ("13th", "thirteenth"),
    ("20th", "twentieth"), ("21st", "twenty-first"), ("42nd", "forty-second"), ("100th", "one hundredth"),
    ("101st", "one hundred and first"), ("1000th", "one thousandth"), ("1001st", "one thousand and first"),
    ("1999th", "one thousand, nine hundred and ninety-ninth"), ("0th", "zeroth"), ("1th", "first"),
    ("007th", "seventh"), ("1000000th", "one millionth"),
])
def test_ordinals(text, words):
    assert normalize_numbers(text) == words


@pytest.mark.parametrize("text,words", [
    ("$3.50", "three dollars, fifty cents"), ("$1", "one dollar"), ("$2", "two dollars"),
    ("$1.01", "one dollar, one cent"), ("$2.01", "two dollars, one cent"), ("$1.5", "one dollar, five cents"),
    ("$0.99", "ninety-nine cents"), ("$0.01", "one cent"), ("$.5", "five cents"), ("$0", "zero dollars"),
    ("$0.00", "zero dollars"), ("$5.00", "five dollars"), ("$2,000", "two thousand dollars"),
    ("$1,000,000", "one million dollars"), ("$1.2.3", "one point two.three dollars"),
    ("$1,.5", "one dollar, five cents"),  # the original raised on the stray comma
])
def test_dollars(text, words):
    assert normalize_numbers(text) == words


@pytest.mark.parametrize("text,words", [
    ("£5", "five pounds"), ("£1", "one pounds"), ("£1,000", "one thousand pounds"),
    ("3.14", "three point fourteen"), ("0.5", "zero point five"), ("1.05", "one point five"),
    ("1,000", "one thousand"), ("10,000", "ten thousand"), ("1,2", "twelve"), ("1, 2", "one, two"),
    ("007", "seven"), ("room 101, 2 beds", "room one hundred one, two beds"), ("5thousand", "fifthousand"),
    ("no digits", "no digits"),
])
def test_other_number_rules(text, words):
    assert normalize_numbers(text) == words
    assert T.expand_numbers(text) == words


def test_number_range():
    assert number_to_words(MAX_NUMBER, andword="").startswith("nine hundred ninety-nine decillion, ")
    with pytest.raises(ValueError, match="too large"):
        number_to_words(MAX_NUMBER + 1)
    with pytest.raises(ValueError, match="negative"):
        number_to_words(-1)
    with pytest.raises(ValueError):
        normalize_numbers("1" + "0" * 36)


# ------------------------------------------------------------------------- against inflect (the original's)

@pytest.fixture(scope="module")
def inflect_engine():
    return pytest.importorskip("inflect").engine()


def _sample_numbers():
    rng = random.Random(1234)
    big = [rng.randrange(10 ** rng.randint(4, 36)) for _ in range(800)]
    edges = [10**k + d for k in range(3, 36, 3) for d in (-1, 0, 1, 10, 99, 100, 101)]
    return list(range(3001)) + big + edges + [MAX_NUMBER]


def test_cardinals_match_inflect(inflect_engine):
    for n in _sample_numbers():
        for andword in ("", "and"):
            assert number_to_words(n, andword=andword) == inflect_engine.number_to_words(n, andword=andword), n


def test_ordinals_match_inflect(inflect_engine):
    for n in _sample_numbers():
        suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        expected = inflect_engine.number_to_words(f"{n}{suffix}")
        assert number_to_words(n, ordinal=True) == expected, n
        assert normalize_numbers(f"{n}{suffix}") == expected, n


def test_plain_numbers_match_inflect(inflect_engine):
    def reference(n):
        # Year-style reading strictly between 1000 and 3000, plain cardinals without "and" elsewhere.
        if not 1000 < n < 3000:
            return inflect_engine.number_to_words(n, andword="")
        if n == 2000:
            return "two thousand"
        if 2000 < n < 2010:
            return "two thousand " + inflect_engine.number_to_words(n - 2000)
        if n % 100 == 0:
            return inflect_engine.number_to_words(n // 100) + " hundred"
        pairs = inflect_engine.number_to_words(n, andword="", zero="oh", group=2)
        return pairs.replace(", ", " ")

    for n in _sample_numbers():
        assert read_number(n) == reference(n), n
        assert normalize_numbers(f"x {n} y") == f"x {reference(n)} y", n


# ------------------------------------------------------------------------------------------ isolation

def test_imports_no_framework_and_no_inflect():
    code = ("import sys, speechblocks.text\n"
            "speechblocks.text.text_to_sequence('Dr. 1999, $3.50 and 21st')\n"
            "bad = sorted(m for m in ('torch', 'tensorflow', 'keras', 'inflect') if m in sys.modules)\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
