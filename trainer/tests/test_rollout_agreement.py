"""Label sources: training data from human labels, rollout labels or both; the agreement between
them; both side by side on the inspection page; a training run on rollout labels."""

import math

import pytest
import torch
from django.urls import reverse

from labeling.agreement import labels_of
from labeling.models import LabelingSession, Problem, Solution
from trainer import inspection
from trainer.models import RolloutLabel, SamplingRun
from trainer.sampling import rollout_agreement
from trainer.tests.test_inspection import rate
from trainer.training.dataset import (
    Example,
    build_training_examples,
    snapshot_hash,
    split_by_problem,
    step_label_counts,
)
from trainer.training.ml.prm import CLASSES, soft_loss
from trainer.training.params import InvalidParams, TrainingParams

pytestmark = pytest.mark.django_db

GENERATOR = {"backend": "local", "model": "smollm2-135m-instruct", "base_url": ""}
SAMPLING = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 0}


def rollout_run(samples: int = 4) -> SamplingRun:
    return SamplingRun.objects.create(
        purpose=SamplingRun.Purpose.ROLLOUTS,
        status=SamplingRun.Status.SUCCEEDED,
        generator=GENERATOR,
        sampling=SAMPLING,
        samples=samples,
    )


def store(run: SamplingRun, solution: Solution, reached: list[tuple[int, int]]) -> None:
    for index, (hit, rollouts) in enumerate(reached):
        RolloutLabel.objects.create(
            solution=solution,
            index=index,
            sampling_run=run,
            rollouts=rollouts,
            reached=hit,
            answers=["2"] * hit + ["5"] * (rollouts - hit),
        )


@pytest.fixture
def case():
    """The hand-made case.

    Problem "1 + 1", answer 2; a wrong solution of 4 steps ending "# Answer 3". A labeler rates
    it [+1, 0, -1] (error found at step 2). Rollout run R (k=4) reached the answer from step 0
    in 3 of 4 rollouts, from steps 1 and 2 in none; the answer step is the solution's own
    correctness: 0 of 1.

    By hand (human +1 and 0 read as ok, -1 as bad; hard estimate ok when reached > 0):
    - per step: step 0 ok/ok agrees, step 1 ok/bad differs, step 2 bad/bad agrees -> 2/3;
    - first error: human's first bad step 2, rollouts' first bad step 1 -> 0/1;
    - soft: |0.75 - 1| + |0 - 1| + |0 - 0| = 1.25 over 3 pairs -> 0.41666...
    """
    problem = Problem.objects.create(text="What is $1 + 1$?", answer="2", unique_id="t/one.json")
    solution = Solution.objects.create(
        problem=problem,
        steps=["We add.", "One and one make three.", "So it is $3$.", "# Answer\n\n3"],
        answer="3",
        is_correct=False,
    )
    rate(solution, "ann", [1, 0, -1])
    run = rollout_run()
    store(run, solution, [(3, 4), (0, 4), (0, 4), (0, 1)])
    other = Problem.objects.create(text="What is $2 + 2$?", answer="4", unique_id="t/two.json")
    right = Solution.objects.create(
        problem=other,
        steps=["Two and two.", "Make four.", "# Answer\n\n4"],
        answer="4",
        is_correct=True,
    )
    store(run, right, [(2, 4), (4, 4), (1, 1)])
    return {"solution": solution, "right": right, "run": run}


def test_agreement_figures_match_the_hand_computed_case(case):
    solution, run = case["solution"], case["run"]
    human = labels_of(LabelingSession.objects.filter(solution=solution))[solution.pk]
    labels = RolloutLabel.objects.filter(sampling_run=run, solution=solution)
    figures = rollout_agreement.compare(
        human=human,
        rollout={label.index: (label.reached, label.rollouts) for label in labels},
        steps=4,
    )
    assert (figures.steps_agreed, figures.step_pairs) == (2, 3)
    assert (figures.first_error_agreed, figures.first_error_pairs) == (0, 1)
    assert figures.soft_mean_abs_error == pytest.approx(1.25 / 3)
    # The aggregate of every rollout run: the same figures (the other solution has no human).
    (row,) = inspection.rollout_agreement()
    assert row.run == run and row.labeled == 2 and row.agreement.solutions == 1
    assert row.agreement.per_step_agreement == pytest.approx(2 / 3)


def test_training_data_from_human_rollout_or_both_kept_apart(case):
    solution, right, run = case["solution"], case["right"], case["run"]
    human = build_training_examples(params=TrainingParams.from_dict({}))
    assert [(e.source, e.labels, e.weight) for e in human] == [("human", [1, 0, -1], 1.0)]

    hard = build_training_examples(params=TrainingParams.from_dict({"label_source": "rollout"}))
    assert [(e.solution_id, e.labels, e.targets, e.sampling_run_id) for e in hard] == [
        (solution.pk, [1, -1], None, run.pk),  # cut after the first -1, like human labels
        (right.pk, [1, 1, 1], None, run.pk),
    ]

    soft = build_training_examples(
        params=TrainingParams.from_dict({"label_source": "rollout", "rollout_estimate": "soft"})
    )
    assert soft[0].steps == solution.steps  # every step
    assert soft[0].targets == [0.75, 0.0, 0.0, 0.0]
    assert soft[1].targets == [0.5, 1.0, 1.0]

    both = build_training_examples(
        params=TrainingParams.from_dict({"label_source": "both", "rollout_weight": 2.5})
    )
    # One human and one rollout example of the same solution, never merged.
    assert [(e.source, e.solution_id, e.labels, e.weight) for e in both] == [
        ("human", solution.pk, [1, 0, -1], 1.0),
        ("rollout", solution.pk, [1, -1], 2.5),
        ("rollout", right.pk, [1, 1, 1], 2.5),
    ]
    assert step_label_counts(both) == {"human": 3, "rollout": 5}  # as the run records them


