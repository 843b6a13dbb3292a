"""Requests the server makes on a researcher's behalf (generators/outbound.py).

A real HTTP server on 127.0.0.1 stands in for a hostile host a researcher points a run at: it
records every request's headers and answers as told (a chat completion, an error whose body
holds a secret, a redirect to another port). A researcher's own URL may reach 127.0.0.1 only
where a test lists it in GENERATOR_ALLOWED_NETWORKS, as an operator would list a network;
addresses other than 127.0.0.1 are refused without a connection (the rule is checked before
any is made), and names are resolved by a stand-in resolver where a test needs a name.
Over 500 lines on purpose: every outbound rule is tested against the one recording server.
"""

import io
import json
import socket
import socketserver
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from generators import (
    GenerationRequest,
    GeneratorSpec,
    InvalidGenerator,
    SamplingSettings,
    open_generator,
    outbound,
)
from generators.prompts import solution_messages
from labeling.models import Problem, Solution
from trainer.models import SamplingRun
from trainer.sampling import services as sampling

OPERATOR_KEY = "sk-operator-0f1e2d3c4b5a"
RESEARCHER_KEY = "sk-researcher-9a8b7c6d"
# What a service behind the URL must never see travel back to the researcher.
REPLY_SECRET = "sk-live-REPLYSECRET-77c1"
ANSWER = "Add: $2 + 3 = 5$.\n\n# Answer\n\n5"
LOOPBACK_ONLY = ["127.0.0.1/32"]


def completion(text: str) -> dict:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


@dataclass
class Recorder:
    """A server on 127.0.0.1 that records each request. By path: /ok/ answers a chat
    completion, /leak400/ and /leak500/ an error whose body holds REPLY_SECRET, /redirect/ a
    307 to `redirect_to`."""

    base: str = ""
    seen: list[dict] = field(default_factory=list)
    redirect_to: str = ""

    def authorizations(self) -> list[str]:
        return [headers.get("authorization", "") for headers in self.seen]

    def reply(self, path: str) -> tuple[int, dict, bytes]:
        if path.startswith("/ok/"):
            return 200, {"Content-Type": "application/json"}, json.dumps(completion(ANSWER))
        if path.startswith("/leak400/"):
            body = {"error": {"message": f"database password is {REPLY_SECRET}"}}
            return 400, {"Content-Type": "application/json"}, json.dumps(body)
        if path.startswith("/leak500/"):
            return 500, {"Content-Type": "text/plain"}, f"Traceback: token={REPLY_SECRET}"
        if path.startswith("/redirect/"):
            return 307, {"Location": self.redirect_to}, ""
        return 404, {"Content-Type": "text/plain"}, f"no route; {REPLY_SECRET}"


def _serve(recorder: Recorder):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            recorder.seen.append({k.lower(): v for k, v in self.headers.items()})
            status, headers, body = recorder.reply(self.path)
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def recorders():
    """`recorders(n)`: n recording servers on 127.0.0.1, shut down after the test."""
    servers = []

    def start(n: int = 1) -> list[Recorder]:
        made = [Recorder() for _ in range(n)]
        servers.extend(_serve(r) for r in made)
        return made

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def recorder(recorders) -> Recorder:
    return recorders(1)[0]


@pytest.fixture
def operator(settings):
    """An operator who set a key for a generator of theirs elsewhere, and nothing else."""
    settings.GENERATOR_BASE_URL = "http://generator.operator.invalid:8000/v1"
    settings.GENERATOR_MODEL = "operator-model"
    settings.GENERATOR_API_KEY = OPERATOR_KEY
    settings.GENERATOR_ALLOWED_BASE_URLS = []
    settings.GENERATOR_ALLOWED_NETWORKS = []
    settings.GENERATOR_TIMEOUT_SECONDS = 5
    return settings


@pytest.fixture
def eager(monkeypatch):
    """Tasks run where they are queued (the message, and what it carries, included)."""
    from annotate.celery import app

    monkeypatch.setattr(app.conf, "task_always_eager", True)


