"""Rollout labels by first-error search (OmegaPRM): a binary search over a solution's prefixes
for the first step that can no longer reach the right answer, stored with the steps it only
implied marked; the run's cost (generator calls, completion tokens); its agreement with
every-step labels; the option on the page, the API and the command line; and a search run
with the real SmolLM2."""

import itertools
import math
import re
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from generators import GeneratorSpec, SamplingSettings, Usage
from labeling.agreement import Label
from labeling.models import Problem, Solution
from trainer.models import RolloutLabel, SamplingRun
from trainer.sampling import rollout_agreement
from trainer.sampling import services as sampling
from trainer.sampling.rollouts import estimate_solution, rollout_labels_of
from trainer.sampling.selectors import first_error, search_agreement

pytestmark = pytest.mark.django_db

K = 4
FAKE = GeneratorSpec(backend="openai", model="known", base_url="http://known.invalid/v1")
SETTINGS = SamplingSettings(max_tokens=32, seed=5)
MARK = re.compile(r"step-(\d+)-mark")
TAG = re.compile(r"problem-\d+")
TAGS = itertools.count(1)


@pytest.fixture(autouse=True)
def known_url_allowed(settings):
    settings.GENERATOR_ALLOWED_BASE_URLS = [FAKE.base_url]


class Known:
    """A generator whose reachability is known: a prefix ending at step i of a solution to a
    problem whose text holds `tag` reaches the answer when `reaches(i, tag)`, and then exactly
    one of any k consecutive seeds does (the others answer wrong), so "reaches" means "at
    least one of k". Records its batches (the prefixes
    of each call of `generate`) and reports a token count per reply in `usage`, as a real
    backend does."""

    def __init__(self, reaches, *, with_usage: bool = True) -> None:
        self.spec = FAKE
        self.reaches = reaches
        self.batches: list[list[int]] = []
        if with_usage:
            self.usage = Usage()

    def generate(self, *, requests, settings):
        texts, prefixes = [], set()
        for request in requests:
            prompt = request.messages[-1]["content"]
            index = max(int(i) for i in MARK.findall(prompt))
            tag = TAG.search(prompt)
            good = self.reaches(index, tag.group(0) if tag else "") and request.seed % K == 0
            texts.append(f"So on.\n\n# Answer\n\n{'5' if good else '7'}")
            prefixes.add(index)
        self.batches.append(sorted(prefixes))
        if hasattr(self, "usage"):
            for text in texts:
                self.usage.add(tokens=len(text.split()))
        return texts

    def close(self) -> None:
        pass


def make_solution(n: int, *, correct: bool | None, problem: Problem | None = None) -> Solution:
    if problem is None:
        # Tagged, so a generator can tell which solution a prefix is of.
        tag = f"problem-{next(TAGS)}"
        problem = Problem.objects.create(text=f"What is $2 + 3$? {tag}", answer="5")
    steps = [f"We do step-{i}-mark." for i in range(n - 1)]
    answer = "5" if correct else "7"
    return Solution.objects.create(
        problem=problem,
        steps=[*steps, f"# Answer\n\n{answer}"],
        answer=answer,
        is_correct=correct,
    )


def rollout_run(search: str) -> SamplingRun:
    return SamplingRun.objects.create(
        purpose="rollouts",
        search=search,
        generator=FAKE.to_dict(),
        sampling=SETTINGS.to_dict(),
        samples=K,
    )


def label(run, solution, generator) -> dict[int, RolloutLabel]:
    labels = estimate_solution(run=run, solution=solution, generator=generator, settings=SETTINGS)
    RolloutLabel.objects.bulk_create(labels)
    return {lab.index: lab for lab in RolloutLabel.objects.filter(sampling_run=run)}


def cases():
    """(steps, first bad step or None, graded correct): every position of the first error,
    none, a one-step solution, the answer step itself, ungraded solutions."""
    for n in range(1, 10):
        yield n, None, True  # a correct solution: nothing is bad
        for bad in range(n):  # a wrong one: its answer step is bad at the latest
            yield n, bad, False
        for bad in [*range(n - 1), None]:  # ungraded: the answer step decides nothing
            yield n, bad, None


