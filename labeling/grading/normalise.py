"""Stage 1: read an answer into a value (normalised LaTeX) and what is written with it.

A normaliser runs first, the way MATH graders (Hendrycks `is_equiv`, PRM800K `grader.py`) do,
so that formatting which carries no meaning cannot make a right answer wrong: boxes, `$`,
`\\dfrac`, spacing commands, thousands separators, `\\left`. Nothing that carries meaning is
dropped: a unit, a degree sign, a percent sign, a currency, a scale word (`5 million`) or a
number in words is read into the `Reading` (`quantities`), and a time of day is kept whole for
`quantities.clock_verdict`. Unicode math (`½`, `x²`, `√2`, `π`, `−`) is rewritten as LaTeX
first, from the characters' Unicode names and decompositions, so no symbol is read by hand.
"""

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from labeling.grading.quantities import Unit, number_in_words, scaled, unit_of

# No final answer is this long (MATH's longest ground truths are a few hundred characters; a
# 3x3 matrix of fractions is about 200). Longer text is a runaway generation or an attack,
# and regular expressions and sympy on 50 kB of braces take seconds, so it is never parsed.
MAX_ANSWER_CHARS = 1000

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
# `\\` (a matrix row break) is matched first so that its second backslash and the space after
# it are never read as the spacing command `\ `, which would merge two rows into one.
_SPACING = re.compile(r"\\\\|\\[!,;: ]|~|\\(?:q?quad|left|right|big|Big|displaystyle)(?![a-zA-Z])")
_SPACES = {"\\\\": "\\\\", "\\ ": " ", "~": " ", "\\quad": " ", "\\qquad": " "}
# `1,\!000` and `1{,}000` are thousands separators even inside a tuple: `(4,\!000, 3)`.
_MARKED_THOUSANDS = re.compile(r"(\d)(?:,\\!|\{,\})(?=\d{3}(?!\d))")
_NAME = re.compile(r"([a-zA-Z]\s*=\s*)?(.*)", re.S)
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# `1 000 000` (SI style) is one number; `2 100/3` is a mixed number, so a slash ends it.
_SPACED_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d/]| \d| ?\\frac)")
_DEGREE = r"\s*\^\s*\{?\s*\\circ\s*\}?"
# A degree sign on a trigonometric function's argument changes the argument: sin 30° is
# sin(pi/6), not sin 30. Rewritten in radians; any other degree sign must follow a number.
_DEGREES = rf"(?:{_DEGREE}|\s*\\text\{{\s*degrees?\s*\}}|\s+degrees?\b)"
_TRIG_DEGREES = re.compile(
    r"(\\(?:sin|cos|tan|cot|sec|csc)(?:\^\{?-?\d\}?)?)\s*(\()?\s*(-?\d+(?:\.\d+)?)"
    rf"{_DEGREES}\s*(?(2)\))"
)
# A unit left after a function (`\log 100 \text{ m}`, `\sin 2 \text{ rad}`) may be on its
# argument or on its value; which one, the grader cannot tell.
_AFTER_FUNCTION = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc|log|ln|exp|arc[a-z]+)\b[^,;]*$")
_NUMBER_DEGREES = re.compile(rf"(?<=[\d}}])(?:{_DEGREE}|\s*\\text\{{\s*degrees?\s*\}})")
_PERCENT = re.compile(r"\s*(?:\\?%|\\text\{\s*\\?%\s*\}|\s\\text\{\s*percent\s*\}|\spercent)$")
_DOLLARS = re.compile(r"^(-?)\s*\\\$\s*|(?<=\d)\s*\\\$$")
# A trailing unit after a number ("5 \text{ cm}", "\frac92\text{ units}^2", "30 \text{ km/h}",
# "6 cm"): in `\text{}`, or bare words after a space. A lone letter (`5 m`) may be a variable,
# so bare units are words of two letters or more; `\mathrm{i}` and `\mathrm{e}` are numbers.
_UNIT_TEXT = r"\\(?:text|mbox|mathrm|textrm|textnormal)\{(?!\s*[eid]\s*\})([a-zA-Z ./']*)\}"
_TRAILING_UNIT = re.compile(
    rf"(?<=[\w}}.)])\s*(?:{_UNIT_TEXT}(\^\{{?\d\}}?)?(?:\s*/\s*{_UNIT_TEXT})?"
    r"|\s((?:[a-zA-Z]{2,}\.?)(?: [a-zA-Z]{2,}\.?){0,2}(?:\^\{?\d\}?|/[a-z]+)?))$"
)
_TEXT = re.compile(
    r"\\(?:text|mbox|textnormal|textbf|textrm|mathrm|mathbf|operatorname)\{([^{}]*)\}"
)
# Unicode math with no decomposition to ASCII; Greek letters are named by `unicodedata`.
_SYMBOLS = {
    "π": "\\pi ", "−": "-", "×": "\\times ", "·": "\\cdot ", "⋅": "\\cdot ", "÷": "\\div ",
    "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "∞": "\\infty ", "±": "\\pm ", "∓": "\\mp ",
    "°": "^\\circ ", "∅": "\\emptyset ", "∪": "\\cup ", "∩": "\\cap ", "∈": "\\in ",
    "ℝ": "\\mathbb{R}", "′": "'", "…": "...", "⋯": "\\cdots ", "≈": "\\approx ", "⁄": "/",
    "∖": "\\setminus ", "∣": "\\mid ", "⟨": "\\langle ", "⟩": "\\rangle ",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ",
}  # fmt: skip
# The argument of `√`: a number, a letter, a command (`√\\pi`) or a bracketed group.
_ROOT_ARGUMENT = re.compile(r"\s*(\d+(?:\.\d+)?|[a-zA-Z]|\\[a-zA-Z]+|\([^()]*\)|\{[^{}]*\})")
_ROOTS = {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}