@pytest.fixture
def researcher(client, make_user):
    client.force_login(make_user("rita", "researcher"))
    return client


@pytest.fixture
def problem(db) -> Problem:
    return Problem.objects.create(text="What is $2 + 3$?", answer="5")


@pytest.fixture
def resolver(monkeypatch):
    """`resolver(name, *addresses)`: the name resolves to those addresses (a list, changed in
    place, is what each later lookup sees); other names resolve as usual."""
    real = socket.getaddrinfo
    names: dict[str, list[str]] = {}
    lookups: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in names:
            return real(host, port, *args, **kwargs)
        lookups.append(name)
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, int(port or 0)),
            )
            for a in names[name]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    def add(name: str, *addresses: str) -> list[str]:
        names[name] = list(addresses)
        return names[name]

    add.lookups = lookups
    return add


def api_start(client, problem, *, base_url: str, api_key: str | None = None, model: str = "m"):
    body = {
        "problem_ids": [problem.pk],
        "samples": 1,
        "generator": {"backend": "openai", "model": model, "base_url": base_url},
        "sampling": {"max_tokens": 16},
    }
    if api_key is not None:
        body["api_key"] = api_key
    return client.post("/api/sampling-runs/", body, content_type="application/json")


def run_service(problem, base_url: str) -> SamplingRun:
    """A run recorded by the service directly, as if its URL had got past every edge."""
    run = sampling.request_sampling_run(
        user=None,
        purpose="solutions",
        generator=GeneratorSpec(backend="openai", model="m", base_url=base_url),
        settings=SamplingSettings(max_tokens=16),
        samples=1,
        problem_ids=[problem.pk],
        enqueue=False,
    )
    return sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")


def dump_everything() -> str:
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    return out.getvalue()


# --- (a) the operator's key stays with the operator's URLs -------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("api_key", [None, RESEARCHER_KEY], ids=["no-key", "own-key"])
def test_a_run_at_a_researchers_url_never_carries_the_operators_key(
    operator,
    recorder,
    researcher,
    problem,
    eager,
    django_capture_on_commit_callbacks,
    caplog,
    api_key,
):
    operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY  # the hostile host's network

    with django_capture_on_commit_callbacks(execute=True):
        response = api_start(
            researcher, problem, base_url=f"{recorder.base}/ok/v1", api_key=api_key
        )

    assert response.status_code == 201, response.content
    run = SamplingRun.objects.get()
    assert run.status == "succeeded", run.error
    assert Solution.objects.filter(sampling_run=run).count() == 1
    assert recorder.seen, "the researcher's server was asked"
    everything_sent = json.dumps(recorder.seen)
    assert OPERATOR_KEY not in everything_sent
    assert recorder.authorizations() == [f"Bearer {api_key or 'EMPTY'}"]
    # The researcher's key was used for the run and kept nowhere: not in the database, the
    # API's answer, nor a log line.
    if api_key:
        assert api_key not in dump_everything()
        assert api_key not in response.content.decode()
        assert api_key not in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["api", "page"])
def test_a_resumed_run_at_a_researchers_url_is_sent_the_key_given_again(
    operator, recorder, researcher, problem, eager, django_capture_on_commit_callbacks, where
):
    operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY
    with django_capture_on_commit_callbacks(execute=True):
        api_start(researcher, problem, base_url=f"{recorder.base}/ok/v1", api_key=RESEARCHER_KEY)
    run = SamplingRun.objects.get()
    # As a run a killed worker left: failed, its item not done.
    run.items.update(done_at=None)
    Solution.objects.filter(sampling_run=run).delete()
    SamplingRun.objects.filter(pk=run.pk).update(status="failed")
    recorder.seen.clear()
    page = researcher.get(reverse("sampling-detail", args=[run.pk])).content.decode()
    assert 'name="api_key"' in page, "the page asks for the key again"

    with django_capture_on_commit_callbacks(execute=True):
        if where == "api":
            answer = researcher.post(
                f"/api/sampling-runs/{run.pk}/resume/",
                {"api_key": RESEARCHER_KEY},
                content_type="application/json",
            )
            assert answer.status_code == 200, answer.content
            assert RESEARCHER_KEY not in answer.content.decode()
        else:
            researcher.post(reverse("sampling-resume", args=[run.pk]), {"api_key": RESEARCHER_KEY})

    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert recorder.authorizations() == [f"Bearer {RESEARCHER_KEY}"]
    assert RESEARCHER_KEY not in dump_everything()


