"""Property tests of the grader: what no rewrite may break, and what no near miss may pass.

Values are generated as objects that know their exact value (a sympy number, a frozenset, a
tuple) and write themselves as LaTeX in many forms and styles. A rewrite is the same object, or
another object of the same value, written another way; a perturbation changes the value, and
the test checks that it did, so a failure here is the grader's and not the generator's.

Each property runs seed after seed (`_for_seconds`) for GRADING_PROPERTY_SECONDS, so that a
slow grader still gets a fixed amount of testing and every failure is reproducible from its
seed. No database: the grader is pure. Over 500 lines on purpose: the value generators and
the properties that use them must agree on one notion of a value, kept in one file.
"""

import functools
import itertools
import os
import re
import time
from dataclasses import dataclass, replace
from fractions import Fraction

import pytest
import sympy
from django.conf import settings as django_settings
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

from labeling.grading import Verdict, grade

# The issue asks for 30 s of examples per property; CI and a quick local run set this lower.
SECONDS = float(os.environ.get("GRADING_PROPERTY_SECONDS", "30"))
# The fast lane (`-m "not slow"`) still exercises the two spec properties, briefly.
SMOKE_SECONDS = min(2.0, SECONDS)
# Per seed: small enough that the last seed overruns the budget by little, large enough that
# Hypothesis gets past the simplest examples it always tries first.
EXAMPLES_PER_SEED = 40
# A grader call past its deadline (and the second it takes to replace the grading process it
# killed) is a hang to a labeler waiting on an import.
CALL_LIMIT_SECONDS = django_settings.GRADING_TIME_LIMIT_SECONDS + 1.5

PER_SEED = settings(
    max_examples=EXAMPLES_PER_SEED,
    database=None,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow],
)


def _for_seconds(test_fn, seconds: float = SECONDS) -> None:
    """Run the `@given` test `test_fn` with seed 0, 1, 2, ... until `seconds` are spent.

    Fixed seeds rather than Hypothesis' random one: a failure in CI is replayed locally by its
    seed, and a faster grader only adds seeds, never changes what an earlier seed tried.
    """
    examples = 0
    inner = test_fn.hypothesis.inner_test

    @functools.wraps(inner)  # Hypothesis reports a failing example by the inner signature
    def counted(*args, **kwargs):
        nonlocal examples
        inner(*args, **kwargs)
        examples += 1  # after the call: rejected (assume) examples are not examples

    test_fn.hypothesis.inner_test = counted
    start = time.monotonic()
    n = 0
    try:
        while n == 0 or time.monotonic() - start < seconds:
            seed(n)(test_fn)
            try:
                test_fn()
            except BaseException as exc:
                exc.add_note(f"{test_fn.__name__}: failed with hypothesis.seed({n})")
                raise
            n += 1
    finally:
        test_fn.hypothesis.inner_test = inner
        print(
            f"\n{test_fn.__name__}: {examples} examples, {n} seeds passed, "
            f"{time.monotonic() - start:.1f} s"
        )


# ---------------------------------------------------------------------------------------------
# Writing values
#
# A template is LaTeX with markers the style fills in, so that one value can be written every
# way a solution writes it and a digit can be changed where digits mean something.

GAP = "\x00"  # any space, thin space or none: between tokens
COMMA_GAP = "\x03"  # after a list comma: never `\!`, since `5,\!234` is the number 5234
WHOLE = "\x01"  # the integer part of a number: thousands separators go in it
NUMERAL = "\x02"  # a positive integer as written (numerator, radicand, exponent): never 0
FRACTIONAL = "\x07"  # digits after a decimal point: any digits
OPEN, CLOSE = "\x05", "\x06"  # the outer brackets of a compound: `\left` and `\right` go here

GAPS = ["", " ", "  ", r"\,", r"\ ", r"\!", "~"]
COMMA_GAPS = ["", " ", r"\,", r"\ ", "~"]
# Plain `,` and `\,` separators read as list commas or spaces inside a tuple or a set, so only
# a lone number gets them; `{,}` and `,\!` are unambiguous anywhere.
THOUSANDS_ANYWHERE = ["{,}", r",\!"]
THOUSANDS_ALONE = [",", r"\,"]

VULGAR = {
    (1, 2): "½", (1, 3): "⅓", (2, 3): "⅔", (1, 4): "¼", (3, 4): "¾", (1, 5): "⅕",
    (2, 5): "⅖", (3, 5): "⅗", (4, 5): "⅘", (1, 6): "⅙", (5, 6): "⅚", (1, 7): "⅐",
    (1, 8): "⅛", (3, 8): "⅜", (5, 8): "⅝", (7, 8): "⅞", (1, 9): "⅑", (1, 10): "⅒",
}  # fmt: skip


