"""Stage 1: read an answer into a value (normalised LaTeX) and what is written with it.

A normaliser runs first, the way MATH graders (Hendrycks `is_equiv`, PRM800K `grader.py`) do,
so that formatting which carries no meaning cannot make a right answer wrong: boxes, `$`,
`\\dfrac`, spacing commands, thousands separators, `\\left`. Nothing that carries meaning is
dropped: a unit, a degree sign, a percent sign, a currency, a scale word (`5 million`) or a
number in words is read into the `Reading` (`quantities`), and a time of day is kept whole for
`quantities.clock_verdict`. Unicode math (`½`, `x²`, `√2`, `π`, `−`) is rewritten as LaTeX
first, from the characters' Unicode names and decompositions, so no symbol is read by hand.
"""

import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from core import patterns
from labeling.grading.quantities import Unit, number_in_words, scaled, unit_of
from labeling.grading.vocabulary import AS_I, WORD_CHARS, is_word
from labeling.grading.vocabulary import DIGIT as D
from labeling.grading.vocabulary import SPACE as S

# No final answer is this long (MATH's longest ground truths are a few hundred characters; a
# 3x3 matrix of fractions is about 200). Longer text is a runaway generation or an attack,
# and regular expressions and sympy on 50 kB of braces take seconds, so it is never parsed.
MAX_ANSWER_CHARS = 1000