@pytest.mark.parametrize(("n", "bad", "correct"), list(cases()))
def test_the_search_finds_the_first_bad_step_in_log_batches(n, bad, correct):
    solution = make_solution(n, correct=correct)
    reaches = lambda i, _: bad is None or i < bad  # noqa: E731 (monotone, as the search assumes)
    every, searched = Known(reaches), Known(reaches)
    full = label(rollout_run("every_step"), solution, every)
    found = label(rollout_run("first_error"), solution, searched)

    assert first_error(found) == first_error(full) == bad
    # Binary search: one prefix per batch, at most ceil(log2 n) of them (every step: n - 1).
    assert all(len(batch) == 1 for batch in searched.batches)
    assert len(searched.batches) <= (math.ceil(math.log2(n)) if n > 1 else 0)
    assert every.usage.calls == K * (n - 1)
    assert searched.usage.calls == K * len(searched.batches) <= every.usage.calls
    if n >= 4:
        assert searched.usage.calls < every.usage.calls
    if correct:
        assert not searched.batches  # the answer step reaches: every step is implied good

    # Labels from step 0 without a gap up to and including the first bad one, and every
    # step rolled out (or known: the answer step) after it.
    last = n - 1
    probed = {batch[0] for batch in searched.batches}
    known = {last} if correct is not None else set()
    end = bad + 1 if bad is not None else n
    assert set(found) == (set(range(end)) - {last} | known | probed)
    for index, lab in found.items():
        assert (lab.reached > 0) == (bad is None or index < bad)
        if lab.implied:
            # Implied by a later step that reached; that step's counts, no answers of its own.
            source = found[lab.implied_by]
            assert lab.implied_by > index and source.reached and not source.implied
            assert (lab.rollouts, lab.reached, lab.answers) == (source.rollouts, source.reached, [])
        elif index == last:
            assert (lab.rollouts, lab.answers) == (1, [solution.answer])
        else:
            assert [index] in searched.batches and lab.rollouts == K == len(lab.answers)
    rolled = {i for i, lab in found.items() if not lab.implied and i != last}
    assert rolled == probed


def test_a_resumed_search_labels_a_solution_once():
    solution = make_solution(6, correct=False)
    run = rollout_run("first_error")
    label(run, solution, Known(lambda i, _: i < 2))
    again = Known(lambda i, _: i < 2)
    assert estimate_solution(run=run, solution=solution, generator=again, settings=SETTINGS) == []
    assert again.batches == []


def test_the_database_refuses_an_implied_label_that_is_bad_or_implied_by_an_earlier_step():
    from django.db import IntegrityError, transaction

    solution = make_solution(4, correct=False)
    run = rollout_run("first_error")
    for bad in ({"implied_by": 1, "reached": 0}, {"implied_by": 2, "reached": 1}):
        with pytest.raises(IntegrityError), transaction.atomic():
            RolloutLabel.objects.create(
                solution=solution, index=2, sampling_run=run, rollouts=K, **bad
            )
    with pytest.raises(IntegrityError), transaction.atomic():
        SamplingRun.objects.create(
            purpose="solutions", search="first_error", generator={}, sampling={}, samples=1
        )


# --- runs: cost and agreement -----------------------------------------------------------------


def run_through_service(generator, solutions, *, search: str) -> SamplingRun:
    run = sampling.request_sampling_run(
        user=None,
        purpose="rollouts",
        generator=FAKE,
        settings=SETTINGS,
        samples=K,
        solution_ids=[s.pk for s in solutions],
        search=search,
        enqueue=False,
    )
    with mock.patch.object(sampling, "open_generator", lambda spec: generator):
        return sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")


def test_a_search_run_records_its_cost_and_costs_less_than_every_step():
    solutions = [
        make_solution(9, correct=False),
        make_solution(12, correct=None),
        make_solution(7, correct=True),
    ]
    first_bad = {TAG.search(solutions[i].problem.text).group(0): bad for i, bad in [(0, 3), (1, 8)]}

    def reaches(index, tag):
        return index < first_bad.get(tag, 99)

    every_gen, search_gen = Known(reaches), Known(reaches)
    every = run_through_service(every_gen, solutions, search="every_step")
    searched = run_through_service(search_gen, solutions, search="first_error")
    assert every.status == searched.status == "succeeded"
    # The cost on the run is what the generator was asked and reported.
    for finished, gen in ((every, every_gen), (searched, search_gen)):
        assert finished.generator_calls == gen.usage.calls
        assert finished.completion_tokens == gen.usage.completion_tokens > 0
        assert finished.tokens_unreported == 0
    assert every.generator_calls == K * (8 + 11 + 6)
    assert searched.generator_calls == K * len(search_gen.batches) <= K * (3 + 4 + 0)
    assert searched.search == "first_error" and every.search == "every_step"

    agreement = search_agreement(run=searched)
    assert agreement.solutions == 3 and agreement.compared_with == [every.pk]
    assert agreement.first_error_agreement == 1.0
    assert agreement.per_step_agreement == 1.0 and agreement.implied_pairs > 0
    assert search_agreement(run=every) is None