def _vulgar(match: re.Match) -> str:
    return VULGAR.get((int(match[1]), int(match[2])), match[0])


UNICODE = {
    "vulgar": lambda t: re.sub(r"\\frac\{(\d+)\}\{(\d+)\}", _vulgar, t),
    "sqrt": lambda t: re.sub(r"\\sqrt\{(\d+)\}", r"√\1", t),
    "pi": lambda t: re.sub(r"\\pi(?![a-zA-Z])", "π", t),
    "minus": lambda t: t.replace("-", "\N{MINUS SIGN}"),
    "times": lambda t: re.sub(r"\\times(?![a-zA-Z])", "×", t),
    "superscripts": lambda t: re.sub(
        r"x\^(?:\{([23])\}|([23]))", lambda m: "x" + "  ²³"[int(m[1] or m[2])], t
    ),
    "infty": lambda t: re.sub(r"\\infty(?![a-zA-Z])", "∞", t),
    "le": lambda t: re.sub(r"\\([lg])eq?(?![a-zA-Z])", lambda m: "≤" if m[1] == "l" else "≥", t),
}
UNICODE_ORDER = list(UNICODE)  # vulgar before sqrt and minus: it reads `\frac{1}{2}` as written


@dataclass(frozen=True)
class Style:
    frac: str = r"\frac"
    gaps: tuple[str, ...] = ("",)
    comma_gaps: tuple[str, ...] = (" ",)
    thousands: str = ""
    unicode: frozenset[str] = frozenset()
    left_right: bool = False
    bare_superscripts: bool = False  # `x^2` for `x^{2}`
    braceless: bool = False  # `\frac12`, `\sqrt3`
    leq: bool = False  # `\leq` for `\le`


def _grouped(digits: str, separator: str) -> str:
    if not separator or len(digits) < 4:
        return digits
    head = len(digits) % 3 or 3
    groups = [digits[:head], *(digits[i : i + 3] for i in range(head, len(digits), 3))]
    return separator.join(groups)


def render(template: str, style: Style) -> str:
    text = re.sub(f"{WHOLE}(\\d+){WHOLE}", lambda m: _grouped(m[1], style.thousands), template)
    text = text.replace(NUMERAL, "").replace(FRACTIONAL, "")
    gaps, commas = itertools.cycle(style.gaps), itertools.cycle(style.comma_gaps)

    def gap(match: re.Match) -> str:
        space = next(gaps if match[0] == GAP else commas)
        # A control word glued to a letter by an empty gap (`\le` `x`) is another word.
        glued = (
            re.search(r"\\[a-zA-Z]+$", text[: match.start()]) and text[match.end() :][:1].isalpha()
        )
        return space or (" " if glued else "")

    text = re.sub(f"[{GAP}{COMMA_GAP}]", gap, text)
    text = text.replace(OPEN, r"\left" if style.left_right else "")
    text = text.replace(CLOSE, r"\right" if style.left_right else "")
    if style.bare_superscripts:
        text = re.sub(r"\^\{(\d)\}", r"^\1", text)
    if style.leq:
        text = re.sub(r"\\([lg])e(?![a-zA-Z])", r"\\\1eq", text)
    for name in UNICODE_ORDER:
        if name in style.unicode:
            text = UNICODE[name](text)
    if style.braceless:
        text = re.sub(r"\\frac\{(\d)\}\{(\d)\}", r"\\frac\1\2", text)
        text = re.sub(r"\\sqrt\{(\d)\}", r"\\sqrt\1", text)
    return re.sub(r"\\frac(?![a-zA-Z])", lambda _: style.frac, text)


@st.composite
def styles(draw, *, compound: bool) -> Style:
    """Any way of writing: what a model's or a person's answer may look like."""
    thousands = ["", *THOUSANDS_ANYWHERE, *([] if compound else THOUSANDS_ALONE)]
    return Style(
        frac=draw(st.sampled_from([r"\frac", r"\dfrac", r"\tfrac"])),
        gaps=tuple(draw(st.lists(st.sampled_from(GAPS), min_size=1, max_size=4))),
        comma_gaps=tuple(draw(st.lists(st.sampled_from(COMMA_GAPS), min_size=1, max_size=3))),
        thousands=draw(st.sampled_from(thousands)),
        unicode=frozenset(draw(st.sets(st.sampled_from(UNICODE_ORDER)))),
        left_right=draw(st.booleans()),
        bare_superscripts=draw(st.booleans()),
        braceless=draw(st.booleans()),
        leq=draw(st.booleans()),
    )


