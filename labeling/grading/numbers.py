"""Stage 2a: exact numbers. Integers, fractions, decimals, mixed numbers, repeating decimals,
scientific notation and plain arithmetic (`0.1 + 0.2`, `3 \\times 4 + 2`, `-2^2`) read as exact
rationals, so that a rounded decimal (0.3333) never passes for 1/3 and a difference of 10^-12
is a difference. Most MATH answers are numbers; settling them here skips a ~25 ms sympy parse.
"""

import math
from fractions import Fraction

from core import patterns
from labeling.grading.vocabulary import DIGIT as D
from labeling.grading.vocabulary import SPACE as S
from labeling.grading.vocabulary import WORD

# `D` and `S` are Python's `\d` and `\s` (see `vocabulary`): an answer's digits in any script.
_DECIMAL = patterns.compile(rf"[-+]?(?:{D}+\.?{D}*|\.{D}+)")
DECIMAL_POINT = patterns.compile(rf"{D}\.|\.{D}")
_FRACTION = patterns.compile(rf"([-+]?)(?:\\frac\{{([-+]?{D}+)\}}\{{([-+]?{D}+)\}}|({D}+)/({D}+))")
_MIXED = patterns.compile(rf"(-?)({D}+)(?:{S}*\\frac\{{({D}+)\}}\{{({D}+)\}}|{S}+({D}+)/({D}+))")

_REPEATING = patterns.compile(rf"(-?)({D}*)\.({D}*)\\(?:overline|bar|dot)\{{?({D}+)\}}?")
# 0.\dot{1}4285\dot{7}: the dots mark the first and last digit of the repeating block.
_DOTTED = patterns.compile(rf"(-?)({D}*)\.({D}*)\\dot\{{?({D})\}}?({D}*)\\dot\{{?({D})\}}?")
_PARENTHESISED = patterns.compile(rf"(-?)({D}*)\.({D}*)\(({D}+)\)")
ELLIPSIS = patterns.compile(rf"(-?)({D}*)\.({D}+){S}*(?:\\[lc]?dots|\.\.\.|…)")
_SCIENTIFIC = patterns.compile(
    rf"([-+]?(?:{D}+\.?{D}*|\.{D}+)){S}*"
    rf"(?:[eE]{S}*([-+]?{D}+)|(?:\\times|\\cdot|\*|x){S}*10\^\{{?([-+]?{D}+)\}}?)"
)
# `2 1/2` is a mixed number, so spaces between digits are not dropped.
_SPACED_DIGITS = patterns.compile(rf"{D}{S}+{D}")


def percent_equivalent(percent: str, bare: str) -> bool | None:
    """`p%` against a number written without the sign; None when either is not a number.

    A percent is p/100 (`50\\%` is 1/2). A bare number may also be the percentage itself, as
    MATH writes "what percent" answers (`20` for 20%), but never a fraction or a number under 1,
    which are proportions: `0.5\\%` is not 1/2, and not 0.5.
    """
    p, t = exact_number(percent), exact_number(bare)
    if p is None or t is None:
        return None
    if p / 100 == t:
        return True
    proportion = abs(t) < 1 or ("\\frac" in bare or "/" in bare) and not _MIXED.fullmatch(bare)
    return p == t and not proportion


def exact_number(text: str) -> Fraction | None:
    # Most MATH answers are numbers; settling those exactly skips a ~25 ms LaTeX-to-sympy
    # parse per answer, and keeps a rounded decimal (0.3333) from passing for 1/3.
    text = text.strip()
    compact = text if _SPACED_DIGITS.search(text) else text.replace(" ", "")
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
    if match := ELLIPSIS.fullmatch(compact):
        sign, whole, digits = match.groups()
        block = _repeated_block(digits)
        return _repeating(sign, whole, *block) if block else None
    if match := _SCIENTIFIC.fullmatch(compact):
        mantissa, exponent, power = match.groups()
        exponent = int(exponent or power)
        if abs(exponent) > 400:
            return None
        return Fraction(mantissa) * Fraction(10) ** exponent
    return evaluate(text)


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

# Numbers this long are not worked out (a power tower's value has millions of digits).
MAX_DIGITS = 10_000

_ARITHMETIC_TOKEN = patterns.compile(
    rf"{S}*(?:({D}+\.?{D}*|\.{D}+)|(\\frac|\\cdot|\\times|\\div|[-+*/^(){{}}]))"
)
# Deeper than any real answer (\frac{\sqrt{\frac{1}{2}}}{3} is 3 deep); sympy and a
# recursive parser both slow down on deep nesting.
NESTING_LIMIT = 12
DOUBLE_SUPERSCRIPT = patterns.compile(rf"\^{S}*(?:{WORD}|\\[a-zA-Z]+){S}*\^")


class _NotArithmetic(Exception):
    pass


def evaluate(text: str) -> Fraction | None:
    """The exact value of `text` when it is numbers and + - * / ^ \\frac only, else None."""
    # One scan, not a match per position: RE2's binding encodes the whole text on every call.
    # Tokens follow each other; at the first gap, only spaces may be left.
    tokens, position = [], 0
    for match in _ARITHMETIC_TOKEN.finditer(text):
        if match.start() != position:
            break
        tokens.append(match[1] or match[2])
        position = match.end()
    if text[position:].strip():
        return None
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
            # 2^10 is 2^1 0 in LaTeX; 2^-1 is no LaTeX. One of Python's `\d`, in any script.
            if not (len(digit) == 1 and digit.isdecimal()):
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
        if self.depth > NESTING_LIMIT:
            raise _NotArithmetic
        value = self.sum()
        self.take(closing)
        self.depth -= 1
        return value
