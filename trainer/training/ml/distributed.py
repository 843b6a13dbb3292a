"""Training on several processes: the run's own process group, started and watched by its task.

The parent (the Celery task, `trainer.training.runs`) keeps the database, the heartbeat and the
run's record. It writes a job directory (the examples, best-of-N problems and parameters as plain
JSON, so a rank needs neither Django nor the database), then starts

    python -m torch.distributed.run --standalone --nproc-per-node N \\
        -m trainer.training.ml.distributed JOB

(gloo on the CPU, nccl on CUDA, one device per rank) and follows it:

- rank 0 appends progress events to `events.jsonl`; the parent forwards them to its recorder;
- a cancel is a `cancel` file the parent writes; rank 0 reads it at each step and the ranks
  agree on it (`trainer.training.ml.train._agree`), so all stop at the same step;
- rank 0 also stops the group when the parent's process is gone, so a killed worker does not
  leave ranks training for hours;
- a rank that dies makes torchrun stop the others and exit non-zero: the run fails with the
  rank and its exit named, and, since only a complete training saves, no checkpoint exists.

The built-in backbone's tokenizer is trained from the data: rank 0 builds the PRM once and
shares it through the job directory, so every rank has the same tokenizer and weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from core import patterns
from core.processes import guarded_command

if TYPE_CHECKING:
    from trainer.training.dataset import BestOfNProblem, Example
    from trainer.training.ml.train import TrainResult
    from trainer.training.params import TrainingParams

JOB_FILE = "job.json"
EVENTS_FILE = "events.jsonl"
CANCEL_FILE = "cancel"
OUTCOME_FILE = "outcome.json"
LOG_FILE = "torchrun.log"
INITIAL_PRM = "initial-prm"
POLL_SECONDS = 0.2
# A collective waits this long for a slow rank (rank 0 evaluating, saving a large model)
# before failing; a dead rank is noticed by torchrun at once, not by this timeout.
COLLECTIVE_TIMEOUT = timedelta(hours=12)
# Once asked to stop, the group gets this long before it is killed.
STOP_GRACE_SECONDS = 30


class ProcessGroupFailed(RuntimeError):
    """A rank of the training process group died or failed; the message names which and how."""


class InvalidProcessCount(ValueError):
    """PRM_TRAIN_PROCESSES is neither "auto" nor a positive whole number."""


def process_count(setting: str | int) -> int:
    """Processes a run trains on: "auto" is one per CUDA device (1 without CUDA)."""
    if str(setting).strip().lower() == "auto":
        import torch

        return max(1, torch.cuda.device_count())
    try:
        count = int(str(setting).strip())
    except ValueError:
        count = 0
    if count < 1:
        raise InvalidProcessCount(
            f"PRM_TRAIN_PROCESSES is {setting!r}: use auto or a whole number of at least 1."
        )
    return count


# --- the parent ---------------------------------------------------------------------------


def train_in_process_group(
    *,
    processes: int,
    train: list[Example],
    eval: list[Example],
    params: TrainingParams,
    base_model: str | None,
    out_dir: Path,
    on_progress: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    best_of_n_problems: Sequence[BestOfNProblem] = (),
    start_from: str | None = None,
    memory_limit: int | None = None,
) -> TrainResult:
    """`trainer.training.ml.train.train_prm` on `processes` ranks; the same arguments and result.
    The ranks do not estimate their memory (`memory_limit` is not checked): each holds its own
    share, which the one-process estimate does not describe.
    `start_from`: a PRM checkpoint every rank loads and trains on from (a warm start).

    Raises TrainingCancelled when `should_stop` said stop, ProcessGroupFailed when a rank
    died or failed (CheckpointNotWritten when rank 0 could not save), and leaves no rank
    running in any case.
    """
    from trainer.training.ml.prm import CheckpointNotWritten
    from trainer.training.ml.train import TrainingCancelled, TrainResult

    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} already exists.")
    emit = on_progress or (lambda event: None)
    stop = should_stop or (lambda: False)
    job_dir = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.job-", dir=out_dir.parent))
    try:
        job = {
            "params": params.to_dict(),
            "base_model": base_model,
            "out_dir": str(out_dir),
            "parent_pid": os.getpid(),
            "start_from": start_from,
            "train": [asdict(e) for e in train],
            "eval": [asdict(e) for e in eval],
            "best_of_n_problems": [asdict(p) for p in best_of_n_problems],
        }
        (job_dir / JOB_FILE).write_text(json.dumps(job), encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={processes}",
            "-m",
            "trainer.training.ml.distributed",
            str(job_dir),
        ]
        emit({"log": f"Starting {processes} training processes ({params.distributed})."})
        with open(job_dir / LOG_FILE, "wb") as log:
            # Its own session: the group can be stopped whole, without touching the worker.
            # Through a launcher: a worker killed outright leaves no torchrun or rank running.
            group = subprocess.Popen(
                guarded_command(command),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            returncode = _follow(group, job_dir=job_dir, emit=emit, stop=stop)
        finally:
            _stop_group(group)
        outcome = _read_json(job_dir / OUTCOME_FILE)
        if returncode == 0 and outcome.get("cancelled"):
            raise TrainingCancelled(outcome["cancelled"])
        if returncode == 0 and "epochs" in outcome:
            return TrainResult(
                checkpoint_dir=out_dir,
                epochs=outcome["epochs"],
                final_metrics=outcome["final_metrics"],
            )
        failure = _failure(job_dir, returncode=returncode)
        if outcome.get("error_type") == "CheckpointNotWritten":
            raise CheckpointNotWritten(outcome["error"])
        emit({"log": _tail(job_dir / LOG_FILE)})
        raise ProcessGroupFailed(failure)
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


def _follow(group: subprocess.Popen, *, job_dir: Path, emit, stop) -> int:
    """Forward rank 0's events and pass a cancel on until the group exits; its exit code."""
    events = job_dir / EVENTS_FILE
    offset = 0
    cancel_sent_at = None
    while True:
        returncode = group.poll()
        offset = _forward(events, offset, emit)
        if returncode is not None:
            return returncode
        if cancel_sent_at is None and stop():
            (job_dir / CANCEL_FILE).touch()
            cancel_sent_at = time.monotonic()
        elif cancel_sent_at is not None and time.monotonic() - cancel_sent_at > STOP_GRACE_SECONDS:
            # A rank that does not reach its next step in time (a hung collective).
            _stop_group(group)
        time.sleep(POLL_SECONDS)