@st.composite
def plain_styles(draw, *, compound: bool) -> Style:
    """How MATH writes a ground truth: LaTeX, `,\\!` thousands, ordinary spaces."""
    return Style(
        gaps=(draw(st.sampled_from(["", " "])),),
        comma_gaps=(draw(st.sampled_from(["", " "])),),
        thousands=draw(st.sampled_from(["", r",\!"])),
        bare_superscripts=draw(st.booleans()),
    )


def _sympy(value: Fraction) -> sympy.Rational:
    return sympy.Rational(value.numerator, value.denominator)


def _fewest_places(value: Fraction) -> int | None:
    """Digits after the point of the exact decimal, None when it does not terminate."""
    q, twos, fives = value.denominator, 0, 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    return max(twos, fives) if q == 1 else None


def _decimal(value: Fraction, places: int, *, bare_point: bool = False) -> str:
    sign = "-" if value < 0 else ""
    digits = str(int(abs(value) * 10**places)).rjust(places + 1, "0")
    whole, fractional = (digits[:-places], digits[-places:]) if places else (digits, "")
    written = "" if bare_point and whole == "0" else f"{WHOLE}{whole}{WHOLE}"
    if fractional:
        written += f".{FRACTIONAL}{fractional}{FRACTIONAL}"
    return sign + written


def _n(number: int) -> str:
    return f"{NUMERAL}{number}{NUMERAL}"


def _over(numerator: str, denominator: int) -> str:
    return rf"\frac{{{numerator}}}{{{_n(denominator)}}}"


@dataclass(frozen=True)
class Rational:
    """An integer, fraction or terminating decimal, in one written form."""

    value: Fraction
    form: str = "exact"  # "exact" (integer or \frac), "decimal", "slash", "sign inside"
    scale: int = 1  # \frac{2a}{2b}: numerator and denominator both times this
    places: int = 0  # decimal: digits after the point, at least the fewest exact
    bare_point: bool = False  # `.5`

    scalar = True

    def key(self):
        return _sympy(self.value)

    def negated(self):
        return replace(self, value=-self.value)

    def template(self) -> str:
        value = self.value
        if self.form == "decimal" or (value.denominator == 1 and self.scale == 1):
            return _decimal(value, self.places, bare_point=self.bare_point)
        sign = "-" if value < 0 else ""
        p, q = abs(value.numerator) * self.scale, value.denominator * self.scale
        if self.form == "slash":
            return f"{sign}{_n(p)}/{_n(q)}"
        if self.form == "sign inside":
            return _over(f"{sign}{_n(p)}", q)
        return sign + _over(_n(p), q)


@dataclass(frozen=True)
class Radical:
    """coef * sqrt(radicand), radicand square-free."""

    coef: Fraction
    radicand: int
    form: str = "coef"  # "coef" (a\sqrt{b}, \frac{p\sqrt{b}}{q}), "split", "inside", "rationalised"

    scalar = True

    def key(self):
        return _sympy(self.coef) * sympy.sqrt(self.radicand)

    def negated(self):
        return replace(self, coef=-self.coef)

    def template(self) -> str:
        sign = "-" if self.coef < 0 else ""
        p, q = abs(self.coef.numerator), self.coef.denominator
        root = rf"\sqrt{{{_n(self.radicand)}}}"
        if self.form == "inside":  # 2\sqrt{5} as \sqrt{20}
            return sign + rf"\sqrt{{{_n(p * p * self.radicand)}}}"
        if self.form == "rationalised":  # \frac{\sqrt{2}}{2} as \frac{1}{\sqrt{2}}
            return sign + rf"\frac{{{_n(int(abs(self.coef) * self.radicand))}}}{{{root}}}"
        coefficient = "" if p == 1 else _n(p) + GAP
        if q == 1:
            return sign + coefficient + root
        if self.form == "split":
            return sign + _over(_n(p), q) + GAP + root
        return sign + _over(coefficient + root, q)


@dataclass(frozen=True)
class PiMultiple:
    coef: Fraction
    form: str = "after"  # "after": \frac{3}{4}\pi, "inside": \frac{3\pi}{4}

    scalar = True

    def key(self):
        return _sympy(self.coef) * sympy.pi

    def negated(self):
        return replace(self, coef=-self.coef)

    def template(self) -> str:
        sign = "-" if self.coef < 0 else ""
        p, q = abs(self.coef.numerator), self.coef.denominator
        if q == 1 or self.form == "inside":
            times_pi = r"\pi" if p == 1 else _n(p) + GAP + r"\pi"
            return sign + (times_pi if q == 1 else _over(times_pi, q))
        return sign + _over(_n(p), q) + GAP + r"\pi"


