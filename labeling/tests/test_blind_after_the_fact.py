"""Blind quality control stays blind after the fact (issue 41, item 11): nothing a labeler can
open about their own past work (their labels, one label, its session in the API, a
correction of it) tells quality-control or screening solutions from the others.

Twin worlds: the same rows rendered twice, once with the solutions (and the sessions served
from them) marked quality control or screening and once with the marks off, every other
field as it was. Whatever a labeler reads must be the same in both, up to what changes from
one request to the next (CSRF tokens, nonces, the clock)."""

import difflib
import itertools
import re
from contextlib import contextmanager

import pytest
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.base import reverse
from django.urls.exceptions import NoReverseMatch
from rest_framework.test import APIClient

from labeling.models import Generation, LabelingSession, Problem, Solution
from labeling.services.workbench import next_session, rate_step, submit_session

pytestmark = pytest.mark.django_db

GOLD = [1, 1, 1, 1]

# What differs between two requests for the same rows, masked before comparing.
_VOLATILE = [
    (re.compile(r"\b[A-Za-z0-9]{64}\b"), "<csrf>"),  # Django's masked CSRF tokens
    (re.compile(r'nonce="[^"]*"'), 'nonce="<nonce>"'),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"csrftoken=[^;]*"), "csrftoken=<csrf>"),
    (re.compile(r'"total_time":\d+'), '"total_time":<ms>'),  # the clock again
]


def masked(text: str) -> str:
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def diff(one: tuple, other: tuple) -> str:
    lines = [
        difflib.unified_diff(str(a).splitlines(), str(b).splitlines(), lineterm="")
        for a, b in zip(one, other, strict=True)
    ]
    return "\n".join(line for part in lines for line in part)


def seen(response) -> tuple:
    """What the labeler reads of a response: its status, the headers that say where to go or
    what came, and its body."""
    headers = {
        name: masked(response.headers.get(name, ""))
        for name in ("Content-Type", "Location", "HX-Redirect", "HX-Push-Url", "Allow")
    }
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, headers, masked(body.decode("utf-8", "replace"))


@contextmanager
def rolled_back():
    """Whatever happens inside is undone: the second world starts from the same rows."""
    point = transaction.savepoint()
    try:
        yield
    finally:
        transaction.savepoint_rollback(point)


def unflag() -> None:
    """The other world: no solution is gold any more, and the sessions served from gold read
    as if served from the leftover queue; every other field (gold ratings, generation, times,
    ratings) stays."""
    Solution.objects.update(is_quality_control=False, is_screening=False)
    LabelingSession.objects.filter(queue__in=["quality_control", "screening"]).update(
        is_quality_control=False, is_screening=False, queue="leftover"
    )


def label(labeler, *, finish=True) -> LabelingSession:
    session = next_session(labeler=labeler).session
    if finish:
        for index in range(4):
            rate_step(session_id=session.pk, labeler=labeler, step_index=index, rating=1)
        session = submit_session(session_id=session.pk, labeler=labeler, finish_reason="solution")
    return session


@pytest.fixture
def past_work(make_labeler, make_solution):
    """ann's own submitted screening, quality-control and ordinary labels, and an open
    quality-control session."""
    problem = Problem.objects.create(text="What is $3+4$?", answer="7")
    screening = Generation.objects.create(number=Generation.SCREENING)
    make_solution(problem, 0, is_screening=True, generation=screening, gold_ratings=GOLD)
    make_solution(problem, 1, is_quality_control=True, gold_ratings=GOLD)
    ann = make_labeler("ann")
    sessions = {"screening": label(ann), "quality_control": label(ann)}
    # An ordinary solution with gold ratings too: the marks are all that differ.
    make_solution(problem, 2, gold_ratings=GOLD, labels_wanted=1)
    sessions["ordinary"] = label(ann)
    make_solution(problem, 3, is_quality_control=True, gold_ratings=GOLD)
    sessions["open"] = label(ann, finish=False)
    assert [s.queue for s in sessions.values()] == [
        "screening",
        "quality_control",
        "leftover",
        "quality_control",
    ]
    return ann, sessions


def _named_routes(resolver, namespace=""):
    for key in resolver.reverse_dict:
        if isinstance(key, str):
            for possibilities, *_ in resolver.reverse_dict.getlist(key):
                for _, params in possibilities:
                    yield namespace + key, tuple(params)
    for name, (_, sub) in resolver.namespace_dict.items():
        yield from _named_routes(sub, f"{namespace}{name}:")


