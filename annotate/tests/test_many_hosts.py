"""A team's install on four hosts that share PostgreSQL, Redis and the artifact store, never a
disk (issue 39; docs/operations.md, "Many hosts, one store").

- web: the web server (`python -m annotate.server`, as the Procfile starts it);
- cpu: a Celery worker on the `default` queue (imports, live proposals);
- gpu-a, gpu-b: Celery workers on the `gpu` queue (training, scoring chunks, evaluations).

Each host runs in its own mount namespace (annotate/tests/hosts.py): its private directory is
bind-mounted on one path that every host uses (STEPWISE_VAR_DIR, PRM_MODEL_DIR, TMPDIR), and
the folder with every host's real directory is hidden under an empty tmpfs. A path one host
writes into a record therefore names nothing, or something else, on the others: whatever
crosses hosts must go through the store. Management commands "on a host" run with the same
prologue. The whole test runs against a directory store (outside the hidden folder: the shared
mount, NFS) and against a real S3 API server (moto).

What a team does, each through the host that does it in production, each checked by its result:

1. an import uploaded to the web host's API is imported by the cpu worker;
2. a training run asked of the API runs on a gpu host and records its checkpoint as a store
   reference;
3. activating the version through the API rescores the pool in chunks that both gpu hosts take;
4. `POST /api/score/` on the web host scores with the active version (its own cache's copy);
5. `manage.py export_model_version` on the web host writes a checkpoint that transformers
   alone loads (in a process that imports nothing of stepwise), giving the same step scores;
6. the evaluation set registered through the API evaluates the version on a gpu host;
7. a local generator registered on gpu-b (`manage.py register_models`) proposes the steps of a
   live labeling round opened on the web host, loaded by the cpu worker from the store.

The flows are one checklist: each is timed and a failing one does not hide the others (those
that need its result are reported as not run); the test fails at the end naming every failure.
Last, no row holds a host's path (the text of the common private path), logs included: a log
that named one would send a reader to a folder that exists on one host only.

Over 500 lines on purpose: the four hosts and every flow that crosses them are one scenario,
set up once for both stores; split, each part would start the hosts again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

from annotate.tests.hosts import ROOT, VENV_BIN, Cluster, Host, free_port, namespaces_work
from annotate.tests.hosts import wait_for_log as wait_for_log_text
from conftest import create_user, database_url, require
from trainer.tests.test_hf_export import OUTSIDE  # transformers and torch alone

pytestmark = pytest.mark.services

# The tiny built-in PRM (no backbone), as trainer/tests/test_runs.py trains it.
TINY = {"epochs": 1, "batch_size": 8, "eval_fraction": 0.3}
# PRM_SCORE_CHUNK on every host: the 306 demo solutions make 8 chunks, for two gpu hosts.
SCORE_CHUNK = 40
# A Redis database of this test's own: other sessions' workers on this machine listen on the
# `gpu` and `default` queues of database 0 and would take these hosts' tasks.
REDIS_DB = 12
WAIT_S = 240  # for any one job
LIVE_WAIT_S = 300  # SmolLM2's proposals on a shared 2-core CPU, downloaded first

# Flow 1's upload; flow 7 labels its first problem live.
IMPORTED = [
    {"problem": "What is $2 + 2$?", "answer": "4", "unique_id": "hosts/two-plus-two"},
    {"problem": "What is $3 + 5$?", "answer": "8", "unique_id": "hosts/three-plus-five"},
]
# Flow 6's evaluation set: two solutions of each of three problems, erroneous and correct.
PROCESSBENCH = [
    {"problem": f"P{p}", "steps": [f"p{p} s{i}" for i in range(3)], "label": label}
    for p in range(3)
    for label in (-1, 1 if p % 2 else 0)
]
# Flows 4 and 5: solutions posted to /api/score/ and scored by transformers alone.
POSTED_PROBLEM = "Solve it."
POSTED = [
    ["We add $2$ and $3$.", "So the answer is $5$.", "# Answer\n\n5"],
    ["Multiply both sides by $2$, so $x = 14$.", "# Answer\n\n14"],
]


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(params=["file", "s3"])
def store_url(request, _artifact_store) -> str:
    """The store every host shares: the test's directory (outside the hidden hosts' folder)
    or a fresh bucket of the real S3 server."""
    if request.param == "s3":
        return request.getfixturevalue("s3_store")
    return str(_artifact_store)


@pytest.fixture
def hosts_broker(redis_url):
    """Redis for the hosts, in a database of this test's own, its queues emptied; this process
    publishes there too (as conftest's `broker` does)."""
    from kombu import Connection

    from annotate.celery import app

    url = urlunsplit(urlsplit(redis_url)._replace(path=f"/{REDIS_DB}"))
    previous = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = url, {}
    app._after_fork()
    with Connection(url) as conn:
        for queue in ("gpu", "default"):
            conn.SimpleQueue(queue).clear()
        conn.default_channel.client.delete("unacked", "unacked_index")
    yield url
    app.conf.broker_url, app.conf.broker_transport_options = previous
    app._after_fork()


@dataclass
class Install:
    cluster: Cluster
    url: str  # the web host's
    workers: dict[str, str]  # host name -> Celery worker name
    ready_seconds: float  # from the first start to every host answering

    def __getitem__(self, name: str) -> Host:
        return self.cluster[name]


def worker_command(name: str, queues: str) -> list[str]:
    """A Celery worker as conftest's `start_worker` starts one: one task at a time."""
    options = f"--queues {queues} --concurrency 1 --pool solo --loglevel INFO".split()
    return [sys.executable, "-m", "celery", "-A", "annotate", "worker", "-n", name, *options]


@pytest.fixture
def install(transactional_db, hosts_broker, store_url, tmp_path):
    """The four hosts, started and answering; stopped (their logs printed) at the end."""
    works, why = namespaces_work(tmp_path)
    require(works, why)
    env = dict(
        os.environ,
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=hosts_broker,
        STORE_URL=store_url,
        # One secret for every web host (docs/operations.md), none generated per host.
        SECRET_KEY="many-hosts-test-secret-" + "x" * 40,
        DEBUG="false",
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PRM_HEARTBEAT_SECONDS="1",
        # Activation is the researcher's, through the API (flow 3), not the run's.
        PRM_AUTO_PROMOTE="false",
        PRM_SCORE_CHUNK=str(SCORE_CHUNK),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        API_USER_RATE="100000/min",
    )
    cluster = Cluster(root=tmp_path / "cluster", env=env)
    # The tiny model trains fastest on one torch thread, and two gpu hosts share two cores.
    for name, extra in {
        "web": {"WEB_PROCESSES": "1", "WEB_THREADS": "4"},
        "cpu": {"OMP_NUM_THREADS": "1"},
        "gpu-a": {"OMP_NUM_THREADS": "1"},
        "gpu-b": {"OMP_NUM_THREADS": "1"},
    }.items():
        cluster.add(name, **extra)
    workers = {"cpu": "worker@cpu", "gpu-a": "worker@gpu-a", "gpu-b": "worker@gpu-b"}
    began = time.monotonic()
    try:
        port = free_port()
        server = cluster["web"].start(
            [sys.executable, "-m", "annotate.server", "--port", str(port)], label="server"
        )
        started = {
            host: cluster[host].start(
                worker_command(name, "default" if host == "cpu" else "gpu"), label="worker"
            )
            for host, name in workers.items()
        }
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (
                f"the web host's server exited:\n{cluster['web'].log_tail()}"
            )
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{url}/accounts/login/", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"no answer in 120 s:\n{cluster['web'].log_tail()}"
            time.sleep(0.3)
        for host, process in started.items():
            wait_for_log_text(process, f"{workers[host]} ready.", timeout=120)
        yield Install(
            cluster=cluster, url=url, workers=workers, ready_seconds=time.monotonic() - began
        )
    finally:
        cluster.stop()
        print(cluster.log_tails(4000))


# --- the checklist ---------------------------------------------------------------------------


@dataclass
class Checklist:
    """Flows run one after the other; each is timed, a failure is kept and the next goes on."""

    timings: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def run(self, name: str, flow: Callable[[], object], *, needs: tuple[str, ...] = ()):
        missing = [n for n in needs if n not in self.timings or n in self.failures]
        if missing:
            self.skipped[name] = f"not run: needs {', '.join(missing)}"
            return None
        started = time.monotonic()
        try:
            return flow()
        except Exception as exc:  # noqa: BLE001 - each failure is reported at the end
            self.failures[name] = "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4)
            )
            return None
        finally:
            self.timings[name] = time.monotonic() - started

    def report(self, title: str) -> str:
        lines = [f"{title} ({sum(self.timings.values()):.0f} s in all):"]
        for name, seconds in self.timings.items():
            state = "FAILED" if name in self.failures else "ok"
            lines.append(f"  {name:<44} {state:<6} {seconds:6.1f} s")
        lines += [f"  {name:<44} {why}" for name, why in self.skipped.items()]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def wait_for(predicate: Callable[[], object], *, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


class Api:
    """A token's requests to the web host."""

    def __init__(self, url: str, token: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str, expect: int = 200) -> dict:
        answer = self.session.get(self.url + path, timeout=60)
        assert answer.status_code == expect, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else {}

    def post(self, path: str, expect: int = 200, **kwargs) -> dict:
        answer = self.session.post(self.url + path, timeout=120, **kwargs)
        assert answer.status_code == expect, f"POST {path}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else {}


def token_of(user) -> str:
    from labeling.tokens import create_api_token

    return create_api_token(user=user).token


def host_paths(install: Install) -> tuple[str, ...]:
    """Texts that only a host's own disk gives a meaning to."""
    return (str(install.cluster.common), str(install.cluster.hidden))


def assert_a_reference(text: str, *, prefix: str, install: Install) -> None:
    from core import store

    assert store.is_reference(text), f"{text!r} is not a store reference"
    assert store.describe(text).startswith(prefix), text
    assert not text.startswith("/") and not any(p in text for p in host_paths(install)), text


def in_cache(host: Host, reference: str) -> bool:
    """Whether `host` holds the artifact in its own cache (by the reference's digest)."""
    from core.store import Ref

    return (host.real / "var" / "cache" / Ref.parse(reference).digest).is_dir()


# --- the test --------------------------------------------------------------------------------

# Names of the steps that later ones need.
PUT = "7a local model put on gpu-b"
EVAL = "6a evaluation set registered (web)"
TRAIN = "2a training run requested (web)"
IMPORT = "1 import: web API -> cpu worker"
TRAINED = "2b training on a gpu host"
ACTIVE = "3 activation: chunks on both gpu hosts"
REGISTERED = "7b register_models on gpu-b"
LIVE = (IMPORT, REGISTERED, ACTIVE)
OPENED = "7c live round opened (web)"


def link(source: str, target: str) -> None:
    """shutil.copytree's copy: a hard link where it can (no 540 MB copy), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def test_a_team_install_on_four_hosts_shares_only_the_database_broker_and_store(
    install, store_url, smollm2_checkpoint, request
):
    from generators.local_models import SMOLLM2_NAME
    from generators.models import LocalModel
    from labeling.models import ImportJob, LabelingSession, Problem, Solution
    from trainer.evaluation.models import Evaluation
    from trainer.models import ModelVersion, TrainingRun
    from trainer.scoring.models import ScoringChunk
    from trainer.tests.labels import label_demo_solutions

    web, cpu, gpu_a, gpu_b = (install[n] for n in ("web", "cpu", "gpu-a", "gpu-b"))
    gpu_workers = {install.workers["gpu-a"], install.workers["gpu-b"]}
    admin = Api(install.url, token_of(create_user("ada", "admin")))
    annotator = Api(install.url, token_of(create_user("ann", "annotator")))
    # Four labeled demo problems to train on, and a pool of 306 solutions to score. The demo's
    # quality-control and screening marks would serve the annotator gold first (flow 7).
    label_demo_solutions(problems=4)
    Solution.objects.update(is_quality_control=False, is_screening=False)
    checks = Checklist()
    state: dict = {}

    def privacy():
        # Each host sees its own directory at the common path, and none of the others'.
        for host in (web, cpu, gpu_a, gpu_b):
            seen = host.run(
                ["sh", "-c", f"cat whoami; hostname; ls -A {install.cluster.hidden} | wc -l"],
                cwd=install.cluster.common,
            ).stdout.split()
            assert seen == [host.name, host.name, "0"], (host.name, seen)

    def register_evaluation_set():
        body = "".join(json.dumps(item) + "\n" for item in PROCESSBENCH)
        made = admin.post(
            "/api/evaluation-sets/",
            201,
            data={"name": "ProcessBench on many hosts"},
            files={"file": ("pb.jsonl", body.encode())},
        )
        state["evaluation_set"] = made["id"]

    def request_training():
        run = admin.post("/api/training-runs/", 201, json={"params": TINY})
        state["run"] = run["id"]

    def import_through_the_web_host():
        content = "".join(json.dumps(p) + "\n" for p in IMPORTED).encode()
        job = admin.post(
            "/api/imports/", 202, data={"kind": "problems"}, files={"file": ("p.jsonl", content)}
        )
        row = ImportJob.objects.get(pk=job["id"])
        assert_a_reference(row.upload, prefix="uploads/", install=install)

        def finished():
            answer = admin.get(f"/api/imports/{job['id']}/")
            return answer if answer["status"] in ("succeeded", "failed", "cancelled") else None

        done = wait_for(finished, what="the import job")
        assert done["status"] == "succeeded", done["error"]
        row.refresh_from_db()
        assert row.worker_hostname == install.workers["cpu"]
        imported = Problem.objects.filter(unique_id__in=[p["unique_id"] for p in IMPORTED])
        assert sorted(imported.values_list("answer", flat=True)) == ["4", "8"]
        assert done["result"], done
        # The upload's store copy is gone once the job ended.
        from core import store

        assert not store.exists(row.upload)

    def start_registering_the_generator_on_gpu_b():
        # An operator puts the model files on gpu-b and records them there; the command runs
        # while the other flows go on (publishing 540 MB takes a while).
        shutil.copytree(
            smollm2_checkpoint, gpu_b.real / "models" / SMOLLM2_NAME, copy_function=link
        )
        state["registering"] = gpu_b.start(
            [sys.executable, str(ROOT / "manage.py"), "register_models"], label="register_models"
        )

    def generator_registered_on_gpu_b():
        process = state["registering"]
        process.wait(timeout=WAIT_S)
        said = process.log_path.read_text(errors="replace")
        assert process.returncode == 0 and f"added {SMOLLM2_NAME}" in said, said
        model = LocalModel.objects.get(name=SMOLLM2_NAME)
        assert_a_reference(model.artifact, prefix="local-models/", install=install)
        assert not (cpu.real / "models" / SMOLLM2_NAME).exists()
        state["local_model"] = model.artifact

    def open_a_live_round_on_the_web_host():
        # Opened once the pool is scored (flow 3): the round's trajectory is a new solution.
        problem = Problem.objects.get(unique_id=IMPORTED[0]["unique_id"])
        admin.post(
            "/api/live/generations/",
            201,
            json={
                "problems": [problem.pk],
                "generator": {"backend": "local", "model": SMOLLM2_NAME},
                "settings": {"temperature": 0.7, "max_tokens": 24, "seed": 3},
                "proposals": 2,
            },
        )
        served = annotator.post("/api/sessions/next/")
        state["live_session"] = served["session"]["id"]

    def finish_the_live_round():
        session = state["live_session"]

        def proposed():
            current = annotator.get(f"/api/live/sessions/{session}/")["current"]
            return current if current and current["status"] != "pending" else None

        current = wait_for(proposed, what="the live proposals", timeout=LIVE_WAIT_S)
        assert current["status"] == "ready", current["error"]
        texts = [p["text"] for p in current["proposals"]]
        assert texts and all(t.strip() for t in texts), texts
        for c in range(len(texts)):
            annotator.post(
                f"/api/live/sessions/{session}/rate/",
                json={"step_index": 0, "completion_index": c, "rating": -1},
            )
        annotator.post(
            f"/api/live/sessions/{session}/write/",
            json={"step_index": 0, "text": "# Answer\n\n4"},
        )
        ended = annotator.get(f"/api/live/sessions/{session}/")
        assert not ended["open"] and ended["finish_reason"] == "solution", ended
        row = LabelingSession.objects.select_related("solution").get(pk=session)
        assert row.solution.problem.unique_id == IMPORTED[0]["unique_id"]
        assert row.solution.is_correct
        # The cpu worker proposed them, from its own cache's copy of gpu-b's files.
        assert in_cache(cpu, state["local_model"])

    def training_on_a_gpu_host():
        def finished():
            run = TrainingRun.objects.get(pk=state["run"])
            return run if run.status in TrainingRun.FINISHED else None

        run = wait_for(finished, what="the training run")
        assert run.status == "succeeded", f"{run.error}\n{run.log_tail}"
        assert run.worker_hostname in gpu_workers, run.worker_hostname
        state["version"] = ModelVersion.objects.get(training_run=run)

    def checkpoint_is_a_store_reference():
        version = state["version"]
        prefix = f"checkpoints/run-{version.training_run_id}-"
        assert_a_reference(version.checkpoint, prefix=prefix, install=install)
        shown = admin.get(f"/api/model-versions/{version.pk}/")
        assert shown["checkpoint"] == version.checkpoint and not shown["is_active"]

    def evaluation_on_a_gpu_host():
        version = state["version"]

        def finished():
            evaluation = Evaluation.objects.filter(model_version=version).first()
            return (
                evaluation if evaluation and evaluation.status in ("succeeded", "failed") else None
            )

        evaluation = wait_for(finished, what="the evaluation")
        assert evaluation.status == "succeeded", f"{evaluation.error}\n{evaluation.log_tail}"
        assert evaluation.evaluation_set_id == state["evaluation_set"]
        assert evaluation.worker_hostname in gpu_workers
        assert evaluation.done == evaluation.total == len(PROCESSBENCH)
        figures = evaluation.results["figures"]
        for name in ("first_error_f1", "step_auroc", "best_of_n"):
            figure = figures[name]
            assert figure["low"] <= figure["value"] <= figure["high"], (name, figure)
            assert figure["baselines"], (name, figure)
        [shown] = admin.get(f"/api/model-versions/{version.pk}/")["evaluations"]
        assert shown["status"] == "succeeded" and shown["results"]["figures"]

    def activation_scored():
        version = state["version"]
        answer = admin.post(f"/api/model-versions/{version.pk}/activate/")
        assert answer["is_active"]
        pool = Solution.objects.count()

        def scored():
            left = Solution.objects.exclude(prm_model_version=version).count()
            chunks = ScoringChunk.objects.filter(model_version=version)
            return left == 0 and chunks.exists() and not chunks.exclude(status="succeeded")

        wait_for(scored, what=f"the {pool} solutions to be scored")
        chunks = ScoringChunk.objects.filter(model_version=version)
        assert chunks.count() >= 2
        assert set(chunks.values_list("worker_hostname", flat=True)) == gpu_workers
        assert sum(chunks.values_list("scored", flat=True)) == pool
        some = Solution.objects.order_by("pk").first()
        assert len(some.prm_step_scores) == len(some.steps)
        assert 0.0 <= some.prm_score <= 1.0
        # Both gpu hosts read the checkpoint into their own caches.
        assert in_cache(gpu_a, version.checkpoint) and in_cache(gpu_b, version.checkpoint)
        progress = admin.get(f"/api/model-versions/{version.pk}/")["scoring"]
        assert progress["scored"] == pool, progress

    def score_api_on_the_web_host():
        version = state["version"]
        assert not in_cache(web, version.checkpoint)
        pooled = Solution.objects.order_by("pk").select_related("problem").first()
        posted = [{"problem": POSTED_PROBLEM, "steps": steps} for steps in POSTED]
        posted.append({"problem": pooled.problem.text, "steps": pooled.steps})
        answer = admin.post("/api/score/", json={"solutions": posted})
        assert answer["model_version"] == version.pk
        scored = answer["solutions"]
        assert [len(s["step_scores"]) for s in scored] == [len(p["steps"]) for p in posted]
        for s in scored:
            assert all(0.0 <= x <= 1.0 for x in s["step_scores"]) and s["score"] is not None
        # The numbers the gpu hosts stored for the same solution.
        assert scored[-1]["step_scores"] == pytest.approx(pooled.prm_step_scores, abs=1e-5)
        assert in_cache(web, version.checkpoint)
        state["posted_scores"] = [s["step_scores"] for s in scored[:-1]]

    def hf_export():
        version = state["version"]
        out = install.cluster.common / "export"
        said = web.manage("export_model_version", str(version.pk), "--out", str(out)).stdout
        assert "exported" in said, said
        assert (web.real / "export" / "config.json").is_file()
        for other in (cpu, gpu_a, gpu_b):
            assert not (other.real / "export").exists()
        # transformers alone, on the web host, in a process that cannot import stepwise.
        loaded = web.run(
            [sys.executable, "-c", OUTSIDE, str(out), POSTED_PROBLEM, json.dumps(POSTED)],
            cwd=install.cluster.common,
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        )
        result = json.loads(loaded.stdout.strip().splitlines()[-1])
        assert result["class"].endswith("ForTokenClassification"), result["class"]
        if "posted_scores" in state:
            for mine, theirs in zip(result["scores"], state["posted_scores"], strict=True):
                assert mine == pytest.approx(theirs, abs=1e-5)

    def no_host_path_in_any_record():
        from django.apps import apps

        found = []
        paths = host_paths(install)
        for model in apps.get_models():
            if model._meta.app_label not in {"generators", "labeling", "trainer", "core"}:
                continue
            texts = [
                f.name
                for f in model._meta.concrete_fields
                if f.get_internal_type() in ("CharField", "TextField", "JSONField")
            ]
            for row in model.objects.values("pk", *texts):
                for name in texts:
                    value = json.dumps(row[name], default=str)
                    for path in paths:
                        if (at := value.find(path)) >= 0:
                            seen = value[max(0, at - 120) : at + 120]
                            found.append(f"{model.__name__} {row['pk']}.{name}: …{seen}…")
        assert not found, "\n".join(found)

    checks.run("0 each host sees only its own directory", privacy)
    checks.run(PUT, start_registering_the_generator_on_gpu_b)
    checks.run(EVAL, register_evaluation_set)
    checks.run(TRAIN, request_training)
    checks.run(IMPORT, import_through_the_web_host)
    checks.run(TRAINED, training_on_a_gpu_host, needs=(TRAIN,))
    # Apart, so that a version recorded by a host path still shows where the others fail.
    checks.run(
        "2c its checkpoint is a store reference", checkpoint_is_a_store_reference, needs=(TRAINED,)
    )
    checks.run("6b evaluation on a gpu host", evaluation_on_a_gpu_host, needs=(EVAL, TRAINED))
    checks.run(ACTIVE, activation_scored, needs=(TRAINED,))
    checks.run(REGISTERED, generator_registered_on_gpu_b, needs=(PUT,))
    # The live round's proposals are made on the cpu host while the web host does 4 and 5.
    checks.run(OPENED, open_a_live_round_on_the_web_host, needs=LIVE)
    checks.run("4 POST /api/score/ (web)", score_api_on_the_web_host, needs=(ACTIVE,))
    checks.run("5 HF export (web) loads in transformers", hf_export, needs=(TRAINED,))
    checks.run("7d live round: proposals from cpu", finish_the_live_round, needs=(OPENED,))
    checks.run("no host path in any record", no_host_path_in_any_record)

    report = checks.report(
        f"many hosts, {request.node.callspec.id} store, up in {install.ready_seconds:.0f} s"
    )
    print(report)
    if checks.failures:
        details = "\n".join(f"--- {name}\n{text}" for name, text in checks.failures.items())
        pytest.fail(f"{report}\n{details}", pytrace=False)
