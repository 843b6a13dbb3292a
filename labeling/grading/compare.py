"""Stage 3: compare two read answers, and give the verdict: equal, not equal or unsure.

Exact paths settle what can be settled without sympy: numbers and plain arithmetic as exact
rationals (`numbers`); tuples, vectors, sets, intervals, inequalities and matrices entry by
entry (`structures`); numbers in a named base digit by digit; powers too large to compute by
their smallest base and exponent; quantities through their units (`quantities`). What is left
goes to math-verify, made exact (`symbolic`), under a hard deadline. Equal and not equal are
claims with a reason behind them; where an answer holds anything the grader does not read (a
token outside `vocabulary`, a unit it cannot relate, a deadline passed), the verdict is unsure
and a person decides (`labeling.services.answer_review`).
"""

import logging

from core import patterns
from labeling.grading.normalise import MAX_ANSWER_CHARS, Reading, read, squash
from labeling.grading.numbers import DECIMAL_POINT, ELLIPSIS, exact_number, percent_equivalent
from labeling.grading.quantities import clock_verdict, conversion
from labeling.grading.structures import as_set, compound, in_base, malformed, tower, unending, union
from labeling.grading.symbolic import verify_within_limit
from labeling.grading.verdict import Verdict, every
from labeling.grading.vocabulary import FUNCTION_WORDS, unread
from labeling.grading.vocabulary import SPACE as S

# One logger for the whole grader: operators filter on it.
logger = logging.getLogger("labeling.grading")

# "x = 3" names the unknown; the value is what follows (only for a single `=`, not systems).
_NAMED = patterns.compile(
    r"(?P<name>[a-zA-Z](?:\([a-z]\))?|\\[a-zA-Z]+|\\(?:vec|overrightarrow)\{[a-zA-Z]\}"
    rf"|m?\\angle{S}*[A-Z]{{1,3}}"
    rf"|\([a-z](?:,{S}*[a-z])+\)){S}*={S}*(?P<value>[^=]*)"
)
# A relation, and a command's name ends where letters do (the character after it is taken
# along: a search needs only to find one, and RE2 has no lookahead).
_RELATION = patterns.compile(r"[<>=|]|\\(?:le|ge|leq|geq|ne|neq|lt|gt)(?:[^a-zA-Z]|$)")
_CHOSEN = patterns.compile(r"\(([A-H])\)(?: (.+))?", patterns.DOTALL)
_LETTER_CHOICE = patterns.compile(r"[A-H]")

# Words compared as words; "even function" is the answer "even".
_SHORT_WORDS = {"yes", "no", "odd", "all", "none"}
_QUALIFIED = patterns.compile(rf"(.+?){S}+(?:function|functions|number|numbers)")
_NEITHER = patterns.compile(r"neither(?: even nor odd| odd nor even)?")
_WORDS = patterns.compile(r"[A-Za-z]{2,}(?:[ -][A-Za-z]+)*")
_ARTICLE = patterns.compile(r"^(?:an?|the) ")
# Two words in a row that are not a command's name: a sentence ("no, it is not possible",
# "Alice wins"). What a sentence says beyond its first word is not read, so a sentence is never
# called different from a shorter answer: a person decides.
_PROSE = patterns.compile(r"(?:^|[^\\a-zA-Z])[a-zA-Z]{2,}[ ,;.]+[a-zA-Z]{2,}")
_NAME = patterns.compile(r"(\\?)([a-zA-Z]{2,})")


def grade(answer: str, ground_truth: str) -> Verdict:
    """Is `answer` the same as the MATH-style `ground_truth`: equal, not equal, or unsure.

    Never raises, and answers within GRADING_TIME_LIMIT_SECONDS from any thread or process.
    """
    if not answer.strip() or not ground_truth.strip():
        return Verdict.NOT_EQUAL  # an empty answer is never right, even against an empty truth
    if len(answer) > MAX_ANSWER_CHARS or len(ground_truth) > MAX_ANSWER_CHARS:
        logger.warning(
            "Answer over %d characters; not parsed, counted as not equal unless identical: "
            "%.80r (%d characters) vs %.80r (%d characters)",
            MAX_ANSWER_CHARS, answer, len(answer), ground_truth, len(ground_truth),
        )  # fmt: skip
        return Verdict.of(answer.strip() == ground_truth.strip())
    try:
        left, right = read(answer), read(ground_truth)
        if not left.text or not right.text:
            return Verdict.NOT_EQUAL
        if (clock := clock_verdict(left.written, right.written)) is not None:
            return clock
        verdict = _quantities(left, right)
        if verdict is Verdict.NOT_EQUAL and (_prose(left) or _prose(right)):
            return Verdict.UNSURE
        return verdict
    except Exception:  # noqa: BLE001 - a grader must answer, not crash an import
        logger.warning("Grading failed; unsure: %r vs %r", answer, ground_truth, exc_info=True)
        return Verdict.UNSURE


def is_equivalent(answer: str, ground_truth: str) -> bool:
    """Whether the grader can say `answer` equals `ground_truth` (unsure is not)."""
    return grade(answer, ground_truth) is Verdict.EQUAL