@dataclass(frozen=True)
class Scientific:
    mantissa: Fraction  # 1 <= |m| < 10, terminating
    exponent: int  # nonzero
    form: str = "times"  # "times", "cdot", "expanded"

    scalar = True

    def key(self):
        return _sympy(self.mantissa) * sympy.Integer(10) ** self.exponent

    def negated(self):
        return replace(self, mantissa=-self.mantissa)

    def template(self) -> str:
        if self.form == "expanded":
            value = self.mantissa * Fraction(10) ** self.exponent
            return _decimal(value, _fewest_places(value))
        mantissa = _decimal(self.mantissa, _fewest_places(self.mantissa))
        exponent = ("-" if self.exponent < 0 else "") + _n(abs(self.exponent))
        times = r"\times" if self.form == "times" else r"\cdot"
        return f"{mantissa}{GAP}{times}{GAP}10^{{{exponent}}}"


X = sympy.Symbol("x")


@dataclass(frozen=True)
class Polynomial:
    coefs: tuple[int, ...]  # constant term first; the last is nonzero
    ascending: bool = False

    scalar = False

    def key(self):
        return sympy.expand(sum(c * X**i for i, c in enumerate(self.coefs)))

    def template(self) -> str:
        terms = [(i, c) for i, c in enumerate(self.coefs) if c]
        if not self.ascending:
            terms.reverse()
        text = ""
        for i, c in terms:
            power = "" if i == 0 else "x" if i == 1 else f"x^{{{_n(i)}}}"
            body = power if abs(c) == 1 and i else _n(abs(c)) + power
            if not text:
                text = ("-" if c < 0 else "") + body
            else:
                text += f"{GAP}{'-' if c < 0 else '+'}{GAP}{body}"
        return text


@dataclass(frozen=True)
class SetOf:
    elements: tuple  # distinct values; a SetOf element is a set inside the set

    scalar = False

    def key(self):
        return frozenset(e.key() for e in self.elements)

    def template(self) -> str:
        inner = f",{COMMA_GAP}".join(_inner(e) for e in self.elements)
        return rf"{OPEN}\{{{GAP}{inner}{GAP}{CLOSE}\}}"


def _inner(element) -> str:
    if isinstance(element, SetOf):  # a nested set has plain braces: `\left` is for the outer
        return element.template().replace(OPEN, "").replace(CLOSE, "")
    return element.template()


@dataclass(frozen=True)
class TupleOf:
    entries: tuple

    scalar = False

    def key(self):
        return tuple(e.key() for e in self.entries)

    def template(self) -> str:
        inner = f",{COMMA_GAP}".join(e.template() for e in self.entries)
        return f"{OPEN}({GAP}{inner}{GAP}{CLOSE})"


@dataclass(frozen=True)
class Interval:
    low: Rational | None  # None: -infinity
    high: Rational | None  # None: +infinity
    low_closed: bool = False
    high_closed: bool = False
    inequality: bool = False  # `-3 \le x < 2`, `x > 5`

    scalar = False

    def key(self):
        low = -sympy.oo if self.low is None else self.low.key()
        high = sympy.oo if self.high is None else self.high.key()
        return ("interval", low, high, self.low_closed, self.high_closed)

    def template(self) -> str:
        low = r"-\infty" if self.low is None else self.low.template()
        high = r"\infty" if self.high is None else self.high.template()
        if not self.inequality:
            opening = "[" if self.low_closed else "("
            closing = "]" if self.high_closed else ")"
            return f"{OPEN}{opening}{GAP}{low},{COMMA_GAP}{high}{GAP}{CLOSE}{closing}"
        below = r"\le" if self.high_closed else "<"
        if self.low is None:
            return f"x{GAP}{below}{GAP}{high}"
        above = r"\ge" if self.low_closed else ">"
        if self.high is None:
            return f"x{GAP}{above}{GAP}{low}"
        below_low = r"\le" if self.low_closed else "<"
        return f"{low}{GAP}{below_low}{GAP}x{GAP}{below}{GAP}{high}"


# ---------------------------------------------------------------------------------------------
# Generating values

# Some large enough for thousands separators, most the size of a contest answer.
integers = st.one_of(st.integers(-20, 20), st.integers(-(10**7), 10**7))
fractions = st.fractions(min_value=-1000, max_value=1000, max_denominator=64)
decimals = st.decimals(
    min_value=-(10**6), max_value=10**6, places=3, allow_nan=False, allow_infinity=False
).map(lambda d: Fraction(d))
rational_values = st.one_of(integers.map(Fraction), fractions, decimals)
SQUARE_FREE = [2, 3, 5, 6, 7, 10, 11, 13, 14, 15, 17, 19, 21, 22, 23, 26, 29, 30, 31, 33]
small_coefs = st.builds(Fraction, st.integers(-12, 12).filter(bool), st.integers(1, 8))