# `D` and `S` are Python's `\d` and `\s` (see `vocabulary`). RE2 has no lookaround: where a
# pattern had one, the character it looked at is taken along and put back, or checked on the
# match by the function named beside it.
_BOX = patterns.compile(rf"\\(?:boxed|fbox){S}*\{{")
# `\\` (a matrix row break) is matched first so that its second backslash and the space after
# it are never read as the spacing command `\ `, which would merge two rows into one. A letter
# after a command's name is taken along: `\leftarrow` is no `\left` (`_spacing`).
_SPACING = patterns.compile(
    r"\\\\|\\[!,;: ]|~|\\(?:q?quad|left|right|big|Big|displaystyle)([a-zA-Z]?)"
)
_SPACES = {"\\\\": "\\\\", "\\ ": " ", "~": " ", "\\quad": " ", "\\qquad": " "}
# `1,\!000` and `1{,}000` are thousands separators even inside a tuple: `(4,\!000, 3)`; three
# digits and no fourth follow (`_thousands_mark`).
_MARKED_THOUSANDS = patterns.compile(rf"({D})(?:,\\!|\{{,\}})")
_NAME = patterns.compile(rf"([a-zA-Z]{S}*={S}*)?(.*)", patterns.DOTALL)
_THOUSANDS = patterns.compile(rf"-?{D}{{1,3}}(?:,{D}{{3}})+(?:\.{D}+)?")
# `1 000 000` (SI style) is one number; `2 100/3` is a mixed number, so a slash ends it. The
# character before it is no digit and no point, and is taken along; what follows it is checked
# by `_spaced_thousands`.
_SPACED_THOUSANDS = patterns.compile(rf"(^|[^{D}.])({D}{{1,3}}(?: {D}{{3}})+)")
_DEGREE = rf"{S}*\^{S}*\{{?{S}*\\circ{S}*\}}?"
# A degree sign on a trigonometric function's argument changes the argument: sin 30° is
# sin(pi/6), not sin 30. Rewritten in radians; any other degree sign must follow a number.
# RE2's `\b` is ASCII's: `_in_radians` checks the character after the word `degrees`.
_DEGREES = rf"(?:{_DEGREE}|{S}*\\text\{{{S}*degrees?{S}*\}}|{S}+degrees?\b)"
_ANGLE = rf"(-?{D}+(?:\.{D}+)?){_DEGREES}"
# With a bracket before the angle, one after it.
_TRIG_DEGREES = patterns.compile(
    rf"(\\(?:sin|cos|tan|cot|sec|csc)(?:\^\{{?-?{D}\}}?)?){S}*"
    rf"(?:\({S}*{_ANGLE}{S}*\)|{_ANGLE}{S}*)"
)
# A unit left after a function (`\log 100 \text{ m}`, `\sin 2 \text{ rad}`) may be on its
# argument or on its value; which one, the grader cannot tell. The name ends as a word does
# (Python's `\b`): no letter, digit or `_` of any script follows it.
_AFTER_FUNCTION = patterns.compile(
    rf"\\(?:sin|cos|tan|cot|sec|csc|log|ln|exp|arc[a-z]+)(?:[^{WORD_CHARS},;][^,;]*)?$"
)
# After a digit or `}` (`_after_number`).
_NUMBER_DEGREES = patterns.compile(rf"{_DEGREE}|{S}*\\text\{{{S}*degrees?{S}*\}}")
# Last: `(\n?)$` is Python's `$`, the newline kept (`_PERCENT.sub(r"\1", ...)`).
_PERCENT = patterns.compile(
    rf"{S}*(?:\\?%|\\text\{{{S}*\\?%{S}*\}}|{S}\\text\{{{S}*percent{S}*\}}|{S}percent)(\n?)$"
)
# A dollar sign first, or last after a digit (taken along). `\n?$` is Python's `$`: the end,
# or before a newline that ends the text (which `\left` taken off the end can leave).
_DOLLARS = patterns.compile(rf"^(-?){S}*\\\${S}*|({D}){S}*\\\$(\n?)$")
# A trailing unit after a number ("5 \text{ cm}", "\frac92\text{ units}^2", "30 \text{ km/h}",
# "6 cm"): in `\text{}`, or bare words after a space. A lone letter (`5 m`) may be a variable,
# so bare units are words of two letters or more; `\mathrm{i}` and `\mathrm{e}` are numbers:
# in braces, any of the characters below but `e`, `i` or `d` alone between spaces.
_UNIT_WORDS = r"( *|(?: *(?:[a-zA-Z./'][a-zA-Z ./']*[a-zA-Z./']|[a-cf-hj-zA-Z./']) *))"
_UNIT_TEXT = rf"\\(?:text|mbox|mathrm|textrm|textnormal)\{{{_UNIT_WORDS}\}}"
# After a letter, digit, `}`, `.` or `)`, which is taken along: the unit starts one after.
# `\n?$` is Python's `$` (only where the unit starts, and what it is, are read).
_TRAILING_UNIT = patterns.compile(
    rf"[{WORD_CHARS}}}.)]{S}*(?:{_UNIT_TEXT}(\^\{{?{D}\}}?)?(?:{S}*/{S}*{_UNIT_TEXT})?"
    rf"|{S}((?:[a-zA-Z]{{2,}}\.?)(?: [a-zA-Z]{{2,}}\.?){{0,2}}(?:\^\{{?{D}\}}?|/[a-z]+)?))\n?$"
)
_VALUE_BEFORE = patterns.compile(rf"[{D}}}\\]")
_TEXT = patterns.compile(
    r"\\(?:text|mbox|textnormal|textbf|textrm|mathrm|mathbf|operatorname)\{([^{}]*)\}"
)
_DISPLAY_FRACTION = patterns.compile(r"\\[dt]frac")
_DISPLAY_BINOMIAL = patterns.compile(r"\\[dt]binom")
_BARE_FRACTION = patterns.compile(rf"\\frac({D})({D})")
_BARE_NUMERATOR = patterns.compile(rf"\\frac({D})\{{")
_BARE_DENOMINATOR = patterns.compile(rf"\\frac\{{([^{{}}]*)\}}({D})")
_BARE_ROOT = patterns.compile(rf"\\sqrt({D})")
# A sentence before the answer on its first line (`so the answer is $5$`): the words start a
# word, as Python's `\b` has it (no letter, digit or `_` of any script before them).
# Case-blind: read `.translate(AS_I)`.
_PROSE = patterns.compile(rf"(?:.*?[^{WORD_CHARS}\n])??(?i:answer|result) (?i:is):?{S}*")
# Unicode math with no decomposition to ASCII; Greek letters are named by `unicodedata`.
_SYMBOLS = {
    "π": "\\pi ", "−": "-", "×": "\\times ", "·": "\\cdot ", "⋅": "\\cdot ", "÷": "\\div ",
    "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "∞": "\\infty ", "±": "\\pm ", "∓": "\\mp ",
    "°": "^\\circ ", "∅": "\\emptyset ", "∪": "\\cup ", "∩": "\\cap ", "∈": "\\in ",
    "ℝ": "\\mathbb{R}", "′": "'", "…": "...", "⋯": "\\cdots ", "≈": "\\approx ", "⁄": "/",
    "∖": "\\setminus ", "∣": "\\mid ", "⟨": "\\langle ", "⟩": "\\rangle ",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ",
}  # fmt: skip
_ROOTS = {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}
# A root sign and its argument: a number, a letter, a command (`√\\pi`) or a bracketed group.
_ROOT = patterns.compile(
    rf"[√∛∜](?:{S}*({D}+(?:\.{D}+)?|[a-zA-Z]|\\[a-zA-Z]+|\([^()]*\)|\{{[^{{}}]*\}}))?"
)

