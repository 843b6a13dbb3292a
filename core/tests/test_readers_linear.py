"""Every reader of text a model wrote runs in linear time (issue 41, item 5), regexes or not.

core/tests/test_patterns.py holds every regular expression to linear time; a reader can still
be quadratic without one (a loop that rescans the rest of the text for each brace, a string
grown and recounted per paragraph). Each reader here is given hostile replies of 10 kB and
100 kB: ten times the text may take about ten times the CPU, not a hundred.
"""

import time

import pytest

from core.answers import extract_answer, final_answer, last_boxed, stated_answer
from core.tests.cpu_bound import Slow, cpu_bound
from generators.prompts import parse_solution, step_answer
from labeling import mathtext
from labeling.grading.normalise import read
from trainer.judging.prompts import read_reply

# The shapes replies take when a model loops or someone builds one to hurt: a unit repeated.
UNITS = [
    "\\boxed{",
    "\\boxed{1}",
    "{",
    "}",
    "$",
    "$$\n\n",
    "\\[\n\n",
    "\\(",
    "# Answer\n\n",
    "Step 1: ",
    "Step 1: +1\n",
    "**Step 2:** -1\n",
    "\n\n",
    " ",
    "a",
    "7",
    "1,",
    "\\frac{",
    "\\frac{1}{2}",
    "The answer is ",
    "> ",
    "- ",
    "1. ",
    "|",
    "*",
    "_",
    "`",
    "[",
    "\\",
    "&",
    "\\begin{pmatrix}",
    "x^",
]

READERS = {
    "generators.prompts.parse_solution": parse_solution,
    "generators.prompts.step_answer": step_answer,
    "core.answers.last_boxed": last_boxed,
    "core.answers.stated_answer": stated_answer,
    "core.answers.final_answer": lambda text: final_answer(text.split("\n\n")),
    "core.answers.extract_answer": lambda text: extract_answer(text.split("\n\n")),
    "trainer.judging.prompts.read_reply (per step)": lambda text: read_reply(
        text, steps=40, format="per_step"
    ),
    "trainer.judging.prompts.read_reply (first error)": lambda text: read_reply(
        text, steps=40, format="first_error"
    ),
    "labeling.mathtext.render_step": mathtext.render_step,
    "labeling.mathtext.render_markdown": mathtext.render_markdown,
    "labeling.mathtext.render_excerpt": lambda text: mathtext.render_excerpt(text, 200),
    "labeling.grading.normalise.read": read,
}
SMALL, LARGE = 10_000, 100_000
# Ten times the text in at most this many times the CPU (linear is about 10, quadratic 100),
# once the large case takes long enough to time.
RATIO = 30
TIMED_FROM_SECONDS = 0.05
BOUND_SECONDS = 5.0


def _cpu(reader, text: str, *, repeats: int = 1) -> float:
    """The fastest of `repeats` runs, in seconds (a run past BOUND_SECONDS of CPU is inf):
    the fastest, so that a collection or another process's burst does not count."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        try:
            with cpu_bound(BOUND_SECONDS):
                reader(text)
        except Slow:
            return float("inf")
        except Exception:  # refusing hostile text is an answer too, if it is quick
            pass
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_is_linear_on_hostile_replies(name):
    reader = READERS[name]
    slow = []
    for unit in UNITS:
        small = _cpu(reader, unit * (SMALL // len(unit)), repeats=5)
        large = _cpu(reader, unit * (LARGE // len(unit)), repeats=2)
        if large > BOUND_SECONDS or (large > TIMED_FROM_SECONDS and large > RATIO * small):
            slow.append(f"{unit!r}: {small:.3f} s at 10 kB, {large:.3f} s at 100 kB")
    assert not slow, f"{name} is super-linear:\n" + "\n".join(slow)


def test_the_check_catches_a_quadratic_reader():
    def rescans(text: str) -> int:  # what last_boxed did: one scan to the end per brace
        return sum(text[i:].count("}") for i in range(len(text)) if text[i] == "{")

    small = _cpu(rescans, "{" * SMALL)
    large = _cpu(rescans, "{" * LARGE)
    assert large > RATIO * small or large == float("inf")
