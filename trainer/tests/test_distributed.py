"""Training on several processes: a real torchrun process group of two CPU ranks (gloo).

Two processes must train the model one process trains: the same global batch and seed give
the same per-step losses and the same saved weights, within TOLERANCE (float32 sums taken in
another order: measured differences are about 1e-7). A rank that dies fails the run cleanly,
a cancel stops the group, and no rank outlives its run.
"""

import contextlib
import os
import signal
from pathlib import Path
from unittest import mock

import psutil
import pytest
import torch

from trainer.models import ModelVersion, TrainingRun
from trainer.tests.labels import label_demo_solutions
from trainer.tests.test_train import synthetic
from trainer.training import checkpoints, dataset, runs
from trainer.training.ml.distributed import train_in_process_group
from trainer.training.ml.prm import PRM
from trainer.training.ml.train import build_prm, train_prm
from trainer.training.params import TrainingParams

pytestmark = pytest.mark.django_db

# Relative tolerance on losses; on weights, this relative and absolute tolerance.
TOLERANCE = 1e-5
# An odd global batch over two ranks, two micro-batches per step: shares of unequal size,
# and a last batch that leaves a rank with no example.
PARAMS = {
    "epochs": 2,
    "batch_size": 5,
    "grad_accum": 2,
    "learning_rate": 3e-3,
    "eval_fraction": 0.3,
}


@pytest.fixture(autouse=True)
def model_dir(settings, tmp_path) -> Path:
    # Where the worker writes (this host's scratch) before the checkpoint goes to the store.
    settings.STORE_SCRATCH_DIR = tmp_path / "models"
    # As in test_runs: the recorder's own writes carry the heartbeat inside the test's
    # transaction, which the heartbeat thread's connection cannot see.
    settings.PRM_HEARTBEAT_SECONDS = 3600
    settings.PRM_AUTO_PROMOTE = True
    settings.PRM_PROMOTE_METRIC = "step_auroc"
    settings.PRM_TRAIN_PROCESSES = 2
    return settings.STORE_SCRATCH_DIR


def record_progress(hook):
    """Patch the recorder so that `hook(recorder, event)` sees every event it records."""
    real = runs.RunRecorder.on_progress

    def on_progress(recorder, event):
        real(recorder, event)
        hook(recorder, event)

    return mock.patch.object(runs.RunRecorder, "on_progress", on_progress)


def rank_pids(model_dir: Path) -> dict[int, int]:
    pids = {}
    for path in model_dir.glob(".run-*.job-*/rank-*.pid"):
        pids[int(path.stem.split("-")[1])] = int(path.read_text())
    return pids


def assert_no_process_left(pids) -> None:
    assert pids, "the ranks' pids were never seen"
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie", pid
    # Nor torchrun, nor a rank that never wrote its pid (other tests' servers may run on).
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            command = " ".join(child.cmdline())
            assert "torch.distributed.run" not in command, command
            assert "trainer.training.ml.distributed" not in command, command


def same_weights(left: Path, right: Path) -> None:
    a, b = PRM.load(left).module.state_dict(), PRM.load(right).module.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=TOLERANCE, atol=TOLERANCE, msg=key)


def test_a_two_process_run_trains_the_model_one_process_trains(researcher, model_dir, tmp_path):
    label_demo_solutions(problems=4)
    params = TrainingParams.from_dict(PARAMS)
    examples = dataset.build_training_examples(params=params)
    train, held_out = dataset.split_by_problem(
        examples, eval_fraction=params.eval_fraction, seed=params.seed
    )
    alone: list[dict] = []
    reference = train_prm(
        train=train,
        eval=held_out,
        params=params,
        base_model=None,
        out_dir=tmp_path / "one-process",
        on_progress=alone.append,
        best_of_n_problems=dataset.best_of_n_problems(held_out),
    )

    events: list[dict] = []
    with record_progress(lambda recorder, event: events.append(event)):
        run = runs.request_training_run(user=researcher, params=PARAMS)
        run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert "2 processes (ddp, cpu)" in run.log_tail
    losses = [e["loss"] for e in events if "step" in e]
    expected = [e["loss"] for e in alone if "step" in e]
    assert len(losses) == len(expected) == run.total_steps == run.step
    assert losses == pytest.approx(expected, rel=TOLERANCE)
    assert [m["epoch"] for m in run.metrics] == [1, 2]
    assert run.metrics[-1]["eval_loss"] == pytest.approx(
        reference.final_metrics["eval_loss"], rel=TOLERANCE
    )
    version = run.model_version
    assert version.is_active
    same_weights(tmp_path / "one-process", checkpoints.local_dir(version))
    # The job directory goes with the run, and the checkpoint, once published, from the disk.
    assert list(model_dir.iterdir()) == []


