"""Final-answer grading: is a solution's answer equivalent to the MATH-style ground truth?

Over 500 lines on purpose: one answer's way through the normaliser and each exact comparison
reads top to bottom, and every form depends on the normaliser above it.

A normaliser runs first, the way MATH graders (Hendrycks `is_equiv`, PRM800K `grader.py`) do,
so that formatting which carries no meaning cannot make a right answer wrong. Exact paths then
settle what can be settled without sympy: numbers and plain arithmetic (integers, fractions,
decimals, mixed numbers, repeating decimals, scientific notation, `0.1 + 0.2`, `-2^2`) as exact
rationals; tuples, vectors, sets, intervals, inequalities and matrices entry by entry; numbers
in a named base digit by digit; powers too large to compute by their smallest base and
exponent. What is left goes to math-verify (sympy equivalence of radicals, pi, expressions,
equations, the same curve) under a hard deadline (GRADING_TIME_LIMIT_SECONDS): a timeout is
logged and counts as "not equal". An answer longer than MAX_ANSWER_CHARS is not parsed at all
(logged, "not equal" unless it is the ground truth character for character).
Below the grader: the verdict cache and the grading of stored solutions (imports, regrading).

The corpus in `labeling/tests/fixtures/grading_corpus.tsv` is the measure of this module:
change the grader, run `test_grading.py`, and read the per-category misses it prints. What the
grader refuses on purpose (reads as "not equal" though a reader might accept it) is listed in
docs/import-export.md, "Grading".

Over 1000 lines on purpose: the grader reads top to bottom (normalise, exact paths, math-verify
under a deadline, verdicts) and its steps share private helpers; the corpus tests it whole.
"""

import functools
import logging
import math
import multiprocessing
import os
import re
import signal
import threading
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise, product

import sympy
from django.conf import settings
from django.db import IntegrityError, transaction
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from core.answers import final_answer
from labeling.models import Solution

logger = logging.getLogger(__name__)

# No final answer is this long (MATH's longest ground truths are a few hundred characters; a
# 3x3 matrix of fractions is about 200). Longer text is a runaway generation or an attack,
# and regular expressions and sympy on 50 kB of braces take seconds, so it is never parsed.
MAX_ANSWER_CHARS = 1000