@pytest.mark.django_db
def test_a_researchers_key_travels_in_the_task_message_only_shown_as_stars(
    operator, problem, monkeypatch, resolver, django_capture_on_commit_callbacks
):
    from annotate.celery import app
    from trainer import tasks  # noqa: F401 - registers the task

    resolver("gen.example.com", "93.184.216.34")
    sent = {}
    task = app.tasks[sampling.SAMPLING_TASK]
    monkeypatch.setattr(task, "apply_async", lambda *args, **kwargs: sent.update(kwargs))
    spec = GeneratorSpec.requested(
        {"backend": "openai", "model": "m", "base_url": "https://gen.example.com/v1"},
        api_key=RESEARCHER_KEY,
    )

    with django_capture_on_commit_callbacks(execute=True):
        sampling.request_sampling_run(
            user=None,
            purpose="solutions",
            generator=spec,
            settings=SamplingSettings(),
            samples=1,
            problem_ids=[problem.pk],
        )

    assert sent["kwargs"] == {"api_key": RESEARCHER_KEY}
    # Where a message's arguments are printed (the worker's log, `celery inspect`).
    assert RESEARCHER_KEY not in sent["kwargsrepr"]
    assert RESEARCHER_KEY not in repr(spec)
    assert RESEARCHER_KEY not in dump_everything()


@pytest.mark.django_db
def test_a_url_that_only_looks_like_the_operators_is_a_researchers(operator, recorder, problem):
    # The operator's own server, on loopback, with its key...
    operator.GENERATOR_ALLOWED_BASE_URLS = [f"{recorder.base}/ok/v1"]
    # ...and URLs that reach the same server but are not the URL the operator listed.
    for base_url in (f"{recorder.base}/ok/v1/../../leak400/v1", f"{recorder.base}/leak400/v1"):
        run = run_service(problem, base_url)
        assert run.status == "failed" and "loopback" in run.error
    assert recorder.seen == []


# --- (b) addresses a researcher's URL may not reach, refused at every edge ----------------------

REFUSED = [
    ("http://127.0.0.1:8000/v1", "loopback"),
    ("http://localhost:8000/v1", "loopback"),
    ("http://LOCALHOST./v1", "loopback"),
    ("http://api.localhost/v1", "loopback"),
    ("http://0x7f000001/v1", "hexadecimal"),
    ("http://2130706433/v1", "decimal"),
    ("http://0177.0.0.1/v1", "octal"),
    ("http://127.1/v1", "short form"),
    ("http://[::ffff:127.0.0.1]/v1", "loopback"),
    ("http://[::ffff:7f00:1]:6379/", "loopback"),
    ("http://[::1]:5432/v1", "loopback"),
    ("http://0.0.0.0:6379/v1", "unspecified"),
    ("http://[::]/v1", "unspecified"),
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://[fe80::1]/v1", "link-local"),
    ("http://10.0.0.5:8000/v1", "private"),
    ("http://172.16.3.4/v1", "private"),
    ("http://192.168.1.1/v1", "private"),
    ("http://[fd00::1]/v1", "private"),
    ("http://100.64.0.1/v1", "non-public"),
    ("http://224.0.0.1/v1", "multicast"),
    ("http://240.0.0.1/v1", "reserved"),
    ("http://[2002:7f00:1::1]/v1", "loopback"),  # 6to4 around 127.0.0.1
    ("http://[64:ff9b::a9fe:a9fe]/v1", "link-local"),  # NAT64 around 169.254.169.254
    ("http://[::1", "not a well-formed URL"),
    ("http://host:99999/v1", "not a well-formed URL"),
    ("http://user:pass@gen.example.com/v1", "user name or password"),
    ("http://gen.example.com/v1?x=1", "query"),
    ("http://gen_example.com/v1", "not a valid host name"),
    ("http://gen.example.com\\@127.0.0.1/v1", "user name or password"),
    ("file:///etc/passwd", "http:// or https://"),
    ("gopher://127.0.0.1:6379/_INFO", "http:// or https://"),
    ("ftp://gen.example.com/", "http:// or https://"),
    ("http://private.example.test/v1", "resolves to 10.1.2.3"),
    ("http://mixed.example.test/v1", "resolves to 192.168.0.9"),
    ("http://nowhere.example.test/v1", "does not resolve"),
]
REFUSED_IDS = [url for url, _ in REFUSED]


