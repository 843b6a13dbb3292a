"""Generators behind one interface, with the real SmolLM2-135M-Instruct through both backends:
a `transformers serve` process (openai) and the checkpoint loaded in this process (local).

Token budgets are small: the point is what comes back (how many, parsed, reproducible, the
right refusal), not how good a 135M model is at mathematics.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from generators import (
    GenerationRequest,
    GeneratorSpec,
    GeneratorUnavailable,
    InvalidGenerator,
    SamplingSettings,
    open_generator,
    parse_solution,
    propose_next_steps,
    roll_out,
    sample_solutions,
)
from generators.models import LocalModel
from generators.prompts import solution_messages

PROBLEM = "What is $3 \\cdot 7 + 4$?"
STEPS = ["First multiply: $3 \\cdot 7 = 21$."]


@pytest.fixture
def generator(generator_spec):
    generator = open_generator(generator_spec)
    yield generator
    generator.close()


@pytest.mark.django_db
def test_sampled_solutions_are_parsed_and_the_same_seed_draws_them_again(generator, settings):
    # `transformers serve` seeds one global generator per request, so requests it runs side by
    # side reseed each other's sampling: only requests sent one at a time are reproducible
    # there (vLLM seeds each request). The local backend's batches do not share randomness.
    settings.GENERATOR_CONCURRENCY = 1 if generator.spec.backend == "openai" else 3
    sampling = SamplingSettings(temperature=0.9, top_p=0.95, max_tokens=32, seed=11)

    first = sample_solutions(generator=generator, problem=PROBLEM, n=3, settings=sampling)
    again = sample_solutions(generator=generator, problem=PROBLEM, n=3, settings=sampling)
    other = sample_solutions(
        generator=generator, problem=PROBLEM, n=3, settings=sampling, seed_offset=3
    )

    assert len(first) == 3
    assert all(s.steps and all(step.strip() for step in s.steps) for s in first)
    assert [s.steps for s in again] == [s.steps for s in first]
    # Seeds do reach the sampler: three seeds draw at least two different solutions, and
    # other seeds other solutions.
    assert len({tuple(s.steps) for s in first}) >= 2
    assert [s.steps for s in other] != [s.steps for s in first]


@pytest.mark.django_db
def test_proposals_are_at_most_k_distinct_non_empty_steps(generator):
    sampling = SamplingSettings(temperature=1.0, max_tokens=40, seed=5)

    proposals = propose_next_steps(
        generator=generator, problem=PROBLEM, steps=STEPS, k=3, settings=sampling
    )

    assert 1 <= len(proposals) <= 3
    assert all(p.strip() and "\n\n" not in p for p in proposals)
    assert len(set(proposals)) == len(proposals)
    assert STEPS[-1] not in proposals


@pytest.mark.django_db
def test_a_roll_out_continues_a_prefix(generator):
    sampling = SamplingSettings(temperature=0.7, max_tokens=64, seed=2)

    completions = roll_out(
        generator=generator, problem=PROBLEM, steps=STEPS, k=2, settings=sampling
    )

    assert len(completions) == 2
    assert all(c.steps for c in completions)
    for completion in completions:
        assert completion.finished == bool(completion.answer)


@pytest.mark.django_db
def test_requests_come_back_in_order_with_their_own_budget(generator, settings):
    settings.GENERATOR_CONCURRENCY = 4
    sampling = SamplingSettings(temperature=0, max_tokens=40)
    short = GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=0, max_tokens=4)
    long = GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=0)

    texts = generator.generate(requests=[long, short, long], settings=sampling)

    # Greedy: the same request gives the same text, and a 4-token reply is the start of it.
    assert texts[0] == texts[2]
    assert len(texts[1]) < len(texts[0]) and texts[0].startswith(texts[1])


@pytest.mark.django_db
def test_a_stop_string_ends_the_text_before_it(generator):
    sampling = SamplingSettings(temperature=0, max_tokens=48)
    messages = solution_messages(problem=PROBLEM)
    [whole] = generator.generate(
        requests=[GenerationRequest(messages=messages, seed=0)], settings=sampling
    )
    word = whole.split()[2]
    [stopped] = generator.generate(
        requests=[GenerationRequest(messages=messages, seed=0, stop=(word,))], settings=sampling
    )

    assert stopped == whole[: whole.index(word)]


@pytest.mark.django_db
def test_a_local_request_gives_the_same_text_alone_or_in_any_batch(smollm2_model_dir, settings):
    generator = open_generator(GeneratorSpec(backend="local", model=smollm2_model_dir.name))
    sampling = SamplingSettings(temperature=1.0, max_tokens=32)
    mine = GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=42)
    longer = solution_messages(problem="Find the sum of the integers from 1 to 100, explained.")
    others = [GenerationRequest(messages=longer, seed=seed) for seed in (1, 2)]

    settings.GENERATOR_CONCURRENCY = 1
    [alone] = generator.generate(requests=[mine], settings=sampling)
    settings.GENERATOR_CONCURRENCY = 3
    batched = generator.generate(requests=[others[0], mine, others[1]], settings=sampling)

    assert batched[1] == alone
    assert batched[0] != batched[2]


def test_a_server_that_is_down_is_unavailable_and_named(settings):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.GENERATOR_API_KEY = "sk-secret-key-1234"
    settings.GENERATOR_TIMEOUT_SECONDS = 5
    url = f"http://127.0.0.1:{port}/v1"
    settings.GENERATOR_ALLOWED_BASE_URLS = [url]
    generator = open_generator(GeneratorSpec(backend="openai", model="m-1", base_url=url))
    request = GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=0)

    with pytest.raises(GeneratorUnavailable) as refused:
        generator.generate(requests=[request], settings=SamplingSettings(max_tokens=8))

    message = str(refused.value)
    assert url in message and "m-1" in message and "cannot be reached" in message
    assert "sk-secret" not in message


class _OddServer(BaseHTTPRequestHandler):
    """A server that answers chat completions wrongly: by path, slowly, with HTML, with no
    choices."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.startswith("/slow"):
            time.sleep(3)
        if self.path.startswith("/html"):
            body, kind = b"<html>Bad gateway</html>", "text/html"
        else:
            body, kind = json.dumps({"id": "x", "choices": []}).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def odd_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OddServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/slow/v1", "did not answer within 1 s"),
        ("/html/v1", "no message text"),
        ("/v1", "no message text"),
    ],
    ids=["timeout", "html", "no-choices"],
)
def test_a_reply_that_is_not_a_completion_is_unavailable(odd_server, settings, path, what):
    settings.GENERATOR_TIMEOUT_SECONDS = 1
    url = odd_server + path
    settings.GENERATOR_ALLOWED_BASE_URLS = [url]
    generator = open_generator(GeneratorSpec(backend="openai", model="m-1", base_url=url))
    request = GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=0)

    with pytest.raises(GeneratorUnavailable, match=what) as refused:
        generator.generate(requests=[request], settings=SamplingSettings(max_tokens=8))

    assert url in str(refused.value) and "m-1" in str(refused.value)