# The answer is already the final one, so a box in it is the answer, not one candidate of many.
_EXTRACTION = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
# `\\` (a matrix row break) is matched first so that its second backslash and the space after
# it are never read as the spacing command `\ `, which would merge two rows into one.
_SPACING = re.compile(r"\\\\|\\[!,;: ]|~|\\(?:q?quad|left|right|big|Big|displaystyle)(?![a-zA-Z])")
_SPACES = {"\\\\": "\\\\", "\\ ": " ", "~": " ", "\\quad": " ", "\\qquad": " "}
_DECORATIONS = re.compile(r"\^\{?\\circ\}?|\\circ|°|\\?%|\\?\$")
# `1,\!000` and `1{,}000` are thousands separators even inside a tuple: `(4,\!000, 3)`.
_MARKED_THOUSANDS = re.compile(r"(\d)(?:,\\!|\{,\})(?=\d{3}(?!\d))")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# `1 000 000` (SI style) is one number; `2 100/3` is a mixed number, so a slash ends it.
_SPACED_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d/]| \d| ?\\frac)")
# "5 million" is 5 \times 10^6, not 5 with a unit.
_MULTIPLIER = re.compile(
    r"(\d[\d.]*)\s*(?:\\(?:text|mbox)\{\s*(thousand|million|billion|trillion)\s*\}"
    r"|\s(thousand|million|billion|trillion))$"
)
_POWERS_OF_TEN = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
# A trailing unit after a number ("5 \text{ cm}", "\frac92\text{ units}^2", "30 \text{ km/h}",
# "6 cm") carries no value. Bare units are only these words, after a space: a lone letter
# (`5 m`) may be a variable. `\mathrm{i}` and `\mathrm{e}` are numbers, not units.
_UNIT_TEXT = r"\\(?:text|mbox|mathrm|textrm|textnormal)\{(?!\s*[eid]\s*\})[a-zA-Z ./]*\}"
_BARE_UNITS = (
    r"(?:square |sq\.? |cubic )?(?:cm|mm|km|inches|inch|feet|foot|ft|yards|miles|meters|metres"
    r"|seconds|minutes|hours|days|weeks|months|years|dollars|cents|degrees|units|mph|kg|grams"
    r"|pounds|liters|litres|ml|gallons|percent)"
)
_TRAILING_UNIT = re.compile(
    rf"(?<=[\w}}.])\s*(?:{_UNIT_TEXT}(?:\^\{{?\d\}}?)?(?:\s*/\s*{_UNIT_TEXT})?"
    rf"|\s{_BARE_UNITS}(?:\^\{{?\d\}}?|/[a-z]+)?)$"
)
_UNIT = re.compile(
    r"(?:\\(?:text|mbox|mathrm|textrm|textnormal)\{\s*([a-zA-Z ./]+?)\s*\}"
    rf"|\s({_BARE_UNITS}))(\^\{{?\d\}}?)?$"
)
_TEXT = re.compile(
    r"\\(?:text|mbox|textnormal|textbf|textrm|mathrm|mathbf|operatorname)\{([^{}]*)\}"
)
# "x = 3" names the unknown; the value is what follows (only for a single `=`, not systems).
_NAMED = re.compile(
    r"^(?P<name>[a-zA-Z](?:\([a-z]\))?|\\[a-zA-Z]+|\\(?:vec|overrightarrow)\{[a-zA-Z]\}"
    r"|\([a-z](?:,\s*[a-z])+\))\s*=\s*(?=[^=]*$)"
)
_IN_SET = re.compile(r"^[a-zA-Z]\s*\\in\s*")
_CHOICE = re.compile(r"\(([A-H])\)")
# A choice letter in any wrapping, alone or before its option's text: `(B) 12`, `B)`, `[B]`,
# `Option B`, `Answer: B`. Kept as `(B) 12` so that the letter and the value both count.
_CHOICE_WORD = r"(?:[Oo]ption|[Cc]hoice|[Aa]nswer)\s*:?\s*"
_CHOICE_LEAD = re.compile(
    rf"(?:{_CHOICE_WORD})?(?:\(([A-H])\)|\[([A-H])\]|([A-H])[):])(?:\s+(.+))?"
    rf"|{_CHOICE_WORD}([A-H])",
    re.S,
)
_CHOSEN = re.compile(r"\(([A-H])\)(?: (.+))?", re.S)
# `1210_5`, `1210_{5}`, `1210_{(5)}`, `(1210)_5`, `1210_{\text{five}}`.
_BASED = re.compile(r"\(?([0-9A-Z]+)\)?_\{?\(?(\d+|[a-z]+)\)?\}?")
_BASE_NAMES = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16,
}  # fmt: skip
_EMPTY = re.compile(r"\\varnothing|\\emptyset|\\\{\s*\\\}")
_MATRIX = re.compile(r"^\\begin\{([pbB]?matrix)\}(.*)\\end\{\1\}$", re.S)
_ARRAY = re.compile(r"\\begin\{array\}\{[^{}]*\}(.*?)\\end\{array\}", re.S)
# `2\begin{pmatrix}1\\-3\end{pmatrix}`: a scalar times a vector.
_SCALED_MATRIX = re.compile(
    r"(.+?)\s*(?:\\cdot|\\times)?\s*(\\begin\{([pbB]?matrix)\}.*\\end\{\3\})", re.S
)
_DECIMAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_DECIMAL_POINT = re.compile(r"\d\.|\.\d")
_FRACTION = re.compile(r"([-+]?)(?:\\frac\{([-+]?\d+)\}\{([-+]?\d+)\}|(\d+)/(\d+))")
_MIXED = re.compile(r"(-?)(\d+)(?:\s*\\frac\{(\d+)\}\{(\d+)\}|\s+(\d+)/(\d+))")
# A mixed number before a factor (`2\frac{1}{2}\pi`) is 5/2 of it, not 2 * 1/2 of it.
_MIXED_FACTOR = re.compile(
    r"(?<![\d.}^_])(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}(?=\s*(?:\\[a-zA-Z]|[a-zA-Z(]))"
)
_DECIMAL_EXPONENT = re.compile(r"\^\{(\d*\.\d+)\}")
_REPEATING = re.compile(r"(-?)(\d*)\.(\d*)\\(?:overline|bar|dot)\{?(\d+)\}?")
# 0.\dot{1}4285\dot{7}: the dots mark the first and last digit of the repeating block.
_DOTTED = re.compile(r"(-?)(\d*)\.(\d*)\\dot\{?(\d)\}?(\d*)\\dot\{?(\d)\}?")
_PARENTHESISED = re.compile(r"(-?)(\d*)\.(\d*)\((\d+)\)")
_ELLIPSIS = re.compile(r"(-?)(\d*)\.(\d+)\s*(?:\\[lc]?dots|\.\.\.|…)")
_SCIENTIFIC = re.compile(
    r"([-+]?(?:\d+\.?\d*|\.\d+))\s*(?:[eE]\s*([-+]?\d+)|(?:\\times|\\cdot|\*|x)\s*10\^\{?([-+]?\d+)\}?)"
)
_PERCENT = re.compile(r"(?:\\?%|\s+percent)\s*$")
_INEQUALITY_OPS = {
    "<": "<",
    ">": ">",
    "\\lt": "<",
    "\\gt": ">",
    "\\le": "<=",
    "\\leq": "<=",
    "\\leqslant": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\geqslant": ">=",
    "<=": "<=",
    ">=": ">=",
}
_OP = r"(<=|>=|<|>|\\leqslant|\\geqslant|\\leq|\\geq|\\le|\\ge|\\lt|\\gt)"
_BOUND = r"([^<>=]+?)"
_ONE_SIDED = re.compile(rf"^([a-zA-Z])\s*{_OP}\s*{_BOUND}$")
_ONE_SIDED_REVERSED = re.compile(rf"^{_BOUND}\s*{_OP}\s*([a-zA-Z])$")
_TWO_SIDED = re.compile(rf"^{_BOUND}\s*{_OP}\s*([a-zA-Z])\s*{_OP}\s*{_BOUND}$")
_OR = re.compile(r"\s*(?:\\text\{\s*(?:or|and)\s*\}|\b(?:or|and)\b|\\cup|\\vee)\s*")
# The same set of reals, written other ways: {x | x > 3}, R \ {4}, x != 4, all real numbers.
_SET_BUILDER = re.compile(
    r"\\\{\s*([a-zA-Z])\s*(?:\\in\s*\\mathbb\{?R\}?\s*)?(?:\\mid|\\vert|\||:)\s*(.+)\\\}", re.S
)
_REALS = re.compile(r"\\mathbb\{?R\}?|\\R|all real numbers|all reals|\(-\\infty,\s*\\infty\)")
_NOT_EQUAL = re.compile(r"([a-zA-Z])\s*\\neq?(?![a-zA-Z])\s*(.+)")
_WITHOUT = re.compile(r"(?:\\mathbb\{?R\}?|\\R)\s*(?:\\setminus|\\backslash|-)\s*(.+)")
_INTERVAL = re.compile(r"([(\[])([^,]+),([^,]+)([)\]])")
# Values whose evaluation never ends: power towers, huge powers, huge factorials.
_POWER = re.compile(r"(\d+)\^(?:\{(\d+)\}|(\d))")
_TOWER = re.compile(r"(\d+|\(.+\))\^(?:\{(.+)\}|(\d))", re.S)
_FACTORIAL = re.compile(r"(\d+)\)?\s*!")
MAX_DIGITS = 10_000
# A lone `i` is the imaginary unit, which sympy spells `I` (as a symbol 2(1+i) != 2+2i).
_IMAGINARY = re.compile(r"(?<![a-zA-Z\\])i(?![a-zA-Z])")
# Words compared as words; "even function" is the answer "even".
_SHORT_WORDS = {"yes", "no", "odd", "all", "none"}
_QUALIFIED = re.compile(r"(.+?)\s+(?:function|functions|number|numbers)")
_NEITHER = re.compile(r"neither(?: even nor odd| odd nor even)?")


def _closing(text: str, opening: int) -> int | None:
    """Index of the brace that closes the one at `opening`, or None when it never closes."""
    depth = 0
    for i in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None


def _unbox(text: str) -> str:
    # Braces nest (\boxed{\frac{1}{2}}), so a box is closed by counting, not by a regex. Each of
    # a list boxed on its own (`\boxed{2}, \boxed{3}`) is an item of the answer.
    for _ in range(8):  # nested boxes, \boxed{\boxed{7}}
        boxes, position = [], 0
        while match := _BOX.search(text, position):
            end = _closing(text, match.end() - 1)
            if end is None:
                return text  # unbalanced: leave it for math-verify to reject
            boxes.append(text[match.end() : end].strip())
            position = end + 1
        if not boxes:
            return text
        text = ", ".join(boxes)
    return text


def _strip_prose(text: str) -> str:
    text = re.sub(r"^.*?\b(?:answer|result) is:?\s*", "", text, flags=re.I) if "$" in text else text
    if text.count("$") >= 2:
        text = text[text.index("$") : text.rindex("$") + 1]
    text = text.strip()
    # A sentence's full stop goes; an ellipsis (0.333...) is part of the number.
    return text[:-1].strip() if text.endswith(".") and not text.endswith("..") else text