@pytest.fixture
def names(resolver):
    """Names whose answers are private: one wholly, one among public addresses."""
    resolver("private.example.test", "10.1.2.3")
    resolver("mixed.example.test", "93.184.216.34", "192.168.0.9")
    resolver("gen.example.com", "93.184.216.34")
    return resolver


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "why"), REFUSED, ids=REFUSED_IDS)
def test_the_api_refuses_a_url_a_researcher_may_not_reach_with_400(
    operator, names, researcher, problem, url, why
):
    response = api_start(researcher, problem, base_url=url, api_key=RESEARCHER_KEY)

    assert response.status_code == 400, response.content
    assert why in response.json()["detail"]
    assert RESEARCHER_KEY not in response.content.decode()
    assert not SamplingRun.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "why"), REFUSED[::3], ids=REFUSED_IDS[::3])
def test_the_live_api_refuses_them_too(operator, names, researcher, problem, url, why):
    body = {
        "problems": [problem.pk],
        "generator": {"backend": "openai", "model": "m", "base_url": url},
        "proposals": 2,
    }
    response = researcher.post(
        reverse("api-live-generations"), body, content_type="application/json"
    )

    assert response.status_code == 400, response.content
    assert why in response.json()["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "why"), REFUSED[1::3], ids=REFUSED_IDS[1::3])
def test_the_forms_refuse_them_with_the_reason(operator, names, researcher, problem, url, why):
    sampling_form = {
        "purpose": "solutions",
        "problem_ids": str(problem.pk),
        "limit": 5,
        "samples": 1,
        "backend": "openai",
        "model": "m",
        "base_url": url,
        "api_key": RESEARCHER_KEY,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 16,
        "seed": 0,
    }
    page = researcher.post(reverse("sampling-list"), sampling_form)
    assert page.status_code == 400
    text = page.content.decode()
    assert why in text
    # The key typed into the form is not written back into the page.
    assert RESEARCHER_KEY not in text

    live_form = {
        "problems": str(problem.pk),
        "backend": "openai",
        "model": "m",
        "base_url": url,
        "proposals": 2,
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 16,
        "seed": 0,
    }
    page = researcher.post(reverse("live-generation-new"), live_form)
    assert page.status_code == 400 and why in page.content.decode()
    assert not SamplingRun.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "why"), REFUSED[2::3], ids=REFUSED_IDS[2::3])
def test_the_sample_command_refuses_them(operator, names, problem, url, why):
    with pytest.raises(CommandError) as refused:
        call_command(
            "sample",
            *("--problems", str(problem.pk), "--model", "m", "--base-url", url),
            *("--samples", "1"),
            stdout=io.StringIO(),
        )

    assert why in str(refused.value)
    assert not SamplingRun.objects.exists()


