"""A new label source is one module: this test module declares a toy one ("toy", a machine
that calls a step bad when its text says "wrong") and registers it, and with no other edit it
is offered and read everywhere sources are: the training form, the API, `train_prm`, the
dataset and a run's counts, the consensus (its choices, training data and the solution page),
the quality page's first-error figures and the `disagreement` strategy.

The built-in sources are modules of `trainer/training/label_sources/` like this one."""

import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Q
from django.urls import reverse

from labeling.models import Problem, Solution
from trainer.forms import TrainingRunForm
from trainer.models import TrainingRun
from trainer.selection.disagreement import disagreements
from trainer.tests.test_inspection import rate
from trainer.training import consensus, label_sources
from trainer.training.dataset import Example, labeled_examples, step_label_counts
from trainer.training.params import InvalidParams, TrainingParams

pytestmark = pytest.mark.django_db


# --- the toy source: everything a source is, in one place ------------------------------------


def toy_ratings(steps: list[str]) -> dict[int, int]:
    """+1 for each step up to the first that says "wrong", -1 there, nothing after."""
    found = {}
    for index, text in enumerate(steps):
        found[index] = -1 if "wrong" in text else 1
        if found[index] == -1:
            break
    return found


def toy_examples(*, params) -> list[Example]:
    examples = []
    for pk, problem_id, problem, steps in Solution.objects.order_by("pk").values_list(
        "pk", "problem_id", "problem__text", "steps"
    ):
        ratings = toy_ratings(steps)
        examples.append(
            Example(
                problem_id=problem_id,
                solution_id=pk,
                problem=problem,
                steps=steps[: len(ratings)],
                labels=list(ratings.values()),
                source="toy",
            )
        )
    return examples


def toy_read(*, solution_ids: list[int]) -> dict:
    rows = Solution.objects.filter(pk__in=solution_ids).values_list("pk", "steps")
    return {pk: (None, toy_ratings(steps)) for pk, steps in rows}


def toy_positions(*, solution_ids: list[int]) -> dict[int, int]:
    found = {}
    for pk, (_, ratings) in toy_read(solution_ids=solution_ids).items():
        bad = [index for index, rating in ratings.items() if rating == -1]
        steps = len(Solution.objects.get(pk=pk).steps)
        found[pk] = bad[0] if bad else steps
    return found


TOY = label_sources.LabelSource(
    name="toy",
    title="Toy labels",
    trains=label_sources.Trains(
        examples=toy_examples,
        missing=lambda *, params: "no solution for the toy",
        help="a toy that reads the word wrong",
    ),
    machine=label_sources.MachineReader(
        labeled=lambda: Q(pk__isnull=False),  # it labels every solution
        read=toy_read,
        bad=lambda rating: rating == -1,
        help="the step says wrong",
    ),
    first_error=label_sources.FirstErrorReader(
        title="Toy", labeled=lambda: Solution.objects.values("pk"), positions=toy_positions
    ),
)


@pytest.fixture
def toy():
    label_sources.register(TOY)
    yield TOY
    label_sources.unregister(TOY.name)


@pytest.fixture
def solutions(make_solution):
    """Two problems (a held-out split needs two): a right solution and one wrong at step 2."""
    made = []
    for n, (text, answer) in enumerate([("What is $1+1$?", "2"), ("What is $2+3$?", "5")]):
        problem = Problem.objects.create(text=text, answer=answer, unique_id=f"toy/{n}.json")
        made.append(make_solution(problem, steps=["Add.", f"# Answer\n\n{answer}"]))
        made.append(
            make_solution(
                problem, 1, steps=["Add.", "This is wrong: 7.", "# Answer\n\n7"], answer="7"
            )
        )
    return made


# --- where it shows ---------------------------------------------------------------------------


def test_the_toy_is_a_training_choice_of_the_form_the_api_and_the_command(toy, client, researcher):
    assert ("toy", "Toy labels") in TrainingRunForm().fields["label_source"].choices
    page = client.get(reverse("training-run-list")).content.decode()
    assert '<option value="toy">Toy labels</option>' in page
    made = []  # one run at a time may wait: each is read, then removed
    client.post(reverse("training-run-list"), {"label_source": "toy"})
    made.append(TrainingRun.objects.get().params["label_source"])
    TrainingRun.objects.all().delete()
    api = client.post(
        "/api/training-runs/", {"params": {"label_source": "toy"}}, content_type="application/json"
    )
    assert api.status_code in (201, 202), api.content
    made.append(TrainingRun.objects.get().params["label_source"])
    TrainingRun.objects.all().delete()
    assert made == ["toy", "toy"]
    # With no data the command reaches the source's own "no data" words.
    with pytest.raises(CommandError, match="No labeled examples: no solution for the toy"):
        call_command("train_prm", "--label-source", "toy")