def test_agreement_counts_where_monotonicity_fails_and_the_search_missed_it():
    """Step 1 cannot reach but step 2 can again: the search, probing step 2 first, never sees
    step 1, implies it good and finds the first error later than every-step labels do."""
    solution = make_solution(5, correct=False)  # steps 0..3 and the answer step 4
    reaches = lambda i, _: i in (0, 2)  # noqa: E731
    run_through_service(Known(reaches), [solution], search="every_step")
    searched = run_through_service(Known(reaches), [solution], search="first_error")
    found = rollout_labels_of([solution.pk], run=searched)[solution.pk][searched.pk]
    assert found[1].implied and found[1].implied_by == 2 and first_error(found) == 3
    agreement = search_agreement(run=searched)
    assert agreement.solutions == 1 and agreement.first_error_agreed == 0
    assert agreement.implied_pairs == 2 and agreement.implied_agreed == 1  # steps 0 and 1
    assert agreement.step_pairs == 5 and agreement.steps_agreed == 4  # all but step 1


def test_a_generator_that_reports_no_tokens_leaves_its_calls_counted_as_unreported():
    solution = make_solution(9, correct=False)
    run = run_through_service(
        Known(lambda i, _: i < 5, with_usage=False), [solution], search="first_error"
    )
    assert run.generator_calls == 3 * K  # ceil(log2 9) = 4 at most; here 3 probes
    assert run.completion_tokens == 0 and run.tokens_unreported == run.generator_calls


def test_a_search_run_decides_the_first_error_against_human_labels_too():
    """A search run labels up to its first bad step only: that still decides its first error,
    so the comparison with a complete human label counts it."""
    solution = make_solution(6, correct=False)
    run = run_through_service(Known(lambda i, _: i < 2), [solution], search="first_error")
    labels = rollout_labels_of([solution.pk], run=run)[solution.pk][run.pk]
    human = Label(
        session_id=1,
        solution_id=solution.pk,
        labeler_id=1,
        generation_id=None,
        finish_reason="found_error",
        submitted_at=timezone.now(),
        adjudicated=False,
        ratings={0: 1, 1: 1, 2: -1},
    )
    agreement = rollout_agreement.compare(
        human=[human], rollout={i: (x.reached, x.rollouts) for i, x in labels.items()}, steps=6
    )
    assert agreement.first_error_pairs == 1 and agreement.first_error_agreed == 1


# --- the option at the edges ------------------------------------------------------------------


def test_the_page_starts_a_search_run_and_shows_its_cost_and_agreement(client, make_user):
    solution = make_solution(9, correct=False)
    client.force_login(make_user("rita", "researcher"))
    page = client.get(reverse("sampling-list")).content.decode()
    assert 'name="search"' in page and "First-error search" in page
    form = {
        "purpose": "rollouts",
        "solution_ids": str(solution.pk),
        "limit": 20,
        "samples": K,
        "search": "first_error",
        "backend": "openai",
        "model": FAKE.model,
        "base_url": FAKE.base_url,
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 32,
        "seed": 5,
    }
    with mock.patch("core.jobs.queue_task"):
        response = client.post(reverse("sampling-list"), form)
    assert response.status_code == 302
    run = SamplingRun.objects.get()
    assert run.search == "first_error"
    run_through_service(Known(lambda i, _: i < 4), [solution], search="every_step")
    with mock.patch.object(sampling, "open_generator", lambda spec: Known(lambda i, _: i < 4)):
        sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")
    run.refresh_from_db()
    page = client.get(response.url).content.decode()
    assert "by first-error search" in page
    assert f"{run.generator_calls} generator calls, {run.completion_tokens} completion" in page
    assert "Same first error</dt><dd>1 of 1" in page
    # The solution page tells an implied label from a rolled-out one (steps shown from 1).
    page = client.get(reverse("solution-inspect", args=[solution.pk])).content.decode()
    assert page.count("implied by step 3</small>") == 2  # steps 1 and 2, by the probe of 3

    # Refused with 400, nothing recorded: an unknown search; a search over solutions.
    for bad in ({"search": "sideways"}, {"purpose": "solutions", "problem_ids": "1"}):
        Problem.objects.get_or_create(pk=1, defaults={"text": "1 + 1?", "answer": "2"})
        response = client.post(reverse("sampling-list"), {**form, **bad})
        assert response.status_code == 400, bad
    assert SamplingRun.objects.count() == 2


