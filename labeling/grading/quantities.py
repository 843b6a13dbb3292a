"""What a number in an answer is of: a unit, a scale word, a number word, a time of day.

Each of these changes the value it is written with, so none is ever dropped unread. A unit is
read with pint (exact conversions: the registry's factors are fractions) and classed: a
measure (`cm`, `km/h`, `kg`), an angle (`^\\circ`, `radians`), money (`\\$`, `cents`), the
generic `units`, or a noun naming what is counted (`5 students`). What is none of these is
"unknown", and an answer with an unknown unit is graded unsure.
"""

import functools
from dataclasses import dataclass
from fractions import Fraction

from core import patterns
from labeling.grading.verdict import Verdict
from labeling.grading.vocabulary import AS_I, FUNCTION_WORDS, SPACE_CHARS, WORD_CHARS
from labeling.grading.vocabulary import DIGIT as D
from labeling.grading.vocabulary import SPACE as S

# A scale word multiplies the number before it: `5 million` is 5 \times 10^6, not 5 of a unit.
SCALE_WORDS = {
    "hundred": 10**2, "thousand": 10**3, "million": 10**6, "billion": 10**9,
    "trillion": 10**12, "quadrillion": 10**15, "dozen": 12, "gross": 144, "score": 20,
    "lakh": 10**5, "crore": 10**7, "bn": 10**9,
}  # fmt: skip
# Written right after the digits (`7k`, `2.5M`) or as `\text{k}`; `5 m` is five metres.
_SCALE_LETTERS = {"k": 10**3, "K": 10**3, "M": 10**6}
# Words after a number that change its value in ways not read here (`5 tenths`, `3 halves`,
# `2 pairs`): an answer with one is unsure, never "5 of something".
# Case-blind: read `.translate(AS_I)` (see `vocabulary`). Read whole, and anchored so: a search
# would rescan a run of letters for `illion` at each match (quadratic on 100 kB of `dozens`).
_VALUE_WORDS = patterns.compile(
    r"^(?:half|halves|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|ninths?"
    r"|tenths?|hundredths?|thousandths?|millionths?|billionths?|pairs?|couples?|times"
    rf"|fold|squared|cubed|percent|per{S}?cent|percentage|points?|am|pm|a\.m|p\.m|o'?clock"
    r"|noon|midnight|[a-z]*illions?|thousands|hundreds|dozens)$",
    patterns.IGNORECASE,
)
_GENERIC = patterns.compile(
    rf"(?:(?:square|sq\.?|cubic|cu\.?){S}+)?units?(?:{S}*(?:squared|cubed|\^{D}))?"
)
_ANGLES = {"degree": "degree", "degrees": "degree", "deg": "degree", "\\circ": "degree",
           "radian": "radian", "radians": "radian", "rad": "radian"}  # fmt: skip
# pint reads some short words as units no answer means: `k` (Boltzmann), `pm` (picometre).
_MEASURE_DIMENSIONS = {"[length]", "[time]", "[mass]", "[currency]"}
_COUNT_NOUN = patterns.compile(r"[a-z]{3,}(?: [a-z]{3,}){0,2}")
_SPACES = patterns.compile(rf"{S}+")
_POWER = patterns.compile(rf"\^\{{?({D})\}}?")


@dataclass(frozen=True)
class Unit:
    text: str  # as written, lower-case, single spaces
    kind: str  # "measure", "angle", "generic", "count" or "unknown"


@functools.cache
def _registry():
    import pint  # ~0.4 s to load; only answers with a unit need it

    registry = pint.UnitRegistry(non_int_type=Fraction, autoconvert_offset_to_baseunit=False)
    registry.define("dollar = [currency] = usd = dollars")
    registry.define("cent = dollar / 100 = cents")
    return registry


