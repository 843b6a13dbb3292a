"""Final-answer grading: is a solution's answer equivalent to the MATH-style ground truth?

math-verify does the mathematics (sympy equivalence of fractions, decimals, radicals,
intervals, tuples, solution sets). A small normaliser runs first, the way MATH graders
(Hendrycks `is_equiv`, PRM800K `grader.py`) do, so that formatting which carries no meaning
cannot make a right answer wrong, and so that the common integer answers skip the slow parse.
Below the grader: the verdict cache and the grading of stored solutions (imports, regrading).
"""

import functools
import logging
import multiprocessing
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from fractions import Fraction

from django.conf import settings
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from labeling.models import Solution

logger = logging.getLogger(__name__)

# The answer is already the final one, so a box in it is the answer, not one candidate of many.
_EXTRACTION = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]

# Spacing, sizing and decorations with no value. `\,` must go before math-verify sees
# `5\,000`, which it would otherwise read as 5*000.
_NOISE = re.compile(r"\\(?:left|right|displaystyle)(?![a-zA-Z])|\\[!,;: ]|\^\{?\\circ\}?|°|\\?[%$]")
# A trailing unit after a number ("5 \text{ cm}", "\frac92\text{ units}^2") is dropped here so
# the answer can reach the exact fast path; other \text{} (choices, words) is math-verify's.
_TRAILING_UNIT = re.compile(r"(?<=[\d}])\s*\\(?:text|mbox)\{[a-zA-Z .]*\}(?:\^\{?\d\}?)?$")
# "x = 3" names the unknown; the value is what follows (only for a single `=`, not systems).
_NAMED = re.compile(r"^(?:[a-zA-Z]|\\[a-zA-Z]+)\s*=\s*(?=[^=]*$)")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_RATIONAL = re.compile(r"(-?)(?:\\frac\{(-?\d+)\}\{(\d+)\}|(\d+)(?:/(\d+))?)")


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


def _normalize(answer: str) -> str:
    text = _unbox(answer.strip()).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    text = _NOISE.sub("", text).replace("{,}", ",").strip()
    text = _NAMED.sub("", _TRAILING_UNIT.sub("", text))
    if _THOUSANDS.fullmatch(text.replace(" ", "")):
        text = text.replace(",", "")
    return re.sub(r"\s+", " ", text).strip()


def _exact_rational(text: str) -> Fraction | None:
    # Most MATH answers are integers or integer fractions; settling those exactly skips a
    # ~25 ms LaTeX-to-sympy parse per answer, which dominates bulk imports.
    match = _RATIONAL.fullmatch(text.replace(" ", ""))
    if match is None:
        return None
    sign, frac_top, frac_bottom, top, bottom = match.groups()
    top, bottom = int(frac_top or top), int(frac_bottom or bottom or 1)
    if bottom == 0:
        return None
    value = Fraction(top, bottom)
    return -value if sign else value


def is_equivalent(answer: str, ground_truth: str) -> bool:
    """True when `answer` is mathematically the same as the MATH-style `ground_truth`.

    Never raises. math-verify's own signal-based timeouts are off because grading runs in
    Celery workers and web threads, where `signal.alarm` cannot be used.
    """
    if not answer or not ground_truth:
        return False
    left, right = _normalize(answer), _normalize(ground_truth)
    if not left or not right:
        return False  # an empty answer is never right, even against an empty truth
    if left.replace(" ", "") == right.replace(" ", ""):
        return True
    exact_left, exact_right = _exact_rational(left), _exact_rational(right)
    if exact_left is not None and exact_right is not None:
        return exact_left == exact_right
    try:
        gold, target = _parse(right), _parse(left)
        return bool(gold and target and verify(gold, target, timeout_seconds=None))
    except Exception:  # noqa: BLE001 - a grader must answer, not crash an import
        # The normalised strings were compared above and differ, so the fallback says no.
        return False


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> list:
    # A ground truth is graded against every wrong answer of its problem, and answers recur
    # across problems; the parse is most of a grade, and sympy expressions are immutable.
    return parse(f"${text}$", extraction_config=_EXTRACTION, parsing_timeout=None)


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
            self._executor = ProcessPoolExecutor(self.processes, mp_context=context)
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