IN_SET = patterns.compile(rf"^[a-zA-Z]{S}*\\in{S}*")
_CHOICE = patterns.compile(r"\(([A-H])\)")
# A choice letter in any wrapping, alone or before its option's text: `(B) 12`, `B)`, `[B]`,
# `Option B`, `Answer: B`. Kept as `(B) 12` so that the letter and the value both count.
_CHOICE_WORD = rf"(?:[Oo]ption|[Cc]hoice|[Aa]nswer){S}*:?{S}*"
_CHOICE_LEAD = patterns.compile(
    rf"(?:{_CHOICE_WORD})?(?:\(([A-H])\)|\[([A-H])\]|([A-H])[):])(?:{S}+(.+))?"
    rf"|{_CHOICE_WORD}([A-H])",
    patterns.DOTALL,
)

_EMPTY = patterns.compile(rf"\\varnothing|\\emptyset|\\\{{{S}*\\\}}")

_ARRAY = patterns.compile(r"\\begin\{array\}\{[^{}]*\}(.*?)\\end\{array\}", patterns.DOTALL)
# Read whole; `(\n?)` is what Python's `$` left after the match, a newline ending the text.
_ANGLE_BRACKETS = patterns.compile(r"\\langle(.*)\\rangle(\n?)", patterns.DOTALL)
# Brackets around a matrix environment are its delimiters, not a tuple of one (the two
# environment names are compared on the match: RE2 has no backreference).
_BRACKETED_MATRIX = patterns.compile(
    r"[(\[](\\begin\{([pbB]?matrix)\}.*\\end\{([pbB]?matrix)\})[)\]](\n?)", patterns.DOTALL
)
_SPACE_RUN = patterns.compile(rf"{S}+")
_FULL_STOP = patterns.compile(r"([A-Za-z])\.(\n?)$")

# A mixed number before a factor (`2\frac{1}{2}\pi`) is 5/2 of it, not 2 * 1/2 of it. The
# character before it (no digit, `.`, `}`, `^` or `_`) is taken along, and the factor after it
# is checked by `_mixed_factor`.
_MIXED_FACTOR = patterns.compile(rf"(^|[^{D}.}}^_])({D}+){S}*\\frac\{{({D}+)\}}\{{({D}+)\}}")
_DECIMAL_EXPONENT = patterns.compile(rf"\^\{{({D}*\.{D}+)\}}")


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
    # The root signs, read in one scan (RE2's binding encodes the text on every call); the loop
    # below meets each of them, and skips the ones inside another's argument, as this scan does.
    roots = {}
    if any(sign in text for sign in _ROOTS):
        roots = {root.start(): root for root in _ROOT.finditer(text)}
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
            argument = roots[i]
            if argument[1] is None:
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
        # One scan (RE2's binding encodes the text on every call): a box inside the last one
        # read is passed over, as a search from its end would.
        for match in _BOX.finditer(text):
            if match.start() < position:
                continue
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
    if "$" in text and (prose := _PROSE.match(text.translate(AS_I))):
        text = text[prose.end() :]
    if text.count("$") >= 2:
        text = text[text.index("$") : text.rindex("$") + 1]
    text = text.strip()
    # A sentence's full stop goes; an ellipsis (0.333...) is part of the number.
    return text[:-1].strip() if text.endswith(".") and not text.endswith("..") else text