@st.composite
def rational_forms(draw, value: Fraction) -> Rational:
    """`value` in any exact written form: integer, fraction (reduced or not), decimal."""
    places = _fewest_places(value)
    # 0 as `\frac{0}{3}` or `0/1` is no form an answer takes.
    forms = ["exact"] if value == 0 else ["exact", "slash", "sign inside"]
    if places is not None:
        forms.append("decimal")
    form = draw(st.sampled_from(forms))
    if form == "decimal":
        places += draw(st.integers(0, 2))  # `0.50`, `12.0`
        bare_point = abs(value) < 1 and places > 0 and draw(st.booleans())
        return Rational(value, "decimal", places=places, bare_point=bare_point)
    if value.denominator == 1 and form != "exact":
        return Rational(value, form, scale=draw(st.integers(2, 9)))  # `\frac{12}{3}`
    scale = 1 if value == 0 else draw(st.sampled_from([1, 1, 2, 3, 10]))
    return Rational(value, form, scale=scale)


@st.composite
def radical_forms(draw, coef: Fraction, radicand: int) -> Radical:
    forms = ["coef"]
    if coef.denominator > 1:
        forms.append("split")
    if coef.denominator == 1:
        forms.append("inside")
    if (coef * radicand).denominator == 1:
        forms.append("rationalised")
    return Radical(coef, radicand, draw(st.sampled_from(forms)))


@st.composite
def scalars(draw, *, kinds=("rational", "radical", "pi", "scientific")):
    kind = draw(st.sampled_from(kinds))
    if kind == "rational":
        return draw(rational_values.flatmap(rational_forms))
    if kind == "radical":
        return draw(radical_forms(draw(small_coefs), draw(st.sampled_from(SQUARE_FREE))))
    if kind == "pi":
        return PiMultiple(draw(small_coefs), draw(st.sampled_from(["after", "inside"])))
    mantissa = draw(st.builds(Fraction, st.integers(100, 999), st.just(100)))
    mantissa *= draw(st.sampled_from([1, -1]))
    exponent = draw(st.integers(-9, 12).filter(bool))
    return Scientific(mantissa, exponent, draw(st.sampled_from(["times", "cdot", "expanded"])))


def _same_value(draw, value):
    """Another written form of `value`."""
    if isinstance(value, Rational):
        return draw(rational_forms(value.value))
    if isinstance(value, Radical):
        return draw(radical_forms(value.coef, value.radicand))
    if isinstance(value, PiMultiple):
        return replace(value, form=draw(st.sampled_from(["after", "inside"])))
    if isinstance(value, Scientific):
        return replace(value, form=draw(st.sampled_from(["times", "cdot", "expanded"])))
    if isinstance(value, Polynomial):
        return replace(value, ascending=draw(st.booleans()))
    if isinstance(value, SetOf):
        elements = [_same_value(draw, e) for e in value.elements]
        return SetOf(tuple(draw(st.permutations(elements))))
    if isinstance(value, TupleOf):
        return TupleOf(tuple(_same_value(draw, e) for e in value.entries))
    if isinstance(value, Interval):
        ends = [None if e is None else _same_value(draw, e) for e in (value.low, value.high)]
        return replace(value, low=ends[0], high=ends[1])
    raise AssertionError(value)


set_elements = scalars(kinds=("rational", "rational", "radical", "pi"))
tuple_entries = scalars(kinds=("rational", "rational", "radical"))


def _unique(values):
    return st.lists(values, min_size=2, max_size=5, unique_by=lambda v: v.key())


@st.composite
def polynomials(draw) -> Polynomial:
    coefs = draw(st.lists(st.integers(-12, 12), min_size=2, max_size=5))
    assume(coefs[-1])
    return Polynomial(tuple(coefs), draw(st.booleans()))


@st.composite
def intervals(draw) -> Interval:
    low = draw(st.none() | rational_values.flatmap(rational_forms))
    high = draw(st.none() | rational_values.flatmap(rational_forms))
    if low is not None and high is not None:
        assume(low.value < high.value)
    inequality = draw(st.booleans()) and (low is not None or high is not None)
    return Interval(
        low,
        high,
        low_closed=low is not None and draw(st.booleans()),
        high_closed=high is not None and draw(st.booleans()),
        inequality=inequality,
    )