def test_the_latest_run_or_the_chosen_one_and_the_snapshot_covers_rollout_labels(case):
    solution, run = case["solution"], case["run"]
    before = snapshot_hash(
        build_training_examples(params=TrainingParams.from_dict({"label_source": "both"}))
    )
    newer = rollout_run(samples=2)
    store(newer, solution, [(0, 2), (0, 2), (0, 2), (0, 1)])
    latest = build_training_examples(params=TrainingParams.from_dict({"label_source": "rollout"}))
    assert latest[0].labels == [-1] and latest[0].sampling_run_id == newer.pk
    chosen = build_training_examples(
        params=TrainingParams.from_dict({"label_source": "rollout", "rollout_run": run.pk})
    )
    assert chosen[0].labels == [1, -1] and chosen[0].sampling_run_id == run.pk
    after = snapshot_hash(
        build_training_examples(params=TrainingParams.from_dict({"label_source": "both"}))
    )
    assert after != before
    # Human examples hash exactly as before rollout labels existed.
    example = Example(1, 2, "p", ["a"], [1])
    assert snapshot_hash([example]) == snapshot_hash([example])
    import hashlib
    import json

    legacy = {"problem_id": 1, "solution_id": 2, "problem": "p", "steps": ["a"], "labels": [1]}
    line = json.dumps(legacy, sort_keys=True, ensure_ascii=False) + "\n"
    assert snapshot_hash([example]) == hashlib.sha256(line.encode()).hexdigest()


def test_label_source_parameters_are_checked():
    for bad in (
        {"label_source": "crowd"},
        {"rollout_estimate": "medium"},
        {"rollout_weight": 0},
        {"rollout_weight": 10.5},
        {"rollout_run": 0},
    ):
        with pytest.raises(InvalidParams):
            TrainingParams.from_dict(bad)
    params = TrainingParams.from_dict({})
    assert (params.label_source, params.rollout_estimate, params.rollout_weight) == (
        "human",
        "hard",
        1.0,
    )
    assert params.rollout_run is None


def test_soft_targets_and_weights_in_the_loss():
    logits = torch.tensor([[0.2, -0.1, 1.0], [1.5, 0.0, -0.5]])
    labels = torch.tensor([2, 0])
    hard = torch.nn.functional.cross_entropy(logits, labels)
    # A soft target of exactly 1 or 0 is the one-hot hard label.
    assert soft_loss(logits, labels, soft=torch.tensor([1.0, 0.0])) == pytest.approx(hard.item())
    # p(+1) = 0.25: -(0.75 log p(-1) + 0.25 log p(+1)).
    log_p = logits[0].log_softmax(-1)
    expected = -(0.75 * log_p[CLASSES.index(-1)] + 0.25 * log_p[CLASSES.index(1)])
    got = soft_loss(logits[:1], labels[:1], soft=torch.tensor([0.25]))
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)
    # Weight 2 counts a row twice.
    rows = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    weighted = soft_loss(logits, labels, weights=torch.tensor([2.0, 1.0]))
    assert weighted.item() == pytest.approx(((2 * rows[0] + rows[1]) / 3).item(), rel=1e-6)


def test_the_inspect_page_shows_human_and_rollout_labels_side_by_side(client, researcher, case):
    solution, run = case["solution"], case["run"]
    page = client.get(reverse("solution-inspect", args=[solution.pk])).content.decode()
    assert f"Rollouts, run #{run.pk}" in page
    assert "3/4" in page and "hard +1" in page and "soft 0.75" in page
    assert "differs" in page and "agrees" in page  # step 1 differs, steps 0 and 2 agree
    assert "smollm2-135m-instruct" in page and "max_tokens 64" in page
    assert "0.67" in page and "(2/3)" in page and "0.417" in page
    summary = client.get(reverse("disagreement-list")).content.decode()
    assert "Human vs rollout labels" in summary and f"#{run.pk}" in summary and "0.67" in summary


def test_a_training_run_on_rollout_labels_trains(case, tmp_path):
    from trainer.training.ml.train import train_prm

    for estimate in ("hard", "soft"):
        params = TrainingParams.from_dict(
            {"label_source": "rollout", "rollout_estimate": estimate, "epochs": 1, "seed": 1}
        )
        examples = build_training_examples(params=params)
        train, held_out = split_by_problem(examples, eval_fraction=0.5, seed=1)
        assert train and held_out
        events = []
        result = train_prm(
            train=train,
            eval=held_out,
            params=params,
            base_model=None,
            out_dir=tmp_path / estimate,
            on_progress=events.append,
        )
        losses = [e["loss"] for e in events if "loss" in e]
        assert losses and all(math.isfinite(loss) for loss in losses)
        assert (result.checkpoint_dir / "prm.json").is_file()
        assert result.final_metrics["eval_examples"] == len(held_out)