def unit_of(text: str) -> Unit:
    """Class the unit text written after a number (`cm`, `square units`, `students`)."""
    text = _SPACES.sub(" ", text.strip().lower().rstrip("."))
    text = _POWER.sub(r"^\1", text)
    if text in _ANGLES:
        return Unit(_ANGLES[text], "angle")
    if _GENERIC.fullmatch(text):
        return Unit("units", "generic")
    if _VALUE_WORDS.fullmatch(text.translate(AS_I)) or text in SCALE_WORDS:
        return Unit(text, "unknown")
    if not FUNCTION_WORDS.isdisjoint(text.split()):
        return Unit(text, "unknown")  # `5 more`, `5 is wrong`; pint reads `are` as 100 m^2
    measure = _measure(text)
    if measure is not None:
        return Unit(measure, "measure")
    if _COUNT_NOUN.fullmatch(text):
        return Unit(text, "count")
    return Unit(text, "unknown")


def _measure(text: str) -> str | None:
    """pint's canonical name of a unit of length, area, volume, time, mass, speed or money."""
    import pint

    if len(text) < 2 and text not in ("m", "g", "s", "h", "l"):
        return None
    try:
        units = _registry().parse_units(text.replace(" per ", "/"))
    except (pint.errors.PintError, ValueError, TypeError, AttributeError, SyntaxError):
        return None
    dimensions = units.dimensionality
    if not dimensions or not set(dimensions) <= _MEASURE_DIMENSIONS:
        return None
    # pint's own formatter cannot write the fraction exponents of an exact registry.
    return " ".join(f"{name}^{power}" for name, power in sorted(units._units.items()))


def conversion(left: Unit | None, right: Unit | None) -> Fraction | Verdict:
    """The factor that puts a value written in `left` into `right` (1 where either side has no
    unit: a bare number is read in the other side's unit); NOT_EQUAL for units of different
    things (`cm` and `cm^2`), UNSURE where the units cannot be related."""
    if left is None and right is None:
        return Fraction(1)
    if left is None or right is None:
        return Verdict.UNSURE if (left or right).kind == "unknown" else Fraction(1)
    if "unknown" in (left.kind, right.kind):
        return Verdict.UNSURE
    if left.text == right.text or "generic" in (left.kind, right.kind):
        return Fraction(1)
    if left.kind == right.kind == "measure":
        import pint

        try:
            factor = _registry().Quantity(Fraction(1), left.text).to(right.text).magnitude
        except pint.errors.DimensionalityError:
            return Verdict.NOT_EQUAL
        return Fraction(factor)
    return Verdict.UNSURE  # degrees against radians, `students` against `cm`


# ---------------------------------------------------------------------------------------------
# Scale words and number words

# `\n?$` is Python's `$`: the end, or before a newline that ends the text.
_SCALED = patterns.compile(
    rf"({D}[{D}.]*){S}*(?:\\(?:text|mbox|mathrm)\{{{S}*([a-zA-Z]+){S}*\}}|{S}([a-zA-Z]+)"
    r"|([kKM]))\n?$"
)


def scaled(text: str) -> str:
    """`5 million` as `5\\times10^{6}`, `3 dozen` as `3\\times12`; other text unchanged."""
    match = _SCALED.search(text)
    if match is None:
        return text
    if match[4] or match[2] in _SCALE_LETTERS:
        factor = _SCALE_LETTERS[match[4] or match[2]]
    elif (word := (match[2] or match[3]).lower()) in SCALE_WORDS:
        factor = SCALE_WORDS[word]
    else:
        return text
    power = len(str(factor)) - 1
    written = f"10^{{{power}}}" if factor == 10**power else str(factor)
    return f"{text[: match.start()]}{match[1]}\\times{written}"


_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_NUMBER_WORDS = {word: n for n, word in enumerate(_ONES)} | {
    word: 10 * (n + 2) for n, word in enumerate(_TENS)
}
_PARTS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4,
          "fourth": 4, "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6,
          "eighth": 8, "eighths": 8, "tenth": 10, "tenths": 10}  # fmt: skip


_ORDINALS = {"first": 1, "second": 2, "third": 3, "fifth": 5, "eighth": 8, "ninth": 9,
             "twelfth": 12}  # fmt: skip