values = st.one_of(
    scalars(),
    polynomials(),
    _unique(set_elements).map(lambda es: SetOf(tuple(es))),
    st.lists(tuple_entries, min_size=2, max_size=4).map(lambda es: TupleOf(tuple(es))),
    intervals(),
)


@st.composite
def wrapped(draw, text: str, value) -> str:
    """The answer as a solution states it: boxed, in dollars, `x = ` before a number."""
    if getattr(value, "scalar", False) and draw(st.booleans()):
        text = draw(st.sampled_from(["x = ", "x=", "x =", r"x\,=\,"])) + text
    if draw(st.booleans()):
        text = rf"\boxed{{{text}}}"
    if draw(st.booleans()):
        text = f"${text}$"
    return text


def _styled(draw, value, *, plain: bool) -> str:
    compound = not getattr(value, "scalar", False)
    style = draw(plain_styles(compound=compound) if plain else styles(compound=compound))
    return render(value.template(), style)


# ---------------------------------------------------------------------------------------------
# Property 1: rewrites that keep the value grade equal


@st.composite
def rewrites(draw) -> tuple[str, str]:
    """(answer, ground truth): one value, the truth written as MATH does, the answer any way."""
    truth = draw(values)
    answer = _same_value(draw, truth)
    assert answer.key() == truth.key(), "generator bug: a rewrite changed the value"
    answer_text = draw(wrapped(_styled(draw, answer, plain=False), answer))
    return answer_text, _styled(draw, truth, plain=True)


def _check_equal(case: tuple[str, str]) -> None:
    answer, truth = case
    verdict = grade(answer, truth)
    assert verdict is Verdict.EQUAL, f"{answer!r} vs {truth!r}: {verdict}"


@PER_SEED
@given(rewrites())
def _rewrites_grade_equal(case):
    _check_equal(case)


@pytest.mark.slow
def test_rewrites_grade_equal():
    _for_seconds(_rewrites_grade_equal)


def test_rewrites_grade_equal_smoke():
    _for_seconds(_rewrites_grade_equal, SMOKE_SECONDS)


# ---------------------------------------------------------------------------------------------
# Property 2: perturbations that change the value never grade equal

_MARKED = re.compile(f"([{WHOLE}{NUMERAL}{FRACTIONAL}])(\\d+)\\1")


@st.composite
def _digit_changed(draw, template: str) -> str:
    """`template` with one digit of one numeral changed.

    Every marked numeral is positional and the value is one-to-one in it with the rest fixed
    (a numerator over a fixed denominator, a coefficient of a fixed radical, an exponent of a
    nonzero term), so the value always changes. No new leading zero, no zero denominator.
    """
    numerals = list(_MARKED.finditer(template))
    assume(numerals)  # `\pi`, `(-\infty, \infty)`: no digit to change
    numeral = draw(st.sampled_from(numerals))
    kind, digits = numeral[1], numeral[2]
    i = draw(st.integers(0, len(digits) - 1))
    banned = {digits[i]}
    if kind != FRACTIONAL and i == 0 and (len(digits) > 1 or kind == NUMERAL):
        banned.add("0")
    digit = draw(st.sampled_from([d for d in "0123456789" if d not in banned]))
    return (
        template[: numeral.start(2)]
        + digits[:i]
        + digit
        + digits[i + 1 :]
        + template[numeral.end(2) :]
    )


UNIT_PAIRS = [("cm", "m"), ("mm", "cm"), ("km", "m"), ("kg", "g"), ("s", "min"), ("min", "h")]
# "@" stands for the unit or word.
UNIT_WRITINGS = [r"\text{ @}", r"\,\text{@}", r"\text{@}", r"\mathrm{ @}", r" \text{ @}"]
DEGREES = [r"^\circ", r"^{\circ}", "°"]
RADIANS = [r"\text{ radians}", r"\text{ rad}", r" \text{ radians}"]
SCALE_WORDS = ["thousand", "million", "billion", "trillion"]
TINY = [r"10^{-12}", r"1 \times 10^{-12}", "0.000000000001"]