def _quantities(left: Reading, right: Reading) -> Verdict:
    """The values compared in one unit: `40 mm` against `4 cm`, `20\\%` against `0.2`."""
    factor = conversion(left.unit, right.unit)
    if factor is Verdict.UNSURE and left.unit and right.unit and left.unit.kind == "angle":
        return _other_angle_units(left, right)
    if isinstance(factor, Verdict):
        return factor
    if factor != 1:
        values = exact_number(left.text), exact_number(right.text)
        if None in values:
            return Verdict.UNSURE  # `2\\pi \\text{ m}` against `200\\pi \\text{ cm}`: not read
        return Verdict.of(values[0] * factor == values[1])
    if left.percent != right.percent:
        percent, bare = (left.text, right.text) if left.percent else (right.text, left.text)
        verdict = percent_equivalent(percent, bare)
        if verdict is not None:
            return Verdict.of(verdict)
        return Verdict.UNSURE  # `x\\%` against an expression: a proportion or a percentage
    verdict = _equivalent(left.text, right.text, depth=0)
    if verdict is Verdict.NOT_EQUAL and "degree" in (
        getattr(left.unit, "text", None),
        getattr(right.unit, "text", None),
    ):
        return _degrees_as_radians(left, right)
    return verdict


def _other_angle_units(left: Reading, right: Reading) -> Verdict:
    """Degrees against radians: rational numbers of each are the same angle only at zero
    (`60 \\text{ radians}` is not `60^\\circ`); other values are not read here."""
    if right.unit.kind != "angle":
        return Verdict.UNSURE
    values = exact_number(left.text), exact_number(right.text)
    if None in values:
        return Verdict.UNSURE
    return Verdict.of(values[0] == values[1] == 0)


def _degrees_as_radians(left: Reading, right: Reading) -> Verdict:
    """`30^\\circ` against `\\frac{\\pi}{6}`: the same angle, given in radians where the
    question may have asked for degrees, so unsure; otherwise not equal."""
    degrees, other = (
        (left, right) if getattr(left.unit, "text", None) == "degree" else (right, left)
    )
    if other.unit is not None or exact_number(degrees.text) is None:
        return Verdict.NOT_EQUAL
    value = exact_number(degrees.text) / 180
    radians = f"\\frac{{{value.numerator}\\pi}}{{{value.denominator}}}"
    same = _equivalent(radians, other.text, depth=0) is Verdict.EQUAL
    return Verdict.UNSURE if same else Verdict.NOT_EQUAL


def _equivalent(left: str, right: str, *, depth: int) -> Verdict:
    if squash(left) == squash(right):
        return Verdict.EQUAL
    if depth > 4:
        return Verdict.UNSURE
    choices = _choice(left), _choice(right)
    if choices[0] and choices[1]:
        return Verdict.of(choices[0][0] == choices[1][0])
    for choice, other in ((choices[0], right), (choices[1], left)):
        if choice and choice[1]:
            return _equivalent(choice[1], other, depth=depth + 1)  # (A) 24 against 24
    bases = in_base(left), in_base(right)
    if bases[0] and bases[1]:
        return Verdict.of(bases[0] == bases[1])
    if bases[0] or bases[1]:
        digits, other = (bases[0][0], right) if bases[0] else (bases[1][0], left)
        return Verdict.of(digits == squash(other).upper())  # 1011_2 against 1011: base implied
    unnamed = _without_names(left, right)
    if unnamed is None:
        return Verdict.NOT_EQUAL
    left, right = unnamed
    left, right = as_set(left), as_set(right)
    if squash(left) == squash(right):
        return Verdict.EQUAL
    unions = union(left), union(right)
    if unions[0] is not None and unions[1] is not None:
        return Verdict.of(unions[0] == unions[1])
    compound_left, compound_right = compound(left), compound(right)
    if compound_left or compound_right:
        return _same_compound(
            compound_left, compound_right, left, right, depth=depth + 1, whole=depth == 0
        )
    exact_left, exact_right = exact_number(left), exact_number(right)
    if exact_left is not None and exact_right is not None:
        return Verdict.of(exact_left == exact_right)
    if ELLIPSIS.fullmatch(left.replace(" ", "")) or ELLIPSIS.fullmatch(right.replace(" ", "")):
        return Verdict.NOT_EQUAL  # 3.14159... is a truncation, not a value
    words = _words(left), _words(right)
    if words[0] and words[1]:
        return Verdict.of(_word_key(left) == _word_key(right))  # `even`, `odd`, `Tuesday`
    if words[0] or words[1]:
        return Verdict.UNSURE  # `no solution` against `\\emptyset`
    if "\\emptyset" in (left, right):
        return Verdict.NOT_EQUAL  # the empty set against anything not empty
    if malformed(left) or malformed(right):
        return Verdict.NOT_EQUAL  # no value: unbalanced brackets, a double superscript
    if unread(left) is not None or unread(right) is not None:
        return Verdict.UNSURE  # part of an answer the grader cannot read is never dropped
    if (exact_left is not None and DECIMAL_POINT.search(left)) or (
        exact_right is not None and DECIMAL_POINT.search(right)
    ):
        return Verdict.NOT_EQUAL  # a decimal is never taken as a rounding of an irrational value
    unending_left, unending_right = unending(left), unending(right)
    if unending_left or unending_right:
        towers = tower(left), tower(right)
        if towers[0] and towers[1]:
            return Verdict.of(towers[0] == towers[1])
        return Verdict.of(unending_left == unending_right)
    return verify_within_limit(left, right)