def test_a_sharded_two_process_run_trains_the_model_one_process_trains(tmp_path):
    train, held_out = synthetic(21, seed=1), synthetic(6, seed=2)
    params = TrainingParams(**{**PARAMS, "distributed": "fsdp"})
    alone: list[dict] = []
    train_prm(
        train=train,
        eval=held_out,
        params=params,
        base_model=None,
        out_dir=tmp_path / "one-process",
        on_progress=alone.append,
    )
    events: list[dict] = []
    result = train_in_process_group(
        processes=2,
        train=train,
        eval=held_out,
        params=params,
        base_model=None,
        out_dir=tmp_path / "two-processes",
        on_progress=events.append,
    )

    assert any("2 processes (fsdp, cpu)" in e.get("log", "") for e in events)
    losses = [e["loss"] for e in events if "step" in e]
    assert losses == pytest.approx([e["loss"] for e in alone if "step" in e], rel=TOLERANCE)
    assert [e["epoch"] for e in result.epochs] == [1, 2]
    same_weights(tmp_path / "one-process", tmp_path / "two-processes")


def test_a_killed_rank_fails_the_run_and_leaves_the_active_model(researcher, model_dir):
    label_demo_solutions(problems=4)
    active = ModelVersion.objects.create(name="old", checkpoint="/nowhere", is_active=True)
    seen: dict[int, int] = {}

    def kill_rank_1(recorder, event):
        if "step" in event and not seen:
            seen.update(rank_pids(model_dir))
            os.kill(seen[1], signal.SIGKILL)

    with record_progress(kill_rank_1):
        run = runs.request_training_run(user=researcher, params={**PARAMS, "epochs": 200})
        run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    assert run.status == TrainingRun.Status.FAILED
    assert "rank 1 died (killed by SIGKILL)" in run.error, run.error
    assert "No checkpoint was written" in run.error
    assert run.step < run.total_steps
    assert not ModelVersion.objects.exclude(pk=active.pk).exists()
    assert ModelVersion.objects.get(is_active=True) == active
    assert not (model_dir / f"run-{run.pk}").exists()
    assert list(model_dir.iterdir()) == []
    assert_no_process_left(seen.values())


def test_a_cancelled_two_process_run_stops_every_rank(researcher, model_dir):
    label_demo_solutions(problems=4)
    seen: dict[int, int] = {}

    def cancel_at_first_step(recorder, event):
        if "step" in event and not seen:
            seen.update(rank_pids(model_dir))
            TrainingRun.objects.filter(pk=recorder.run_id).update(cancel_requested=True)

    with record_progress(cancel_at_first_step):
        run = runs.request_training_run(user=researcher, params={**PARAMS, "epochs": 200})
        run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    assert run.status == TrainingRun.Status.CANCELLED, run.error
    assert run.step < run.total_steps
    assert not ModelVersion.objects.exists()
    assert list(model_dir.iterdir()) == []
    assert set(seen) == {0, 1}
    assert_no_process_left(seen.values())


def test_gradient_checkpointing_recomputes_the_layers_and_trains_to_the_same_losses(tmp_path):
    train = synthetic(24, seed=3)
    losses, layer_calls = {}, {}
    for checkpointing in (False, True):
        params = TrainingParams(
            epochs=1, batch_size=8, learning_rate=3e-3, gradient_checkpointing=checkpointing
        )
        prm = build_prm(params=params, base_model=None, examples=train)
        calls: list[int] = []
        # Inside the checkpointed layer, so the backward pass's recomputation shows (module
        # hooks do not run when it recomputes; the forward itself does).
        mlp = prm.module.backbone.layers[0].mlp
        mlp.forward = lambda *args, real=mlp.forward, calls=calls: calls.append(1) or real(*args)
        events: list[dict] = []
        train_prm(
            train=train,
            eval=[],
            params=params,
            base_model=None,
            out_dir=tmp_path / str(checkpointing),
            on_progress=events.append,
            prm=prm,
        )
        losses[checkpointing] = [e["loss"] for e in events if "step" in e]
        layer_calls[checkpointing] = len(calls)
    assert len(losses[True]) == 3
    assert losses[True] == pytest.approx(losses[False], rel=TOLERANCE)
    # Three micro-batches: the layer ran once for each, and again in each backward pass.
    assert layer_calls == {False: 3, True: 6}


def test_every_rank_of_a_warm_started_run_starts_from_the_given_checkpoint(tmp_path):
    train, held_out = synthetic(12, seed=4), synthetic(4, seed=5)
    start = build_prm(params=TrainingParams(seed=9), base_model=None, examples=train)
    start.save(tmp_path / "start")
    # Too small a learning rate to move anything: what is saved is what every rank started from.
    params = TrainingParams(**{**PARAMS, "epochs": 1, "learning_rate": 1e-12})

    train_in_process_group(
        processes=2,
        train=train,
        eval=held_out,
        params=params,
        base_model=None,
        out_dir=tmp_path / "warm",
        start_from=str(tmp_path / "start"),
    )

    same_weights(tmp_path / "start", tmp_path / "warm")