def read(answer: str) -> Reading:
    """The answer's value and what is written with it; see `Reading`."""
    text = _unbox(_strip_prose(latex_from_unicode(answer).strip()))
    text = _DISPLAY_FRACTION.sub(r"\\frac", text)
    text = _DISPLAY_BINOMIAL.sub(r"\\binom", text)
    text = _BARE_FRACTION.sub(r"\\frac{\1}{\2}", text)
    text = _BARE_NUMERATOR.sub(r"\\frac{\1}{", text)
    text = _BARE_DENOMINATOR.sub(r"\\frac{\1}{\2}", text)
    text = _BARE_ROOT.sub(r"\\sqrt{\1}", text)
    text = _MARKED_THOUSANDS.sub(_thousands_mark, text)
    text = _SPACING.sub(_spacing, text)
    text = _SPACED_THOUSANDS.sub(_spaced_thousands, text)
    unit = None
    if _DOLLARS.search(text):
        text, unit = _DOLLARS.sub(_dollar, text).strip(), unit_of("dollars")
    text = text.replace("$", "").replace("{,}", ",").replace("\\%", "%").strip()
    written = text
    percent = _PERCENT.search(text) is not None
    text = _PERCENT.sub(r"\1", text)
    text = _TRIG_DEGREES.sub(_in_radians, text)
    if any(_after_number(match) for match in _NUMBER_DEGREES.finditer(text)):
        text = _NUMBER_DEGREES.sub(lambda m: "" if _after_number(m) else m[0], text)
        unit = unit_of("degrees")
        if _AFTER_FUNCTION.search(text):
            unit = Unit(unit.text, "unknown")
    text = scaled(text)
    # Only after a value: in `even function` or `no solution` the words are the answer.
    if (match := _TRAILING_UNIT.search(text)) and _VALUE_BEFORE.search(text[: match.start() + 1]):
        text, unit = text[: match.start() + 1].strip(), _trailing_unit(match, unit)
        if _AFTER_FUNCTION.search(text):
            unit = Unit(unit.text, "unknown")
        text = scaled(text)  # `\$2.5 \text{ million}`
    text = _TEXT.sub(lambda m: m.group(1).strip(), text).strip()
    text = number_in_words(text) or text
    return Reading(_value(text), unit=unit, percent=percent, written=written)


def _thousands_mark(match: patterns.Match) -> str:
    after = match.string[match.end() : match.end() + 4]
    return (
        match[1]
        if len(after) >= 3 and after[:3].isdecimal() and not after[3:].isdecimal()
        else match[0]
    )


def _spacing(match: patterns.Match) -> str:
    return match[0] if match[1] else _SPACES.get(match[0], "")


def _spaced_thousands(match: patterns.Match) -> str:
    after = match.string[match.end() : match.end() + 6]
    if (
        after[:1].isdecimal()
        or after[:1] == "/"
        or (after[:1] == " " and after[1:2].isdecimal())
        or after.startswith(("\\frac", " \\frac"))
    ):
        return match[0]
    return match[1] + match[2].replace(" ", "")


def _dollar(match: patterns.Match) -> str:
    return match[1] if match[1] is not None else match[2] + match[3]


def _after_number(match: patterns.Match) -> bool:
    before = match.string[match.start() - 1 : match.start()]
    return before == "}" or before.isdecimal()


