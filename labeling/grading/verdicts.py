"""Stage 4: the verdicts of stored solutions.

`Solution.is_correct` holds a verdict as True (equal), False (not equal) or None (ungraded:
unsure, or nothing to grade), so an unsure answer waits in the answer-review queue and is
never a convincing wrong answer. Verdicts are cached by (answer, ground truth), since a pool
repeats the same few final answers per problem many times over; `GradingPool` grades a big
batch on worker processes; `regrade_solutions` grades stored solutions again.
"""

import logging
import multiprocessing
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from core.answers import final_answer
from core.processes import die_with_parent
from labeling.grading.compare import grade
from labeling.grading.symbolic import GRADER, warm
from labeling.grading.verdict import Verdict
from labeling.models import Solution

# One logger for the whole grader: operators filter on it.
logger = logging.getLogger("labeling.grading")

# How much lower a GradingPool worker's CPU priority is than its importer's (os.nice).
GRADING_NICENESS = 10


def _grade_in_this_process(parent: int) -> None:
    die_with_parent(parent)  # a killed importer leaves no workers behind
    # A GradingPool worker grades in its main thread, where the interval timer works; a
    # process forked from it could inherit a lock some thread of the importer held.
    GRADER._unavailable = True
    # The import waits for its rows to be stored, and for the verdicts only at its end: the
    # workers take the CPU the importer and the database leave (100,000 PRM800K lines on 2
    # cores: 50.5 s with the workers at the importer's priority, 45.1-45.7 s below it).
    os.nice(GRADING_NICENESS)


def grade_pair(pair: tuple[str, str]) -> Verdict:
    """`grade` of one (answer, ground truth) pair, as a module-level function that a
    process pool can call."""
    return grade(*pair)


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

    def grade(self, pairs: list[tuple[str, str]]) -> list[Verdict]:
        if self.processes > 1 and len(pairs) >= self.MIN_PAIRS:
            try:
                return self._parallel(pairs)
            except (BrokenProcessPool, AssertionError, OSError) as exc:
                logger.warning("Grading in this process: worker processes failed (%s)", exc)
                self.close()
                self.processes = 1
        return [grade_pair(pair) for pair in pairs]

    def _parallel(self, pairs: list[tuple[str, str]]) -> list[Verdict]:
        if self._executor is None:
            warm()  # once, here: every worker forked below starts with the parser loaded
            context = multiprocessing.get_context("fork")
            self._executor = ProcessPoolExecutor(
                self.processes,
                mp_context=context,
                initializer=_grade_in_this_process,
                initargs=(os.getpid(),),
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
_verdicts: dict[tuple[str, str], Verdict] = {}
VERDICTS_MAX = 65536


def gradable(answer: str, ground_truth: str) -> bool:
    """Whether there is anything to grade: a final answer read from the solution
    (`core.answers.final_answer`) and a ground truth on its problem."""
    return bool(answer.strip()) and bool(ground_truth.strip())


_STORED = {Verdict.EQUAL: True, Verdict.NOT_EQUAL: False, Verdict.UNSURE: None}


def stored(verdict: Verdict) -> bool | None:
    """A verdict as `Solution.is_correct` holds it: unsure is None, ungraded, not wrong."""
    return _STORED[verdict]


def cached(pair: tuple[str, str]) -> Verdict | None:
    """The cached verdict of (answer, ground truth), None when it has not been graded yet."""
    return _verdicts.get(pair)


def grade_answer(answer: str, ground_truth: str) -> bool | None:
    """The verdict stored in `Solution.is_correct`: None (ungraded) when the grader is unsure,
    or when there is no answer or no ground truth, since a solution whose answer cannot be read
    is not known to be wrong."""
    if not gradable(answer, ground_truth):
        return None
    pair = (answer, ground_truth)
    verdict = _verdicts.get(pair)
    if verdict is None:
        grade_answers(pairs=[pair], pool=None)
        verdict = _verdicts[pair]
    return stored(verdict)


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
