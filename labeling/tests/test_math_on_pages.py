"""Issue 30, point 7: the researcher pages that showed raw TeX render it as every other page does
(`labeling.mathtext`: math in `<span class="math">`, which math.js hands to KaTeX)."""

import re

import pytest
from django.urls import reverse

from labeling.models import Generation, Problem
from labeling.services import overlap
from labeling.services.workbench import next_session, rate_step, submit_session
from trainer.models import SamplingRun

pytestmark = pytest.mark.django_db

TEXT = r"Compute $\frac{2}{3} + \frac{1}{4}$ and give the answer in lowest terms."
ANSWER = r"\frac{11}{12}"
MATH = re.compile(r'<span class="math"[^>]*>.*?</span>', re.S)


def raw_tex(html: str) -> list[str]:
    """What a reader would see as TeX: a `\\command` or a `$` outside the math spans."""
    main = html.split("<main", 1)[1]
    outside = MATH.sub("", main)
    outside = re.sub(r"<script.*?</script>", "", outside, flags=re.S)
    return re.findall(r"\\[a-zA-Z]+|\$[^$<]+\$", outside)


@pytest.fixture
def problem():
    return Problem.objects.create(text=TEXT, answer=ANSWER)


def label(labeler, finish_reason="solution", text=""):
    served = next_session(labeler=labeler).session
    if finish_reason == "solution":
        for index in range(len(served.solution.steps)):
            rate_step(session_id=served.pk, labeler=labeler, step_index=index, rating=1)
    submit_session(
        session_id=served.pk,
        labeler=labeler,
        finish_reason=finish_reason,
        finish_reason_text=text,
    )


def test_the_reports_page_renders_the_problem_and_its_answer_as_math(
    client, problem, make_solution, make_labeler, make_user
):
    make_solution(problem, steps=[r"So $\frac{11}{12}$.", "# Answer\n\n" + ANSWER], answer=ANSWER)
    label(make_labeler("lab1"), "bad_problem", "The fractions are unclear.")
    client.force_login(make_user("res", "researcher"))
    html = client.get(reverse("problem-reports")).content.decode()
    assert "The fractions are unclear." in html
    assert raw_tex(html) == []
    assert r"\frac{2}{3} + \frac{1}{4}" in html and r"\frac{11}{12}" in html


def test_labels_side_by_side_render_both_answers_as_math(
    client, problem, make_solution, make_labeler, make_user
):
    generation = Generation.objects.create(number=1)
    make_solution(
        problem,
        steps=[r"So $\frac{23}{30}$.", "# Answer\n\n\\frac{23}{30}"],
        answer=r"\frac{23}{30}",
        is_correct=False,
        generation=generation,
    )
    overlap.set_overlap(generation=generation, share=1.0, labelers=2)
    label(make_labeler("ann"))
    label(make_labeler("bob"))
    client.force_login(make_user("res", "researcher"))
    html = client.get(reverse("labeler-disagreement-list")).content.decode()
    assert r"\frac{23}{30}" in html
    assert raw_tex(html) == []


def test_a_sampling_runs_solutions_show_their_answers_as_math(
    client, problem, make_solution, make_user
):
    run = SamplingRun.objects.create(
        purpose="solutions", generator={"model": "m"}, sampling={}, samples=1
    )
    make_solution(problem, steps=["# Answer\n\n" + ANSWER], answer=ANSWER, sampling_run=run)
    client.force_login(make_user("res", "researcher"))
    html = client.get(reverse("sampling-detail", args=[run.pk])).content.decode()
    assert r"\frac{11}{12}" in html
    assert raw_tex(html) == []


def test_a_labelers_own_labels_list_renders_the_problem_as_math(
    client, problem, make_solution, make_labeler
):
    # The same class on a labeler's page: the list of one's labels cut the problem's TeX.
    make_solution(problem, steps=["# Answer\n\n" + ANSWER], answer=ANSWER)
    me = make_labeler("me")
    label(me)
    client.force_login(me.user)
    html = client.get(reverse("my-labels")).content.decode()
    assert r"\frac{2}{3}" in html
    assert raw_tex(html) == []