@st.composite
def perturbations(draw) -> tuple[str, str, str]:
    """(answer, ground truth, kind): two different values, the answer near the truth."""
    kind = draw(
        st.sampled_from(
            [
                "digit",
                "sign",
                "unit",
                "tolerance",
                "set element",
                "tuple entry",
                "tuple swap",
                "bracket",
                "am/pm",
                "scale word",
                "nested set",
            ]
        )  # fmt: skip
    )
    truth = answer = None
    if kind == "digit":
        truth = draw(values)
        template = draw(_digit_changed(truth.template()))
        answer_text = draw(
            wrapped(render(template, draw(styles(compound=not truth.scalar))), truth)
        )
        return answer_text, _styled(draw, truth, plain=True), kind
    if kind == "sign":
        truth = draw(scalars())
        assume(truth.key() != 0)  # -0 is 0
        answer = truth.negated()
    elif kind in ("unit", "tolerance", "am/pm", "scale word"):
        return (*draw(_written_perturbation(kind)), kind)
    elif kind in ("set element", "nested set"):
        elements = draw(_unique(set_elements))
        truth = SetOf(tuple(elements))
        i = draw(st.integers(0, len(elements) - 1))
        if kind == "nested set":  # \{1,\{2\}\} is not \{1,2\}
            changed = [*elements[:i], SetOf((elements[i],)), *elements[i + 1 :]]
        elif draw(st.booleans()):  # one element fewer
            changed = elements[:i] + elements[i + 1 :]
        else:
            extra = draw(set_elements)
            assume(extra.key() not in truth.key())
            changed = [*elements[:i], extra, *elements[i:]]
        answer = SetOf(tuple(changed))
    elif kind == "tuple entry":
        entries = draw(st.lists(tuple_entries, min_size=3, max_size=5))
        truth = TupleOf(tuple(entries))
        i = draw(st.integers(0, len(entries) - 1))
        if draw(st.booleans()):
            answer = TupleOf(tuple(entries[:i] + entries[i + 1 :]))
        else:
            answer = TupleOf((*entries[:i], draw(tuple_entries), *entries[i:]))
    elif kind == "tuple swap":
        entries = draw(st.lists(tuple_entries, min_size=2, max_size=4))
        i, j = draw(st.lists(st.integers(0, len(entries) - 1), min_size=2, max_size=2, unique=True))
        assume(entries[i].key() != entries[j].key())
        swapped = list(entries)
        swapped[i], swapped[j] = entries[j], entries[i]
        truth, answer = TupleOf(tuple(entries)), TupleOf(tuple(swapped))
    elif kind == "bracket":
        truth = draw(intervals())
        ends = [e for e, end in (("low", truth.low), ("high", truth.high)) if end is not None]
        assume(ends)
        end = draw(st.sampled_from(ends))
        closed = f"{end}_closed"
        answer = replace(truth, **{closed: not getattr(truth, closed)})
    assert answer.key() != truth.key(), "generator bug: a perturbation kept the value"
    if draw(st.booleans()):  # dropped or added: either side may be the one changed
        truth, answer = answer, truth
    answer_text = draw(wrapped(_styled(draw, answer, plain=False), answer))
    return answer_text, _styled(draw, truth, plain=True), kind


@st.composite
def _written_perturbation(draw, kind: str) -> tuple[str, str]:
    """Perturbations of what is written around a number, as (answer, truth) text."""
    if kind == "tolerance":  # exact values, never within a float tolerance of each other
        value = draw(scalars(kinds=("rational", "radical", "pi")))
        assume(value.key() != 0)
        assume(not (isinstance(value, Rational) and value.form == "slash"))  # `3/7(1+...)`
        base = _styled(draw, value, plain=True)
        change = draw(st.sampled_from(["plus", "relative", "scaled"]))
        if change == "plus":
            answer = f"{base} + {draw(st.sampled_from(TINY))}"
        elif change == "relative":
            answer = draw(
                st.sampled_from(
                    [rf"{base}\left(1 + 10^{{-9}}\right)", rf"{base} \cdot (1 + 10^{{-9}})"]
                )
            )
        else:
            answer = draw(
                st.sampled_from([rf"{base} \times 10^{{-9}}", rf"{base} \cdot 10^{{-9}}"])
            )
        return answer, base
    if kind == "am/pm":
        hour = draw(st.integers(1, 12))
        minutes = draw(st.sampled_from(["", *(f":{m:02d}" for m in (0, 15, 30, 45, 5))]))
        am, pm = draw(st.sampled_from([("am", "pm"), ("a.m.", "p.m."), ("AM", "PM")]))
        writing = draw(st.sampled_from([r"\text{ @}", " @", r"\text{@}", r"\ \text{@}"]))
        times = [f"{hour}{minutes}" + writing.replace("@", word) for word in (am, pm)]
        return tuple(draw(st.permutations(times)))
    number = draw(rational_values.flatmap(rational_forms))
    assume(number.value != 0)  # 0 cm is 0 m, 0 million is 0 billion
    # `3/4 cm` and `3/4 million` leave open what the unit or the word applies to; a scale
    # word follows a whole number or a decimal.
    assume(number.form != "slash")
    assume(kind == "unit" or number.form == "decimal" or number.value.denominator == 1)
    text = _styled(draw, number, plain=True)
    if kind == "unit":
        if draw(st.booleans()):
            units = [text + draw(st.sampled_from(DEGREES)), text + draw(st.sampled_from(RADIANS))]
        else:
            writing = draw(st.sampled_from(UNIT_WRITINGS))
            units = [text + writing.replace("@", u) for u in draw(st.sampled_from(UNIT_PAIRS))]
        return tuple(draw(st.permutations(units)))
    writing = draw(st.sampled_from([r"\text{ @}", " @", r"\ \text{@}"]))
    words = draw(st.lists(st.sampled_from(SCALE_WORDS), min_size=2, max_size=2, unique=True))
    return text + writing.replace("@", words[0]), text + writing.replace("@", words[1])


