"""POST /api/score/: the active model version scores posted solutions, with the numbers a scoring
of the pool stores, for researchers and their tokens only."""

import pytest
from rest_framework.test import APIClient

from labeling.models import Problem, Solution
from trainer.models import ModelVersion
from trainer.scoring import posted as scoring_service
from trainer.scoring.store import score_and_store
from trainer.training import checkpoints
from trainer.training.ml.prm import PRM, PRMSettings, solution_score

pytestmark = pytest.mark.django_db

STEPS = [
    ["We add $2$ and $3$.", "So the answer is $5$.", "# Answer\n\n5"],
    ["Multiply both sides by $2$, so $x = 14$.", "# Answer\n\n14"],
]


@pytest.fixture
def active(tmp_path) -> ModelVersion:
    corpus = [text for steps in STEPS for text in steps] * 5
    prm = PRM.build(base_model=None, corpus=corpus, settings=PRMSettings(aggregation="min"), seed=5)
    prm.save(tmp_path / "run-1")
    scoring_service._loaded.clear()  # another test's version must not answer for this one
    return ModelVersion.objects.create(
        name="v1", checkpoint=str(tmp_path / "run-1"), is_active=True
    )


def client_of(make_user, role: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user(f"{role}-1", role))
    return client


def test_posted_solutions_get_the_scores_the_pool_stores(make_user, active):
    problem = Problem.objects.create(text="Solve it.", answer="5")
    stored = [
        Solution.objects.create(problem=problem, steps=steps, answer=str(i), is_correct=i == 0)
        for i, steps in enumerate(STEPS)
    ]
    score_and_store(
        prm=PRM.load(checkpoints.local_dir(active), device="cpu"),
        solution_ids=[s.pk for s in stored],
        model_version_id=active.pk,
    )
    body = {"solutions": [{"problem": "Solve it.", "steps": steps} for steps in STEPS]}

    answer = client_of(make_user, "researcher").post("/api/score/", body, format="json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["model_version"] == active.pk
    for solution, scored in zip(stored, answer.json()["solutions"], strict=True):
        solution.refresh_from_db()
        assert scored["step_scores"] == pytest.approx(solution.prm_step_scores, abs=1e-5)
        want = solution_score(scored["step_scores"], aggregation="min")
        assert scored["score"] == pytest.approx(want) and scored["truncated"] is False


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"solutions": []},
        {"solutions": [{"problem": "P", "steps": []}]},
        {"solutions": [{"problem": "P", "steps": [1, 2]}]},
        {"solutions": [{"problem": "P"}]},
        {"solutions": [{"problem": "P", "steps": ["s"]}] * (scoring_service.MAX_SOLUTIONS + 1)},
        {"solutions": [{"problem": "P", "steps": ["x" * (scoring_service.MAX_TEXT_CHARS + 1)]}]},
    ],
    ids=["empty", "none", "no-steps", "not-text", "no-steps-key", "too-many", "too-long"],
)
def test_a_malformed_body_is_a_400(make_user, active, body):
    answer = client_of(make_user, "researcher").post("/api/score/", body, format="json")

    assert answer.status_code == 400


def test_only_researchers_score_and_only_with_an_active_version(make_user, active):
    body = {"solutions": [{"problem": "P", "steps": ["s"]}]}

    assert APIClient().post("/api/score/", body, format="json").status_code == 401
    annotator = client_of(make_user, "annotator")
    assert annotator.post("/api/score/", body, format="json").status_code == 403
    ModelVersion.objects.update(is_active=False)
    refused = client_of(make_user, "researcher").post("/api/score/", body, format="json")
    assert refused.status_code == 409 and "No model version is active" in refused.json()["detail"]
