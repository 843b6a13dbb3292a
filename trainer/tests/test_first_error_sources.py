"""Agreement on the first-error position between label sources: human labels against rollout
labels (hard estimate) and imported labels of the same solutions, computed by hand, on
/quality/ and in the API; a further source is one entry of the registry."""

from dataclasses import replace

import pytest
from django.urls import reverse

from labeling import first_error
from labeling.models import LabelingSession, Problem, Solution
from trainer.models import ImportedLabel, JudgeLabel, JudgeRun, RolloutLabel, SamplingRun
from trainer.tests.test_inspection import rate
from trainer.training import label_sources

pytestmark = pytest.mark.django_db


def rollout_run() -> SamplingRun:
    return SamplingRun.objects.create(
        purpose=SamplingRun.Purpose.ROLLOUTS,
        status=SamplingRun.Status.SUCCEEDED,
        generator={"backend": "local", "model": "smollm2-135m-instruct", "base_url": ""},
        sampling={"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 0},
        samples=4,
    )


def store(run: SamplingRun, solution: Solution, reached: list[int]) -> None:
    """Rollout labels of the solution's first steps: `reached` of 4 rollouts each."""
    for index, hit in enumerate(reached):
        RolloutLabel.objects.create(
            solution=solution, index=index, sampling_run=run, rollouts=4, reached=hit
        )


def solution(n: int) -> Solution:
    problem = Problem.objects.create(text=f"What is ${n} + 1$?", answer=str(n + 1))
    steps = [f"Take {n}.", "Add one.", "That is it.", f"# Answer\n\n{n + 1}"]
    return Solution.objects.create(problem=problem, steps=steps, answer=str(n + 1))


@pytest.fixture
def case():
    """Four-step solutions A-H. Rollouts give how many of 4 reached the answer per step; the
    position is the first step none did, 4 when every step reached it.

    | solution | human            | rollouts (newest run)            | imported       |
    |----------|------------------|----------------------------------|----------------|
    | A        | [1, 1, -1]: 2    | reached 3, 2, 0, 0: 2            | [1, 1, -1]: 2  |
    | B        | [1, -1]: 1       | reached 4, 1, 0, 0: 2            |                |
    | C        | [1, 1, 1, 1]: 4  | reached 4, 4, 4, 1: 4            | [1, 1, 1, 1]: 4 (newest) |
    | D        | [-1]: 0          | reached 4, 4, 0, 0: 2            |                |
    | E        | [1, -1]: 1       | none                             |                |
    | F        | none             | reached 4, 0, 0, 0: 1            |                |
    | G        | [1], gave up     | reached 0, 0, 0, 0: 0            |                |
    | H        | [1, -1]: 1       | step 0 only (cancelled): none    |                |

    A also has an older rollout run saying 0 and C an older imported label saying 1: the
    newest of each counts.
    """
    s = {name: solution(n) for n, name in enumerate("ABCDEFGH")}
    for name, ratings in {
        "A": [1, 1, -1],
        "B": [1, -1],
        "C": [1, 1, 1, 1],
        "D": [-1],
        "E": [1, -1],
        "G": [1],
        "H": [1, -1],
    }.items():
        rate(s[name], "ann", ratings)
    LabelingSession.objects.filter(solution=s["G"]).update(
        finish_reason="give_up", finish_reason_text="Too long."
    )
    older = rollout_run()
    store(older, s["A"], [0, 0, 0, 0])
    run = rollout_run()
    reached = {"A": [3, 2, 0, 0], "B": [4, 1, 0, 0], "C": [4, 4, 4, 1], "D": [4, 4, 0, 0]}
    reached |= {"F": [4, 0, 0, 0], "G": [0, 0, 0, 0], "H": [4]}
    for name, hits in reached.items():
        store(run, s[name], hits)
    for row, (name, ratings) in enumerate(
        [("A", [1, 1, -1]), ("C", [1, -1]), ("C", [1, 1, 1, 1])], start=1
    ):
        ImportedLabel.objects.create(
            solution=s[name], format="processbench", file_name="pb.jsonl", row=row, ratings=ratings
        )
    return s


# Human against rollouts: pairs A (2, 2), B (1, 2), C (4, 4), D (0, 2); E, F have one source,
# G's human label is given up, H's rollouts stop short. Exact 2/4, within one step 3/4.
# Values 0, 1, 2, 2, 2, 2, 4, 4 (n = 8); every unit holds two values, so the observed
# disagreement is 2 * sum(delta) / 8.
# Interval: observed 2 * (0 + 1 + 0 + 4) / 8 = 10/8; expected 2 * sum over c < k of
# n_c n_k (c - k)^2 / (8 * 7) = 2 * (1 + 16 + 32 + 4 + 18 + 32) / 56 = 206/56; alpha = 0.660.
# Ordinal: n_0 = 1, n_1 = 1, n_2 = 4, n_4 = 2; delta(c, k) = (n from c to k - (n_c + n_k)/2)^2:
# (0,1) 1, (0,2) 12.25, (0,4) 42.25, (1,2) 6.25, (1,4) 30.25, (2,4) 9. Observed
# 2 * (6.25 + 12.25) / 8 = 37/8; expected 2 * (1 + 49 + 84.5 + 25 + 60.5 + 72) / 56 = 584/56;
# alpha = 1 - (37/8) / (584/56) = 0.557.
INTERVAL = 1 - (10 / 8) / (206 / 56)
ORDINAL = 1 - (37 / 8) / (584 / 56)


def pair(first: str, second: str) -> first_error.FirstErrorAgreement:
    return first_error.between(first_error.sources()[first], first_error.sources()[second])


def test_human_against_rollouts_gives_the_figures_computed_by_hand(case):
    figures = pair("human", "rollout")
    assert (figures.solutions, figures.pairs, figures.exact, figures.within_one) == (4, 4, 2, 3)
    assert figures.alpha_interval == pytest.approx(INTERVAL)
    assert figures.alpha_ordinal == pytest.approx(ORDINAL)


def test_imported_labels_pair_with_human_and_rollouts_on_the_solutions_both_decide(case):
    # A (2, 2) and C (4, 4), the newest imported label of C: perfect agreement.
    for first, second in (("human", "imported"), ("rollout", "imported")):
        figures = pair(first, second)
        assert (figures.pairs, figures.exact) == (2, 2), (first, second)
        assert figures.alpha_interval == pytest.approx(1.0)


def test_a_solution_several_labelers_labeled_counts_once_with_the_label_training_uses(case):
    # Ann's earliest label says step 0; Bob and Cy, later, say step 2, which training uses
    # (most votes). The imported label says 2 too: one more pair, and it agrees.
    extra = solution(99)
    for name, ratings in (("ann", [-1]), ("bob", [1, 1, -1]), ("cy", [1, 1, -1])):
        rate(extra, name, ratings)
    ImportedLabel.objects.create(
        solution=extra, format="processbench", file_name="pb.jsonl", row=9, ratings=[1, 1, -1]
    )
    figures = pair("human", "imported")
    assert (figures.pairs, figures.exact) == (3, 3)


def test_the_sources_are_read_through_the_registry_in_order(case):
    assert [s.name for s in label_sources.first_error_sources()] == ["rollout", "imported", "judge"]
    pairs = [(p.first.name, p.second.name) for p in first_error.between_sources()]
    assert pairs[:4] == [
        ("human", "rollout"),
        ("human", "imported"),
        ("human", "judge"),
        ("rollout", "imported"),
    ]


def test_quality_page_and_api_show_each_source_pair(client, make_user, case):
    client.force_login(make_user("rita", "researcher"))
    html = client.get(reverse("quality")).content.decode()
    row = html.split('data-first-error="human-rollout"')[1].split("</tr>")[0]
    assert "Human vs rollouts (hard)" in row
    assert '"pairs">4<' in row and '"exact">50%<' in row and '"within-one">75%<' in row
    assert '"alpha-interval">0.660<' in row and '"alpha-ordinal">0.557<' in row

    body = client.get(reverse("api-first-error-agreement")).json()
    by_pair = {(p["first"], p["second"]): p["figures"] for p in body["between_sources"]}
    assert by_pair["human", "rollout"]["within_one_rate"] == pytest.approx(3 / 4)
    assert by_pair["human", "rollout"]["alpha_ordinal"] == pytest.approx(ORDINAL)
    assert by_pair["human", "imported"]["pairs"] == 2
    # One labeler only: no pair between labelers.
    assert body["between_labelers"]["pairs"] == 0


def judge_run() -> JudgeRun:
    return JudgeRun.objects.create(
        generator={"backend": "local", "model": "smollm2-135m-instruct", "base_url": ""},
        sampling={"temperature": 0.2, "max_tokens": 768},
        prompt_version="judge-v1",
        format="per_step",
        status="succeeded",
    )


def test_judge_labels_pair_with_the_others_by_their_newest_run(case):
    s = {sol.steps[0]: sol for sol in Solution.objects.all()}
    a, b, c, d = (s[f"Take {n}."] for n in range(4))
    older, newest = judge_run(), judge_run()
    judged = {
        (older, d): [-1],
        (newest, a): [1, 1, -1],  # 2, as the human says
        (newest, b): [1, -1],  # 1, as the human says
        (newest, c): [1, 1, 1, 1],  # no error: 4, as the human says
        (newest, d): [1, 1, 1],  # the last step unrated: decides nothing, the older run neither
    }
    for (run, sol), ratings in judged.items():
        for index, rating in enumerate(ratings):
            JudgeLabel.objects.create(run=run, solution=sol, index=index, rating=rating)
    figures = pair("human", "judge")
    assert (figures.pairs, figures.exact) == (3, 3)
    assert figures.alpha_interval == pytest.approx(1.0)


def test_a_further_source_is_one_entry_of_the_registry(client, make_user, case):
    # A judge that finds the first error one step late on every solution it reads, registered
    # in the trainer's registry while the test runs: the quality page and API compare it.
    real = label_sources.source("judge")
    late = label_sources.FirstErrorReader(
        title="Judge",
        labeled=lambda: Solution.objects.filter(steps__isnull=False).values("pk"),
        positions=lambda *, solution_ids: {
            pk: position + 1
            for pk, position in first_error.HUMAN.positions(solution_ids=solution_ids).items()
        },
    )
    label_sources.register(replace(real, first_error=late))
    try:
        figures_with_a_late_judge(client, make_user)
    finally:
        label_sources.register(real)


def figures_with_a_late_judge(client, make_user) -> None:
    client.force_login(make_user("rita", "researcher"))
    body = client.get(reverse("api-first-error-agreement")).json()
    by_pair = {(p["first"], p["second"]): p["figures"] for p in body["between_sources"]}
    # Human positions of A, B, C, D, E, H against themselves plus one: never exact, all near.
    assert by_pair["human", "judge"]["pairs"] == 6
    assert by_pair["human", "judge"]["exact"] == 0 and by_pair["human", "judge"]["within_one"] == 6
    html = client.get(reverse("quality")).content.decode()
    assert 'data-first-error="rollout-judge"' in html and "Human vs judge" in html
