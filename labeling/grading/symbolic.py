"""Stage 2c: math-verify (sympy) for what the exact stages leave, made exact, under a deadline.

math-verify compares numbers rounded to a few digits, so its "equal" is checked: the difference
must simplify to zero, or at least not evaluate to a nonzero number at 60 digits. Its "not
equal" is checked too: a witness (the values at a few points) must show the difference;
without one the verdict is unsure. Every thread sends pairs to one long-lived grading process
that is killed and replaced at the deadline (GRADING_TIME_LIMIT_SECONDS); a pair past it is
unsure.
"""

import functools
import logging
import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool

import sympy
from django.conf import settings
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from sympy.core.evalf import PrecisionExhausted

from core import patterns
from core.processes import die_with_parent
from labeling.grading.verdict import Verdict, every

# Values compared part by part once math-verify calls them equal.
_CONTAINERS = (sympy.Tuple, sympy.FiniteSet, sympy.Interval, sympy.MatrixBase)

# One logger for the whole grader: operators filter on it.
logger = logging.getLogger("labeling.grading")

# The answer is already the final one, so a box in it is the answer, not one candidate of many.
_EXTRACTION = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]


# A lone `i` is the imaginary unit, which sympy spells `I` (as a symbol 2(1+i) != 2+2i): not
# after a letter or `\`, and not before a letter. RE2 has no lookaround: the character before
# it is taken along, and so is a letter after it, which makes the match no `i` (`_imaginary`).
_IMAGINARY = patterns.compile(r"(^|[^a-zA-Z\\])i([a-zA-Z]?)")


def _imaginary(match: patterns.Match) -> str:
    return match[0] if match[2] else f"{match[1]}I"


# ---------------------------------------------------------------------------------------------
# math-verify under a deadline


class _Timeout(Exception):
    pass


def _verify(left: str, right: str) -> Verdict:
    gold = _parse(_IMAGINARY.sub(_imaginary, right))
    target = _parse(_IMAGINARY.sub(_imaginary, left))
    if not (gold and target):
        return Verdict.UNSURE  # a side math-verify cannot read is not known to differ
    gold, target = gold[0], target[0]
    if verify([gold], [target], timeout_seconds=None):
        # math-verify rounds numbers to a few digits before comparing; equal means exactly.
        return _exactly(gold, target)
    if _same_curve(gold, target) or _same_for_positive(gold, target):
        return Verdict.EQUAL
    return _witness(gold, target)


def _exactly(gold, target) -> Verdict:
    """EQUAL when the difference of two values math-verify called equal simplifies to zero;
    NOT_EQUAL when it evaluates to a nonzero number (`\\pi + 10^{-12}` against `\\pi`)."""
    if isinstance(gold, sympy.Expr) and isinstance(target, sympy.Expr):
        difference = gold - target
        if difference == 0 or sympy.simplify(difference) == 0:
            return Verdict.EQUAL
        return _witness(gold, target, agreed=True)
    if type(gold) is type(target) and isinstance(gold, _CONTAINERS):
        parts = (gold.args, target.args)
        if isinstance(gold, sympy.MatrixBase):
            parts = (list(gold), list(target))
        if len(parts[0]) == len(parts[1]):
            return every(_exactly(g, t) for g, t in zip(*parts, strict=True))
    return Verdict.EQUAL  # equations, relations: math-verify compares their sides symbolically


def _witness(gold, target, *, agreed: bool = False) -> Verdict:
    """NOT_EQUAL when the two values differ at a point (numbers: their values to 60 digits;
    expressions: at a few rational points); where no point shows a difference, EQUAL if
    math-verify `agreed` and UNSURE if not (a form it could not simplify)."""
    if not (isinstance(gold, sympy.Expr) and isinstance(target, sympy.Expr)):
        if agreed:
            return Verdict.EQUAL
        # Two equations, two sets: compared as such. An interval against an inequality on
        # `|x|`, a set against an equation: forms math-verify does not relate.
        return Verdict.NOT_EQUAL if type(gold) is type(target) else Verdict.UNSURE
    # math-verify parses without evaluating (`\\cos(\\frac{90\\pi}{180})` stays cos(90pi/180)),
    # and an unevaluated zero term makes a strict evaluation fail: evaluate it first.
    difference = (gold - target).doit()
    symbols = sorted(difference.free_symbols, key=str)
    points = (
        [{}]
        if not symbols
        else [
            {
                symbol: (-1) ** (i + k) * sympy.Rational(17 + 3 * i + 5 * k, 7 + i)
                for k, symbol in enumerate(symbols)
            }
            for i in range(3)
        ]
    )
    for point in points:
        try:
            # strict: 60 significant digits or an error, so a difference of e^{-200} is a
            # difference and an unsimplified zero (sin^2 + cos^2 - 1) shows none.
            value = difference.subs(point).evalf(60, strict=True)
        except (PrecisionExhausted, TypeError, ValueError, ZeroDivisionError):
            continue
        if value in (sympy.oo, -sympy.oo, sympy.zoo):
            return Verdict.NOT_EQUAL  # `\\infty` against `-\\infty`
        if value.is_number and value.is_finite and value != 0:
            return Verdict.NOT_EQUAL
    return Verdict.EQUAL if agreed else Verdict.UNSURE


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


def warm() -> None:
    """Load math-verify's LaTeX parser and sympy's printers in this process (about a second
    the first time), before any deadline runs; a process forked after it inherits them."""
    _verify("\\frac{\\pi}{2}", "\\sqrt{2}x")


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> list:
    # A ground truth is graded against every wrong answer of its problem, and answers recur
    # across problems; the parse is most of a grade, and sympy expressions are immutable.
    return parse(f"${text}$", extraction_config=_EXTRACTION, parsing_timeout=None)


def verify_within_limit(left: str, right: str) -> Verdict:
    """math-verify's verdict, made exact; UNSURE when it takes longer than the limit.

    math-verify's own timeouts use `signal.alarm`, which only the main thread may set, and a
    signal cannot stop sympy inside one long C call anyway. So every thread (Celery, web
    requests, imports) sends the pair to one long-lived grading process and waits on a future;
    a process that overruns is killed and replaced. Where no process can be started, the main
    thread falls back to an interval timer, and other threads to the guard alone.
    """
    limit = settings.GRADING_TIME_LIMIT_SECONDS
    try:
        return GRADER.verify(left, right, limit)
    except _Timeout:
        logger.warning("Grading took over %ss; unsure: %r vs %r", limit, left, right)
        return Verdict.UNSURE


def _alarm_is_free() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


def _verify_with_alarm(left: str, right: str, limit: float) -> Verdict:
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

    def verify(self, left: str, right: str, limit: float) -> Verdict:
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
                    executor = ProcessPoolExecutor(
                        1, mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),)
                    )
                except (AssertionError, OSError) as exc:
                    logger.warning("Grading in the calling thread: no grading process (%s)", exc)
                    self._unavailable = True
                    return None
                try:
                    # Start it now, under the lock, with its parser loaded: the first parse
                    # of a process builds math-verify's grammar, which under load can take
                    # most of the deadline and make the first pair unsure.
                    executor.submit(warm).result(timeout=30)
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


GRADER = _GradingProcess()


# A forked child (a GradingPool worker) must not share its parent's grading process.
os.register_at_fork(after_in_child=GRADER.__init__)
