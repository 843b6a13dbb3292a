"""Reading a judge's reply: what real small models write about MATH solutions, read into
per-step ratings where it can be, and None (unreadable) where it cannot."""

import time

from trainer.judging.models import REASON_MAX_CHARS
from trainer.judging.prompts import (
    FIRST_ERROR_TEMPLATE,
    StepJudgement,
    first_error_judgements,
    judge_messages,
    read_first_error,
    read_per_step,
    read_reply,
)

STEPS = [
    r"The sum of the interior angles of a hexagon is $180(6-2) = 720^\circ$.",
    r"Each angle of a regular hexagon is $\frac{720^\circ}{6} = 120^\circ$.",
    r"So the exterior angle is $180^\circ - 120^\circ = 70^\circ$.",
    "# Answer\n\n70",
]


def ratings(judged):
    return [(j.index, j.rating) for j in judged]


def test_a_per_step_reply_with_latex_bold_and_a_unicode_minus_is_read_step_by_step():
    reply = (
        "Here are my ratings:\n\n"
        r"**Step 1:** +1 - correct use of $180(n-2)$." + "\n"
        r"**Step 2:** (+1) $\frac{720}{6} = 120$ is right" + "\n"
        "Step 3: \u22121 \u2014 $180 - 120 = 60$, not $70$.\n"
        "Step 4: -1 - the answer repeats the error.\n\n"
        "I hope this helps!"
    )
    judged = read_per_step(reply, steps=len(STEPS))
    assert ratings(judged) == [(0, 1), (1, 1), (2, -1), (3, -1)]
    assert judged[0].reason == "correct use of $180(n-2)$."
    assert judged[1].reason == r"$\frac{720}{6} = 120$ is right"
    assert judged[2].reason == "$180 - 120 = 60$, not $70$."


def test_words_and_numbered_lists_are_ratings_but_a_steps_arithmetic_is_not():
    reply = (
        "1. Correct: the formula is right\n"
        "2. neutral - restates the problem\n"
        r"Step 3: 1 + 1 = 2 so $\frac{1}{2}$" + "\n"
        "3) incorrect, 60 not 70\n"
    )
    judged = read_per_step(reply, steps=len(STEPS))
    # "Step 3: 1 + 1 = 2" is maths copied from a step, not a rating of +1.
    assert ratings(judged) == [(0, 1), (1, 0), (2, -1)]
    assert judged[2].reason == "60 not 70"


def test_fewer_ratings_than_steps_give_judgements_of_the_steps_rated_only():
    judged = read_per_step("Step 1: +1 - fine\nStep 2: +1 - fine", steps=len(STEPS))
    assert ratings(judged) == [(0, 1), (1, 1)]


def test_out_of_range_steps_are_ignored_and_a_step_rated_twice_keeps_its_first_rating():
    reply = "Step 0: -1 - no such step\nStep 2: -1 first\nStep 2: +1 again\nStep 9: +1 beyond"
    assert ratings(read_per_step(reply, steps=3)) == [(1, -1)]
    assert read_per_step("Step 7: +1\nStep 12: -1", steps=3) is None


def test_junk_is_unreadable_not_a_label():
    for junk in (
        "",
        "The solution looks good to me.",
        r"To find the angle, $\frac{720}{6} = 120$. So the answer is $\boxed{120}$.",
        "Step 1: The sum of the interior angles of a hexagon is $180(6-2) = 720^\\circ$.",
        "1 + 1 = 2\n2 * 3 = 6",
        "<|im_end|>" * 20,
    ):
        assert read_per_step(junk, steps=len(STEPS)) is None, junk
        assert read_reply(junk, steps=len(STEPS), format="per_step") is None, junk


def test_a_long_reason_is_cut_to_the_cap():
    judged = read_per_step("Step 1: -1 - " + "because " * 100, steps=2)
    assert len(judged[0].reason) == REASON_MAX_CHARS and judged[0].reason.endswith("…")


def test_processbench_critic_replies_give_the_index_of_the_first_wrong_paragraph():
    critique = (
        "Paragraph 0 correctly computes $180(6-2)=720$. Paragraph 1 divides correctly.\n"
        "Paragraph 2 claims $180-120=70$, which is wrong.\n\n"
        r"The earliest error is in paragraph 2: $\boxed{2}$"
    )
    assert read_first_error(critique, steps=4) == 2
    assert read_first_error(r"All paragraphs are correct. \boxed{-1}", steps=4) == -1
    assert read_first_error(r"\boxed{\text{paragraph } 1}", steps=4) == 1
    assert read_first_error("\\boxed{\u22121}", steps=4) == -1
    # The last box holding one number is the answer: "\boxed{1}" then a corrected "\boxed{0}".
    assert read_first_error(r"First \boxed{1}. On second thought, \boxed{0}.", steps=4) == 0
    # A bare index alone on the last line is read too.
    assert read_first_error("The error is here.\n\n**3**", steps=4) == 3


def test_a_critic_reply_without_an_index_or_with_an_index_out_of_range_is_unreadable():
    for reply in (
        "I think the solution is mostly fine.",
        r"\boxed{4}",  # a solution of 4 steps has paragraphs 0..3
        r"\boxed{-2}",
        r"\boxed{1, 2}",
        r"\boxed{}",
        r"$\boxed{\frac{1}{2}}$",
    ):
        assert read_first_error(reply, steps=4) is None, reply
        assert read_reply(reply, steps=4, format="first_error") is None, reply