def _forward(events: Path, offset: int, emit) -> int:
    """Emit the complete lines written since `offset`; the offset after them."""
    if not events.exists():
        return offset
    with open(events, "rb") as stream:
        stream.seek(offset)
        data = stream.read()
    complete = data[: data.rfind(b"\n") + 1]
    for line in complete.splitlines():
        emit(json.loads(line))
    return offset + len(complete)


def _stop_group(group: subprocess.Popen) -> None:
    """Stop torchrun and every rank (their session), politely first."""
    if group.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            group.wait(timeout=STOP_GRACE_SECONDS)
    # Ranks outlive a torchrun that was killed before it could stop them.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group.pid, signal.SIGKILL)
    group.wait()


# torchrun's summary of a failed rank: "rank : 1 (local_rank: 1)" then "exitcode : -9 (pid: …)".
_KILLED_RANK = patterns.compile(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-\d+)")


def _failure(job_dir: Path, *, returncode: int) -> str:
    """What went wrong, in a sentence. A rank killed by a signal (killed, out of memory) writes
    nothing, and its peers then fail in their next collective with an error of their own
    ("connection reset by peer"): so a rank torchrun saw die of a signal is named first, then
    the error a rank wrote, then torchrun's exit."""
    log = (job_dir / LOG_FILE).read_text(encoding="utf-8", errors="replace")
    root = log[log.rfind("Root Cause") :] if "Root Cause" in log else ""
    killed = _KILLED_RANK.findall(root) + _KILLED_RANK.findall(log)
    # torchrun stops the surviving ranks with SIGTERM: those are not what went wrong.
    killed.sort(key=lambda found: int(found[1]) == -signal.SIGTERM)
    for rank, exit_code in killed[:1]:
        code = int(exit_code)
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
        return (
            f"Training process rank {rank} died ({how}): it was killed or ran out of memory, "
            "and the process group stopped. No checkpoint was written."
        )
    outcome = _read_json(job_dir / OUTCOME_FILE)
    if outcome.get("error"):
        return (
            f"Training process rank {outcome['rank']} failed: {outcome['error_type']}: "
            f"{outcome['error']}"
        )
    return f"The training process group exited with code {returncode}: {_tail(job_dir / LOG_FILE)}"


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


