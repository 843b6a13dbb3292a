"""Final-answer grading: is a solution's answer equivalent to the ground truth?

math-verify does the mathematics (sympy equivalence of fractions, decimals, radicals,
intervals, tuples, sets). Before it, answers are normalised the way MATH graders do, so
formatting that carries no meaning (thousands separators, units, `\\text{}`, degree signs,
`x =`) cannot make a right answer wrong.
"""

import re
from fractions import Fraction

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

_EXTRACTION = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]

_REMOVE = [
    r"\\left",
    r"\\right",
    r"\\!",
    r"\\,",
    r"\\;",
    r"\\ ",
    r"\^\{?\\circ\}?",
    r"\^\\circ",
    r"\\%",
    r"%",
    r"\\\$",
    r"\$",
    r"\\displaystyle",
]
_UNIT_WORDS = (
    r"(?:units?|cm|centimeters?|meters?|m|km|inches|inch|feet|foot|ft|miles?|degrees?|"
    r"dollars?|cents?|seconds?|minutes?|hours?|days?|square|sq|cubic)"
)


def _unbox(text: str) -> str:
    # \boxed{...} with nested braces: keep the inside.
    start = text.find("\\boxed{")
    if start < 0:
        start = text.find("\\fbox{")
        if start < 0:
            return text
    open_at = text.index("{", start)
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[:start] + text[open_at + 1 : i] + text[i + 1 :]
    return text


def normalize(answer: str) -> str:
    """A MATH-style canonical text form of an answer (used before and beside math-verify)."""
    text = _unbox(answer.strip())
    text = text.strip().strip("$").strip()
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    for pattern in _REMOVE:
        text = re.sub(pattern, "", text)
    # Units and words in \text{} or \mbox{} carry no value: "5 \text{ cm}" is 5.
    text = re.sub(r"\\(?:text|mbox|textbf|mathrm)\{\s*" + _UNIT_WORDS + r"\^?\d?\s*\}", "", text)
    text = re.sub(r"\\(?:text|mbox|textbf|mathrm)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"(?<=\d)\s*" + _UNIT_WORDS + r"\b(\^\d)?", "", text)
    # A leading "x =" names the unknown; the value is what follows.
    text = re.sub(r"^\s*[a-zA-Z]\s*=\s*", "", text)
    # Thousands separators: 40,000 -> 40000 (but not tuples such as (1,234)).
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text.replace(" ", "")):
        text = text.replace(",", "")
    return re.sub(r"\s+", " ", text).strip()


_INTEGER = re.compile(r"-?\d+")
_RATIO = re.compile(r"(-?)(?:\\frac\{(-?\d+)\}\{(\d+)\}|\\frac(\d)(\d)|(-?\d+)/(\d+))")


def _exact_rational(text: str) -> Fraction | None:
    """Integers and integer fractions, compared exactly without a LaTeX parser."""
    compact = text.replace(" ", "")
    if _INTEGER.fullmatch(compact):
        return Fraction(int(compact))
    match = _RATIO.fullmatch(compact)
    if match is None:
        return None
    sign, a, b, c, d, e, f = match.groups()
    top, bottom = (a, b) if a is not None else (c, d) if c is not None else (e, f)
    if int(bottom) == 0:
        return None
    value = Fraction(int(top), int(bottom))
    return -value if sign else value


def _parse(text: str) -> list:
    return parse(f"${text}$", extraction_config=_EXTRACTION, parsing_timeout=None)


def is_equivalent(answer: str, ground_truth: str) -> bool:
    """True when `answer` is mathematically the same as the MATH-style `ground_truth`.

    Never raises: input math-verify cannot read is compared as normalised text. Its own
    signal-based timeouts are off, since graders run in worker and web threads.
    """
    left, right = normalize(answer), normalize(ground_truth)
    if not left or not right:
        return False
    if left.replace(" ", "") == right.replace(" ", ""):
        return True
    # Most MATH answers are integers or fractions: settling those exactly here keeps imports
    # of large pools fast (parsing LaTeX into sympy costs ~25 ms an answer).
    exact_left, exact_right = _exact_rational(left), _exact_rational(right)
    if exact_left is not None and exact_right is not None:
        return exact_left == exact_right
    try:
        gold, target = _parse(right), _parse(left)
        if not gold or not target:
            return False
        return bool(verify(gold, target, timeout_seconds=None))
    except Exception:  # noqa: BLE001 - a grader must answer, not crash an import
        return False
