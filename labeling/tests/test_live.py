"""Phase-1 live labeling: proposals from the generator, rating, choosing, writing a step,
and the export in PRM800K phase 1's shape."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from generators import GeneratorSpec, SamplingSettings
from generators.models import LocalModel
from generators.prompts import step_answer
from labeling.models import Generation, LabelingSession, Problem, Solution, StepLabel, StepRating
from labeling.services import live
from labeling.services.workbench import LabelingRefused, next_session
from labeling.signals import solutions_added

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
PHASE1_LINE = json.loads((FIXTURES / "prm800k_phase1.jsonl").read_text().splitlines()[1])


class FakeGenerator:
    """A generator that answers from a script: for pure rule tests only."""

    replies: list[str] = []
    # Replies of the next calls, one list per call, before `replies` takes over.
    script: list[list[str]] = []
    seeds: list[list[int]] = []
    fail = False
    # What a failing call raises; its text names internal places a labeler must not see.
    failure: Exception | None = None
    calls = 0

    def __init__(self, spec):
        self.spec = spec

    def generate(self, *, requests, settings):
        FakeGenerator.calls += 1
        FakeGenerator.seeds.append([r.seed for r in requests])
        if FakeGenerator.fail:
            from generators import GeneratorUnavailable

            raise FakeGenerator.failure or GeneratorUnavailable("connection refused")
        replies = FakeGenerator.script.pop(0) if FakeGenerator.script else FakeGenerator.replies
        return [replies[i % len(replies)] for i in range(len(requests))]

    def close(self):
        pass


@pytest.fixture
def fake(monkeypatch, eager_tasks):
    monkeypatch.setattr(live, "open_generator", FakeGenerator)
    FakeGenerator.replies = ["Add the numbers: $2 + 2 = 4$.", "It is $5$.", "Guess $3$."]
    FakeGenerator.fail = False
    FakeGenerator.failure = None
    FakeGenerator.calls = 0
    FakeGenerator.script = []
    FakeGenerator.seeds = []
    return FakeGenerator


def make_generation(*, spec=None, k=3, max_tokens=40, problems=None) -> Generation:
    if problems is None:
        problems = [Problem.objects.create(text="What is $2 + 2$?", answer="4")]
    return live.create_live_generation(
        user=None,
        problem_ids=[p.pk for p in problems],
        generator=spec or GeneratorSpec(backend="openai", model="m", base_url="http://x/v1"),
        settings=SamplingSettings(temperature=0.7, max_tokens=max_tokens, seed=3),
        proposals=k,
    )


def serve(labeler, django_capture_on_commit_callbacks) -> LabelingSession:
    with django_capture_on_commit_callbacks(execute=True):
        served = next_session(labeler=labeler)
    assert served is not None and served.queue in ("live", "resumed")
    return served.session


def step_texts(session, index) -> list[str]:
    return list(
        StepRating.objects.filter(step__session=session, step__index=index)
        .order_by("completion_index")
        .values_list("text", flat=True)
    )


def export_lines() -> list[dict]:
    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def shape(record: dict) -> dict:
    return {
        "top": sorted(record),
        "question": sorted(record["question"]),
        "label": sorted(record["label"]),
        "step": sorted(record["label"]["steps"][0]),
        "completion": sorted(record["label"]["steps"][0]["completions"][0]),
    }


# --- rules (a scripted generator) -------------------------------------------------------------


def test_a_live_session_rates_chooses_writes_and_exports_phase1(
    fake, make_labeler, django_capture_on_commit_callbacks
):
    generation = make_generation()
    labeler = make_labeler("ann")
    session = serve(labeler, django_capture_on_commit_callbacks)
    assert session.generation == generation and session.solution.steps == []
    assert step_texts(session, 0) == fake.replies
    assert StepLabel.objects.get(session=session, index=0).extra["live"]["seed_offset"] == (
        live.seed_offset(session_id=session.pk, step_index=0)
    )
    # Rated but not all: no choice yet.
    live.rate_proposal(
        session_id=session.pk, labeler=labeler, step_index=0, completion_index=0, rating=1
    )
    with pytest.raises(LabelingRefused, match="Rate every proposal"):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=0
        )
    for c, r in ((1, -1), (2, 0)):
        live.rate_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=c, rating=r
        )
    with pytest.raises(LabelingRefused, match="rated \\+1 or 0"):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=1
        )
    with django_capture_on_commit_callbacks(execute=True):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=0
        )
    # A double submit of the same choice stores nothing twice.
    with django_capture_on_commit_callbacks(execute=True):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=0
        )
    assert StepLabel.objects.filter(session=session).count() == 2
    assert Solution.objects.get(pk=session.solution_id).steps == [fake.replies[0]]
    # All -1: a written step continues the trajectory; then the answer ends it.
    # (A proposal repeating the last step is left out: two come back.)
    assert step_texts(session, 1) == fake.replies[1:]
    for c in range(2):
        live.rate_proposal(
            session_id=session.pk, labeler=labeler, step_index=1, completion_index=c, rating=-1
        )
    fake.replies = ["# Answer\n\n4"]
    with django_capture_on_commit_callbacks(execute=True):
        live.write_step(session_id=session.pk, labeler=labeler, step_index=1, text="So it is 4.")
        live.write_step(session_id=session.pk, labeler=labeler, step_index=1, text="So it is 4.")
    assert step_texts(session, 2) == ["# Answer\n\n4"]
    live.rate_proposal(
        session_id=session.pk, labeler=labeler, step_index=2, completion_index=0, rating=1
    )
    # Scores of the path so far (a scoring ran meanwhile) do not survive a new step, and the
    # whole path is announced to the pool once it ends, so the active version scores it.
    Solution.objects.filter(pk=session.solution_id).update(prm_score=0.5, prm_step_scores=[0.5])
    added = []
    solutions_added.connect(lambda **kw: added.append(kw["count"]), weak=False, dispatch_uid="t")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            live.choose_proposal(
                session_id=session.pk, labeler=labeler, step_index=2, completion_index=0
            )
    finally:
        solutions_added.disconnect(dispatch_uid="t")
    assert added == [1]
    session.refresh_from_db()
    assert session.finish_reason == "solution" and session.is_submitted
    solution = Solution.objects.get(pk=session.solution_id)
    assert solution.answer == "4" and solution.is_correct
    assert solution.prm_score is None and solution.prm_step_scores is None
    [line] = export_lines()
    assert shape(line) == shape(PHASE1_LINE)
    steps = line["label"]["steps"]
    assert [s["chosen_completion"] for s in steps] == [0, None, 0]
    assert steps[1]["human_completion"]["text"] == "So it is 4."
    assert [c["rating"] for c in steps[0]["completions"]] == [1, -1, 0]


def test_two_trajectories_of_one_problem_do_not_collide(
    fake, make_labeler, django_capture_on_commit_callbacks
):
    make_generation()
    a = serve(make_labeler("a"), django_capture_on_commit_callbacks)
    b = serve(make_labeler("b"), django_capture_on_commit_callbacks)
    assert a.solution_id != b.solution_id
    # The same problem is not served twice to one labeler once finished.
    live.finish_live(
        session_id=a.pk, labeler=a.labeler, finish_reason="give_up", finish_reason_text="hard"
    )
    assert next_session(labeler=a.labeler) is None


def test_found_error_only_when_every_proposal_is_minus_one(
    fake, make_labeler, django_capture_on_commit_callbacks
):
    make_generation(k=2)
    labeler = make_labeler()
    session = serve(labeler, django_capture_on_commit_callbacks)
    live.rate_proposal(
        session_id=session.pk, labeler=labeler, step_index=0, completion_index=0, rating=-1
    )
    with pytest.raises(LabelingRefused, match="found_error"):
        live.finish_live(session_id=session.pk, labeler=labeler, finish_reason="found_error")
    live.rate_proposal(
        session_id=session.pk, labeler=labeler, step_index=0, completion_index=1, rating=-1
    )
    live.finish_live(session_id=session.pk, labeler=labeler, finish_reason="found_error")
    live.finish_live(session_id=session.pk, labeler=labeler, finish_reason="found_error")
    [line] = export_lines()
    assert line["label"]["finish_reason"] == "found_error"
    assert line["label"]["steps"][0]["chosen_completion"] is None
    assert line["label"]["steps"][0]["human_completion"] is None


@pytest.mark.parametrize(
    "failure",
    [
        "unavailable",
        "backend",
    ],
)
def test_a_generator_failure_shows_the_labeler_no_address_or_backend_text(
    failure, fake, make_labeler, client, django_capture_on_commit_callbacks, caplog
):
    from generators import GeneratorUnavailable

    secret = "http://10.1.2.3:8000/v1 said: token sk-operator-123"
    fake.fail = True
    fake.failure = (
        GeneratorUnavailable(f"The generator at {secret} did not answer.")
        if failure == "unavailable"
        else RuntimeError(secret)
    )
    make_generation()
    labeler = make_labeler("ann")
    session = serve(labeler, django_capture_on_commit_callbacks)
    client.force_login(labeler.user)
    page = client.get(reverse("label-session", args=[session.pk])).content.decode()
    assert "Try again" in page
    assert "10.1.2.3" not in page and "sk-operator" not in page and "RuntimeError" not in page
    # The operator still finds what happened in the worker's log.
    assert "10.1.2.3" in caplog.text


def test_a_generator_failure_is_shown_with_try_again(
    fake, make_labeler, client, django_capture_on_commit_callbacks
):
    fake.fail = True
    make_generation()
    labeler = make_labeler("ann")
    session = serve(labeler, django_capture_on_commit_callbacks)
    client.force_login(labeler.user)
    page = client.get(reverse("label-session", args=[session.pk]))
    assert page.status_code == 200
    assert b"The generator did not answer" in page.content and b"Try again" in page.content
    fake.fail = False
    with django_capture_on_commit_callbacks(execute=True):
        retried = client.post(reverse("live-retry", args=[session.pk]), {"step_index": 0})
    assert retried.status_code == 200
    assert step_texts(session, 0) == fake.replies


def test_another_labelers_session_is_404_and_bad_input_400(
    fake, make_labeler, make_user, django_capture_on_commit_callbacks, settings
):
    make_generation()
    owner = make_labeler("owner")
    session = serve(owner, django_capture_on_commit_callbacks)
    api = APIClient()
    api.force_authenticate(make_labeler("other").user)
    url = reverse("api-live-session", args=[session.pk])
    assert api.get(url).status_code == 404
    assert api.post(f"{url}rate/", {"step": 0, "completion": 0, "rating": 1}).status_code == 404
    api.force_authenticate(owner.user)
    bad = api.post(f"{url}rate/", {"step": 0, "completion": 0, "rating": 7}, format="json")
    assert bad.status_code == 400
    researcher = make_user("res", "researcher")
    api.force_authenticate(researcher)
    create = reverse("api-live-generations")
    problem = Problem.objects.first()
    body = {
        "problems": [problem.pk],
        "generator": {"backend": "nope", "model": "m"},
        "settings": {},
        "proposals": 3,
    }
    assert api.post(create, body, format="json").status_code == 400
    # A URL on the operator's allow-list (it resolves nowhere: the scripted generator answers).
    settings.GENERATOR_ALLOWED_BASE_URLS = ["http://x/v1"]
    body["generator"] = {"backend": "openai", "model": "m", "base_url": "http://x/v1"}
    body["proposals"] = 99
    assert api.post(create, body, format="json").status_code == 400
    body["proposals"] = 2
    made = api.post(create, body, format="json")
    assert made.status_code == 201, made.content
    assert Generation.objects.get(pk=made.json()["id"]).params["live"]["proposals"] == 2
    api.force_authenticate(owner.user)
    assert api.post(create, body, format="json").status_code == 403


def test_repeated_or_empty_proposals_are_drawn_again_with_new_seeds(
    fake, make_labeler, client, django_capture_on_commit_callbacks
):
    make_generation(k=2)
    labeler = make_labeler("ann")
    # The first round: an empty reply and a repeat of each other; then a new step.
    fake.script = [["", "Add: $2 + 2 = 4$."], ["Add: $2 + 2 = 4$.", "Add: $2 + 2 = 4$."]]
    fake.replies = ["It is $4$."]
    session = serve(labeler, django_capture_on_commit_callbacks)
    assert step_texts(session, 0) == ["Add: $2 + 2 = 4$.", "It is $4$."]
    # Each round asked only for what was missing, with seeds no earlier round used.
    assert [len(s) for s in fake.seeds] == [2, 1, 1]
    assert len({seed for call in fake.seeds for seed in call}) == 4
    for c in range(2):
        live.rate_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=c, rating=1
        )
    # Step 2: every reply repeats the chosen step, in every round: the step fails, and says so.
    fake.replies = ["Add: $2 + 2 = 4$."]
    fake.seeds = []
    with django_capture_on_commit_callbacks(execute=True):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=0
        )
    step = StepLabel.objects.get(session=session, index=1)
    assert step.extra["live"]["status"] == "failed" and not step_texts(session, 1)
    assert "repeated a step" in step.extra["live"]["error"]
    assert len(fake.seeds) == live.PROPOSAL_ROUNDS
    client.force_login(labeler.user)
    page = client.get(reverse("label-session", args=[session.pk]))
    assert b"repeated a step" in page.content and b"Try again" in page.content
    # Trying again draws new seeds (the old ones would repeat themselves again).
    tried = {seed for call in fake.seeds for seed in call}
    fake.replies = ["# Answer\n\n4"]
    fake.seeds = []
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("live-retry", args=[session.pk]), {"step_index": 1})
    assert step_texts(session, 1) == ["# Answer\n\n4"]
    assert not tried & {seed for call in fake.seeds for seed in call}


def test_the_configured_generator_is_the_default(make_user, settings, client):
    problem = Problem.objects.create(text="What is $2 + 2$?", answer="4")
    api = APIClient()
    api.force_authenticate(make_user("res", "researcher"))
    create = reverse("api-live-generations")
    body = {"problems": [problem.pk], "proposals": 2}
    settings.GENERATOR_MODEL = ""
    refused = api.post(create, body, format="json")
    assert refused.status_code == 400 and "GENERATOR_MODEL" in refused.json()["detail"]
    settings.GENERATOR_MODEL = "smol"
    settings.GENERATOR_BASE_URL = "http://gen:8000/v1"
    made = api.post(create, body, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["live"]["generator"] == {
        "backend": "openai",
        "model": "smol",
        "base_url": "http://gen:8000/v1",
    }
    # The form: the model left empty takes the configured generator too.
    client.force_login(make_user("res2", "researcher"))
    settings.GENERATOR_BASE_URL = ""
    form = {
        "problems": str(problem.pk),
        "proposals": 3,
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 64,
        "seed": 0,
    }
    assert client.post(reverse("live-generation-new"), form).status_code == 302
    newest = Generation.objects.order_by("-number").first()
    assert newest.params["live"]["generator"]["backend"] == "local"
    settings.GENERATOR_MODEL = ""
    page = client.post(reverse("live-generation-new"), form)
    assert page.status_code == 400 and b"GENERATOR_MODEL" in page.content
    # Nothing configured but a local model recorded (as `make models-smollm2` does): the
    # defaults take the newest one that generates text, not a PRM backbone (issue 43, item 9).
    LocalModel.objects.create(
        name="smol-chat", kind="checkpoint", path="a", architecture="LlamaForCausalLM"
    )
    LocalModel.objects.create(
        name="prm-backbone", kind="checkpoint", path="b", architecture="BertModel"
    )
    assert client.post(reverse("live-generation-new"), form).status_code == 302
    newest = Generation.objects.order_by("-number").first()
    assert newest.params["live"]["generator"] == {
        "backend": "local",
        "model": "smol-chat",
        "base_url": "",
    }


# --- the real generator -----------------------------------------------------------------------


def test_live_labeling_with_the_real_generator(
    generator_spec,
    make_labeler,
    settings,
    tmp_path,
    django_capture_on_commit_callbacks,
    eager_tasks,
):
    generation = make_generation(spec=generator_spec, k=2, max_tokens=64)
    labeler = make_labeler("ann")
    session = serve(labeler, django_capture_on_commit_callbacks)
    first = step_texts(session, 0)
    assert first, StepLabel.objects.get(session=session, index=0).extra
    assert all(text.strip() for text in first)
    recorded = StepLabel.objects.get(session=session, index=0).extra["live"]
    assert recorded["generator"] == generator_spec.to_dict()
    assert generation.params["live"]["sampling"]["max_tokens"] == 64
    # Continue from a proposal that is not already the answer step (for 2 + 2 SmolLM2 may
    # answer at once); when every one is, the labeler writes the first step instead.
    chosen = next((c for c, text in enumerate(first) if not step_answer(text)), None)
    for c in range(len(first)):
        live.rate_proposal(
            session_id=session.pk,
            labeler=labeler,
            step_index=0,
            completion_index=c,
            rating=1 if c == chosen else -1,
        )
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(2):  # the same choice twice is stored once
            if chosen is None:
                live.write_step(
                    session_id=session.pk, labeler=labeler, step_index=0, text="$2 + 2 = 4$."
                )
            else:
                live.choose_proposal(
                    session_id=session.pk, labeler=labeler, step_index=0, completion_index=chosen
                )
    step_one = "$2 + 2 = 4$." if chosen is None else first[chosen]
    second = step_texts(session, 1)
    assert second, StepLabel.objects.get(session=session, index=1).extra["live"]
    # No proposal repeats the step chosen before it (SmolLM2 often does; those are redrawn).
    assert step_one not in second
    for c in range(len(second)):
        live.rate_proposal(
            session_id=session.pk, labeler=labeler, step_index=1, completion_index=c, rating=-1
        )
    with django_capture_on_commit_callbacks(execute=True):
        live.write_step(session_id=session.pk, labeler=labeler, step_index=1, text="# Answer\n\n4")
    session.refresh_from_db()
    assert session.finish_reason == "solution"
    assert Solution.objects.get(pk=session.solution_id).is_correct
    [line] = export_lines()
    assert shape(line) == shape(PHASE1_LINE)
    assert [s["chosen_completion"] for s in line["label"]["steps"]] == [chosen, None]
    # The export re-imports, and exports again to the same line.
    LabelingSession.objects.all().delete()
    Solution.objects.all().delete()
    target = tmp_path / "live.jsonl"
    target.write_text(json.dumps(line) + "\n")
    call_command("import_prm800k", str(target), stdout=io.StringIO())
    assert export_lines() == [line]
