"""Answer grading against MATH-style ground truths (plain pytest, no database)."""

import multiprocessing
import threading

import pytest

from labeling.grading import GradingPool, is_equivalent

CASES = [
    # (answer, ground truth, equivalent?)
    ("468", "468", True),
    ("\\boxed{468}", "468", True),
    ("$468$", "468", True),
    ("$\\boxed{\\frac{7}{2}}$", "3.5", True),
    ("The answer is $\\boxed{5}$.", "5", True),
    ("40,\\!000", "40000", True),
    ("40,000", "40000", True),
    ("40000", "40,\\!000", True),
    ("5\\,000", "5000", True),
    ("1{,}000{,}000", "1000000", True),
    ("\\frac{1}{2}", "0.5", True),
    ("1/2", "\\frac{1}{2}", True),
    ("\\dfrac12", "\\frac{1}{2}", True),
    ("\\dfrac12", "0.5", True),
    ("\\tfrac{3}{4}", "0.75", True),
    ("-\\frac{3}{4}", "\\frac{-3}{4}", True),
    ("12", "12.0", True),
    ("\\sqrt{2}/2", "\\frac{\\sqrt2}{2}", True),
    ("2\\sqrt{5}", "\\sqrt{20}", True),
    ("\\pi/2", "\\dfrac{\\pi}{2}", True),
    ("[-3, 5)", "[-3,5)", True),
    ("\\left[ -3, 5 \\right)", "[-3,5)", True),
    ("(-\\infty, 3]", "(-\\infty,3]", True),
    ("(2, -1)", "(2,-1)", True),
    ("\\left( 2, -1 \\right)", "(2,-1)", True),
    ("5 \\text{ cm}", "5", True),
    ("5\\text{ square units}", "5", True),
    ("\\frac{9}{2}\\text{ units}^2", "4.5", True),
    ("12 \\mbox{ inches}", "12", True),
    ("\\text{(A)}", "\\text{(A)}", True),
    ("A", "\\text{(A)}", True),
    ("10^\\circ", "10", True),
    ("10^{\\circ}", "10", True),
    ("\\$5", "5", True),
    ("\\$ 5.00", "5", True),
    ("20\\%", "20", True),
    ("x = 3", "3", True),
    ("3", "x=3", True),
    ("\\boxed{y = 2x + 3}", "2x+3", True),
    ("\\theta = 30^\\circ", "30", True),
    ("1, 2", "2, 1", True),
    ("\\{1, 2\\}", "1,2", True),
    ("0.333333333", "\\frac{1}{3}", True),
    ("x^2+2x+1", "(x+1)^2", True),
    ("\\text{no solution}", "\\text{no solution}", True),
    ("3", "-3", False),
    ("-468", "468", False),
    ("467", "468", False),
    ("4000", "40,000", False),
    ("\\frac{1}{3}", "0.33", False),
    ("1/3", "0.33", False),
    ("\\frac{2}{3}", "\\frac{3}{2}", False),
    ("0.5", "0.05", False),
    ("2", "2\\sqrt{2}", False),
    ("\\sqrt{3}", "3", False),
    ("\\pi", "3.14", False),
    ("(1,2)", "[1,2]", False),
    ("[1,2)", "[1,2]", False),
    ("(-\\infty, 3)", "(-\\infty,3]", False),
    ("(2,-1)", "(-1,2)", False),
    ("1, 2", "1, 3", False),
    ("3, 5", "3, 5, 7", False),
    ("\\text{(A)}", "\\text{(B)}", False),
    ("\\text{even}", "\\text{odd}", False),
    ("x+1", "x-1", False),
    ("5 \\text{ cm}", "6", False),
    ("x = 3", "4", False),
    ("", "5", False),
    ("   ", "5", False),
    ("$$", "5", False),
    ("\\boxed{}", "5", False),
    ("5", "", False),
    ("", "", False),
]


def test_cases_cover_both_outcomes():
    assert sum(expected for *_, expected in CASES) >= 25
    assert sum(not expected for *_, expected in CASES) >= 20


@pytest.mark.parametrize(("answer", "truth", "expected"), CASES)
def test_is_equivalent(answer, truth, expected):
    assert is_equivalent(answer, truth) is expected


def test_grading_works_outside_the_main_thread():
    # Celery workers and web servers grade in threads, where signal.alarm raises ValueError;
    # math-verify's default timeouts would turn every answer there into a wrong one.
    results: dict[str, bool] = {}
    errors: list[BaseException] = []

    def grade() -> None:
        try:
            results["frac"] = is_equivalent("\\frac{\\sqrt2}{2}", "\\sqrt{2}/2")
            results["interval"] = is_equivalent("[-3, 5)", "[-3,5)")
            results["wrong"] = is_equivalent("\\frac{1}{3}", "0.33")
        except BaseException as error:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(error)

    thread = threading.Thread(target=grade)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert errors == []
    assert results == {"frac": True, "interval": True, "wrong": False}


@pytest.mark.parametrize(
    "garbage", ["\\frac{", "}}}", "\\boxed{", "$$$", "\\sqrt[", "(((", "\\left(", "^_^", "\\\\"]
)
def test_garbage_is_not_equivalent_and_does_not_raise(garbage):
    assert is_equivalent(garbage, "5") is False
    assert is_equivalent("5", garbage) is False


def _graded_in_a_daemon(pairs, queue) -> None:
    pool = GradingPool(processes=2)
    queue.put((pool.grade(pairs), pool.processes))


class TestGradingPool:
    # Enough pairs for the pool to start its worker processes (MIN_PAIRS).
    PAIRS = [(answer, truth) for answer, truth, _ in CASES] * 2
    EXPECTED = [expected for *_, expected in CASES] * 2

    def test_worker_processes_give_the_same_verdicts(self):
        assert len(self.PAIRS) >= GradingPool.MIN_PAIRS
        with GradingPool(processes=2) as pool:
            assert pool.grade(self.PAIRS) == self.EXPECTED
            assert pool.processes == 2  # it did not fall back to grading in this process

    def test_grades_in_its_own_process_where_children_are_not_allowed(self):
        # A daemonic process (a Celery prefork child, say) may not start processes; the
        # import must still grade every answer.
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        daemon = context.Process(target=_graded_in_a_daemon, args=(self.PAIRS, queue), daemon=True)
        daemon.start()
        verdicts, processes = queue.get(timeout=120)
        daemon.join(timeout=30)
        assert verdicts == self.EXPECTED
        assert processes == 1  # it fell back to grading in the daemon itself