def _trailing_unit(match: patterns.Match, unit: Unit | None) -> Unit:
    words = match[1] if match[1] is not None else match[4]
    power = match[2] or ""
    per = f"/{match[3]}" if match[3] else ""
    written = f"{words}{power}{per}".strip()
    if unit is not None and unit.text == "dollar" and written.lower() in ("dollars", "dollar"):
        return unit
    return unit_of(written) if unit is None else unit_of(f"{unit.text} {written}")


def _in_radians(match: patterns.Match) -> str:
    text, end = match.string, match.end()
    if match[0].endswith(("degree", "degrees")) and end < len(text) and is_word(text[end]):
        return match[0]  # Python's `\b`, not RE2's ASCII one: `30 degreesé` is no angle
    function, degrees = match[1], match[2] or match[3]
    return f"{function}(\\frac{{{degrees}\\pi}}{{180}})"


def _value(text: str) -> str:
    text = _EMPTY.sub(r"\\emptyset", text).replace("+\\infty", "\\infty")
    text = _MIXED_FACTOR.sub(_mixed_factor, text)
    text = _DECIMAL_EXPONENT.sub(_exponent_as_fraction, text)
    if angled := _ANGLE_BRACKETS.fullmatch(text):
        text = f"({angled[1]}){angled[2]}"
    text = _ARRAY.sub(r"\\begin{pmatrix}\1\\end{pmatrix}", text)
    if (matrix := _BRACKETED_MATRIX.fullmatch(text)) and matrix[2] == matrix[3]:
        text = matrix[1] + matrix[4]
    text = IN_SET.sub("", text)
    # `12,345` alone, or after a name (`x = 12,345`), is one number; in a list it is two.
    name, value = _NAME.match(text).groups()
    if _THOUSANDS.fullmatch(value.replace(" ", "")):
        text = (name or "") + value.replace(",", "")
    text = _SPACE_RUN.sub(" ", text).strip()
    text = _FULL_STOP.sub(r"\1\2", text)  # `\text{odd.}`
    if lead := _CHOICE_LEAD.fullmatch(text):
        letter = next(group for group in (lead[1], lead[2], lead[3], lead[5]) if group)
        return f"({letter}) {lead[4]}" if lead[4] else f"({letter})"
    return _CHOICE.sub(r"\1", text)


def _mixed_factor(match: patterns.Match) -> str:
    before, whole, top, bottom = match.groups()
    if not _factor_at(match.string, match.end()) or int(top) >= int(bottom):
        return match[0]  # 2\frac{3}{2}\pi is not a mixed number: 2 times 3/2
    return f"{before}({whole}+\\frac{{{top}}}{{{bottom}}})"


def _factor_at(text: str, position: int) -> bool:
    """Whether a factor follows `position` after any spaces: a command, a letter, a bracket."""
    while position < len(text) and text[position].isspace():
        position += 1
    char, after = text[position : position + 1], text[position + 1 : position + 2]
    if char == "\\":
        char = after
    elif char == "(":
        return True
    return char.isascii() and char.isalpha()


def _exponent_as_fraction(match: patterns.Match) -> str:
    # 5^{0.5} is exactly \sqrt5; sympy keeps a float exponent as a float.
    value = Fraction(match[1])
    return f"^{{\\frac{{{value.numerator}}}{{{value.denominator}}}}}"


def squash(text: str) -> str:
    # Spaces go, except between digits: `2 1/2` (a mixed number) is not `21/2`.
    return _SPACE_RUN.sub(_between_digits, text)


def _between_digits(match: patterns.Match) -> str:
    # Only a single space between two digits stays. A longer run goes, as it always has: the
    # lookaround pattern this replaces took all of it but the last space, then that one too.
    text, (start, end) = match.string, match.span()
    if end - start == 1 and start > 0 and end < len(text) and text[start - 1].isdecimal():
        return match[0] if text[end].isdecimal() else ""
    return ""
