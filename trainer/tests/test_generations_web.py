"""Generation pages and POST /api/generations/: who may see and publish, what the pages show."""

from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError
from rest_framework.test import APIClient

from labeling.models import Generation, LabelingSession, Problem, Solution
from trainer.models import ModelVersion

pytestmark = pytest.mark.django_db

DOWN = OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


@pytest.fixture
def generation(make_labeler) -> Generation:
    """Generation 3: 4 to label (3 wrong answers), 1 QC; one labeler submitted 2 of them."""
    version = ModelVersion.objects.create(name="v7", checkpoint="/x", is_active=True)
    generation = Generation.objects.create(
        number=3, model_version=version, params={"strategy": "convincing_wrong_answer"}
    )
    problem = Problem.objects.create(text="What is 3+4?", answer="7")
    rows = [
        ("8", False, 0.9, "wrong_answer_convincing"),
        ("9", False, 0.8, "wrong_answer_convincing"),
        ("6", False, 0.7, "convincing"),
        ("7", True, 0.6, "convincing"),
        ("7 ", True, 0.5, "quality_control"),
    ]
    solutions = [
        Solution.objects.create(
            problem=problem,
            steps=[f"It is {answer}."],
            answer=answer.strip(),
            is_correct=correct,
            generation=generation,
            selection_model_version=version,
            selection_score=score,
            selection_reason=reason,
            is_quality_control=reason == "quality_control",
        )
        for answer, correct, score, reason in rows
    ]
    labeler = make_labeler("lab")
    now = timezone.now()
    for solution in (solutions[0], solutions[4]):
        LabelingSession.objects.create(
            labeler=labeler,
            solution=solution,
            generation=generation,
            is_quality_control=solution.is_quality_control,
            started_at=now,
            submitted_at=now,
            total_time=125_000,
            finish_reason="found_error",
        )
    LabelingSession.objects.create(
        labeler=labeler, solution=solutions[1], generation=generation, started_at=now
    )
    return generation


@pytest.fixture
def login(client, make_user):
    """`login(role)`: `client` logged in as a new user of that role."""

    def log_in(role: str):
        admin = role == "admin"
        user = make_user(f"{role}-user", role, is_staff=admin, is_superuser=admin)
        client.force_login(user)
        return user

    return log_in


@pytest.mark.parametrize("role,status", [("annotator", 403), ("researcher", 200), ("admin", 200)])
def test_generation_pages_are_for_researchers_and_admins(client, generation, role, status, login):
    login(role)
    for url in (
        reverse("generation-list"),
        reverse("generation-detail", args=[generation.pk]),
    ):
        assert client.get(url).status_code == status, url
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = client.post(reverse("generation-list"), {})
    assert response.status_code == (403 if role == "annotator" else 400)
    apply_async.assert_not_called()


def test_anonymous_users_are_sent_to_login(client, generation):
    response = client.get(reverse("generation-detail", args=[generation.pk]))
    assert response.status_code == 302 and "login" in response["Location"]


def test_a_missing_generation_is_404(client, login):
    login("researcher")
    assert client.get(reverse("generation-detail", args=[999])).status_code == 404


def test_the_generation_page_shows_composition_scores_labels_and_progress(
    client, generation, login
):
    login("researcher")
    page = client.get(reverse("generation-detail", args=[generation.pk])).content.decode()

    assert "Generation 3" in page and "v7" in page
    assert "5 solutions: 4 to label once, 1 quality control" in page
    assert "75% of the batch (3)" in page  # wrong answers among the 4
    assert "0.750" in page  # mean of 0.9, 0.8, 0.7, 0.6 (QC left out)
    assert "1 of 4 (25%); 2 labels submitted" in page
    assert "wrong_answer_convincing: 2" in page and "quality_control: 1" in page
    labeler = LabelingSession.objects.first().labeler
    row = page.split(f'data-labeler="{labeler.uuid}"')[1].split("</tr>")[0]
    cells = [c.split("</td>")[0].strip() for c in row.split("<td>")[1:]]
    assert cells[1:5] == ["2", "1 / 1", "1", "4 min"]
    assert "lab" not in cells[0]  # researchers see the UUID only


def test_admins_see_who_is_behind_a_labeler(client, generation, login):
    login("admin")
    page = client.get(reverse("generation-detail", args=[generation.pk])).content.decode()
    assert "<br>lab" in page


def test_the_list_shows_each_generation_and_the_nav_links_to_it(client, generation, login):
    login("researcher")
    page = client.get(reverse("generation-list")).content.decode()
    assert reverse("generation-detail", args=[generation.pk]) in page
    assert "75%" in page and "0.750" in page and "1 / 4" in page
    assert reverse("generation-list") in client.get(reverse("home")).content.decode()