def test_the_api_takes_the_search_and_shows_the_cost(client, make_user):
    solution = make_solution(5, correct=False)
    client.force_login(make_user("rita", "researcher"))
    body = {
        "purpose": "rollouts",
        "solution_ids": [solution.pk],
        "samples": K,
        "generator": FAKE.to_dict(),
        "search": "first_error",
    }
    with mock.patch("core.jobs.queue_task"):
        created = client.post("/api/sampling-runs/", body, content_type="application/json")
        assert created.status_code == 201, created.json()
        problem = solution.problem
        for bad, key in (
            ({"search": "sideways"}, "search"),
            ({"search": 3}, "search"),
            ({"purpose": "solutions", "solution_ids": [], "problem_ids": [problem.pk]}, None),
        ):
            response = client.post(
                "/api/sampling-runs/", {**body, **bad}, content_type="application/json"
            )
            assert response.status_code == 400, bad
            assert key is None or key in response.json()
    assert SamplingRun.objects.count() == 1
    run = SamplingRun.objects.get()
    with mock.patch.object(sampling, "open_generator", lambda spec: Known(lambda i, _: i < 1)):
        sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")
    data = client.get(f"/api/sampling-runs/{run.pk}/").json()
    assert data["search"] == "first_error"
    assert data["generator_calls"] == 3 * K  # 4 steps before the answer: probes 2, 1, 0
    assert data["completion_tokens"] > 0 and data["tokens_unreported"] == 0


def test_the_command_takes_the_search(capsys):
    solution = make_solution(9, correct=False)
    with mock.patch.object(sampling, "open_generator", lambda spec: Known(lambda i, _: i < 6)):
        call_command(
            "sample",
            "--rollouts",
            str(solution.pk),
            "--search",
            "first_error",
            "--samples",
            str(K),
            "--backend",
            FAKE.backend,
            "--model",
            FAKE.model,
            "--base-url",
            FAKE.base_url,
        )
    run = SamplingRun.objects.get()
    assert run.search == "first_error" and run.generator_calls == 3 * K
    assert f"{run.generator_calls} generator calls" in capsys.readouterr().out
    with pytest.raises(CommandError, match="search must be one of"):
        call_command("sample", "--rollouts", str(solution.pk), "--search", "sideways")


# --- the real generator -----------------------------------------------------------------------


def test_a_first_error_search_run_with_the_real_generator_records_its_cost(generator_spec):
    problem = Problem.objects.create(text="What is $2 + 3$?", answer="5")
    solutions = [
        Solution.objects.create(
            problem=problem,
            steps=["We multiply $2$ and $3$.", "$2 \\cdot 3 = 6$.", "So it is 6.", "# Answer\n\n6"],
            answer="6",
            is_correct=False,
        ),
        Solution.objects.create(
            problem=problem, steps=["$2 + 3 = 5$.", "# Answer\n\n5"], answer="5", is_correct=True
        ),
    ]
    real = SamplingSettings(temperature=0.8, top_p=0.95, max_tokens=32, seed=7)
    run = sampling.request_sampling_run(
        user=None,
        purpose="rollouts",
        generator=generator_spec,
        settings=real,
        samples=2,
        solution_ids=[s.pk for s in solutions],
        search="first_error",
        enqueue=False,
    )
    run = sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")
    assert run.status == "succeeded", run.error
    labels = rollout_labels_of([s.pk for s in solutions], run=run)
    wrong = labels[solutions[0].pk][run.pk]
    # From step 0 without a gap to the first bad step (the answer step at the latest); after
    # it only steps rolled out (or the answer step), bad ones.
    bad = first_error(wrong)
    assert bad is not None and set(range(bad + 1)) <= set(wrong)
    assert all(not x.reached and not x.implied for i, x in wrong.items() if i > bad)
    rolled = [x for i, x in wrong.items() if not x.implied and i != 3]
    assert 1 <= len(rolled) <= 2 and all(x.rollouts == 2 == len(x.answers) for x in rolled)
    # The correct solution: its answer step reaches, both steps good, nothing generated.
    right = labels[solutions[1].pk][run.pk]
    assert right[0].implied_by == 1 and right[1].reached == 1
    # Cost: one call per rollout drawn, the tokens the backend reported for each.
    assert run.generator_calls == 2 * len(rolled)
    assert run.tokens_unreported == 0
    assert run.generator_calls <= run.completion_tokens <= run.generator_calls * 32
    assert run.generator == generator_spec.to_dict()
