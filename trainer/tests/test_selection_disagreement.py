"""The `disagreement` selection strategy: solutions whose first error the machine label sources
(newest rollout run, newest judge run, the selection's PRM) put furthest apart come first, the
rest after in seeded-random order; chosen through the API like every strategy."""

from collections import Counter
from unittest import mock

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Generation, Problem, Solution
from trainer.models import JudgeLabel, JudgeRun, ModelVersion, RolloutLabel, SamplingRun
from trainer.selection import services as selection
from trainer.selection.services import choose
from trainer.selection.strategies import Candidate

pytestmark = pytest.mark.django_db

GOOD, BAD = 0.9, 0.1  # PRM step scores either side of the 0.5 the metrics call bad


@pytest.fixture
def version() -> ModelVersion:
    return ModelVersion.objects.create(name="v1", checkpoint="/nowhere", is_active=True)


def rollout_run() -> SamplingRun:
    return SamplingRun.objects.create(
        purpose=SamplingRun.Purpose.ROLLOUTS,
        status=SamplingRun.Status.SUCCEEDED,
        generator={"backend": "local", "model": "smollm2-135m-instruct", "base_url": ""},
        sampling={"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 0},
        samples=4,
    )


def judge_run() -> JudgeRun:
    return JudgeRun.objects.create(
        generator={"backend": "local", "model": "smollm2-135m-instruct", "base_url": ""},
        sampling={"temperature": 0.2, "max_tokens": 768},
        prompt_version="judge-v1",
        format="per_step",
        status="succeeded",
    )


def rollouts(run: SamplingRun, solution: Solution, reached: list[int]) -> None:
    """`reached` of 4 rollouts per step: the first step with 0 is the rollouts' first error."""
    RolloutLabel.objects.bulk_create(
        RolloutLabel(solution=solution, index=i, sampling_run=run, rollouts=4, reached=hit)
        for i, hit in enumerate(reached)
    )


def judged(run: JudgeRun, solution: Solution, ratings: list[int]) -> None:
    JudgeLabel.objects.bulk_create(
        JudgeLabel(solution=solution, index=i, run=run, rating=rating)
        for i, rating in enumerate(ratings)
    )


def solution(name: str, version: ModelVersion, step_scores: list[float]) -> Solution:
    problem = Problem.objects.create(text=f"Problem {name}?", answer="7")
    return Solution.objects.create(
        problem=problem,
        steps=[f"{name} one.", f"{name} two.", f"{name} three.", "# Answer\n\n7"],
        answer="7",
        is_correct=True,
        prm_score=min(step_scores),
        prm_step_scores=step_scores,
        prm_model_version=version,
    )


@pytest.fixture
def pool(version) -> dict[str, Solution]:
    """Four-step solutions, one problem each; first-error positions (4: no error):

    | solution | rollouts (newest) | judge (newest) | PRM                         | spread |
    |----------|-------------------|----------------|-----------------------------|--------|
    | A        | 0                 | 4              | 2                           | 4      |
    | B        | 1                 | 3              | 4                           | 3      |
    | C        | 3                 |                | 1                           | 2      |
    | D        | 2                 | 3              | 2                           | 1      |
    | E        | 2                 | 2              | 2                           | 0      |
    | F        | 4 (older run: 0)  | 4 (older: 0)   | 4                           | 0      |
    | G        |                   | 0              | 2 of 4 steps scored: none   | none   |
    | H        |                   |                | 0                           | none   |

    C has no judge label, so its spread needs the PRM's position; G's PRM scores stop short
    of its last steps (cut to the model's context), so only the judge decides G.
    """
    scores = {
        "A": [GOOD, GOOD, BAD, BAD],
        "B": [GOOD] * 4,
        "C": [GOOD, BAD, BAD, BAD],
        "D": [GOOD, GOOD, BAD, GOOD],
        "E": [GOOD, GOOD, BAD, BAD],
        "F": [GOOD] * 4,
        "G": [GOOD, GOOD],
        "H": [BAD] * 4,
    }
    s = {name: solution(name, version, step_scores) for name, step_scores in scores.items()}
    older_rollouts, older_judge = rollout_run(), judge_run()
    rollouts(older_rollouts, s["F"], [0, 0, 0, 0])
    judged(older_judge, s["F"], [-1])
    newer_rollouts, newer_judge = rollout_run(), judge_run()
    for name, reached in {
        "A": [0, 0, 0, 0],
        "B": [4, 0, 0, 0],
        "C": [4, 4, 4, 0],
        "D": [4, 4, 0, 0],
        "E": [3, 1, 0, 0],
        "F": [4, 4, 4, 4],
    }.items():
        rollouts(newer_rollouts, s[name], reached)
    for name, ratings in {
        "A": [1, 1, 1, 1],
        "B": [1, 1, 1, -1],
        "D": [1, 1, 1, -1],
        "E": [1, 0, -1],
        "F": [1, 1, 1, 1],
        "G": [-1],
    }.items():
        judged(newer_judge, s[name], ratings)
    return s


def select(version, **params) -> Generation:
    return selection.select_generation(
        model_version=version,
        **{
            "strategy": "disagreement",
            "batch_size": 8,
            "per_problem_cap": 1,
            "quality_control_count": 0,
            **params,
        },
    )


def picked(generation: Generation, pool: dict[str, Solution]) -> list[str]:
    """The names of the generation's solutions in selection order (highest priority first)."""
    names = {s.pk: name for name, s in pool.items()}
    return [
        names[pk]
        for pk in Solution.objects.filter(generation=generation)
        .order_by("-priority")
        .values_list("pk", flat=True)
    ]


def test_the_most_disagreeing_come_first_then_the_rest(version, pool):
    generation = select(version)

    order = picked(generation, pool)
    assert order[:4] == ["A", "B", "C", "D"]
    # No disagreement (sources agree, or fewer than two decide): after, in seeded order.
    assert sorted(order[4:]) == ["E", "F", "G", "H"]
    reasons = dict(
        Solution.objects.filter(generation=generation).values_list("pk", "selection_reason")
    )
    assert [reasons[pool[name].pk] for name in order] == ["disagreement"] * 4 + ["uniform"] * 4
    assert generation.params["selected"] == {"disagreement": 4, "uniform": 4}


def test_a_batch_smaller_than_the_disagreeing_takes_the_most_disagreeing(version, pool):
    assert picked(select(version, batch_size=2), pool) == ["A", "B"]


def test_a_solution_one_source_decides_has_no_disagreement(version, pool):
    # G: the judge says step 0, the PRM scored only 2 of its 4 steps, both good: undecided,
    # not "no error". H: only the PRM labels it. Neither outranks D's one-step spread.
    order = picked(select(version), pool)
    assert order.index("D") < order.index("G") and order.index("D") < order.index("H")


def test_ties_are_broken_by_the_seed_the_same_way_every_time(version, pool):
    # Two more solutions with A's spread of 4 (rollouts 0, judge 4): A, I and J tie.
    for name in ("I", "J"):
        pool[name] = solution(name, version, [GOOD] * 4)
        rollouts(SamplingRun.objects.latest("pk"), pool[name], [0, 0, 0, 0])
        judged(JudgeRun.objects.latest("pk"), pool[name], [1, 1, 1, 1])

    def order(seed: int) -> list[str]:
        candidates = [
            Candidate(s.pk, s.problem_id, s.prm_score, s.is_correct, apart)
            for s, apart in (
                (pool["A"], 4.0),
                (pool["I"], 4.0),
                (pool["J"], 4.0),
                (pool["E"], 0.0),
                (pool["H"], None),
            )
        ]
        names = {s.pk: name for name, s in pool.items()}
        picks = choose(
            candidates=candidates,
            strategy="disagreement",
            batch_size=5,
            per_problem_cap=1,
            seed=seed,
        )
        return [names[p.candidate.solution_id] for p in picks]

    orders = {tuple(order(seed)) for seed in range(8)}
    assert all(set(o[:3]) == {"A", "I", "J"} and set(o[3:]) == {"E", "H"} for o in orders)
    assert len({o[:3] for o in orders}) > 1  # the seed decides among equals
    assert order(5) == order(5)

    # Published from the database the same: the same seed, the same generation.
    first = picked(select(version, seed=5, batch_size=3), pool)
    Solution.objects.update(generation=None, selection_reason="", priority=0.0)
    Generation.objects.all().delete()
    assert picked(select(version, seed=5, batch_size=3), pool) == first == order(5)[:3]


def test_the_per_problem_cap_holds_and_keeps_the_most_disagreeing_of_a_problem(version, pool):
    # A's problem gets a twin disagreeing as much and six solutions no source labels: with a
    # cap of 1 it gives one solution, a disagreeing one.
    problem = pool["A"].problem
    twin = solution("A2", version, [GOOD] * 4)
    Solution.objects.filter(pk=twin.pk).update(problem=problem, answer="8")
    rollouts(SamplingRun.objects.latest("pk"), twin, [0, 0, 0, 0])
    for i in range(6):
        Solution.objects.create(
            problem=problem,
            steps=[f"Plain {i}.", "# Answer\n\n7"],
            answer="7",
            prm_score=0.5,
            prm_step_scores=[GOOD, GOOD],
            prm_model_version=version,
        )
    for seed in range(3):
        generation = select(version, batch_size=3, seed=seed)
        members = Solution.objects.filter(generation=generation)
        assert max(Counter(members.values_list("problem_id", flat=True)).values()) == 1
        assert members.filter(problem=problem).get().pk in {pool["A"].pk, twin.pk}


def test_other_strategies_do_not_read_the_label_sources(version, pool):
    with mock.patch("trainer.selection.disagreement.disagreements") as read:
        select(version, strategy="uncertainty")
    read.assert_not_called()


def test_disagreement_is_chosen_through_the_api_and_the_form(version, pool, make_user):
    researcher = make_user("res", "researcher")
    api = APIClient()
    api.force_authenticate(researcher)
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = api.post(
            "/api/generations/",
            {
                "strategy": "disagreement",
                "batch_size": 3,
                "per_problem_cap": 1,
                "quality_control_count": 0,
                "seed": 1,
            },
            format="json",
        )
    assert response.status_code == 202, response.json()
    (version_id, params), *_ = apply_async.call_args.args
    assert params["strategy"] == "disagreement"

    generation = selection.execute_selection(model_version_id=version_id, params=params)

    assert picked(generation, pool) == ["A", "B", "C"]
    assert generation.params["strategy"] == "disagreement"

    client = api.__class__()
    client.force_login(researcher)
    page = client.get(reverse("generation-list")).content.decode()
    assert 'value="disagreement"' in page