_ORDINAL_SUFFIX = patterns.compile(
    rf"(?:the{S}+)?({D}+){S}*(?:\^\{{?{S}*(?:\\text\{{)?(st|nd|rd|th)\}}?{S}*\}}?"
    rf"|\\text\{{{S}*(st|nd|rd|th){S}*\}}|(st|nd|rd|th))"
)
_SPACES_OR_HYPHENS = patterns.compile(rf"[{SPACE_CHARS}\-]+")


def number_in_words(text: str) -> str | None:
    """`five` as `5`, `negative twenty-one` as `-21`, `two thirds` as `\\frac{2}{3}`, `a dozen`
    as `12`, `fourth` and `4^{th}` as `4`; None for other text."""
    text = _SPACES_OR_HYPHENS.sub(" ", text.strip().lower().rstrip(".")).strip()
    if match := _ORDINAL_SUFFIX.fullmatch(text):
        return match[1]
    words = text.split()
    if not words or len(words) > 6:
        return None
    sign = ""
    if words[0] in ("negative", "minus"):
        sign, words = "-", words[1:]
    if words and words[0] == "the":
        words = words[1:]
    if len(words) == 1 and (ordinal := _ordinal(words[0])) is not None:
        return f"{sign}{ordinal}"
    if len(words) == 2 and words[1] in _PARTS:
        top = 1 if words[0] in ("a", "an", "one") else _NUMBER_WORDS.get(words[0])
        return None if top is None else f"{sign}\\frac{{{top}}}{{{_PARTS[words[1]]}}}"
    if len(words) == 3 and words[0] == "half" and words[1] in ("a", "an"):
        factor = SCALE_WORDS.get(words[2])
        return None if factor is None or factor % 2 else f"{sign}{factor // 2}"
    if len(words) == 2 and words[0] in ("a", "an") and words[1] in SCALE_WORDS:
        return f"{sign}{SCALE_WORDS[words[1]]}"
    value = _whole_number(words)
    return None if value is None else f"{sign}{value}"


def _ordinal(word: str) -> int | None:
    if word in _ORDINALS:
        return _ORDINALS[word]
    for stem, ending in (("ieth", "y"), ("th", "")):
        if word.endswith(stem) and word[: -len(stem)] + ending in _NUMBER_WORDS:
            return _NUMBER_WORDS[word[: -len(stem)] + ending]
    return None


def _whole_number(words: list[str]) -> int | None:
    """`one thousand two hundred and five` as 1205: below a million, in the usual order."""
    total, group = 0, None
    for word in words:
        if word == "and" and group is not None:
            continue
        if word in _NUMBER_WORDS:
            value = _NUMBER_WORDS[word]
            if group is not None and (group % 100 and (group % 10 or value >= 10) or value >= 100):
                return None  # `five five`, `twenty thirty`
            group = (group or 0) + value
        elif word == "hundred" and group is not None and 0 < group < 10:
            group *= 100
        elif word == "thousand" and group is not None and total == 0:
            total, group = group * 1000, None
        else:
            return None
    if group is None and total == 0:
        return None
    return total + (group or 0)


# ---------------------------------------------------------------------------------------------
# Times of day and ratios

# Case-blind patterns here read `.translate(AS_I)` (see `vocabulary`).
_MERIDIEM = rf"[ap]\.?{S}?m\.?"
# A whole time: its meridiem follows digits or spaces and ends the text.
_CLOCK = patterns.compile(
    rf"({D}{{1,2}})(?::({D}{D}))?{S}*(?:({_MERIDIEM}))?|(noon|midday|midnight)",
    patterns.IGNORECASE,
)
# Somewhere in the text: a meridiem not inside a word or a command (`\pm`), or noon as a word.
# A neighbour is taken along rather than looked at: RE2 has no lookaround; a search needs only
# to find one. The word test of Python's `\b` is Unicode's (`WORD_CHARS`), never case-blind.
_MERIDIEM_OR_NOON = patterns.compile(
    rf"(?i:(?:^|[^a-zA-Z\\]){_MERIDIEM}(?:[^a-zA-Z]|$))"
    rf"|(?:^|[^{WORD_CHARS}])(?i:noon|midday|midnight)(?:[^{WORD_CHARS}]|$)"
)
_TWELVE = patterns.compile(r"12(?::00)? (noon|midnight)", patterns.IGNORECASE)
_TEXT = patterns.compile(r"\\(?:text|mbox|mathrm)\{([^{}]*)\}")
_RATIO = patterns.compile(rf"{D}+(?:{S}*:{S}*{D}+)+")
# `3 to 2` and `3 \colon 2` are the ratio 3:2: between digits, which `_ratio_word` checks on
# the match (RE2 has no lookaround). Between two digits, `to` is a word only with spaces
# around it.
_RATIO_WORDS = patterns.compile(rf"{S}*\\colon{S}*|{S}*\\text\{{{S}*to{S}*\}}{S}*|{S}+to{S}+")


