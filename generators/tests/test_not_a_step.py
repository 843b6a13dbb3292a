"""What a generator writes that is no step is not stored as one (issue 30, point 13): a
preamble, the problem restated, a heading alone, an answer said in a paragraph of its own.
One function decides (`parse_solution`), for sampling, live proposals and rollouts alike."""

import pytest

from generators import parse_solution

PERCENT = "What is $40\\%$ of 65?"
BINOM = "Compute $\\dbinom{8}{4}$."
TRIANGLE = "A right triangle has legs $3$ and $4$. What is the length of its hypotenuse?"


@pytest.mark.parametrize(
    ("reply", "problem", "steps"),
    [
        # The problem restated as the first step, plainly or labelled.
        (
            "What is 40% of 65?\n\n$0.4 \\cdot 65 = 26$.\n\n# Answer\n\n26",
            PERCENT,
            ["$0.4 \\cdot 65 = 26$.", "# Answer\n\n26"],
        ),
        (
            "Problem: Compute $\\dbinom{8}{4}$.\n\nSolution:\n\n"
            "$\\dbinom{8}{4} = \\frac{8!}{4!\\,4!} = 70$.\n\n# Answer\n\n70",
            BINOM,
            ["$\\dbinom{8}{4} = \\frac{8!}{4!\\,4!} = 70$.", "# Answer\n\n70"],
        ),
        # Only the question of a longer problem, asked again.
        (
            "What is the length of its hypotenuse?\n\n$\\sqrt{3^2 + 4^2} = 5$.\n\n# Answer\n\n5",
            TRIANGLE,
            ["$\\sqrt{3^2 + 4^2} = 5$.", "# Answer\n\n5"],
        ),
        # Preambles.
        (
            "Here is the next part of the solution:\n\nThen $x^2 = 9$, so $x = \\pm 3$.",
            "Solve $x^2 - 9 = 0$.",
            ["Then $x^2 = 9$, so $x = \\pm 3$."],
        ),
        (
            "Sure! Let's solve this problem step by step.\n\n"
            "By Pythagoras, $c = \\sqrt{3^2 + 4^2} = 5$.\n\n# Answer\n\n5",
            TRIANGLE,
            ["By Pythagoras, $c = \\sqrt{3^2 + 4^2} = 5$.", "# Answer\n\n5"],
        ),
        (
            "Certainly. Here's the solution:\n\n**Step 1:**\n\n"
            "$\\frac{1}{2} + \\frac{1}{3} = \\frac{5}{6}$.\n\n# Answer\n\n\\frac{5}{6}",
            "Compute $\\frac{1}{2} + \\frac{1}{3}$.",
            ["$\\frac{1}{2} + \\frac{1}{3} = \\frac{5}{6}$.", "# Answer\n\n\\frac{5}{6}"],
        ),
        # The answer said in a paragraph of its own: the final-answer line holds it.
        (
            "Multiply: $0.4 \\cdot 65 = 26$.\n\nThis answer is $26$",
            PERCENT,
            ["Multiply: $0.4 \\cdot 65 = 26$.", "# Answer\n\n$26$"],
        ),
        (
            "$\\dbinom{8}{4} = 70$.\n\nSo the final answer is $\\boxed{70}$.",
            BINOM,
            ["$\\dbinom{8}{4} = 70$.", "# Answer\n\n70"],
        ),
        (
            "$\\dbinom{8}{4} = 70$.\n\n**Answer:** 70",
            BINOM,
            ["$\\dbinom{8}{4} = 70$.", "# Answer\n\n70"],
        ),
        (
            "$\\dbinom{8}{4} = 70$.\n\nThe answer is $70$.\n\n# Answer\n\nThis answer is $70$.",
            BINOM,
            ["$\\dbinom{8}{4} = 70$.", "# Answer\n\n$70$"],
        ),
    ],
    ids=[
        "restated",
        "restated-labelled",
        "question-restated",
        "here-is",
        "sure-lets-solve",
        "heading-alone",
        "this-answer-is",
        "final-answer-boxed",
        "answer-colon",
        "answer-twice",
    ],
)
def test_what_is_no_step_is_left_out_and_the_answer_line_kept(reply, problem, steps):
    assert parse_solution(reply, problem=problem).steps == steps


@pytest.mark.parametrize(
    ("reply", "steps"),
    [
        # "Let's" that does work is a step; so is one with no mathematics that plans.
        (
            "Let's multiply $0.4$ by $65$: $26$.\n\n# Answer\n\n26",
            ["Let's multiply $0.4$ by $65$: $26$.", "# Answer\n\n26"],
        ),
        (
            "Let's find the hypotenuse first.\n\n$c = 5$.\n\n# Answer\n\n5",
            ["Let's find the hypotenuse first.", "$c = 5$.", "# Answer\n\n5"],
        ),
        # A question in the middle of a solution, or one the problem does not ask, stays.
        (
            "$c^2 = 25$.\n\nWhat is the length of its hypotenuse?\n\n$c = 5$.\n\n# Answer\n\n5",
            [
                "$c^2 = 25$.",
                "What is the length of its hypotenuse?",
                "$c = 5$.",
                "# Answer\n\n5",
            ],
        ),
        (
            "What is $3^2 + 4^2$? It is $25$.\n\n# Answer\n\n5",
            ["What is $3^2 + 4^2$? It is $25$.", "# Answer\n\n5"],
        ),
        # Reasoning that mentions the answer is a step, not the answer line.
        (
            "The answer is $5$ because $\\sqrt{25} = 5$. Lengths are positive.\n\n# Answer\n\n5",
            [
                "The answer is $5$ because $\\sqrt{25} = 5$. Lengths are positive.",
                "# Answer\n\n5",
            ],
        ),
    ],
    ids=["lets-with-math", "lets-plan", "question-later", "own-question", "answer-reasoned"],
)
def test_real_steps_are_kept(reply, steps):
    assert parse_solution(reply, problem=TRIANGLE).steps == steps


def test_a_reply_of_only_chatter_has_no_step():
    parsed = parse_solution("Sure!\n\n   \n\nHere is the solution:", problem=PERCENT)

    assert (parsed.steps, parsed.finished) == ([], False)