# --- a rank -------------------------------------------------------------------------------


def run_rank(job_dir: Path) -> None:
    """One rank: join the group, train on the job's data, and (rank 0) report and save."""
    import torch
    import torch.distributed as dist

    from trainer.training.ml.prm import PRM
    from trainer.training.ml.train import TrainingCancelled, build_prm, train_prm
    from trainer.training.params import TrainingParams

    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=COLLECTIVE_TIMEOUT)
    rank = dist.get_rank()
    (job_dir / f"rank-{rank}.pid").write_text(str(os.getpid()), encoding="utf-8")
    params = TrainingParams(**job["params"])
    # The rank imports no Django, so trainer.training.dataset's records come back as plain ones with
    # the same fields, which is all the loop reads.
    train = [SimpleNamespace(**e) for e in job["train"]]
    eval = [SimpleNamespace(**e) for e in job["eval"]]
    best_of_n = [SimpleNamespace(**p) for p in job["best_of_n_problems"]]
    base_model = job["base_model"]
    lead = rank == 0
    try:
        if job.get("start_from"):
            prm = PRM.load(job["start_from"])
        elif base_model is None:
            # A tokenizer trained on the data, built once: rank 0's PRM is everyone's.
            shared = job_dir / INITIAL_PRM
            if lead:
                prm = build_prm(params=params, base_model=None, examples=[*train, *eval])
                prm.save(shared)
            dist.barrier()
            if not lead:
                prm = PRM.load(shared)
        else:
            prm = build_prm(params=params, base_model=base_model, examples=[*train, *eval])
        result = train_prm(
            train=train,
            eval=eval,
            params=params,
            base_model=base_model,
            out_dir=Path(job["out_dir"]),
            on_progress=_event_writer(job_dir / EVENTS_FILE) if lead else None,
            should_stop=_stop_check(job_dir, parent_pid=job["parent_pid"]) if lead else None,
            best_of_n_problems=best_of_n,
            prm=prm,
        )
        if lead:
            outcome = {"epochs": result.epochs, "final_metrics": result.final_metrics}
            _write_json(job_dir / OUTCOME_FILE, outcome)
    except TrainingCancelled as exc:
        if lead:
            _write_json(job_dir / OUTCOME_FILE, {"cancelled": str(exc)})
    except Exception as exc:
        error = {"rank": rank, "error_type": type(exc).__name__, "error": str(exc)}
        # The first rank to fail tells why; the others fail because it did.
        with (
            contextlib.suppress(FileExistsError),
            open(job_dir / OUTCOME_FILE, "x", encoding="utf-8") as stream,
        ):
            json.dump(error, stream)
        raise
    dist.destroy_process_group()


def _event_writer(path: Path) -> Callable[[dict], None]:
    stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the rank's life)

    def write(event: dict) -> None:
        stream.write(json.dumps(event) + "\n")
        stream.flush()

    return write


def _stop_check(job_dir: Path, *, parent_pid: int) -> Callable[[], bool]:
    def should_stop() -> bool:
        return (job_dir / CANCEL_FILE).exists() or not _alive(parent_pid)

    return should_stop


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, killed but not yet reaped, does not)."""
    if not Path("/proc/self").exists():  # no procfs: existence is all one can ask
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] not in {"Z", "X"}


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value), encoding="utf-8")
    tmp.rename(path)


if __name__ == "__main__":
    run_rank(Path(sys.argv[1]))
