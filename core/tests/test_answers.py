"""Reading a solution's final answer from its last steps (`core.answers.final_answer`), on the
endings MATH solutions and model samples really have."""

import pytest

from core.answers import final_answer


@pytest.mark.parametrize(
    "steps,answer",
    [
        # MATH precalculus: the last box wins, nested braces counted.
        (
            [
                "We have $r = \\sqrt{0^2 + 3^2} = 3.$",
                "Also, if we draw the line connecting the origin and $(0,3),$ this line makes "
                "an angle of $\\frac{\\pi}{2}$ with the positive $x$-axis, so the polar "
                "coordinates are $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$",
            ],
            "\\left( 3, \\frac{\\pi}{2} \\right)",
        ),
        # Two boxes in the last step: the later one is the answer.
        (
            ["Then $x = \\boxed{2}$ is extraneous, so $x = \\boxed{\\dfrac{1}{2}}$."],
            "\\dfrac{1}{2}",
        ),
        # A matrix in a box, followed by a closing sentence of chatter.
        (
            [
                "So $\\mathbf{v} = \\boxed{\\begin{pmatrix} -1 \\\\ 2 \\end{pmatrix}}.$",
                "I hope this helps!",
            ],
            "\\begin{pmatrix} -1 \\\\ 2 \\end{pmatrix}",
        ),
        (["The probability is $\\frac{3}{6}$.", "The answer is $\\frac{1}{2}$."], "\\frac{1}{2}"),
        (["So the final answer is $-\\sqrt{3}$."], "-\\sqrt{3}"),
        (["Answer: $(-\\infty, 3]$"], "(-\\infty, 3]"),
        (["Adding the two cases,", "$$4 + 6 = 10$$\n\n10"], "10"),
        (["The total is 12 + 30, which is", "42"], "42"),
        (["Step.", "# Answer\n\n\\frac{3}{4}"], "\\frac{3}{4}"),
    ],
)
def test_the_final_answer_is_read_from_the_last_steps(steps, answer):
    assert final_answer(steps) == answer


@pytest.mark.parametrize(
    "steps",
    [
        ["The two numbers are 1 and 19."],
        ["So $x^2 - 20x + 19 = 0$ factors as $(x-1)(x-19)$."],
        ["Then \\boxed{} is left empty."],
        [],
    ],
)
def test_no_readable_answer_is_empty(steps):
    assert final_answer(steps) == ""