def _normalize(answer: str) -> str:
    text = _unbox(_strip_prose(answer.strip()))
    text = re.sub(r"\\[dt]frac", r"\\frac", text)
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", text)
    text = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", text)
    text = _MARKED_THOUSANDS.sub(r"\1", text)
    text = _SPACING.sub(lambda m: _SPACES.get(m.group(), ""), text)
    text = _SPACED_THOUSANDS.sub(lambda m: m.group().replace(" ", ""), text)
    text = _DECORATIONS.sub("", text).replace("{,}", ",").strip()
    text = _MULTIPLIER.sub(lambda m: f"{m[1]}\\times10^{{{_POWERS_OF_TEN[m[2] or m[3]]}}}", text)
    text = _TRAILING_UNIT.sub("", text).strip()
    text = _TEXT.sub(lambda m: m.group(1).strip(), text).strip()
    text = _TRAILING_UNIT.sub("", text).strip()
    text = _EMPTY.sub(r"\\emptyset", text).replace("+\\infty", "\\infty")
    text = _MIXED_FACTOR.sub(_mixed_factor, text)
    text = _DECIMAL_EXPONENT.sub(_exponent_as_fraction, text)
    text = re.sub(r"^\\langle(.*)\\rangle$", r"(\1)", text, flags=re.S)
    text = _ARRAY.sub(r"\\begin{pmatrix}\1\\end{pmatrix}", text)
    # Brackets around a matrix environment are its delimiters, not a tuple of one.
    text = re.sub(r"^[(\[](\\begin\{([pbB]?matrix)\}.*\\end\{\2\})[)\]]$", r"\1", text, flags=re.S)
    text = _IN_SET.sub("", text)
    if _THOUSANDS.fullmatch(text.replace(" ", "")):
        text = text.replace(",", "")
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"(?<=[A-Za-z])\.$", "", text)  # `\text{odd.}`
    if lead := _CHOICE_LEAD.fullmatch(text):
        letter = next(group for group in (lead[1], lead[2], lead[3], lead[5]) if group)
        return f"({letter}) {lead[4]}" if lead[4] else f"({letter})"
    return _CHOICE.sub(r"\1", text)


def _mixed_factor(match: re.Match) -> str:
    whole, top, bottom = match.groups()
    if int(top) >= int(bottom):
        return match[0]  # 2\frac{3}{2}\pi is not a mixed number: 2 times 3/2
    return f"({whole}+\\frac{{{top}}}{{{bottom}}})"


def _exponent_as_fraction(match: re.Match) -> str:
    # 5^{0.5} is exactly \sqrt5; sympy keeps a float exponent as a float.
    value = Fraction(match[1])
    return f"^{{\\frac{{{value.numerator}}}{{{value.denominator}}}}}"


def _unit(answer: str) -> str | None:
    """The unit written after the answer (`cm` in `4\\text{ cm}`), lower-cased, if any."""
    text = _unbox(_strip_prose(answer.strip())).strip().rstrip("$").strip()
    text = _SPACING.sub(lambda m: _SPACES.get(m.group(), ""), text)
    match = _UNIT.search(text)
    if match is None or match.start() == 0:
        return None
    unit = (match[1] or match[2]).strip().lower()
    if unit in _POWERS_OF_TEN or unit == "percent":
        return None
    return unit + (match[3] or "").replace("{", "").replace("}", "")


def _is_percent(answer: str) -> bool:
    text = _unbox(_strip_prose(answer.strip())).strip().strip("$").strip()
    text = _TEXT.sub(lambda m: m.group(1), text)
    return _PERCENT.search(text) is not None


def _percent_equivalent(percent: str, bare: str) -> bool | None:
    """`p%` against a number written without the sign; None when either is not a number.

    A percent is p/100 (`50\\%` is 1/2). A bare number may also be the percentage itself, as
    MATH writes "what percent" answers (`20` for 20%), but never a fraction or a number under 1,
    which are proportions: `0.5\\%` is not 1/2, and not 0.5.
    """
    p, t = _exact_number(percent), _exact_number(bare)
    if p is None or t is None:
        return None
    if p / 100 == t:
        return True
    proportion = abs(t) < 1 or ("\\frac" in bare or "/" in bare) and not _MIXED.fullmatch(bare)
    return p == t and not proportion


def _exact_number(text: str) -> Fraction | None:
    # Most MATH answers are numbers; settling those exactly skips a ~25 ms LaTeX-to-sympy
    # parse per answer, and keeps a rounded decimal (0.3333) from passing for 1/3.
    text = text.strip()
    # `2 1/2` is a mixed number, so spaces between digits are not dropped.
    compact = text if re.search(r"\d\s+\d", text) else text.replace(" ", "")
    if _DECIMAL.fullmatch(compact):
        return Fraction(compact)
    if match := _FRACTION.fullmatch(compact):
        sign, frac_top, frac_bottom, top, bottom = match.groups()
        top, bottom = int(frac_top or top), int(frac_bottom or bottom)
        if bottom == 0:
            return None
        return -Fraction(top, bottom) if sign == "-" else Fraction(top, bottom)
    # A whole number before a fraction is a mixed number (MATH writes 2\frac{1}{2} for 5/2);
    # with a slash it needs the space, or `2 1/2` would read as 21/2.
    if match := _MIXED.fullmatch(text):
        sign, whole, top, bottom, slash_top, slash_bottom = match.groups()
        top, bottom = int(top or slash_top), int(bottom or slash_bottom)
        if bottom == 0:
            return None
        value = int(whole) + Fraction(top, bottom)
        return -value if sign else value
    if match := _REPEATING.fullmatch(compact) or _PARENTHESISED.fullmatch(compact):
        return _repeating(*match.groups())
    if match := _DOTTED.fullmatch(compact):
        sign, whole, fixed, first, middle, last = match.groups()
        return _repeating(sign, whole, fixed, first + middle + last)
    if match := _ELLIPSIS.fullmatch(compact):
        sign, whole, digits = match.groups()
        block = _repeated_block(digits)
        return _repeating(sign, whole, *block) if block else None
    if match := _SCIENTIFIC.fullmatch(compact):
        mantissa, exponent, power = match.groups()
        exponent = int(exponent or power)
        if abs(exponent) > 400:
            return None
        return Fraction(mantissa) * Fraction(10) ** exponent
    return _evaluate(text)


def _repeating(sign: str, whole: str, fixed: str, block: str) -> Fraction:
    value = Fraction(int(whole or 0)) + Fraction(int(fixed or 0), 10 ** len(fixed))
    value += Fraction(int(block), (10 ** len(block) - 1) * 10 ** len(fixed))
    return -value if sign else value


