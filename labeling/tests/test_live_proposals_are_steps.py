"""Live labeling stores as proposals only what is a step (issue 30, point 13): what a
generator writes around its step (a preamble, the problem asked again, the answer said as a
sentence) reaches the labeler as the step itself, or as the final "# Answer" step."""

import pytest

from generators import GeneratorSpec, SamplingSettings
from labeling.models import Problem, StepRating
from labeling.services import live
from labeling.services.workbench import next_session

pytestmark = pytest.mark.django_db

PROBLEM = "What is $40\\%$ of $65$?"
REPLIES = [
    "Here is the next part of the solution:\n\n$40\\%$ is $\\frac{2}{5}$.",
    "What is 40% of 65?\n\n$\\frac{2}{5} \\cdot 65 = 26$.",
    "This answer is $26$",
]


class ChattyGenerator:
    """Answers every request with the replies above, in turn, as a chat model might."""

    def __init__(self, spec):
        self.spec = spec

    def generate(self, *, requests, settings):
        return [REPLIES[i % len(REPLIES)] for i in range(len(requests))]

    def close(self):
        pass


def test_live_proposals_leave_out_preamble_restated_problem_and_answer_sentence(
    monkeypatch, eager_tasks, make_labeler, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(live, "open_generator", ChattyGenerator)
    problem = Problem.objects.create(text=PROBLEM, answer="26")
    live.create_live_generation(
        user=None,
        problem_ids=[problem.pk],
        generator=GeneratorSpec(backend="openai", model="m", base_url="http://x/v1"),
        settings=SamplingSettings(temperature=0.7, max_tokens=40, seed=3),
        proposals=3,
    )
    with django_capture_on_commit_callbacks(execute=True):
        session = next_session(labeler=make_labeler("ann")).session

    proposed = list(
        StepRating.objects.filter(step__session=session, step__index=0)
        .order_by("completion_index")
        .values_list("text", flat=True)
    )
    assert proposed == [
        "$40\\%$ is $\\frac{2}{5}$.",
        "$\\frac{2}{5} \\cdot 65 = 26$.",
        "# Answer\n\n$26$",
    ]
