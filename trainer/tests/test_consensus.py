"""Consensus labels (issue 31, item 3): the rule worked out by hand, the training data built
from it, every label source side by side on the inspection page, and a training run on them."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from labeling.judge_display import JudgeShown
from labeling.models import Problem, Solution
from trainer.judging.models import JudgeLabel, JudgeRun
from trainer.models import ModelVersion, RolloutLabel, TrainingRun
from trainer.tests.test_inspection import rate
from trainer.tests.test_rollout_agreement import rollout_run, store
from trainer.training import consensus, label_sources, runs
from trainer.training.dataset import build_training_examples, step_label_counts
from trainer.training.params import InvalidParams, TrainingParams

pytestmark = pytest.mark.django_db

BOTH = ("rollout", "judge")


def rollout(reached: int, rollouts: int = 4) -> RolloutLabel:
    return RolloutLabel(index=0, rollouts=rollouts, reached=reached, answers=[])


def judge(rating: int) -> JudgeShown:
    return JudgeShown(rating=rating, reason="", run_id=1)


def verdict(sources=BOTH, **labels) -> consensus.Verdict:
    return consensus.step_verdict(consensus.StepLabels(**labels), sources=sources)


# --- the rule, by hand ----------------------------------------------------------------------------


def test_agreeing_sources_label_the_step_and_disagreeing_ones_do_not():
    # Rollouts reached nothing (bad) and the judge says -1: both bad.
    bad = verdict(rollout=rollout(0), judge=judge(-1))
    assert (bad.label, bad.origin, bad.reason) == (-1, "consensus", "rollout + judge agree")
    # 3 of 4 reached (not bad) and the judge's 0 is not bad either: +1, not 0.
    ok = verdict(rollout=rollout(3), judge=judge(0))
    assert (ok.label, ok.origin) == (1, "consensus")
    # One reached (not bad) against the judge's -1.
    split = verdict(rollout=rollout(1), judge=judge(-1))
    assert (split.label, split.origin, split.reason) == (None, "", "rollout and judge disagree")
    # The PRM: bad below 0.5; 0.5 itself is not bad.
    three = ("rollout", "judge", "prm")
    assert verdict(three, rollout=rollout(0), judge=judge(-1), prm=0.49).label == -1
    assert verdict(three, rollout=rollout(0), judge=judge(-1), prm=0.5).label is None


def test_a_missing_source_needs_two_others_to_decide_or_the_one_chosen():
    alone = verdict(rollout=rollout(0))
    assert alone.label is None and alone.reason == "only rollout decided (2 needed)"
    assert verdict(rollout=None).reason == "no source labels it"
    # Three chosen, the judge missing: the two that decided agree.
    two = verdict(("rollout", "judge", "prm"), rollout=rollout(2), prm=0.8)
    assert (two.label, two.decided) == (1, ("rollout", "prm"))
    # One source chosen decides alone.
    assert verdict(("prm",), prm=0.3).label == -1
    assert verdict(("judge",), judge=judge(1), prm=0.1).label == 1  # the PRM was not chosen


def test_a_human_rating_wins_wherever_present():
    human = verdict(human=0, rollout=rollout(0), judge=judge(-1))
    assert (human.label, human.origin, human.reason) == (0, "human", "human rating")
    assert verdict(human=-1, rollout=rollout(4), judge=judge(1)).label == -1


def test_an_example_stops_at_the_first_minus_one_or_the_first_unlabeled_step():
    ok, bad, none = (
        consensus.Verdict(label=1),
        consensus.Verdict(label=-1),
        consensus.Verdict(None),
    )
    assert [v.label for v in consensus.example_prefix([ok, ok, bad, ok])] == [1, 1, -1]
    assert [v.label for v in consensus.example_prefix([ok, none, bad])] == [1]
    assert consensus.example_prefix([none, ok]) == []


def test_the_sources_parameter_takes_any_order_and_refuses_unknown_sources():
    assert TrainingParams.from_dict({}).consensus_sources == "rollout,judge"
    given = TrainingParams.from_dict({"consensus_sources": "prm, judge"})
    assert given.consensus_sources == "judge,prm"
    assert label_sources.ordered_machine_names(given.consensus_sources) == ("judge", "prm")
    for bad in ("crowd", "rollout,crowd", "human,judge"):
        with pytest.raises(InvalidParams, match="consensus_sources must be one of"):
            TrainingParams.from_dict({"label_source": "consensus", "consensus_sources": bad})


# --- the training data ----------------------------------------------------------------------------


def judge_run(format: str = "per_step") -> JudgeRun:
    return JudgeRun.objects.create(
        generator={"backend": "openai", "model": "judge", "base_url": "http://judge/v1"},
        sampling={"temperature": 0.0, "max_tokens": 512},
        prompt_version="judge-v1",
        format=format,
        status="succeeded",
    )


def judged(run: JudgeRun, solution: Solution, ratings: list[int]) -> None:
    for index, rating in enumerate(ratings):
        JudgeLabel.objects.create(
            run=run, solution=solution, index=index, rating=rating, reason=f"Step {index}: $x^2$"
        )


def solution(problem: Problem, steps: int, name: str) -> Solution:
    texts = [f"{name} step {i}: $x_{i} = {i}$" for i in range(steps - 1)] + ["# Answer\n\n3"]
    return Solution.objects.create(problem=problem, steps=texts, answer="3", is_correct=False)


@pytest.fixture
def sources():
    """Five solutions of two problems, their labels worked out by hand.

    rollout run R (k=4) and per-step judge run J; default sources rollout + judge:
    - s1, no human: R reached 3,0,0,0; J +1,-1,-1,-1  -> +1 (agree), -1 (agree): [1, -1]
    - s2, human +1, 0 then stopped: R 4,4,0,0; J +1,-1,-1,-1 -> human 1, human 0 (the judge's
      -1 loses), step 2 both bad: [1, 0, -1], 2 human and 1 consensus
    - s3, no human: R 2,0,1; J +1,+1,+1 -> +1, then step 1 disagrees: [1]
    - s4, no human: only a first_error judge run F (+1, +1, -1, nothing after): one source
      decides, two needed: no example
    - s5, human +1, -1, no machine label: the human example as it is
    Counts: humans 2 (s2) + 2 (s5) = 4 steps; consensus 2 (s1) + 1 (s2) + 1 (s3) = 4.
    """
    one = Problem.objects.create(text="What is $1 + 2$?", answer="3", unique_id="t/c1.json")
    two = Problem.objects.create(text="What is $6 / 2$?", answer="3", unique_id="t/c2.json")
    s = {
        "s1": solution(one, 4, "s1"),
        "s2": solution(one, 4, "s2"),
        "s3": solution(two, 3, "s3"),
        "s4": solution(two, 3, "s4"),
        "s5": solution(two, 2, "s5"),
    }
    run, per_step, first_error = rollout_run(), judge_run(), judge_run("first_error")
    store(run, s["s1"], [(3, 4), (0, 4), (0, 4), (0, 1)])
    store(run, s["s2"], [(4, 4), (4, 4), (0, 4), (0, 1)])
    store(run, s["s3"], [(2, 4), (0, 4), (1, 1)])
    judged(per_step, s["s1"], [1, -1, -1, -1])
    judged(per_step, s["s2"], [1, -1, -1, -1])
    judged(per_step, s["s3"], [1, 1, 1])
    judged(first_error, s["s4"], [1, 1, -1])
    rate(s["s2"], "ann", [1, 0])
    rate(s["s5"], "ann", [1, -1])
    return s


def consensus_params(**more) -> TrainingParams:
    return TrainingParams.from_dict({"label_source": "consensus", **more})


def test_consensus_examples_by_hand(sources):
    s = sources
    examples = build_training_examples(params=consensus_params())
    assert [(e.solution_id, e.labels, e.source, e.consensus_steps) for e in examples] == [
        (s["s2"].pk, [1, 0, -1], "consensus", 1),  # human examples first, in session order
        (s["s5"].pk, [1, -1], "human", 0),
        (s["s1"].pk, [1, -1], "consensus", 2),  # then the others, in solution order
        (s["s3"].pk, [1], "consensus", 1),
    ]
    assert examples[0].steps == s["s2"].steps[:3]
    assert step_label_counts(examples) == {"human": 4, "consensus": 4}


def test_a_first_error_judge_labels_up_to_its_error_and_the_prm_is_the_active_versions(sources):
    s4 = sources["s4"]
    alone = build_training_examples(params=consensus_params(consensus_sources="judge"))
    assert [e.labels for e in alone if e.solution_id == s4.pk] == [[1, 1, -1]]
    # The judge and the active PRM: step 0 both ok, step 1 the PRM's 0.2 is bad: disagree.
    active = ModelVersion.objects.create(name="v1", checkpoint="/v1", is_active=True)
    Solution.objects.filter(pk=s4.pk).update(
        prm_step_scores=[0.9, 0.2, 0.1], prm_model_version=active
    )
    pair = build_training_examples(params=consensus_params(consensus_sources="judge,prm"))
    assert [e.labels for e in pair if e.solution_id == s4.pk] == [[1]]
    # Scores another version wrote are not the active PRM's: the judge alone decides, two
    # are needed.
    active.is_active = False
    active.save()
    ModelVersion.objects.create(name="v2", checkpoint="/v2", is_active=True)
    stale = build_training_examples(params=consensus_params(consensus_sources="judge,prm"))
    assert [e.labels for e in stale if e.solution_id == s4.pk] == []


def test_the_newest_runs_are_read(sources):
    s1 = sources["s1"]
    newer = rollout_run()
    store(newer, s1, [(0, 4), (0, 4), (0, 4), (0, 1)])  # step 0 now bad; the judge says +1
    examples = build_training_examples(params=consensus_params())
    assert s1.pk not in [e.solution_id for e in examples]


# --- the inspection page --------------------------------------------------------------------------


def test_the_page_shows_every_source_and_the_consensus_of_each_step(client, researcher, sources):
    s2 = sources["s2"]
    active = ModelVersion.objects.create(name="v1", checkpoint="/v1", is_active=True)
    Solution.objects.filter(pk=s2.pk).update(
        prm_step_scores=[0.9, 0.8, 0.3, 0.1], prm_model_version=active
    )
    judge_id = JudgeRun.objects.filter(format="per_step").get().pk
    html = client.get(reverse("solution-inspect", args=[s2.pk])).content.decode()
    assert f"Judge, run #{judge_id}" in html and ">Consensus<" in html
    rows = html.split('class="step-row')[1:]
    assert len(rows) == 4
    # Step 1: the human 0, rollouts 4/4 (hard +1), the judge's -1 with its reason (math
    # rendered), the PRM's 0.800, and the consensus: the human's 0.
    second = rows[1]
    assert "4/4" in second and "hard +1" in second and "soft 1.00" in second
    judge_cell = second.split('class="judge-label">')[1].split("</td>")[0]
    assert ">-1</span>" in judge_cell and 'class="math"' in judge_cell and "$x^2$" not in judge_cell
    assert "0.800" in second
    verdict_cell = second.split('class="consensus-verdict"')[1].split("</td>")[0]
    assert 'data-origin="human"' in verdict_cell and ">0</span>" in verdict_cell
    # Step 2: no human; rollouts and judge both bad.
    third = rows[2].split('class="consensus-verdict"')[1].split("</td>")[0]
    assert ">-1</span>" in third and "rollout + judge agree" in third
    # With the PRM chosen too: step 3's three sources agree.
    html = client.get(
        reverse("solution-inspect", args=[s2.pk]), {"consensus_sources": "rollout,judge,prm"}
    ).content.decode()
    last = html.split('class="step-row')[4].split('class="consensus-verdict"')[1]
    assert "rollout + judge + prm agree" in last.split("</td>")[0]
    bad = client.get(reverse("solution-inspect", args=[s2.pk]), {"consensus_sources": "crowd"})
    assert bad.status_code == 400


def test_the_page_of_a_solution_only_humans_labeled(client, researcher, sources):
    html = client.get(reverse("solution-inspect", args=[sources["s5"].pk])).content.decode()
    assert "Judge</th>" in html and ">Consensus<" in html and "Rollouts, run" not in html
    rows = html.split('class="step-row')[1:]
    assert len(rows) == 2
    for row in rows:
        assert 'class="judge-label"><span class="muted">–</span>' in row
        assert 'data-origin="human"' in row and "human rating" in row


def test_a_40_step_solution_shows_a_verdict_per_step(client, researcher, sources):
    problem = Problem.objects.get(unique_id="t/c1.json")
    long = solution(problem, 40, "long")
    run = rollout_run()
    store(run, long, [(1, 4)] * 39 + [(0, 1)])
    judged(judge_run(), long, [1] * 39 + [-1])
    html = client.get(reverse("solution-inspect", args=[long.pk])).content.decode()
    verdicts = [row.split("</tr>")[0] for row in html.split('class="step-row')[1:]]
    assert len(verdicts) == 40
    assert all("rollout + judge agree" in row for row in verdicts)
    assert ">-1</span> <small" in verdicts[-1]


# --- the parameter everywhere ---------------------------------------------------------------------


def test_a_bad_consensus_sources_value_is_refused_by_the_api_form_and_command(client, researcher):
    api = client.post(
        "/api/training-runs/",
        {"params": {"label_source": "consensus", "consensus_sources": "rollout,crowd"}},
        content_type="application/json",
    )
    assert api.status_code == 400
    assert "consensus_sources must be one of" in api.content.decode()
    page = client.post(
        reverse("training-run-list"), {"label_source": "consensus", "consensus_sources": "crowd"}
    )
    assert page.status_code == 400 and "consensus_sources must be one of" in page.content.decode()
    with pytest.raises(CommandError, match="consensus_sources must be one of"):
        call_command("train_prm", "--label-source", "consensus", "--consensus-sources", "crowd")
    assert not TrainingRun.objects.exists()
    ok = client.post(
        "/api/training-runs/",
        {"params": {"label_source": "consensus", "consensus_sources": "judge,rollout"}},
        content_type="application/json",
    )
    assert ok.status_code in (201, 202), ok.content
    assert TrainingRun.objects.get().params["consensus_sources"] == "rollout,judge"


# --- a real run -----------------------------------------------------------------------------------


@pytest.mark.slow  # trains a model: not in the fast lane
def test_a_training_run_on_consensus_labels_trains_on_the_expected_examples(
    sources, settings, tmp_path, client, researcher
):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    settings.PRM_PROMOTE_METRIC = "step_accuracy"
    run = runs.request_training_run(
        user=None,
        params={
            "label_source": "consensus",
            "epochs": 1,
            "batch_size": 4,
            "eval_fraction": 0.5,
        },
    )
    run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert run.dataset_size == 4  # s2, s5, s1, s3 (by hand, in the fixture)
    assert "Step labels: 4 human, 4 consensus." in run.log_tail
    assert run.step_labels == {"human": 4, "consensus": 4}
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert '<dd class="step-labels">4 human, 4 consensus</dd>' in page
    api = client.get(f"/api/training-runs/{run.pk}/").json()
    assert api["step_labels"] == {"human": 4, "consensus": 4}
    assert run.model_version is not None


@pytest.mark.django_db(transaction=True)
def test_a_40_step_page_with_every_source_fits_390_px_with_its_math_drawn(
    browser, live_server, make_user, sources
):
    problem = Problem.objects.get(unique_id="t/c1.json")
    long = solution(problem, 40, "long")
    store(rollout_run(), long, [(1, 4)] * 39 + [(0, 1)])
    judged(judge_run(), long, [1] * 39 + [-1])
    rate(long, "ann", [1] * 10)
    make_user("rita", "researcher")
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("rita-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/**")
    page.goto(f"{live_server.url}{reverse('solution-inspect', args=[long.pk])}")
    page.wait_for_function("!document.querySelector('.math[data-display]:not([data-rendered])')")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.locator("td.consensus-verdict").count() == 40
    assert page.locator("td.consensus-verdict[data-origin=human]").count() == 10
    assert "$" not in page.locator("td.judge-label").first.inner_text()