def _repeated_block(digits: str) -> tuple[str, str] | None:
    """(fixed digits, repeating block) of `0.1666...` from its written digits: the shortest
    block that ends them and is written at least twice. None for a truncation (`3.14159...`),
    which is no exact value."""
    for size in range(1, len(digits) // 2 + 1):
        block = digits[-size:]
        if digits[-2 * size :] != block * 2:
            continue
        start = len(digits) - 2 * size
        while start >= size and digits[start - size : start] == block:
            start -= size
        return digits[:start], block
    return None


# ---------------------------------------------------------------------------------------------
# Plain arithmetic, exactly: `0.1 + 0.2`, `3 \times 4 + 2`, `-2^2` (which is -4)

_ARITHMETIC_TOKEN = re.compile(
    r"\s*(?:(\d+\.?\d*|\.\d+)|(\\frac|\\cdot|\\times|\\div|[-+*/^(){}]))"
)
# Deeper than any real answer (\frac{\sqrt{\frac{1}{2}}}{3} is 3 deep); sympy and a
# recursive parser both slow down on deep nesting.
_NESTING_LIMIT = 12
_DOUBLE_SUPERSCRIPT = re.compile(r"\^\s*(?:\w|\\[a-zA-Z]+)\s*\^")


class _NotArithmetic(Exception):
    pass


def _evaluate(text: str) -> Fraction | None:
    """The exact value of `text` when it is numbers and + - * / ^ \\frac only, else None."""
    tokens, position = [], 0
    while position < len(text):
        match = _ARITHMETIC_TOKEN.match(text, position)
        if match is None:
            if text[position:].strip():
                return None
            break
        tokens.append(match[1] or match[2])
        position = match.end()
    if not tokens:
        return None
    reader = _Arithmetic(tokens)
    try:
        value = reader.sum()
        return value if reader.position == len(tokens) else None
    except (_NotArithmetic, ZeroDivisionError, OverflowError):
        return None


class _Arithmetic:
    """Recursive descent over tokens, with the usual precedence: a power binds tighter than a
    sign, so `-2^2` is -4 and `(-2)^2` is 4."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or expected is not None and token != expected:
            raise _NotArithmetic
        self.position += 1
        return token

    def sum(self) -> Fraction:
        value = self.product()
        while self.peek() in ("+", "-"):
            value = value + self.product() if self.take() == "+" else value - self.product()
        return value

    def product(self) -> Fraction:
        value = self.signed()
        while True:
            token = self.peek()
            if token in ("*", "\\cdot", "\\times"):
                self.take()
                value *= self.signed()
            elif token in ("/", "\\div"):
                self.take()
                value /= self.signed()
            elif token == "(":  # 2(3+4)
                value *= self.signed()
            else:
                return value

    def signed(self) -> Fraction:
        negative = False
        while self.peek() in ("-", "+"):
            negative ^= self.take() == "-"
        return -self.power() if negative else self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        if self.peek() == "{":
            exponent = self.group("{", "}")
        else:
            digit = self.take()
            if not re.fullmatch(r"\d", digit):  # 2^10 is 2^1 0 in LaTeX; 2^-1 is no LaTeX
                raise _NotArithmetic
            exponent = Fraction(digit)
        if self.peek() == "^" or exponent.denominator != 1:
            raise _NotArithmetic  # 2^3^2 is no LaTeX; 4^{1/2} is for sympy
        size = max(abs(base.numerator), base.denominator, 1)
        if abs(exponent) * math.log10(size) > MAX_DIGITS:
            raise _NotArithmetic  # too large to compute: the guard below compares it
        return base ** int(exponent)

    def atom(self) -> Fraction:
        token = self.take()
        if token in ("(", "{"):
            self.position -= 1
            return self.group(token, ")" if token == "(" else "}")
        if token == "\\frac":
            top = self.group("{", "}")
            return top / self.group("{", "}")
        if token[0].isdigit() or token[0] == ".":
            value = Fraction(token)
            if self.peek() == "\\frac" and "." not in token:
                return value + self.mixed()
            return value
        raise _NotArithmetic

    def mixed(self) -> Fraction:
        # 2\frac{1}{2} is 5/2; 2\frac{3}{2} is no mixed number and no clear product.
        start = self.position
        self.take("\\frac")
        fraction = self.group("{", "}") / self.group("{", "}")
        written = self.tokens[start + 1 : self.position]
        if (
            len(written) != 6
            or not 0 < fraction < 1
            or not all(t[0].isdigit() for t in written[1::3])
        ):
            raise _NotArithmetic
        return fraction

    def group(self, opening: str, closing: str) -> Fraction:
        self.take(opening)
        self.depth += 1
        if self.depth > _NESTING_LIMIT:
            raise _NotArithmetic
        value = self.sum()
        self.take(closing)
        self.depth -= 1
        return value


def _squash(text: str) -> str:
    # Spaces go, except between digits: `2 1/2` (a mixed number) is not `21/2`.
    return re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", text)


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    parts, depth, current = [], 0, []
    i = 0
    while i < len(text):
        if text.startswith("\\{", i) or text.startswith("\\}", i):
            depth += 1 if text[i + 1] == "{" else -1
            current.append(text[i : i + 2])
            i += 2
            continue
        char = text[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current).strip())
    return parts


def _compound(text: str) -> tuple[str, list[str]] | None:
    """(kind, items) of a tuple, interval, set, list or matrix; None for a single value.

    Kinds with the same brackets compare entry by entry; "set" and "list" ignore order.
    """
    if "\\pm" in text or "\\mp" in text:
        # `\pm 2, \pm 3` is four values, `(\pm 1, 0)` two points.
        items = _split_top_level(text, ";" if ";" in text else ",")
        values = [value for item in items for value in _signs(item)]
        if len(values) > 1:
            return "set", values
    if match := _SCALED_MATRIX.fullmatch(text):
        scalar, matrix = match[1].strip(), match[2]
        if scalar and not scalar.endswith(("=", "\\")):
            kind, items = _compound(matrix) or ("", [])
            return (kind, [_scaled(scalar, item) for item in items]) if kind else None
    if match := _MATRIX.fullmatch(text):
        rows = [_split_top_level(row, "&") for row in match[2].split("\\\\") if row.strip()]
        return f"matrix{len(rows)}x{len(rows[0]) if rows else 0}", [e for r in rows for e in r]
    if text.startswith("\\{") and text.endswith("\\}"):
        return "set", _split_top_level(text[2:-2])
    if len(text) >= 2 and text[0] in "([" and text[-1] in ")]":
        inner = text[1:-1]
        if _balanced(inner):
            items = _split_top_level(inner)
            if len(items) > 1:
                return text[0] + text[-1], items
    for separator in (";", ","):
        items = _split_top_level(text, separator)
        if len(items) > 1:
            return "set", items
    union = _OR.split(text)
    if len(union) > 1 and all(_balanced(part) for part in union):
        return "set", [part for part in union if part]
    return None


def _signs(item: str) -> list[str]:
    """The values of `item` with its signs chosen: `1 \\pm \\sqrt2` is two, `a \\pm b \\mp c`
    two (the signs go together), `\\pm 1 \\pm \\sqrt2` and `(\\pm 1, \\pm 1)` four (each sign
    on its own, as they are read)."""
    if "\\mp" in item or item.count("\\pm") == 1:
        plus = item.replace("\\pm", "+").replace("\\mp", "-")
        minus = item.replace("\\pm", "-").replace("\\mp", "+")
        values = [plus, minus]
    elif 1 < item.count("\\pm") <= 4:
        parts = item.split("\\pm")
        values = [
            parts[0] + "".join(sign + part for sign, part in zip(signs, parts[1:], strict=True))
            for signs in product("+-", repeat=len(parts) - 1)
        ]
    else:
        return [item]
    return [re.sub(r"^\s*\+", "", value) for value in values]


def _scaled(scalar: str, entry: str) -> str:
    scalar = {"-": "-1", "+": "1"}.get(scalar, scalar)
    factor, value = _exact_number(scalar), _exact_number(entry)
    if factor is not None and value is not None:
        product = factor * value
        return str(product.numerator) if product.denominator == 1 else str(product)
    return f"({scalar})({entry})"


def _balanced(text: str, *, max_depth: int | None = None) -> bool:
    depth = 0
    for char in text:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth < 0 or max_depth is not None and depth > max_depth:
            return False
    return depth == 0


def _malformed(text: str) -> bool:
    """Unbalanced brackets, brackets nested deeper than any answer's, or a double superscript
    (`2^2^2`, a LaTeX error): text that cannot be an answer."""
    return (
        not _balanced(text, max_depth=_NESTING_LIMIT)
        or _DOUBLE_SUPERSCRIPT.search(text) is not None
    )


def _as_set(text: str) -> str:
    """A set of reals as intervals: `{x | x > 3}`, `x > 3` as `(3,\\infty)`, `x \\neq 4` and
    `\\mathbb{R} \\setminus \\{4\\}` as `(-\\infty,4)\\cup(4,\\infty)`; anything else unchanged."""
    if match := _SET_BUILDER.fullmatch(text):
        text = _IN_SET.sub("", match[2].strip())
    if _REALS.fullmatch(text):
        return "(-\\infty,\\infty)"
    if match := _NOT_EQUAL.fullmatch(text):
        return _without(f"\\{{{match[2].strip()}\\}}") or text
    if match := _WITHOUT.fullmatch(text):
        return _without(match[1].strip()) or text
    return _as_interval(text)


def _without(removed: str) -> str | None:
    """The reals less `removed` (points `\\{a, b\\}` or one interval) as intervals."""
    if removed.startswith("\\{") and removed.endswith("\\}"):
        points = _split_top_level(removed[2:-2])
        values = [_exact_number(point) for point in points]
        if len(points) > 1:
            if None in values:
                return None
            points = [p for _, p in sorted(zip(values, points, strict=True))]
        bounds = ["-\\infty", *points, "\\infty"]
        return "\\cup".join(_interval(a, False, b, False) for a, b in pairwise(bounds))
    if match := _INTERVAL.fullmatch(removed):
        opening, low, high, closing = match.groups()
        infinity = "\\infty"
        below = _interval(f"-{infinity}", False, low, opening == "(")
        return f"{below}\\cup{_interval(high, closing == ')', infinity, False)}"
    return None


def _as_interval(text: str) -> str:
    """`x > 3` as `(3,\\infty)`, `-2 \\le x < 5` as `[-2,5)`; anything else unchanged."""
    if match := _TWO_SIDED.fullmatch(text):
        low, first, _, second, high = match.groups()
        first, second = _INEQUALITY_OPS[first], _INEQUALITY_OPS[second]
        if first[0] == second[0] == "<":
            return _interval(low, first == "<=", high, second == "<=")
        if first[0] == second[0] == ">":
            return _interval(high, second == ">=", low, first == ">=")
        return text
    if match := _ONE_SIDED.fullmatch(text):
        _, op, bound = match.groups()
        op = _INEQUALITY_OPS[op]
    elif match := _ONE_SIDED_REVERSED.fullmatch(text):
        bound, op, _ = match.groups()
        op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[_INEQUALITY_OPS[op]]
    else:
        return text
    if op[0] == ">":
        return _interval(bound, op == ">=", "\\infty", False)
    return _interval("-\\infty", False, bound, op == "<=")


def _interval(low: str, low_closed: bool, high: str, high_closed: bool) -> str:
    return f"{'[' if low_closed else '('}{low.strip()},{high.strip()}{']' if high_closed else ')'}"


_Bound = tuple[Fraction | float, bool]


def _union(text: str) -> tuple[tuple[_Bound, _Bound], ...] | None:
    """A union of intervals with numeric ends, merged and sorted (`(-\\infty,2]\\cup(2,\\infty)`
    is all reals); None for anything else (a tuple, non-numeric ends)."""
    intervals = []
    for part in text.split("\\cup"):
        part = part.strip()
        if part.startswith("\\{") and part.endswith("\\}"):
            value = _exact_number(part[2:-2])
            if value is None:
                return None
            intervals.append(((value, True), (value, True)))
            continue
        match = _INTERVAL.fullmatch(part)
        if match is None:
            return None
        opening, low, high, closing = match.groups()
        low_value, high_value = _end(low), _end(high)
        if low_value is None or high_value is None or low_value > high_value:
            return None
        if low_value == high_value and not (opening == "[" and closing == "]"):
            return None
        low_closed = opening == "[" and not isinstance(low_value, float)  # never at infinity
        high_closed = closing == "]" and not isinstance(high_value, float)
        intervals.append(((low_value, low_closed), (high_value, high_closed)))
    intervals.sort(key=lambda i: (i[0][0], not i[0][1]))
    merged = [intervals[0]]
    for low, high in intervals[1:]:
        last_low, last_high = merged[-1]
        if low[0] < last_high[0] or low[0] == last_high[0] and (low[1] or last_high[1]):
            if high[0] > last_high[0] or high[0] == last_high[0] and high[1]:
                last_high = high
            merged[-1] = (last_low, last_high)
        else:
            merged.append((low, high))
    return tuple(merged)


def _end(text: str) -> Fraction | float | None:
    text = text.strip()
    if text in ("\\infty", "+\\infty"):
        return math.inf
    if text == "-\\infty":
        return -math.inf
    return _exact_number(text)


def _based(text: str) -> tuple[str, int] | None:
    """(digits, base) of a number written in a base: `1210_5`, `1210_{(5)}`, `(1210)_5`."""
    match = _BASED.fullmatch(text)
    if match is None:
        return None
    base = int(match[2]) if match[2].isdigit() else _BASE_NAMES.get(match[2])
    return (match[1], base) if base and 2 <= base <= 36 else None


def _unending(text: str) -> str | None:
    """`text` with its small powers worked out, when evaluating it could run for ever
    (9^{9^{9}}, 1000000!); None when it is safe. Such answers are compared as written, never
    evaluated, as the PRM800K grader does."""
    huge = False

    def power(match: re.Match) -> str:
        nonlocal huge
        base, exponent = int(match[1]), match[2] or match[3]
        if len(exponent) > 9 or base > 1 and int(exponent) * math.log10(base) > MAX_DIGITS:
            huge = True
            return match[0]
        return str(base ** int(exponent))

    # Towers are worked from the top: 3^{3^{3}} is 3^{27}, fine; 9^{9^{9}} is 9^{387420489}.
    for _ in range(8):
        reduced = _POWER.sub(power, text)
        if reduced == text:
            break
        text = reduced
    else:
        huge = True
    huge = huge or any(len(n) > 4 or int(n) > 3000 for n in _FACTORIAL.findall(text))
    return _squash(re.sub(r"[{}]", "", text)) if huge else None


def _tower(text: str) -> tuple[int, int] | None:
    """A power too large to compute as (root, exponent) with the smallest root: 4^{10^{10}} and
    2^{2\\cdot 10^{10}} are both (2, 2*10^10). None when the exponent itself is too large."""
    match = _TOWER.fullmatch(text)
    if match is None or match[2] is not None and not _balanced(match[2]):
        return None
    base, exponent = _evaluate(match[1]), _evaluate(match[2] or match[3])
    if base is None or exponent is None or base.denominator != 1 or exponent.denominator != 1:
        return None
    base, exponent = int(base), int(exponent)
    if base < 2 or exponent < 1 or base.bit_length() > 256:
        return None
    for k in range(base.bit_length(), 1, -1):
        root, exact = sympy.integer_nthroot(base, k)
        if exact:
            return int(root), k * exponent
    return base, exponent


def is_equivalent(answer: str, ground_truth: str) -> bool:
    """True when `answer` is mathematically the same as the MATH-style `ground_truth`.

    Never raises, and answers within GRADING_TIME_LIMIT_SECONDS from any thread or process.
    """
    if not answer or not ground_truth:
        return False
    if len(answer) > MAX_ANSWER_CHARS or len(ground_truth) > MAX_ANSWER_CHARS:
        logger.warning(
            "Answer over %d characters; not parsed, counted as not equal unless identical: "
            "%.80r (%d characters) vs %.80r (%d characters)",
            MAX_ANSWER_CHARS, answer, len(answer), ground_truth, len(ground_truth),
        )  # fmt: skip
        return answer.strip() == ground_truth.strip()
    left, right = _normalize(answer), _normalize(ground_truth)
    if not left or not right:
        return False  # an empty answer is never right, even against an empty truth
    units = _unit(answer), _unit(ground_truth)
    if None not in units and units[0] != units[1]:
        return False  # 4 cm is not 4 m
    try:
        percent = _is_percent(answer), _is_percent(ground_truth)
        if percent[0] != percent[1]:
            verdict = _percent_equivalent(*((left, right) if percent[0] else (right, left)))
            if verdict is not None:
                return verdict
        return _equivalent(left, right, depth=0)
    except Exception:  # noqa: BLE001 - a grader must answer, not crash an import
        logger.warning("Grading failed; counted as not equal: %r vs %r", answer, ground_truth)
        return False


def _equivalent(left: str, right: str, *, depth: int) -> bool:
    if _squash(left) == _squash(right):
        return True
    if depth > 4:
        return False
    choices = _choice(left), _choice(right)
    if choices[0] and choices[1]:
        return choices[0][0] == choices[1][0]
    for choice, other in ((choices[0], right), (choices[1], left)):
        if choice and choice[1]:
            return _equivalent(choice[1], other, depth=depth + 1)  # (A) 24 against 24
    based = _based(left), _based(right)
    if based[0] and based[1]:
        return based[0][0] == based[1][0] and based[0][1] == based[1][1]
    if based[0] or based[1]:
        digits, other = (based[0][0], right) if based[0] else (based[1][0], left)
        return digits == _squash(other).upper()  # 1011_2 against 1011: the base is implied
    unnamed = _without_names(left, right)
    if unnamed is None:
        return False
    left, right = unnamed
    left, right = _as_set(left), _as_set(right)
    if _squash(left) == _squash(right):
        return True
    unions = _union(left), _union(right)
    if unions[0] is not None and unions[1] is not None:
        return unions[0] == unions[1]
    compound_left, compound_right = _compound(left), _compound(right)
    if compound_left or compound_right:
        return _same_compound(compound_left, compound_right, left, right, depth=depth + 1)
    exact_left, exact_right = _exact_number(left), _exact_number(right)
    if exact_left is not None and exact_right is not None:
        return exact_left == exact_right
    if (exact_left is not None and _DECIMAL_POINT.search(left)) or (
        exact_right is not None and _DECIMAL_POINT.search(right)
    ):
        return False  # a decimal is never taken as a rounding of an irrational value
    if _ELLIPSIS.fullmatch(left.replace(" ", "")) or _ELLIPSIS.fullmatch(right.replace(" ", "")):
        return False  # 3.14159... is a truncation, not a value
    unending_left, unending_right = _unending(left), _unending(right)
    if unending_left or unending_right:
        towers = _tower(left), _tower(right)
        if towers[0] and towers[1]:
            return towers[0] == towers[1]
        return unending_left == unending_right
    if _words(left) or _words(right):
        return _word_key(left) == _word_key(right)  # words (`even`, `odd`) are compared as words
    if _malformed(left) or _malformed(right):
        return False  # no LaTeX parser makes a value of it, and sympy can take seconds to fail
    return _verify_within_limit(left, right)


def _choice(text: str) -> tuple[str, str | None] | None:
    if match := _CHOSEN.fullmatch(text):
        return match[1], match[2]
    return (text, None) if re.fullmatch(r"[A-H]", text) else None


def _without_names(left: str, right: str) -> tuple[str, str] | None:
    """`y = 2x + 3` against `2x + 3` is its value; against another equation (`2x - y + 3 = 0`,
    `x = \\frac{y-3}{2}`) it stays an equation, compared as one. None when the two name
    different unknowns."""
    named_left, named_right = _NAMED.match(left), _NAMED.match(right)
    if named_left and named_right:
        if named_left["name"] == named_right["name"]:
            return _NAMED.sub("", left).strip(), _NAMED.sub("", right).strip()
        if named_left["name"] not in right and named_right["name"] not in left:
            return None  # x = -3 and y = -3 answer different questions
    if named_left and "=" not in right:
        return _NAMED.sub("", left).strip(), right
    if named_right and "=" not in left:
        return left, _NAMED.sub("", right).strip()
    return left, right


def _same_compound(
    left: tuple[str, list[str]] | None,
    right: tuple[str, list[str]] | None,
    left_text: str,
    right_text: str,
    *,
    depth: int,
) -> bool:
    if left and right and left[0] == right[0]:
        return _same_items(left, right, depth=depth)
    # A singleton set is its element: \{3\} against 3.
    for one, other, other_text in ((left, right, right_text), (right, left, left_text)):
        if one and one[0] == "set" and len(one[1]) == 1 and (other is None or other[0] != "set"):
            return _equivalent(one[1][0], other_text, depth=depth)
    # A tuple or \langle\rangle is a vector, and so is a matrix of one column or one row.
    if left and right and {left[0], right[0]} & {"()"} and len(left[1]) == len(right[1]):
        shape = (right if left[0] == "()" else left)[0]
        if re.fullmatch(rf"matrix(?:{len(left[1])}x1|1x{len(left[1])})", shape):
            return _same_items(("()", left[1]), ("()", right[1]), depth=depth)
    return False


def _same_items(left: tuple[str, list[str]], right: tuple[str, list[str]], *, depth: int) -> bool:
    kind, items = left
    other = list(right[1])
    if len(items) != len(other):
        return False
    if kind != "set":
        return all(_equivalent(a, b, depth=depth) for a, b in zip(items, other, strict=True))
    for item in items:
        match = next((i for i, b in enumerate(other) if _equivalent(item, b, depth=depth)), None)
        if match is None:
            return False
        other.pop(match)
    return True


def _words(text: str) -> bool:
    if re.fullmatch(r"[A-Za-z]{2,}(?:[ -][A-Za-z]+)*", text) is None:
        return False
    return len(text) > 3 or text.lower() in _SHORT_WORDS


def _word_key(text: str) -> str:
    key = re.sub(r"^(?:an?|the) ", "", text.lower().strip())  # "an even function" is "even"
    if _NEITHER.fullmatch(key):
        return "neither"
    match = _QUALIFIED.fullmatch(key)
    return match[1] if match else key


# ---------------------------------------------------------------------------------------------
# math-verify under a deadline


class _Timeout(Exception):
    pass


def _verify(left: str, right: str) -> bool:
    gold, target = _parse(_IMAGINARY.sub("I", right)), _parse(_IMAGINARY.sub("I", left))
    if not (gold and target):
        return False
    if verify(gold, target, timeout_seconds=None):
        return True
    return _same_curve(gold[0], target[0]) or _same_for_positive(gold[0], target[0])


def _same_curve(gold, target) -> bool:
    """Two equations of the same line or curve: one's `lhs - rhs` is a nonzero constant times
    the other's (`y = 2x + 3` and `2x - y + 3 = 0`; `x = 3` and `2x = 6`)."""
    if not (isinstance(gold, sympy.Equality) and isinstance(target, sympy.Equality)):
        return False
    gold_zero, target_zero = gold.lhs - gold.rhs, target.lhs - target.rhs
    if gold_zero.is_zero or target_zero.is_zero or not gold_zero.free_symbols:
        return False
    ratio = sympy.simplify(gold_zero / target_zero)
    return bool(not ratio.free_symbols and ratio.is_finite and ratio.is_zero is False)


def _same_for_positive(gold, target) -> bool:
    """`a^{3/4}` and `\\sqrt[4]{a^3}`: equal for the positive unknowns of a radical answer,
    which sympy does not assume. Only for radicals or fractional powers, and never across an
    absolute value (|x| is not x)."""
    if not (isinstance(gold, sympy.Expr) and isinstance(target, sympy.Expr)):
        return False
    if (
        not (gold.free_symbols or target.free_symbols)
        or gold.has(sympy.Abs)
        or target.has(sympy.Abs)
    ):
        return False

    def radical(expr: sympy.Expr) -> bool:
        return any(p.exp.is_Rational and not p.exp.is_integer for p in expr.atoms(sympy.Pow))

    if not (radical(gold) or radical(target)):
        return False
    positive = {
        s: sympy.Symbol(s.name, positive=True) for s in gold.free_symbols | target.free_symbols
    }
    return sympy.simplify(gold.subs(positive) - target.subs(positive)) == 0


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> list:
    # A ground truth is graded against every wrong answer of its problem, and answers recur
    # across problems; the parse is most of a grade, and sympy expressions are immutable.
    return parse(f"${text}$", extraction_config=_EXTRACTION, parsing_timeout=None)


def _verify_within_limit(left: str, right: str) -> bool:
    """math-verify's verdict, or False when it takes longer than the limit.

    math-verify's own timeouts use `signal.alarm`, which only the main thread may set, and a
    signal cannot stop sympy inside one long C call anyway. So every thread (Celery, web
    requests, imports) sends the pair to one long-lived grading process and waits on a future;
    a process that overruns is killed and replaced. Where no process can be started, the main
    thread falls back to an interval timer, and other threads to the guard alone.
    """
    limit = settings.GRADING_TIME_LIMIT_SECONDS
    try:
        return _GRADER.verify(left, right, limit)
    except _Timeout:
        logger.warning("Grading took over %ss; counted as not equal: %r vs %r", limit, left, right)
        return False


def _alarm_is_free() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


def _verify_with_alarm(left: str, right: str, limit: float) -> bool:
    def expire(signum, frame):
        raise _Timeout

    signal.signal(signal.SIGALRM, expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit)
        return _verify(left, right)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


class _GradingProcess:
    """One forked process that runs math-verify for every thread of this process.

    Started on first use and reused (a process per call would cost more than the grade). Where
    no process can be started (a daemonic process), math-verify runs in the calling thread:
    under an interval timer in the main thread, with only the guard against unending values
    in any other.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._unavailable = False

    def verify(self, left: str, right: str, limit: float) -> bool:
        for _attempt in range(2):
            executor = self._start()
            if executor is None:
                if _alarm_is_free():
                    return _verify_with_alarm(left, right, limit)
                return _verify(left, right)
            try:
                return executor.submit(_verify, left, right).result(timeout=limit)
            except FutureTimeout:
                self._restart(executor)
                raise _Timeout from None
            except BrokenProcessPool:
                # Another thread's overrun killed the process under this pair: once more.
                self._restart(executor)
        raise _Timeout

    def _start(self) -> ProcessPoolExecutor | None:
        with self._lock:
            if self._executor is None and not self._unavailable:
                try:
                    context = multiprocessing.get_context("fork")
                    executor = ProcessPoolExecutor(1, mp_context=context)
                except (AssertionError, OSError) as exc:
                    logger.warning("Grading in the calling thread: no grading process (%s)", exc)
                    self._unavailable = True
                    return None
                try:
                    executor.submit(int).result(timeout=30)  # start it now, under the lock
                    self._executor = executor
                except (AssertionError, OSError, BrokenProcessPool, FutureTimeout) as exc:
                    logger.warning("Grading in the calling thread: no grading process (%s)", exc)
                    self._unavailable = True
                    _kill(executor)
            return self._executor

    def _restart(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor = None
                _kill(executor)


def _kill(executor: ProcessPoolExecutor) -> None:
    # shutdown() waits for a busy worker to finish, which an overrun never does; Python 3.14's
    # terminate_workers() does this without the private mapping.
    for process in list((executor._processes or {}).values()):
        process.kill()
    executor.shutdown(wait=False, cancel_futures=True)


_GRADER = _GradingProcess()


# How much lower a GradingPool worker's CPU priority is than its importer's (os.nice).
GRADING_NICENESS = 10


def _grade_in_this_process() -> None:
    # A GradingPool worker grades in its main thread, where the interval timer works; a
    # process forked from it could inherit a lock some thread of the importer held.
    _GRADER._unavailable = True
    # The import waits for its rows to be stored, and for the verdicts only at its end: the
    # workers take the CPU the importer and the database leave (100,000 PRM800K lines on 2
    # cores: 50.5 s with the workers at the importer's priority, 45.1-45.7 s below it).
    os.nice(GRADING_NICENESS)


# A forked child (a GradingPool worker) must not share its parent's grading process.
os.register_at_fork(after_in_child=_GRADER.__init__)


def grade_pair(pair: tuple[str, str]) -> bool:
    """`is_equivalent` of one (answer, ground truth) pair, as a module-level function that a
    process pool can call."""
    return is_equivalent(*pair)


class GradingPool:
    """Grades many pairs at once on `processes` worker processes.

    A LaTeX parse takes tens of milliseconds of pure Python, so a PRM800K-size import spends
    minutes grading on one core. The workers start on first use, and only for a batch big
    enough to pay for them (`MIN_PAIRS`). They are forked: a fork server or spawn would run
    the importing program's main script again in every worker, which a script without a
    `__main__` guard does not survive. A forked worker only grades; it never touches the
    database connection it inherits. Where processes cannot be started (a daemonic process,
    no semaphores), grading runs here instead.
    """

    MIN_PAIRS = 32

    def __init__(self, *, processes: int) -> None:
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    def grade(self, pairs: list[tuple[str, str]]) -> list[bool]:
        if self.processes > 1 and len(pairs) >= self.MIN_PAIRS:
            try:
                return self._parallel(pairs)
            except (BrokenProcessPool, AssertionError, OSError) as exc:
                logger.warning("Grading in this process: worker processes failed (%s)", exc)
                self.close()
                self.processes = 1
        return [grade_pair(pair) for pair in pairs]

    def _parallel(self, pairs: list[tuple[str, str]]) -> list[bool]:
        if self._executor is None:
            context = multiprocessing.get_context("fork")
            self._executor = ProcessPoolExecutor(
                self.processes, mp_context=context, initializer=_grade_in_this_process
            )
        # Small chunks: most pairs take microseconds (integers), a few take a parse each.
        chunk = max(1, len(pairs) // (self.processes * 8))
        return list(self._executor.map(grade_pair, pairs, chunksize=chunk))

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = None

    def __enter__(self) -> "GradingPool":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Verdicts of imported solutions


# Verdicts by (answer, ground truth): a pool repeats the same few final answers per problem
# many times over. Emptied when full rather than evicted one by one; it only saves work.
_verdicts: dict[tuple[str, str], bool] = {}
VERDICTS_MAX = 65536


def gradable(answer: str, ground_truth: str) -> bool:
    """Whether there is anything to grade: a final answer read from the solution
    (`core.answers.final_answer`) and a ground truth on its problem."""
    return bool(answer.strip()) and bool(ground_truth.strip())


def grade_answer(answer: str, ground_truth: str) -> bool | None:
    """The verdict stored in `Solution.is_correct`: None (ungraded) when there is no answer or
    no ground truth, since a solution whose answer cannot be read is not known to be wrong."""
    if not gradable(answer, ground_truth):
        return None
    pair = (answer, ground_truth)
    verdict = _verdicts.get(pair)
    if verdict is None:
        grade_answers(pairs=[pair], pool=None)
        verdict = _verdicts[pair]
    return verdict


def grade_answers(*, pairs: Iterable[tuple[str, str]], pool: GradingPool | None) -> None:
    """Grade the pairs not graded yet (on `pool`'s processes when given), so that
    `grade_answer` then finds them. Ungradable pairs are left out: they have no verdict."""
    pending = list(dict.fromkeys(p for p in pairs if p not in _verdicts and gradable(*p)))
    if not pending:
        return
    verdicts = pool.grade(pending) if pool else [grade_pair(p) for p in pending]
    if len(_verdicts) + len(pending) > VERDICTS_MAX:
        _verdicts.clear()
    _verdicts.update(zip(pending, verdicts, strict=True))


def grading_pool() -> GradingPool:
    return GradingPool(processes=settings.IMPORT_GRADING_PROCESSES)


@dataclass
class Regraded:
    """What a regrade did: `changed` verdicts, `answers_read` answers newly read from the steps
    of solutions stored without one, and the verdicts after it."""

    changed: int = 0
    answers_read: int = 0
    correct: int = 0
    wrong: int = 0
    ungraded: int = 0


def regrade_solutions(*, problem_ids: list[int] | None = None) -> Regraded:
    """Grade solutions again (after a grader, ground-truth or answer change). A solution stored
    with no answer has it read again from its steps first (the extraction may have improved);
    a live trajectory still being written is left without one. A solution whose answer a
    person decided (an AnswerReview) keeps that decision."""
    solutions = (
        Solution.objects.filter(answer_review__isnull=True)
        .select_related("problem")
        .only("id", "steps", "answer", "is_correct", "meta", "problem__answer")
    )
    if problem_ids is not None:
        solutions = solutions.filter(problem_id__in=problem_ids)
    result = Regraded()
    changed = []
    for solution in solutions.iterator(chunk_size=2000):
        if not solution.answer and not (solution.meta or {}).get("trajectory"):
            answer = final_answer(solution.steps)
            if answer and _store_answer(solution, answer):
                result.answers_read += 1
        verdict = grade_answer(solution.answer, solution.problem.answer)
        if verdict != solution.is_correct:
            solution.is_correct = verdict
            changed.append(solution)
        result.correct += verdict is True
        result.wrong += verdict is False
        result.ungraded += verdict is None
    Solution.objects.bulk_update(changed, ["is_correct"], batch_size=1000)
    result.changed = len(changed)
    return result


def _store_answer(solution: Solution, answer: str) -> bool:
    """Give `solution` the answer read from its steps; False (left as it was) when another
    solution of the problem already has those steps with that answer."""
    stored = solution.answer
    solution.answer = answer
    try:
        with transaction.atomic():
            solution.save(update_fields=["answer", "content_hash"])
    except IntegrityError:
        solution.answer = stored
        return False
    return True