def test_a_server_refusal_is_unavailable_with_its_status(allowed_openai_server):
    # The server serves one model: another name is refused with HTTP 400.
    openai_server = allowed_openai_server
    spec = GeneratorSpec(backend="openai", model="not-served", base_url=openai_server.base_url)
    generator = open_generator(spec)
    request = GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=0)

    with pytest.raises(GeneratorUnavailable, match="HTTP 400") as refused:
        generator.generate(requests=[request], settings=SamplingSettings(max_tokens=8))

    assert openai_server.base_url in str(refused.value) and "not-served" in str(refused.value)


@pytest.mark.django_db
def test_an_unknown_local_model_is_refused_naming_the_known_ones(smollm2_model_dir):
    with pytest.raises(InvalidGenerator, match="smollm2-135m-instruct") as refused:
        open_generator(GeneratorSpec(backend="local", model="llama-70b"))
    assert "llama-70b" in str(refused.value)


@pytest.mark.django_db
def test_a_gguf_model_is_refused_with_the_way_to_convert_it(settings, tmp_path):
    settings.PRM_MODEL_DIR = tmp_path
    LocalModel.objects.create(name="tiny.gguf", kind=LocalModel.Kind.GGUF, path="tiny.gguf")

    with pytest.raises(InvalidGenerator, match="convert_gguf"):
        open_generator(GeneratorSpec(backend="local", model="tiny.gguf"))


@pytest.mark.parametrize(
    ("reply", "steps", "answer"),
    [
        (
            "Multiply: $3 \\cdot 7 = 21$.\r\n\r\nAdd: $21 + 4 = 25$.\r\n\r\n# Answer\r\n\r\n25",
            ["Multiply: $3 \\cdot 7 = 21$.", "Add: $21 + 4 = 25$.", "# Answer\n\n25"],
            "25",
        ),
        (
            "Add.\n\n# Answer\n\n25\n\nI hope this helps! Let me know if you have questions.",
            ["Add.", "# Answer\n\n25"],
            "25",
        ),
        (
            "We sum:\n$$\n1 + 2 + \\cdots + 10\n\n= 55\n$$\n\n# Answer: 55",
            ["We sum:\n$$\n1 + 2 + \\cdots + 10\n= 55\n$$", "# Answer\n\n55"],
            "55",
        ),
        (
            "So $x = \\frac{7}{2}$.\n\nThe answer is $\\boxed{\\frac{7}{2}}$.\n\nDone!",
            # The sentence that only says the answer is the answer line's, not a step.
            ["So $x = \\frac{7}{2}$.", "# Answer\n\n\\frac{7}{2}"],
            "\\frac{7}{2}",
        ),
        # What SmolLM2-135M wrote (2026-11-24): an answer said, not marked; the heading twice;
        # the answer as a sentence under the heading.
        (
            "Multiply: $40 \\% \\times 65 = 26$.\n\nThe answer is $26$",
            ["Multiply: $40 \\% \\times 65 = 26$.", "# Answer\n\n$26$"],
            "$26$",
        ),
        ("Add.\n\n# Answer\n\n# Answer\n\n5", ["Add.", "# Answer\n\n5"], "5"),
        ("Add.\n\n# Answer\n\nThe answer is $672$.", ["Add.", "# Answer\n\n$672$"], "$672$"),
    ],
    ids=[
        "crlf",
        "trailing-chatter",
        "blank-line-in-display-math",
        "boxed",
        "answer-said",
        "heading-twice",
        "sentence-under-heading",
    ],
)
def test_replies_are_read_as_prm800k_steps(reply, steps, answer):
    parsed = parse_solution(reply)

    assert parsed.steps == steps
    assert (parsed.answer, parsed.finished) == (answer, True)


def test_a_reply_that_never_answers_is_unfinished():
    parsed = parse_solution("First, $3 \\cdot 7 = 21$.\n\nThen we add")

    assert parsed.steps == ["First, $3 \\cdot 7 = 21$.", "Then we add"]
    assert (parsed.answer, parsed.finished) == ("", False)