IN_SET = re.compile(r"^[a-zA-Z]\s*\\in\s*")
_CHOICE = re.compile(r"\(([A-H])\)")
# A choice letter in any wrapping, alone or before its option's text: `(B) 12`, `B)`, `[B]`,
# `Option B`, `Answer: B`. Kept as `(B) 12` so that the letter and the value both count.
_CHOICE_WORD = r"(?:[Oo]ption|[Cc]hoice|[Aa]nswer)\s*:?\s*"
_CHOICE_LEAD = re.compile(
    rf"(?:{_CHOICE_WORD})?(?:\(([A-H])\)|\[([A-H])\]|([A-H])[):])(?:\s+(.+))?"
    rf"|{_CHOICE_WORD}([A-H])",
    re.S,
)

_EMPTY = re.compile(r"\\varnothing|\\emptyset|\\\{\s*\\\}")

_ARRAY = re.compile(r"\\begin\{array\}\{[^{}]*\}(.*?)\\end\{array\}", re.S)

# A mixed number before a factor (`2\frac{1}{2}\pi`) is 5/2 of it, not 2 * 1/2 of it.
_MIXED_FACTOR = re.compile(
    r"(?<![\d.}^_])(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}(?=\s*(?:\\[a-zA-Z]|[a-zA-Z(]))"
)
_DECIMAL_EXPONENT = re.compile(r"\^\{(\d*\.\d+)\}")


@dataclass(frozen=True)
class Reading:
    """An answer as the later stages see it: `text` is its value, normalised; the rest is what
    was written with the value and taken off it (a unit, a percent sign)."""

    text: str
    unit: Unit | None = None
    percent: bool = False
    written: str = ""  # before the unit and percent sign came off, for times and ratios


def latex_from_unicode(text: str) -> str:
    """Unicode math as LaTeX: `½` as `\\frac{1}{2}`, `x²` as `x^{2}`, `√2` as `\\sqrt{2}`,
    `θ` as `\\theta`, full-width digits as digits. A character with no such reading stays,
    and the vocabulary check makes the answer unsure."""
    if text.isascii():
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        kind = unicodedata.decomposition(char).split(" ")[0]
        if kind in ("<super>", "<sub>"):
            run = char
            while i + 1 < len(text) and unicodedata.decomposition(text[i + 1]).startswith(kind):
                i += 1
                run += text[i]
            mark = "^" if kind == "<super>" else "_"
            out.append(f"{mark}{{{latex_from_unicode(unicodedata.normalize('NFKC', run))}}}")
        elif kind == "<fraction>":
            top, _, bottom = unicodedata.normalize("NFKC", char).partition("\u2044")
            out.append(f"\\frac{{{top}}}{{{bottom}}}")
        elif char in _ROOTS:
            argument = _ROOT_ARGUMENT.match(text, i + 1)
            if argument is None:
                out.append(_ROOTS[char])
            else:
                inner = argument[1]
                if inner[0] in "({" and inner[-1] in ")}":
                    inner = inner[1:-1]
                out.append(f"{_ROOTS[char]}{{{latex_from_unicode(inner)}}}")
                i = argument.end() - 1
        elif char in _SYMBOLS:
            out.append(_SYMBOLS[char])
        elif (name := unicodedata.name(char, "")).startswith(
            ("GREEK SMALL LETTER", "GREEK CAPITAL")
        ):
            letter = name.rsplit(" ", 1)[1].lower()
            out.append(f"\\{letter.capitalize() if 'CAPITAL' in name else letter} ")
        elif (compatible := unicodedata.normalize("NFKC", char)).isascii():
            out.append(compatible)
        else:
            out.append(char)
        i += 1
    return "".join(out)


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