def _unnamed(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _unnamed(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and not pattern.name:
            yield prefix + str(pattern.pattern)


def labeler_urls(ann, sessions) -> list[str]:
    """Every route of the site, each with every id of ann's past work (her sessions, their
    solutions and problem) in its parameters, and her UUID where a UUID goes."""
    ids = {s.pk for s in sessions.values()} | {s.solution_id for s in sessions.values()}
    ids |= {s.solution.problem_id for s in sessions.values()}
    candidates = [str(i) for i in sorted(ids)] + [str(ann.uuid), "labeling", "x"]
    urls = set()
    for name, params in set(_named_routes(get_resolver())):
        fixed = {"format": "json"}
        varying = [p for p in params if p not in fixed]
        for value in candidates if varying else [None]:
            kwargs = {p: fixed[p] for p in params if p in fixed} | dict.fromkeys(varying, value)
            try:
                urls.add(reverse(name, kwargs=kwargs))
            except NoReverseMatch:
                continue
    return sorted(urls)


def test_every_route_is_named_so_the_twin_test_reaches_it():
    unnamed = list(_unnamed(get_resolver().url_patterns))
    # Besides the admin's redirects from an object's old URL to its change page and its
    # catch-all for unknown admin URLs, which read nothing but the URL.
    admin_redirect = re.compile(r"admin/(\w+/\w+/<path:object_id>/|\(\?P<url>\.\*\)\$)")
    assert [route for route in unnamed if not admin_redirect.fullmatch(route)] == []


def render_all(client, urls) -> dict:
    pages = {}
    for url, htmx in itertools.product(urls, (False, True)):
        extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        pages[url, htmx] = seen(client.get(url, **extra))
    return pages


def test_nothing_a_labeler_opens_tells_gold_from_the_rest(client, past_work):
    ann, sessions = past_work
    client.force_login(ann.user)
    urls = labeler_urls(ann, sessions)
    # The labeler's own pages are among them, with every session of hers.
    for session in sessions.values():
        assert reverse("my-label", args=[session.pk]) in urls
        assert reverse("session-detail", args=[session.pk]) in urls
    with rolled_back():
        flagged = render_all(client, urls)
    unflag()
    plain = render_all(client, urls)
    opened = [key for key, (status, _, _) in plain.items() if status == 200]
    assert len(opened) > 10  # the comparison saw pages, not only refusals
    leaks = [key for key in plain if flagged[key] != plain[key]]
    assert leaks == [], "\n\n".join(f"{key}:\n{diff(flagged[key], plain[key])}" for key in leaks)


def correct_and_save(client, api, session) -> list:
    """What the labeler reads while correcting one of her labels, on the pages and in the
    API: reopening it, the pages after, cancelling, reopening by the API, saving a changed
    label, and the label after."""
    pk = session.pk
    answers = [seen(client.post(reverse("my-label-correct", args=[pk])))]
    answers.append(seen(client.get(reverse("my-label", args=[pk]))))  # with its message
    answers.append(seen(client.get(reverse("my-labels"))))
    answers.append(seen(client.get(reverse("label-session", args=[pk]))))
    answers.append(seen(client.post(reverse("my-label-cancel-correction", args=[pk]))))
    answers.append(seen(client.get(reverse("my-label", args=[pk]))))
    answers.append(seen(api.post(reverse("api-correct", args=[pk]))))
    rate = {"step_index": 1, "completion_index": 0, "rating": -1}
    answers.append(seen(api.post(reverse("api-rate", args=[pk]), rate, format="json")))
    submit = {"finish_reason": "found_error"}
    answers.append(seen(api.post(reverse("api-submit", args=[pk]), submit, format="json")))
    answers.append(seen(client.get(reverse("my-label", args=[pk]))))
    answers.append(seen(client.get(reverse("session-detail", args=[pk]))))
    answers.append(seen(client.get(reverse("home"))))
    return answers


@pytest.mark.parametrize("kind", ["quality_control", "screening"])
def test_correcting_a_gold_label_reads_as_correcting_any_other(client, past_work, kind):
    ann, sessions = past_work
    client.force_login(ann.user)
    api = APIClient()
    api.force_authenticate(ann.user)
    # The open session is finished first: a correction waits for no open session.
    submit_session(
        session_id=sessions["open"].pk,
        labeler=ann,
        finish_reason="give_up",
        finish_reason_text="Too long.",
    )
    with rolled_back():
        flagged = correct_and_save(client, api, sessions[kind])
    unflag()
    plain = correct_and_save(client, api, sessions[kind])
    assert [a[0] for a in plain][:1] == [302]  # reopened, on to the workbench
    for step, (one, other) in enumerate(zip(flagged, plain, strict=True)):
        assert one == other, f"answer {step}:\n{diff(one, other)}"


def test_quality_control_measures_a_corrected_label_as_first_submitted(past_work):
    from labeling import quality
    from labeling.services import corrections

    ann, sessions = past_work
    submit_session(
        session_id=sessions["open"].pk,
        labeler=ann,
        finish_reason="give_up",
        finish_reason_text="Too long.",
    )
    before = quality.gold_agreement_by_labeler(labeler_ids=[ann.pk])[ann.pk]
    session = sessions["quality_control"]
    corrections.reopen_label(session_id=session.pk, labeler=ann)
    rate_step(session_id=session.pk, labeler=ann, step_index=1, rating=-1)
    assert quality.gold_agreement_by_labeler(labeler_ids=[ann.pk])[ann.pk] == before  # reopened
    submit_session(session_id=session.pk, labeler=ann, finish_reason="found_error")
    assert quality.gold_agreement_by_labeler(labeler_ids=[ann.pk])[ann.pk] == before  # saved
    assert before.exact_agreed == before.exact_total == 3  # all three agreed with gold