@pytest.mark.django_db
def test_the_sample_command_sends_the_key_named_by_its_variable_not_the_operators(
    operator, recorder, problem, monkeypatch
):
    operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY
    monkeypatch.setenv("MY_GENERATOR_KEY", RESEARCHER_KEY)

    call_command(
        "sample",
        *("--problems", str(problem.pk), "--model", "m", "--samples", "1"),
        *("--base-url", f"{recorder.base}/ok/v1", "--api-key-env", "MY_GENERATOR_KEY"),
        stdout=io.StringIO(),
    )

    assert SamplingRun.objects.get().status == "succeeded"
    assert recorder.authorizations() == [f"Bearer {RESEARCHER_KEY}"]
    assert RESEARCHER_KEY not in dump_everything()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "host",
    ["localhost", "0x7f000001", "2130706433", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]"],
)
def test_the_worker_refuses_a_url_that_got_past_the_edge_without_connecting(
    operator, recorder, problem, host
):
    port = recorder.base.rsplit(":", 1)[1]

    run = run_service(problem, f"http://{host}:{port}/ok/v1")

    assert run.status == "failed"
    assert "refused" in run.error and host.strip("[]") in run.error
    assert recorder.seen == []


@pytest.mark.django_db
def test_a_name_that_rebinds_to_loopback_after_the_check_reaches_nothing(
    operator, recorder, resolver
):
    port = recorder.base.rsplit(":", 1)[1]
    answers = resolver("rebind.example.test", "93.184.216.34")
    spec = GeneratorSpec.requested(
        {"backend": "openai", "model": "m", "base_url": f"http://rebind.example.test:{port}/ok/v1"}
    )
    generator = open_generator(spec)  # the worker's check: still a public address
    answers[:] = ["127.0.0.1"]  # the name's owner now answers with this machine
    request = GenerationRequest(messages=solution_messages(problem="1 + 1?"), seed=0)

    with pytest.raises(InvalidGenerator, match="resolves to 127.0.0.1, a loopback address"):
        generator.generate(requests=[request], settings=SamplingSettings(max_tokens=8))
    generator.close()

    assert recorder.seen == []


@pytest.mark.django_db
def test_the_connection_goes_to_the_address_checked_with_the_hosts_name(
    operator, recorder, resolver, monkeypatch
):
    # No second lookup between the check and the connection: the address checked is the
    # address connected to, and the server still sees its own name.
    operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY
    port = recorder.base.rsplit(":", 1)[1]
    resolver("pinned.example.test", "127.0.0.1")
    checked = []
    real_resolve = outbound.resolve
    monkeypatch.setattr(
        outbound, "resolve", lambda host, port: checked.append(host) or real_resolve(host, port)
    )
    spec = GeneratorSpec(
        backend="openai", model="m", base_url=f"http://pinned.example.test:{port}/ok/v1"
    )
    generator = open_generator(spec)
    request = GenerationRequest(messages=solution_messages(problem="1 + 1?"), seed=0)

    texts = generator.generate(requests=[request, request], settings=SamplingSettings())
    generator.close()

    assert texts == [ANSWER, ANSWER]
    assert [h["host"] for h in recorder.seen] == [f"pinned.example.test:{port}"] * 2
    assert len(resolver.lookups) == len(checked) == 3  # the worker's check, then each request


# --- (c) redirects are not followed ------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("whose", ["researcher", "operator"])
def test_a_redirect_to_another_port_is_not_followed(operator, recorders, problem, whose):
    first, second = recorders(2)
    first.redirect_to = f"{second.base}/ok/v1/chat/completions"
    base_url = f"{first.base}/redirect/v1"
    if whose == "operator":
        operator.GENERATOR_ALLOWED_BASE_URLS = [base_url]
    else:
        operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY

    run = run_service(problem, base_url)

    assert run.status == "failed"
    assert "HTTP 307" in run.error and "redirect, which is not followed" in run.error
    assert len(first.seen) == 1
    assert second.seen == []