def test_once_unregistered_the_toy_is_refused_everywhere(client, researcher):
    assert "toy" not in TrainingRunForm().fields["label_source"].choices
    with pytest.raises(InvalidParams, match="label_source must be one of"):
        TrainingParams.requested({"label_source": "toy"})
    api = client.post(
        "/api/training-runs/", {"params": {"label_source": "toy"}}, content_type="application/json"
    )
    assert api.status_code == 400
    with pytest.raises(CommandError, match="label_source must be one of"):
        call_command("train_prm", "--label-source", "toy")


def test_the_dataset_reads_the_toy_and_counts_its_step_labels(toy, solutions):
    examples = labeled_examples(params=TrainingParams(label_source="toy"))
    assert [e.labels for e in examples] == [[1, 1], [1, -1], [1, 1], [1, -1]]
    assert step_label_counts(examples) == {"toy": 8}


def test_a_consensus_may_ask_the_toy(toy, solutions, client, researcher):
    assert "rollout,judge,prm,toy" in label_sources.consensus_choices()
    params = TrainingParams.requested({"label_source": "consensus", "consensus_sources": "toy"})
    examples = labeled_examples(params=params)
    # The toy alone decides: the steps up to its -1, labeled as it says.
    assert [(e.source, e.labels) for e in examples] == [
        ("consensus", [1, 1]),
        ("consensus", [1, -1]),
        ("consensus", [1, 1]),
        ("consensus", [1, -1]),
    ]
    # A human label wins where the human rated (here every step: the toy adds nothing).
    rate(solutions[1], "ann", [1, 1, 1])
    mine = {e.solution_id: e for e in labeled_examples(params=params)}[solutions[1].pk]
    assert mine.labels == [1, 1, 1] and mine.source == "human"
    page = client.get(
        reverse("solution-inspect", args=[solutions[3].pk]), {"consensus_sources": "toy"}
    )
    assert page.status_code == 200 and 'value="toy"' in page.content.decode()
    machine = consensus.machine_labels(solution_ids=[solutions[3].pk], sources=("toy",))
    assert dict(machine[solutions[3].pk].of("toy")) == {0: 1, 1: -1}


def test_the_quality_page_and_the_disagreement_strategy_read_the_toy(
    toy, solutions, client, researcher
):
    for solution in solutions:
        rate(solution, "ann", [1, 1] if len(solution.steps) == 2 else [1, -1])
    body = client.get(reverse("api-first-error-agreement")).json()
    figures = {(p["first"], p["second"]): p["figures"] for p in body["between_sources"]}
    assert figures["human", "toy"]["pairs"] == 4 and figures["human", "toy"]["exact"] == 4
    assert "Human vs toy" in client.get(reverse("quality")).content.decode()
    # A rollout-free, judge-free pool: only the toy places first errors, so nothing disagrees
    # (one source alone cannot).
    assert disagreements(pool=Solution.objects.all(), model_version=None) == {}


@pytest.mark.slow  # trains the tiny model
def test_train_prm_trains_on_the_toy_and_the_run_page_counts_its_labels(
    toy, solutions, settings, tmp_path, client, researcher
):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    call_command(
        "train_prm",
        *("--label-source", "toy", "--epochs", "1", "--batch-size", "4", "--eval-fraction", "0.5"),
    )
    run = TrainingRun.objects.get()
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert run.step_labels == {"toy": 8}
    assert "Step labels: 8 toy." in run.log_tail
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert '<dd class="step-labels">8 toy</dd>' in page


def test_the_registry_and_the_parameters_load_without_django():
    # The training loop's processes read TrainingParams with no Django configured: every
    # source module imports its readers inside its functions (a top-level model import fails).
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "from trainer.training.params import TrainingParams\n"
        "p = TrainingParams(label_source='consensus', consensus_sources='prm, judge')\n"
        "print(p.consensus_sources)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "judge,prm"