def _choice(text: str) -> tuple[str, str | None] | None:
    if match := _CHOSEN.fullmatch(text):
        return match[1], match[2]
    return (text, None) if _LETTER_CHOICE.fullmatch(text) else None


def _without_names(left: str, right: str) -> tuple[str, str] | None:
    """`y = 2x + 3` against `2x + 3` is its value; against another equation (`2x - y + 3 = 0`,
    `x = \\frac{y-3}{2}`) it stays an equation, compared as one. None when the two name
    different unknowns."""
    named_left, named_right = _NAMED.fullmatch(left), _NAMED.fullmatch(right)
    if named_left and named_right:
        if named_left["name"] == named_right["name"]:
            return named_left["value"].strip(), named_right["value"].strip()
        if named_left["name"] not in right and named_right["name"] not in left:
            return None  # x = -3 and y = -3 answer different questions
    if named_left and "=" not in right:
        return named_left["value"].strip(), right
    if named_right and "=" not in left:
        return left, named_right["value"].strip()
    return left, right


def _same_compound(
    left: tuple[str, list[str]] | None,
    right: tuple[str, list[str]] | None,
    left_text: str,
    right_text: str,
    *,
    depth: int,
    whole: bool,
) -> Verdict:
    if left and right and left[0] == right[0]:
        return _same_items(left, right, depth=depth)
    # A whole answer that is a set of one is its element: \{3\} against 3. Inside a set it is
    # not: \{1, \{2\}\} is not \{1, 2\}.
    for one, other, other_text in ((left, right, right_text), (right, left, left_text)):
        if one and one[0] == "set" and len(one[1]) == 1 and (other is None or other[0] != "set"):
            element = one[1][0]
            if not whole or element == "\\emptyset" or element.startswith("\\{"):
                return Verdict.NOT_EQUAL  # \{\emptyset\} is a set of one set, not empty
            return _equivalent(element, other_text, depth=depth)
    # A tuple or \langle\rangle is a vector, and so is a matrix of one column or one row.
    if left and right and {left[0], right[0]} & {"()"} and len(left[1]) == len(right[1]):
        shape, size = (right if left[0] == "()" else left)[0], len(left[1])
        if shape in (f"matrix{size}x1", f"matrix1x{size}"):
            return _same_items(("()", left[1]), ("()", right[1]), depth=depth)
    single = right_text if left else left_text
    if (left is None or right is None) and (unread(single) or _RELATION.search(single)):
        return Verdict.UNSURE  # an interval against `|x| \\le 1`: a form not read as a set
    return Verdict.NOT_EQUAL


def _same_items(
    left: tuple[str, list[str]], right: tuple[str, list[str]], *, depth: int
) -> Verdict:
    kind, items = left
    other = list(right[1])
    if len(items) != len(other):
        return Verdict.NOT_EQUAL
    if kind != "set":
        return every(_equivalent(a, b, depth=depth) for a, b in zip(items, other, strict=True))
    # Each item of one set is matched to an equal item of the other; an item with no equal
    # but an unsure partner leaves the whole unsure.
    unsure = False
    for item in items:
        verdicts = [_equivalent(item, b, depth=depth) for b in other]
        if Verdict.EQUAL in verdicts:
            other.pop(verdicts.index(Verdict.EQUAL))
        elif Verdict.UNSURE in verdicts:
            unsure = True
        else:
            return Verdict.NOT_EQUAL
    return Verdict.UNSURE if unsure else Verdict.EQUAL


def _words(text: str) -> bool:
    if _WORDS.fullmatch(text) is None:
        return False
    return len(text) > 3 or text.lower() in _SHORT_WORDS


def _prose(reading: Reading) -> bool:
    """A sentence, not a word answer: "an odd function" and "neither even nor odd" are words,
    so are a unit's (`square units`). A count noun read as the unit is a word of the sentence
    too (`900, it is not`), and so is a closed-class word (pint reads `are` as 100 m^2)."""
    names = [word.lower() for slash, word in _NAME.findall(reading.written) if not slash]
    key = _word_key(" ".join(names))
    if " " not in key:
        return False  # one word at most: `No`, `\\text{odd.}`, `x < 1 \\text{ or } x > 2`
    text = reading.text
    if reading.unit is not None and reading.unit.kind in ("count", "unknown"):
        text = f"{text} {reading.unit.text}"
    if _PROSE.search(_word_key(text) if _words(text) else text):
        return True
    return not FUNCTION_WORDS.isdisjoint(key.split())


def _word_key(text: str) -> str:
    key = _ARTICLE.sub("", text.lower().strip())  # "an even function" is "even"
    if _NEITHER.fullmatch(key):
        return "neither"
    match = _QUALIFIED.fullmatch(key)
    return match[1] if match else key
