"""Answer grading against MATH-style ground truths."""

import threading

import pytest

from labeling.grading import is_equivalent

EQUAL = [
    ("468", "468"),
    ("\\boxed{468}", "468"),
    ("$468$", "468"),
    ("40,\\!000", "40000"),
    ("40,000", "40000"),
    ("40000", "40,\\!000"),
    ("\\frac{1}{2}", "0.5"),
    ("1/2", "\\frac{1}{2}"),
    ("\\dfrac12", "\\frac{1}{2}"),
    ("\\tfrac{3}{4}", "0.75"),
    ("\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2"),
    ("2\\sqrt{5}", "\\sqrt{20}"),
    ("[-3, 5)", "[-3,5)"),
    ("(2, -1)", "(2,-1)"),
    ("(-\\infty, 3]", "(-\\infty,3]"),
    ("5 \\text{ cm}", "5"),
    ("5\\text{ units}", "5"),
    ("10^\\circ", "10"),
    ("10^{\\circ}", "10"),
    ("\\$5", "5"),
    ("20\\%", "20"),
    ("x = 3", "3"),
    ("\\left(1, 2\\right)", "(1,2)"),
    ("3\\pi", "3 \\pi"),
    ("\\pi/2", "\\frac{\\pi}{2}"),
    ("-\\frac{3}{4}", "-0.75"),
    ("\\text{(A)}", "\\text{(A)}"),
    ("0.333333333", "\\frac{1}{3}"),
    ("1, 2", "2, 1"),
    ("\\boxed{\\frac{7}{2}}", "3.5"),
    ("12", "12.0"),
    ("x^2+2x+1", "(x+1)^2"),
]

NOT_EQUAL = [
    ("3", "-3"),
    ("-468", "468"),
    ("467", "468"),
    ("\\frac{1}{3}", "0.33"),
    ("2", "2\\sqrt{2}"),
    ("(1,2)", "[1,2]"),
    ("[1,2)", "[1,2]"),
    ("", "5"),
    ("   ", "5"),
    ("5", ""),
    ("\\frac{2}{3}", "\\frac{3}{2}"),
    ("(2,-1)", "(-1,2)"),
    ("\\sqrt{3}", "3"),
    ("4000", "40000"),
    ("\\pi", "3"),
    ("x+1", "x-1"),
    ("10", "100"),
    ("0.5", "0.05"),
    ("1, 2", "1, 3"),
    ("\\text{(A)}", "\\text{(B)}"),
]


@pytest.mark.parametrize("answer,truth", EQUAL)
def test_equivalent_answers(answer, truth):
    assert is_equivalent(answer, truth)


@pytest.mark.parametrize("answer,truth", NOT_EQUAL)
def test_different_answers(answer, truth):
    assert not is_equivalent(answer, truth)


def test_grading_works_outside_the_main_thread():
    # Celery workers and web servers grade in threads, where signal-based timeouts break.
    results = {}

    def grade():
        results["eq"] = is_equivalent("\\frac{1}{2}", "0.5")
        results["ne"] = is_equivalent("\\frac{1}{2}", "0.25")

    thread = threading.Thread(target=grade)
    thread.start()
    thread.join(timeout=60)
    assert results == {"eq": True, "ne": False}


@pytest.mark.parametrize("garbage", ["\\frac{", "}}}", "\\boxed{", "$$$", "\\sqrt[", "((("])
def test_garbage_is_not_equal_and_does_not_raise(garbage):
    assert not is_equivalent(garbage, "5")
