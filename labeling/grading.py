"""Final-answer grading: is a solution's answer equivalent to the MATH-style ground truth?

A normaliser runs first, the way MATH graders (Hendrycks `is_equiv`, PRM800K `grader.py`) do,
so that formatting which carries no meaning cannot make a right answer wrong. Exact paths then
settle what can be settled without sympy: numbers (integers, fractions, decimals, mixed
numbers, repeating decimals, scientific notation) as exact rationals, and tuples, sets,
intervals, inequalities and matrices entry by entry. What is left goes to math-verify (sympy
equivalence of radicals, pi, expressions, equations) under a hard deadline
(GRADING_TIME_LIMIT_SECONDS): a timeout is logged and counts as "not equal".
Below the grader: the verdict cache and the grading of stored solutions (imports, regrading).

The corpus in `labeling/tests/fixtures/grading_corpus.tsv` is the measure of this module:
change the grader, run `test_grading.py`, and read the per-category misses it prints.

Over 500 lines on purpose: the grader reads top to bottom (normalise, exact paths, math-verify
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
from fractions import Fraction

from django.conf import settings
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from labeling.models import Solution

logger = logging.getLogger(__name__)

# The answer is already the final one, so a box in it is the answer, not one candidate of many.
_EXTRACTION = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]

# `\\` (a matrix row break) is matched first so that its second backslash and the space after
# it are never read as the spacing command `\ `, which would merge two rows into one.
_SPACING = re.compile(r"\\\\|\\[!,;: ]|\\(?:q?quad|left|right|big|Big|displaystyle)(?![a-zA-Z])")
_SPACES = {"\\\\": "\\\\", "\\ ": " ", "\\quad": " ", "\\qquad": " "}
_DECORATIONS = re.compile(r"\^\{?\\circ\}?|\\circ|°|\\?%|\\?\$")
# `1,\!000` and `1{,}000` are thousands separators even inside a tuple: `(4,\!000, 3)`.
_MARKED_THOUSANDS = re.compile(r"(\d)(?:,\\!|\{,\})(?=\d{3}(?!\d))")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# "5 million" is 5 \times 10^6, not 5 with a unit.
_MULTIPLIER = re.compile(
    r"(\d[\d.]*)\s*(?:\\(?:text|mbox)\{\s*(thousand|million|billion|trillion)\s*\}"
    r"|\s(thousand|million|billion|trillion))$"
)
_POWERS_OF_TEN = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
# A trailing unit after a number ("5 \text{ cm}", "\frac92\text{ units}^2") carries no value.
_TRAILING_UNIT = re.compile(
    r"(?<=[\w}.])\s*(?:\\(?:text|mbox)\{[a-zA-Z .]*\}|\s(?:cm|km|inches|feet|units|degrees"
    r"|dollars|cents|meters|miles|square units))(?:\^\{?\d\}?)?$"
)
_UNIT = re.compile(r"\\(?:text|mbox)\{\s*([a-zA-Z .]+?)\s*\}(?:\^\{?\d\}?)?$")
_TEXT = re.compile(r"\\(?:text|mbox|textnormal|textbf|mathrm|mathbf|operatorname)\{([^{}]*)\}")
# "x = 3" names the unknown; the value is what follows (only for a single `=`, not systems).
_NAMED = re.compile(
    r"^(?P<name>[a-zA-Z](?:\([a-z]\))?|\\[a-zA-Z]+|\([a-z](?:,\s*[a-z])+\))\s*=\s*(?=[^=]*$)"
)
_IN_SET = re.compile(r"^[a-zA-Z]\s*\\in\s*")
_CHOICE = re.compile(r"\(([A-H])\)")
_BASE = re.compile(r"^([0-9A-Z]+)_\{?(\d+)\}?$")
_EMPTY = re.compile(r"\\varnothing|\\emptyset|\\\{\s*\\\}")
_MATRIX = re.compile(r"^\\begin\{[pbB]?matrix\}(.*)\\end\{[pbB]?matrix\}$", re.S)
_DECIMAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_FRACTION = re.compile(r"([-+]?)(?:\\frac\{([-+]?\d+)\}\{([-+]?\d+)\}|(\d+)/(\d+))")
_MIXED = re.compile(r"(-?)(\d+)(?:\s*\\frac\{(\d+)\}\{(\d+)\}|\s+(\d+)/(\d+))")
_INTEGER_POWER = re.compile(r"(-?\d+)\^(?:\{(-?\d+)\}|(\d))")
_REPEATING = re.compile(r"(-?)(\d*)\.(\d*)\\(?:overline|bar|dot)\{?(\d+)\}?")
_SCIENTIFIC = re.compile(
    r"([-+]?(?:\d+\.?\d*|\.\d+))\s*(?:[eE]\s*([-+]?\d+)|(?:\\times|\\cdot|\*|x)\s*10\^\{?([-+]?\d+)\}?)"
)
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
_OR = re.compile(r"\s*(?:\\text\{\s*or\s*\}|\bor\b|\\cup|\\vee)\s*")
# Values whose evaluation never ends: power towers, huge powers, huge factorials.
_POWER = re.compile(r"(\d+)\^(?:\{(\d+)\}|(\d))")
_FACTORIAL = re.compile(r"(\d+)\)?\s*!")
MAX_DIGITS = 10_000
# A lone `i` is the imaginary unit, which sympy spells `I` (as a symbol 2(1+i) != 2+2i).
_IMAGINARY = re.compile(r"(?<![a-zA-Z\\])i(?![a-zA-Z])")


def _unbox(text: str) -> str:
    # Braces nest (\boxed{\frac{1}{2}}), so the box is closed by counting, not by a regex.
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return text
    opening = text.index("{", start)
    depth = 0
    for i in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[opening + 1 : i]
    return text  # unbalanced: leave it for math-verify to reject


def _strip_prose(text: str) -> str:
    text = re.sub(r"^.*?\b(?:answer|result) is:?\s*", "", text, flags=re.I) if "$" in text else text
    if text.count("$") >= 2:
        text = text[text.index("$") : text.rindex("$") + 1]
    return text.strip().rstrip(".").strip()


def _normalize(answer: str) -> str:
    text = _unbox(_strip_prose(answer.strip()))
    text = re.sub(r"\\[dt]frac", r"\\frac", text)
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", text)
    text = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", text)
    text = _MARKED_THOUSANDS.sub(r"\1", text)
    text = _SPACING.sub(lambda m: _SPACES.get(m.group(), ""), text)
    text = _DECORATIONS.sub("", text).replace("{,}", ",").strip()
    text = _MULTIPLIER.sub(lambda m: f"{m[1]}\\times10^{{{_POWERS_OF_TEN[m[2] or m[3]]}}}", text)
    text = _TRAILING_UNIT.sub("", text).strip()
    text = _TEXT.sub(lambda m: m.group(1).strip(), text).strip()
    text = _TRAILING_UNIT.sub("", text).strip()
    text = _EMPTY.sub(r"\\emptyset", text).replace("+\\infty", "\\infty")
    text = _CHOICE.sub(r"\1", text)
    text = _IN_SET.sub("", text)
    if _THOUSANDS.fullmatch(text.replace(" ", "")):
        text = text.replace(",", "")
    text = re.sub(r"\s+", " ", text).strip()
    base = _BASE.fullmatch(text)
    return base.group(1) if base else text


def _unit(answer: str) -> str | None:
    """The unit written after the answer (`cm` in `4\\text{ cm}`), lower-cased, if any."""
    text = _unbox(_strip_prose(answer.strip())).strip().rstrip("$").strip()
    match = _UNIT.search(text)
    if match is None or match[1].strip() in _POWERS_OF_TEN or match.start() == 0:
        return None
    return match[1].strip().lower()


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
    if match := _INTEGER_POWER.fullmatch(compact):
        base, exponent = int(match[1]), int(match[2] or match[3])
        if abs(exponent) > 400 or abs(base) > 10**6:
            return None
        return Fraction(base) ** exponent if base or exponent >= 0 else None
    if match := _REPEATING.fullmatch(compact):
        sign, whole, fixed, repeating = match.groups()
        value = Fraction(int(whole or 0)) + Fraction(int(fixed or 0), 10 ** len(fixed))
        value += Fraction(int(repeating), (10 ** len(repeating) - 1) * 10 ** len(fixed))
        return -value if sign else value
    if match := _SCIENTIFIC.fullmatch(compact):
        mantissa, exponent, power = match.groups()
        exponent = int(exponent or power)
        if abs(exponent) > 400:
            return None
        return Fraction(mantissa) * Fraction(10) ** exponent
    return None


def _squash(text: str) -> str:
    # Spaces go, except between digits: `2 1/2` (a mixed number) is not `21/2`.
    return re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", text)


def _is_decimal(text: str) -> bool:
    return "." in text and _DECIMAL.fullmatch(text.replace(" ", "")) is not None


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
    if match := _MATRIX.fullmatch(text):
        rows = [_split_top_level(row, "&") for row in match.group(1).split("\\\\") if row.strip()]
        return f"matrix{len(rows)}x{len(rows[0]) if rows else 0}", [e for r in rows for e in r]
    if text.startswith("\\{") and text.endswith("\\}"):
        return "set", _split_top_level(text[2:-2])
    if len(text) >= 2 and text[0] in "([" and text[-1] in ")]":
        inner = text[1:-1]
        if _balanced(inner):
            items = _split_top_level(inner)
            if len(items) > 1:
                return text[0] + text[-1], items
    if text.count("\\pm") == 1:
        return "set", [text.replace("\\pm", "+"), text.replace("\\pm", "-")]
    for separator in (";", ","):
        items = _split_top_level(text, separator)
        if len(items) > 1:
            return "set", items
    union = _OR.split(text)
    if len(union) > 1 and all(_balanced(part) for part in union):
        return "set", [part for part in union if part]
    return None


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth < 0:
            return False
    return depth == 0


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


def is_equivalent(answer: str, ground_truth: str) -> bool:
    """True when `answer` is mathematically the same as the MATH-style `ground_truth`.

    Never raises, and answers within GRADING_TIME_LIMIT_SECONDS from any thread or process.
    """
    if not answer or not ground_truth:
        return False
    left, right = _normalize(answer), _normalize(ground_truth)
    if not left or not right:
        return False  # an empty answer is never right, even against an empty truth
    units = _unit(answer), _unit(ground_truth)
    if None not in units and units[0] != units[1]:
        return False  # 4 cm is not 4 m
    try:
        return _equivalent(left, right, depth=0)
    except Exception:  # noqa: BLE001 - a grader must answer, not crash an import
        logger.warning("Grading failed; counted as not equal: %r vs %r", answer, ground_truth)
        return False


def _equivalent(left: str, right: str, *, depth: int) -> bool:
    if _squash(left) == _squash(right):
        return True
    if depth > 4:
        return False
    named_left, named_right = _NAMED.match(left), _NAMED.match(right)
    if named_left and named_right and named_left["name"] != named_right["name"]:
        return False  # x = -3 and y = -3 answer different questions
    left, right = _NAMED.sub("", left).strip(), _NAMED.sub("", right).strip()
    left, right = _as_interval(left), _as_interval(right)
    if _squash(left) == _squash(right):
        return True
    compound_left, compound_right = _compound(left), _compound(right)
    if compound_left or compound_right:
        if not (compound_left and compound_right) or compound_left[0] != compound_right[0]:
            return False
        return _same_items(compound_left, compound_right, depth=depth + 1)
    exact_left, exact_right = _exact_number(left), _exact_number(right)
    if exact_left is not None and exact_right is not None:
        return exact_left == exact_right
    if (exact_left is not None and _is_decimal(left)) or (
        exact_right is not None and _is_decimal(right)
    ):
        return False  # a decimal is never taken as a rounding of an irrational value
    unending_left, unending_right = _unending(left), _unending(right)
    if unending_left or unending_right:
        return unending_left == unending_right
    if _words(left) or _words(right):
        return left.lower() == right.lower()  # words (`even`, `odd`) are compared as written
    return _verify_within_limit(left, right)


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
    return re.fullmatch(r"[A-Za-z]{2,}(?:[ -][A-Za-z]+)*", text) is not None and len(text) > 3


# ---------------------------------------------------------------------------------------------
# math-verify under a deadline


class _Timeout(Exception):
    pass


def _verify(left: str, right: str) -> bool:
    gold, target = _parse(_IMAGINARY.sub("I", right)), _parse(_IMAGINARY.sub("I", left))
    return bool(gold and target and verify(gold, target, timeout_seconds=None))


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


def _grade_in_this_process() -> None:
    # A GradingPool worker grades in its main thread, where the interval timer works; a
    # process forked from it could inherit a lock some thread of the importer held.
    _GRADER._unavailable = True


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


def grade_answer(answer: str, ground_truth: str) -> bool:
    pair = (answer, ground_truth)
    verdict = _verdicts.get(pair)
    if verdict is None:
        grade_answers(pairs=[pair], pool=None)
        verdict = _verdicts[pair]
    return verdict


def grade_answers(*, pairs: Iterable[tuple[str, str]], pool: GradingPool | None) -> None:
    """Grade the pairs not graded yet (on `pool`'s processes when given), so that
    `grade_answer` then finds them."""
    pending = list(dict.fromkeys(p for p in pairs if p not in _verdicts))
    if not pending:
        return
    verdicts = pool.grade(pending) if pool else [grade_pair(p) for p in pending]
    if len(_verdicts) + len(pending) > VERDICTS_MAX:
        _verdicts.clear()
    _verdicts.update(zip(pending, verdicts, strict=True))


def grading_pool() -> GradingPool:
    return GradingPool(processes=settings.IMPORT_GRADING_PROCESSES)


def regrade_solutions(*, problem_ids: list[int] | None = None) -> int:
    """Grade solutions again (after a grader or ground-truth change); return how many changed."""
    solutions = Solution.objects.select_related("problem").only(
        "id", "answer", "is_correct", "problem__answer"
    )
    if problem_ids is not None:
        solutions = solutions.filter(problem_id__in=problem_ids)
    changed = []
    for solution in solutions.iterator(chunk_size=2000):
        verdict = grade_answer(solution.answer, solution.problem.answer)
        if verdict != solution.is_correct:
            solution.is_correct = verdict
            changed.append(solution)
    Solution.objects.bulk_update(changed, ["is_correct"], batch_size=1000)
    return len(changed)