def test_a_first_error_is_plus_one_before_it_minus_one_at_it_and_nothing_after():
    assert ratings(first_error_judgements(2, steps=4)) == [(0, 1), (1, 1), (2, -1)]
    assert ratings(first_error_judgements(0, steps=4)) == [(0, -1)]
    assert ratings(first_error_judgements(-1, steps=3)) == [(0, 1), (1, 1), (2, 1)]
    assert read_reply(r"\boxed{1}", steps=3, format="first_error") == [
        StepJudgement(index=0, rating=1, reason=""),
        StepJudgement(index=1, rating=-1, reason="The first wrong step."),
    ]


def test_the_prompts_show_every_step_numbered_as_each_format_reads_them():
    per_step = judge_messages(problem="What is $2+3$?", steps=STEPS, format="per_step")
    asked = per_step[-1]["content"]
    assert asked.startswith("Problem:\nWhat is $2+3$?")
    for number, step in enumerate(STEPS, start=1):
        assert f"Step {number}: {step}" in asked
    critic = judge_messages(problem="What is $2+3$?", steps=STEPS, format="first_error")
    assert len(critic) == 1 and critic[0]["role"] == "user"
    text = critic[0]["content"]
    assert f"<paragraph_0>\n{STEPS[0]}\n</paragraph_0>" in text
    assert f"<paragraph_3>\n{STEPS[3]}\n</paragraph_3>" in text
    assert text.endswith("Please put your final answer (i.e., the index) in \\boxed{}.")
    assert "indexed from 0" in FIRST_ERROR_TEMPLATE


# What SmolLM2-135M-Instruct replied to the prompts of judge-v1 (2026-11-26, local backend,
# temperature 0.2) about "What is $2 + 3$?".
SMOLLM2_PER_STEP = (
    "Step 1: +1 - the answer is correct.\nStep 2: -1 - 5 is 5, not 5.\n"
    "Step 3: -1 - the answer follows the wrong answer."
)
SMOLLM2_PER_STEP_JUNK = (
    "Step 1: Multiply $2$ and $3$.\n\nStep 2: 6 * 3 = 18.\n\nStep 3: # Answer\n\n18"
)
SMOLLM2_CRITIC = (
    "[Math Problem]\n\nWhat is $2 + 3$?\n\nThe solution is to multiply $2$ and $3$, which "
    "results in $6$."
)


def test_real_smollm2_replies_are_read_where_they_rate_and_unreadable_where_they_do_not():
    # A rating of a third step of a two-step solution is beyond it: ignored.
    assert ratings(read_per_step(SMOLLM2_PER_STEP, steps=2)) == [(0, 1), (1, -1)]
    # It rewrote the solution instead of rating it: "Step 2: 6 * 3 = 18" is no rating.
    assert read_per_step(SMOLLM2_PER_STEP_JUNK, steps=3) is None
    # The critic prompt: it restated the problem and gave no index.
    assert read_reply(SMOLLM2_CRITIC, steps=3, format="first_error") is None


# --- hostile replies (issue 41) ---------------------------------------------------------------


def test_a_100_kb_reply_shaped_to_make_a_backtracking_reader_crawl_is_read_at_once():
    # The reader on Python's engine took 24 s on 2,000 newlines and 81 s on "Step 1" and 2,000
    # spaces, growing faster than the square of the length; on RE2 it is linear.
    size = 100_000
    for reply in (
        "\n" * size,
        " \n" * (size // 2),
        "Step 1" + " " * size + "x",
        "Step 1:" + "*" * size,
        "Step 1: +1\n" * (size // 11),
        "\\boxed{" * (size // 7),
        "1 " * (size // 2),
    ):
        started = time.process_time()
        read_per_step(reply, steps=4)
        read_first_error(reply, steps=4)
        assert time.process_time() - started < 1.0, reply[:20]


def test_replies_that_made_the_reader_raise_are_read_or_unreadable():
    # A sign and its digit across a tab or a line: the rating it is.
    assert ratings(read_per_step("Step 1: -\t1 - wrong sum", steps=2)) == [(0, -1)]
    assert ratings(read_per_step("Step 2: -\n1", steps=2)) == [(1, -1)]
    # A Turkish dotless i: no rating word.
    assert read_per_step("Step 1: \u0131ncorrect", steps=2) is None
    # A number longer than int() reads: no step's index.
    assert read_first_error("\\boxed{" + "1" * 5000 + "}", steps=4) is None
    assert read_first_error("The error is in\n" + "2" * 5000, steps=4) is None


def test_a_rating_that_ends_its_line_is_read_whatever_the_next_line_starts_with():
    # What follows a rating is looked at as far as the end of its line: a next line in bold,
    # a quote or a list item is no arithmetic after the rating.
    reply = "**Step 1:** +1\n**Step 2:** 0\n> Step 3: -1\n- Step 4: correct"
    assert ratings(read_per_step(reply, steps=4)) == [(0, 1), (1, 0), (2, -1), (3, 1)]