# --- (d) what a server answers never comes back as text ----------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("whose", ["researcher", "operator"])
@pytest.mark.parametrize(("path", "status"), [("leak400", 400), ("leak500", 500)])
def test_an_error_reply_is_reported_by_status_and_host_never_its_text(
    operator, recorder, problem, caplog, whose, path, status
):
    base_url = f"{recorder.base}/{path}/v1"
    if whose == "operator":
        operator.GENERATOR_ALLOWED_BASE_URLS = [base_url]
    else:
        operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY

    run = run_service(problem, base_url)

    assert run.status == "failed"
    assert f"HTTP {status}" in run.error and "127.0.0.1" in run.error
    assert REPLY_SECRET not in run.error and REPLY_SECRET not in run.log_tail
    if whose == "researcher":
        assert REPLY_SECRET not in caplog.text


class _Banner(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.recv(65536)
        # A blank line ends it, so the HTTP client reads it whole as a status line.
        self.request.sendall(f"SSH-2.0-OpenSSH_9.6 {REPLY_SECRET}\r\n\r\n".encode())


@pytest.mark.django_db
def test_a_service_that_does_not_speak_http_is_not_quoted(operator, problem):
    # What an SSH, Redis or PostgreSQL port sends back (a banner) is not in the error.
    operator.GENERATOR_ALLOWED_NETWORKS = LOOPBACK_ONLY
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Banner) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            run = run_service(problem, f"http://127.0.0.1:{server.server_address[1]}/v1")
        finally:
            server.shutdown()

    assert run.status == "failed" and "cannot be reached" in run.error
    assert REPLY_SECRET not in run.error and "SSH" not in run.error


# --- (e) the operator's URLs work, with the operator's key --------------------------------------


@pytest.mark.django_db
def test_an_allow_listed_url_on_loopback_works_with_the_operators_key(
    operator, recorder, researcher, problem, eager, django_capture_on_commit_callbacks
):
    allowed = f"{recorder.base}/ok/v1"
    operator.GENERATOR_ALLOWED_BASE_URLS = [allowed]
    # Offered on the form.
    assert allowed in researcher.get(reverse("sampling-list")).content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        response = api_start(researcher, problem, base_url=allowed + "/")

    assert response.status_code == 201, response.content
    run = SamplingRun.objects.get()
    assert run.status == "succeeded", run.error
    assert recorder.authorizations() == [f"Bearer {OPERATOR_KEY}"]


@pytest.mark.django_db
def test_the_configured_generator_on_loopback_is_the_default_with_its_key(
    operator, recorder, researcher, problem, eager, django_capture_on_commit_callbacks
):
    operator.GENERATOR_BASE_URL = f"{recorder.base}/ok/v1"
    body = {"problem_ids": [problem.pk], "samples": 1, "sampling": {"max_tokens": 16}}

    with django_capture_on_commit_callbacks(execute=True):
        response = researcher.post("/api/sampling-runs/", body, content_type="application/json")

    assert response.status_code == 201, response.content
    assert SamplingRun.objects.get().status == "succeeded"
    assert recorder.authorizations() == [f"Bearer {OPERATOR_KEY}"]


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("GENERATOR_ALLOWED_NETWORKS", "10.0.0.0/8, not-a-network", "not-a-network"),
        ("GENERATOR_ALLOWED_BASE_URLS", "127.0.0.1:8000/v1", "127.0.0.1:8000/v1"),
    ],
)
def test_a_malformed_outbound_setting_stops_start_up(variable, value, named):
    import subprocess
    import sys

    from django.conf import settings

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={
            "DJANGO_SETTINGS_MODULE": "annotate.settings",
            variable: value,
            "STEPWISE_VAR_DIR": str(settings.VAR_DIR),
            "PATH": "/usr/bin:/bin",
        },
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
    )

    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr
    assert f"{variable}: {named!r}" in done.stderr