def _check_not_equal(case: tuple[str, str, str]) -> None:
    answer, truth, kind = case
    verdict = grade(answer, truth)
    assert verdict is not Verdict.EQUAL, f"{kind}: {answer!r} vs {truth!r}: {verdict}"


@PER_SEED
@given(perturbations())
def _perturbations_never_grade_equal(case):
    _check_not_equal(case)


@pytest.mark.slow
def test_perturbations_never_grade_equal():
    _for_seconds(_perturbations_never_grade_equal)


def test_perturbations_never_grade_equal_smoke():
    _for_seconds(_perturbations_never_grade_equal, SMOKE_SECONDS)


# ---------------------------------------------------------------------------------------------
# Property 3: which side is the answer does not decide equality


@PER_SEED
@given(st.one_of(rewrites(), perturbations().map(lambda case: case[:2])))
def _equality_is_symmetric(case):
    left, right = case
    forward, backward = grade(left, right), grade(right, left)
    assert (forward is Verdict.EQUAL) == (backward is Verdict.EQUAL), (
        f"grade({left!r}, {right!r}) is {forward}, grade({right!r}, {left!r}) is {backward}"
    )


@pytest.mark.slow
def test_equality_is_symmetric():
    _for_seconds(_equality_is_symmetric)


# ---------------------------------------------------------------------------------------------
# Property 4: any text gets a verdict, quickly

LATEX_FRAGMENTS = [
    "\\", "{", "}", "{{", "}}", "$", "^", "_", "&", "(", ")", "[", "]", ",", ".", "-", "+", "=",
    "/", ":", "%", "0", "1", "7", "23", "0.5", "1,000", "x", "e", "i", " ", "~", r"\!", r"\,",
    r"\ ", r"\frac", r"\dfrac", r"\sqrt", r"\sqrt[3]", r"\pi", r"\infty", r"\left(", r"\right)",
    r"\left\{", r"\right\}", r"\{", r"\}", r"\boxed{", r"\text{", r"\mathrm{", r"\circ", r"\le",
    r"\ge", r"\in", r"\cup", r"\cdot", r"\times", r"\overline{", r"\ldots", "...", r"\%", r"\$",
    r"\begin{pmatrix}", r"\end{pmatrix}", r"\\", r"\begin{array}{cc}", r"\end{array}", "10^{",
    " cm", " million", " pm", r"\text{ radians}", "√", "π", "½", "−", "×", "²", "∞", "≤", "°",
]  # fmt: skip
fragment_text = st.lists(
    st.one_of(st.sampled_from(LATEX_FRAGMENTS), st.text(max_size=2)), max_size=60
).map("".join)
any_text = st.one_of(st.text(), fragment_text, values.map(lambda v: render(v.template(), Style())))


def _timed_grade(answer: str, truth: str) -> None:
    start = time.monotonic()
    verdict = grade(answer, truth)
    elapsed = time.monotonic() - start
    assert isinstance(verdict, Verdict), f"{answer!r} vs {truth!r}: {verdict!r}"
    assert elapsed < CALL_LIMIT_SECONDS, f"{answer!r} vs {truth!r}: {elapsed:.2f} s"


@PER_SEED
@given(any_text, any_text)
def _any_text_gets_a_verdict(answer, truth):
    _timed_grade(answer, truth)


@pytest.mark.slow
def test_any_text_gets_a_verdict_quickly():
    # The first unit, sympy parse and math-verify call import their libraries: a one-off cost
    # of the process, not of a call.
    for answer, truth in [("5\\text{ cm}", "50\\text{ mm}"), ("\\sqrt{8}", "2\\sqrt{2}")]:
        grade(answer, truth)
    _for_seconds(_any_text_gets_a_verdict)
