"""The `ensemble_uncertainty` selection strategy: the solutions whose score the members of the
PRM's MC-dropout ensemble put furthest apart come first, the unscored after in seeded-random
order; the dropout masks come from the selection's seed; chosen through the API like every
strategy."""

from collections import Counter
from unittest import mock

import pytest
import torch
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Generation, Problem, Solution
from trainer.models import ModelVersion
from trainer.selection import ensemble
from trainer.selection import services as selection
from trainer.selection.pool import shortlist, unlabeled_pool
from trainer.selection.services import choose
from trainer.selection.strategies import Candidate, epistemic_uncertainty
from trainer.training import checkpoints
from trainer.training.ml.prm import PRM, member_masks

STEPS = [
    "We add $2$ and $3$ to get $5$.",
    "Multiply both sides by $2$, so $x = 14$.",
    "Subtract $7$ from both sides.",
    "Divide by $3$ and check the result.",
    "So the sum of the roots is $-b/a$.",
    "# Answer\n\n6",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    """A tiny PRM whose head is not near zero (an untrained one scores every step about 2/3,
    so its members would barely differ), saved where a model version can point."""
    prm = PRM.build(base_model=None, corpus=STEPS * 5, seed=4)
    with torch.no_grad():
        torch.nn.init.normal_(prm.module.head.weight, std=1.0)
    path = tmp_path_factory.mktemp("ensemble") / "v1"
    prm.save(path)
    return str(path)


@pytest.fixture
def version(db, checkpoint, settings) -> ModelVersion:
    settings.PRM_HEARTBEAT_SECONDS = 3600
    return ModelVersion.objects.create(name="v1", checkpoint=checkpoint, is_active=True)


@pytest.fixture
def pool(db) -> list[Solution]:
    """Four problems of five solutions, of 1 to 5 steps in different orders."""
    out = []
    for p in range(4):
        problem = Problem.objects.create(text=f"Problem {p}: find $x$.", answer="6")
        for n in range(5):
            steps = [STEPS[(p + n + i) % 5] for i in range(n + 1)] + [STEPS[5]]
            out.append(
                Solution.objects.create(problem=problem, steps=steps, answer="6", is_correct=True)
            )
    return out


def select(version, **params) -> Generation:
    return selection.select_generation(
        model_version=version,
        **{
            "strategy": "ensemble_uncertainty",
            "batch_size": 8,
            "per_problem_cap": 5,
            "quality_control_count": 0,
            **params,
        },
    )


def picked(generation: Generation) -> list[int]:
    """The generation's solution ids in selection order (highest priority first)."""
    return list(
        Solution.objects.filter(generation=generation)
        .order_by("-priority")
        .values_list("pk", flat=True)
    )


def unpublish() -> None:
    Solution.objects.update(generation=None, selection_reason="", priority=0.0)
    Generation.objects.all().delete()


# --- the strategy, on candidates given by hand ------------------------------------------------


def candidates(epistemic: dict[int, float | None], problem_of=lambda pk: pk) -> list[Candidate]:
    return [
        Candidate(pk, problem_of(pk), 0.5, True, epistemic=value) for pk, value in epistemic.items()
    ]


def test_the_most_uncertain_come_first_then_the_unscored_at_random():
    pool = candidates({1: 0.02, 2: 0.30, 3: None, 4: 0.11, 5: 0.0, 6: None})

    picks = choose(
        candidates=pool, strategy="ensemble_uncertainty", batch_size=6, per_problem_cap=1
    )

    order = [p.candidate.solution_id for p in picks]
    # 0.30 > 0.11 > 0.02 > 0.0 (measured, so still before the unscored), then 3 and 6.
    assert order[:4] == [2, 4, 1, 5]
    assert sorted(order[4:]) == [3, 6]
    assert [p.reason for p in picks] == ["uncertainty"] * 4 + ["uniform"] * 2
    # A batch smaller than the measured ones takes the most uncertain.
    two = choose(candidates=pool, strategy="ensemble_uncertainty", batch_size=2, per_problem_cap=1)
    assert [p.candidate.solution_id for p in two] == [2, 4]


def test_the_per_problem_cap_keeps_each_problems_most_uncertain():
    # Problems: 1-3 -> 10, 4-6 -> 20.
    pool = candidates(
        {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.1, 5: 0.2, 6: 0.3}, problem_of=lambda pk: 10 * (1 + pk // 4)
    )
    picks = choose(
        candidates=pool, strategy="ensemble_uncertainty", batch_size=4, per_problem_cap=2
    )
    assert [p.candidate.solution_id for p in picks] == [1, 2, 6, 5]

    # The shortlist read from a stream keeps what the whole pool gives.
    listed = shortlist(
        pool, strategy="ensemble_uncertainty", per_problem_cap=2, random_count=0, seed=0
    )
    assert {c.solution_id for c in listed.candidates} == {1, 2, 5, 6}


def test_ties_are_broken_by_the_seed_the_same_way_every_time():
    pool = candidates({pk: 0.25 for pk in range(1, 7)} | {7: 0.5})

    def order(seed: int) -> list[int]:
        picks = choose(
            candidates=pool,
            strategy="ensemble_uncertainty",
            batch_size=7,
            per_problem_cap=1,
            seed=seed,
        )
        return [p.candidate.solution_id for p in picks]

    orders = {tuple(order(seed)) for seed in range(8)}
    assert all(o[0] == 7 for o in orders)
    assert len(orders) > 1
    assert order(3) == order(3)


def test_the_uncertainty_is_the_spread_of_the_members_scores():
    assert epistemic_uncertainty([0.5, 0.5, 0.5]) == 0.0
    assert epistemic_uncertainty([0.2, 0.4]) == pytest.approx(0.1)


# --- MC dropout on the tiny PRM ---------------------------------------------------------------


def test_the_masks_come_from_the_seed():
    masks = member_masks(hidden_size=64, members=8, dropout=0.5, seed=3)
    assert masks.shape == (8, 64)
    assert set(masks.unique().tolist()) == {0.0, 2.0}  # dropped, or kept and scaled
    assert torch.equal(masks, member_masks(hidden_size=64, members=8, dropout=0.5, seed=3))
    assert not torch.equal(masks, member_masks(hidden_size=64, members=8, dropout=0.5, seed=4))
    assert torch.equal(
        member_masks(hidden_size=64, members=4, dropout=0.0, seed=3), torch.ones(4, 64)
    )
    with pytest.raises(ValueError):
        member_masks(hidden_size=64, members=1, dropout=0.1, seed=3)


@pytest.mark.django_db
def test_without_dropout_every_member_is_the_model_and_nothing_is_uncertain(version, pool):
    prm = PRM.load(checkpoints.local_dir(version))
    select(version, strategy="uniform")  # scores the pool with the version

    still = ensemble.uncertainties(
        pool=unlabeled_pool(), model_version=version, seed=0, prm=prm, members=8, dropout=0.0
    )
    unsure = ensemble.uncertainties(
        pool=unlabeled_pool(), model_version=version, seed=0, prm=prm, members=8, dropout=0.1
    )

    assert set(still) == set(unsure) == {s.pk for s in pool}
    assert set(still.values()) == {0.0}
    assert all(value > 0 for value in unsure.values())
    # The members without dropout are the model: its scores as stored.
    members = prm.member_step_scores(
        problems=[pool[7].problem.text], steps=[pool[7].steps], members=3, dropout=0.0, seed=0
    )[0]
    pool[7].refresh_from_db()
    for scores in members:
        assert scores == pytest.approx(pool[7].prm_step_scores, abs=1e-6)
    # Another seed draws other members: other values.
    other = ensemble.uncertainties(
        pool=unlabeled_pool(), model_version=version, seed=1, prm=prm, members=8, dropout=0.1
    )
    assert other != unsure


# --- published from the database --------------------------------------------------------------


@pytest.mark.django_db
def test_it_ranks_by_the_ensemble_not_by_the_score_nearest_half(version, pool):
    generation = select(version, batch_size=20, seed=2)
    unsure = ensemble.uncertainties(
        pool=unlabeled_pool(), model_version=version, seed=2, members=8, dropout=0.1
    )

    order = picked(generation)
    assert [unsure[pk] for pk in order] == sorted(unsure.values(), reverse=True)
    assert set(generation.params["selected"]) == {"uncertainty"}
    assert generation.params["ensemble"] == {"uncertain": 20}
    assert (generation.params["ensemble_members"], generation.params["ensemble_dropout"]) == (
        8,
        0.1,
    )
    unpublish()
    nearest_half = picked(select(version, strategy="uncertainty", batch_size=20, seed=2))
    assert order[:5] != nearest_half[:5]


@pytest.mark.django_db
def test_the_ensemble_is_the_one_the_selection_asks_for(version, pool):
    generation = select(version, batch_size=20, seed=2, ensemble_members=3, ensemble_dropout=0.4)
    unsure = ensemble.uncertainties(
        pool=unlabeled_pool(), model_version=version, seed=2, members=3, dropout=0.4
    )
    default = ensemble.uncertainties(
        pool=unlabeled_pool(), model_version=version, seed=2, members=8, dropout=0.1
    )
    assert unsure != default
    assert [unsure[pk] for pk in picked(generation)] == sorted(unsure.values(), reverse=True)
    assert (generation.params["ensemble_members"], generation.params["ensemble_dropout"]) == (
        3,
        0.4,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad",
    [
        {"ensemble_members": 1},
        {"ensemble_members": 65},
        {"ensemble_dropout": 0},
        {"ensemble_dropout": 1},
    ],
)
def test_an_ensemble_that_cannot_measure_anything_is_refused_with_a_400(bad, make_user):
    api = APIClient()
    api.force_authenticate(make_user("res", "researcher"))
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = api.post(
            "/api/generations/", {"strategy": "ensemble_uncertainty", **bad}, format="json"
        )
    assert response.status_code == 400
    assert next(iter(bad)) in response.json()
    apply_async.assert_not_called()


@pytest.mark.django_db
def test_the_same_seed_publishes_the_same_generation(version, pool):
    first = picked(select(version, seed=5))
    unpublish()
    assert picked(select(version, seed=5)) == first
    unpublish()
    assert any(picked(select(version, seed=seed)) != first for seed in (6, 7, 8))
    unpublish()


@pytest.mark.django_db
def test_the_per_problem_cap_holds_in_a_published_generation(version, pool):
    unsure = None
    for seed in range(2):
        generation = select(version, batch_size=8, per_problem_cap=2, seed=seed)
        members = Solution.objects.filter(generation=generation)
        per_problem = Counter(members.values_list("problem_id", flat=True))
        assert sorted(per_problem.values()) == [2, 2, 2, 2]
        # Each problem gives its two most uncertain.
        unsure = ensemble.uncertainties(
            pool=unlabeled_pool(), model_version=version, seed=seed, members=8, dropout=0.1
        )
        for problem_id in per_problem:
            ranked = sorted(
                (s.pk for s in pool if s.problem_id == problem_id), key=lambda pk: -unsure[pk]
            )
            assert set(members.filter(problem_id=problem_id).values_list("pk", flat=True)) == set(
                ranked[:2]
            )
        unpublish()


@pytest.mark.django_db
def test_other_strategies_do_not_run_the_ensemble(version, pool):
    with mock.patch("trainer.selection.ensemble.uncertainties") as run:
        select(version, strategy="uncertainty")
    run.assert_not_called()


@pytest.mark.django_db
def test_ensemble_uncertainty_is_chosen_through_the_api_and_the_form(version, pool, make_user):
    researcher = make_user("res", "researcher")
    api = APIClient()
    api.force_authenticate(researcher)
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = api.post(
            "/api/generations/",
            {
                "strategy": "ensemble_uncertainty",
                "batch_size": 3,
                "per_problem_cap": 1,
                "quality_control_count": 0,
                "seed": 1,
            },
            format="json",
        )
    assert response.status_code == 202, response.json()
    (version_id, params), *_ = apply_async.call_args.args
    assert params["strategy"] == "ensemble_uncertainty"

    generation = selection.execute_selection(model_version_id=version_id, params=params)

    reasons = Solution.objects.filter(generation=generation).values_list(
        "selection_reason", flat=True
    )
    assert list(reasons) == ["uncertainty"] * 3
    assert generation.params["strategy"] == "ensemble_uncertainty"

    client = api.__class__()
    client.force_login(researcher)
    page = client.get(reverse("generation-list")).content.decode()
    assert 'value="ensemble_uncertainty"' in page