def test_the_pages_poll_so_a_new_generation_and_new_labels_show_without_a_reload(
    client, generation, login, make_labeler
):
    login("researcher")
    page = client.get(reverse("generation-list")).content.decode()
    table_url = reverse("generation-table")
    assert f'hx-get="{table_url}" hx-trigger="every 5s"' in page
    # A worker publishes generation 4 while the page is open: the next poll shows it.
    Generation.objects.create(number=4, params={"strategy": "uniform"})
    table = client.get(table_url).content.decode()
    assert 'id="generation-table"' in table
    assert 'data-generation="4"' in table and "<html" not in table

    detail_url = reverse("generation-detail", args=[generation.pk])
    assert f'hx-get="{detail_url}?part=progress"' in client.get(detail_url).content.decode()
    # A second labeler submits one more: the polled part counts it.
    solution = Solution.objects.filter(generation=generation, is_quality_control=False)[1]
    now = timezone.now()
    LabelingSession.objects.create(
        labeler=make_labeler("lab2"),
        solution=solution,
        generation=generation,
        started_at=now,
        submitted_at=now,
        total_time=1000,
        finish_reason="solution",
    )
    progress = client.get(detail_url, {"part": "progress"}).content.decode()
    assert "2 of 4 labeled (50%); 3 labels submitted." in progress and "<html" not in progress


FORM = {
    "strategy": "uniform",
    "batch_size": 20,
    "per_problem_cap": 2,
    "wrong_share": 0.8,
    "quality_control_count": 1,
    "overlap_share": 0.25,
    "overlap_labelers": 3,
    "seed": 4,
    "judge_display": "confirm",
}


def test_the_publish_button_queues_a_selection_with_the_form_parameters(client, generation, login):
    login("researcher")
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = client.post(reverse("generation-list"), FORM)
    assert response.status_code == 302
    (version_id, params), *_ = apply_async.call_args.args
    assert version_id == generation.model_version_id
    assert params == {**FORM, "ensemble_members": 8, "ensemble_dropout": 0.1}  # left empty


def test_the_queued_notice_lasts_until_the_generation_it_announces_is_there(
    client, generation, login
):
    # Issue 30, point 11: a flash message said "queued" after the generation was in the table.
    login("researcher")
    with mock.patch("trainer.tasks.select_generation_task.apply_async"):
        client.post(reverse("generation-list"), FORM)
    table = reverse("generation-table")
    assert 'id="selection-pending"' in client.get(reverse("generation-list")).content.decode()
    assert 'id="selection-pending"' in client.get(table).content.decode()
    # A live labeling round is not the generation it announces.
    Generation.objects.create(number=90, mode=Generation.Mode.LIVE)
    assert 'id="selection-pending"' in client.get(table).content.decode()
    # The worker publishes it: the next poll of the table drops the notice, for good.
    Generation.objects.create(number=generation.number + 1)
    assert 'id="selection-pending"' not in client.get(table).content.decode()
    assert 'id="selection-pending"' not in client.get(reverse("generation-list")).content.decode()


def test_publishing_without_an_active_version_is_409(client, generation, login):
    ModelVersion.objects.update(is_active=False)
    login("researcher")
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = client.post(reverse("generation-list"), FORM)
    assert response.status_code == 409
    assert "No model version is active" in response.content.decode()
    apply_async.assert_not_called()


def test_publishing_with_the_broker_down_is_503(client, generation, login):
    login("researcher")
    with mock.patch("trainer.tasks.select_generation_task.apply_async", side_effect=DOWN):
        response = client.post(reverse("generation-list"), FORM)
    assert response.status_code == 503
    assert "broker is unreachable" in response.content.decode()


# --- the API ----------------------------------------------------------------------------------


@pytest.fixture
def api(make_user):
    """`api(role)`: an API client authenticated as a new user of that role."""

    def client_of(role: str) -> APIClient:
        client = APIClient()
        client.force_authenticate(make_user(f"{role}-api", role))
        return client

    return client_of


def test_post_generations_queues_selection_for_researchers(generation, api):
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        response = api("researcher").post(
            "/api/generations/", {"batch_size": 8, "strategy": "uncertainty"}, format="json"
        )
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["model_version"] == generation.model_version_id
    assert body["params"]["batch_size"] == 8 and body["params"]["strategy"] == "uncertainty"
    apply_async.assert_called_once_with(
        (generation.model_version_id, body["params"]), task_id=body["task_id"]
    )


@pytest.mark.parametrize(
    "setup,body,status",
    [
        ("annotator", {}, 403),
        ("no-active", {}, 409),
        ("broker-down", {}, 503),
        ("researcher", {"strategy": "best"}, 400),
        ("researcher", {"wrong_share": 2}, 400),
        ("researcher", {"batch_size": 0, "quality_control_count": 0}, 400),
    ],
)
def test_post_generations_statuses(generation, setup, body, status, api):
    if setup == "no-active":
        ModelVersion.objects.update(is_active=False)
    client = api("annotator" if setup == "annotator" else "researcher")
    with mock.patch(
        "trainer.tasks.select_generation_task.apply_async",
        side_effect=DOWN if setup == "broker-down" else None,
    ) as apply_async:
        response = client.post("/api/generations/", body, format="json")
    assert response.status_code == status, response.content
    if status != 503:
        apply_async.assert_not_called()
    assert Generation.objects.count() == 1