def _ratio_word(match: patterns.Match) -> str:
    text, (start, end) = match.string, match.span()
    if start > 0 and end < len(text) and text[start - 1].isdecimal() and text[end].isdecimal():
        return ":"
    return match[0]


def _clock_times(text: str) -> frozenset[int] | None:
    """The minutes after midnight `text` can mean: one for `3:00 pm` or `15:00`, two for `3:00`
    (morning or afternoon); None when it is no time of day."""
    text = _TEXT.sub(r"\1", text).strip()
    text = _SPACES.sub(" ", text)
    if twelve := _TWELVE.fullmatch(text.translate(AS_I)):
        text = text[twelve.start(1) : twelve.end(1)]
    match = _CLOCK.fullmatch(text.translate(AS_I))
    if match is None:
        return None
    if match[4]:
        # As written: the case-blind match also takes `mıdnight`, which is not `midnight`.
        word = text[match.start(4) : match.end(4)]
        return frozenset({0 if word.lower() == "midnight" else 720})
    hour, minute, meridiem = int(match[1]), int(match[2] or 0), match[3]
    if minute > 59 or hour > 23 or meridiem and not 1 <= hour <= 12:
        return None
    if meridiem:
        return frozenset({(hour % 12 + (12 if meridiem.lower()[0] == "p" else 0)) * 60 + minute})
    if match[2] is None:
        return None  # a bare number is no time
    if 1 <= hour <= 12:
        return frozenset({hour * 60 + minute, (hour + 12) % 24 * 60 + minute})
    return frozenset({hour * 60 + minute})


def clock_verdict(left: str, right: str) -> Verdict | None:
    """Times of day (`3:00 PM`, `3 p.m.`, `15:00`, `noon`) and ratios (`3:2`) compared; None
    when neither side is one, so the other stages go on."""
    if _MERIDIEM_OR_NOON.search(left.translate(AS_I)) or _MERIDIEM_OR_NOON.search(
        right.translate(AS_I)
    ):
        times = _clock_times(left), _clock_times(right)
        if None in times:
            return Verdict.UNSURE
        if times[0] == times[1] and len(times[0]) == 1:
            return Verdict.EQUAL
        return Verdict.UNSURE if times[0] & times[1] else Verdict.NOT_EQUAL
    left, right = (
        _RATIO_WORDS.sub(_ratio_word, left).strip(),
        _RATIO_WORDS.sub(_ratio_word, right).strip(),
    )
    ratios = _RATIO.fullmatch(left), _RATIO.fullmatch(right)
    if not (ratios[0] or ratios[1]):
        return None
    if not (ratios[0] and ratios[1]):
        return Verdict.UNSURE  # 3:2 against 1.5: a ratio or a time, the question says which
    terms = [[int(n) for n in text.split(":")] for text in (left, right)]
    if terms[0] == terms[1]:
        return Verdict.EQUAL
    if len(terms[0]) == len(terms[1]) and all(terms[0]) and all(terms[1]):
        proportional = len({Fraction(a, b) for a, b in zip(*terms, strict=True)}) == 1
        return Verdict.UNSURE if proportional else Verdict.NOT_EQUAL
    return Verdict.NOT_EQUAL