def read(answer: str) -> Reading:
    """The answer's value and what is written with it; see `Reading`."""
    text = _unbox(_strip_prose(latex_from_unicode(answer).strip()))
    text = re.sub(r"\\[dt]frac", r"\\frac", text)
    text = re.sub(r"\\[dt]binom", r"\\binom", text)
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", text)
    text = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", text)
    text = _MARKED_THOUSANDS.sub(r"\1", text)
    text = _SPACING.sub(lambda m: _SPACES.get(m.group(), ""), text)
    text = _SPACED_THOUSANDS.sub(lambda m: m.group().replace(" ", ""), text)
    unit = None
    if _DOLLARS.search(text):
        text, unit = _DOLLARS.sub(r"\1", text).strip(), unit_of("dollars")
    text = text.replace("$", "").replace("{,}", ",").replace("\\%", "%").strip()
    written = text
    percent = _PERCENT.search(text) is not None
    text = _PERCENT.sub("", text)
    text = _TRIG_DEGREES.sub(_in_radians, text)
    if _NUMBER_DEGREES.search(text):
        text, unit = _NUMBER_DEGREES.sub("", text), unit_of("degrees")
        if _AFTER_FUNCTION.search(text):
            unit = Unit(unit.text, "unknown")
    text = scaled(text)
    # Only after a value: in `even function` or `no solution` the words are the answer.
    if (match := _TRAILING_UNIT.search(text)) and re.search(r"[\d}\\]", text[: match.start()]):
        text, unit = text[: match.start()].strip(), _trailing_unit(match, unit)
        if _AFTER_FUNCTION.search(text):
            unit = Unit(unit.text, "unknown")
        text = scaled(text)  # `\$2.5 \text{ million}`
    text = _TEXT.sub(lambda m: m.group(1).strip(), text).strip()
    text = number_in_words(text) or text
    return Reading(_value(text), unit=unit, percent=percent, written=written)


def _trailing_unit(match: re.Match, unit: Unit | None) -> Unit:
    words = match[1] if match[1] is not None else match[4]
    power = match[2] or ""
    per = f"/{match[3]}" if match[3] else ""
    written = f"{words}{power}{per}".strip()
    if unit is not None and unit.text == "dollar" and written.lower() in ("dollars", "dollar"):
        return unit
    return unit_of(written) if unit is None else unit_of(f"{unit.text} {written}")


def _in_radians(match: re.Match) -> str:
    function, _, degrees = match.groups()
    return f"{function}(\\frac{{{degrees}\\pi}}{{180}})"


def _value(text: str) -> str:
    text = _EMPTY.sub(r"\\emptyset", text).replace("+\\infty", "\\infty")
    text = _MIXED_FACTOR.sub(_mixed_factor, text)
    text = _DECIMAL_EXPONENT.sub(_exponent_as_fraction, text)
    text = re.sub(r"^\\langle(.*)\\rangle$", r"(\1)", text, flags=re.S)
    text = _ARRAY.sub(r"\\begin{pmatrix}\1\\end{pmatrix}", text)
    # Brackets around a matrix environment are its delimiters, not a tuple of one.
    text = re.sub(r"^[(\[](\\begin\{([pbB]?matrix)\}.*\\end\{\2\})[)\]]$", r"\1", text, flags=re.S)
    text = IN_SET.sub("", text)
    # `12,345` alone, or after a name (`x = 12,345`), is one number; in a list it is two.
    name, value = _NAME.match(text).groups()
    if _THOUSANDS.fullmatch(value.replace(" ", "")):
        text = (name or "") + value.replace(",", "")
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


def squash(text: str) -> str:
    # Spaces go, except between digits: `2 1/2` (a mixed number) is not `21/2`.
    return re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", text)
