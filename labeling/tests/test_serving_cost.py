"""What a labeler's request costs the server, pinned where it regressed (issue 27: the workbench
got slower under load). A submission counted the whole pool to say what was left; an API
request paid six round trips to its throttle; ratings took a round trip more than they need;
serving the next solution walked past every solution labeled already.
The figures and the profile are in docs/benchmarks.md (bench/serve.py)."""

import importlib
import json
import threading
import uuid

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.settings import api_settings

from conftest import require
from labeling import selectors
from labeling.models import LabelingSession, Problem, Solution
from labeling.services import workbench


@pytest.fixture
def problem():
    return Problem.objects.create(text="What is $1+1$?", answer="2")


def pool(problem, size: int) -> None:
    Solution.objects.bulk_create(
        Solution(
            problem=problem,
            steps=[f"Step 1 of {n}.", f"Step 2 of {n}.", "# Answer\n\n2"],
            answer="2",
            is_correct=True,
            content_hash=f"pool-{n}",
        )
        for n in range(size)
    )


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rate_all_and_submit(client: Client, session) -> str:
    for index in range(len(session.solution.steps)):
        client.post(reverse("label-rate", args=[session.pk]), {"step_index": index, "rating": 1})
    response = client.post(
        reverse("label-submit", args=[session.pk]),
        {"finish_reason": "solution"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    return response.content.decode()


# --- what is left in the queue: counted up to a cap, never the whole pool ----------------------


@pytest.mark.django_db
def test_what_is_left_is_counted_up_to_a_hundred_and_shown_as_more(problem, make_labeler):
    pool(problem, 105)
    me = make_labeler("me")
    assert selectors.queue_left(labeler=me) == 100
    client = signed_in(me.user)
    assert (
        'data-figure="queue-left">100+</strong> solutions left'
        in client.get(reverse("home")).content.decode()
    )
    page = rate_all_and_submit(client, workbench.next_session(labeler=me).session)
    assert 'id="queue-left">100+ more in your queue after this one' in page


@pytest.mark.django_db
def test_below_the_cap_what_is_left_is_exact(problem, make_labeler):
    pool(problem, 7)
    me = make_labeler("me")
    assert selectors.queue_left(labeler=me) == 7
    assert selectors.queue_left(labeler=me, at_most=3) == 3
    page = rate_all_and_submit(signed_in(me.user), workbench.next_session(labeler=me).session)
    assert 'id="queue-left">5 more in your queue after this one' in page


def solution_rows_read() -> int:
    """Rows of the pool this transaction has read so far (PostgreSQL's own counters)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = 'labeling_solution'"
        )
        row = cursor.fetchone()
    return row[0] if row else 0


@pytest.mark.django_db
def test_no_workbench_request_reads_the_whole_pool(problem, make_labeler):
    require(connection.vendor == "postgresql", "reads its row counts from PostgreSQL")
    pool(problem, 3000)
    with connection.cursor() as cursor:
        # The statistics autovacuum keeps: on a table it never analyzed the planner may scan
        # a small pool whole, which costs little.
        cursor.execute("ANALYZE")
    me = make_labeler("me")
    client = signed_in(me.user)
    session = workbench.next_session(labeler=me).session
    requests = {
        "the home page": lambda: client.get(reverse("home")),
        "the workbench page": lambda: client.get(reverse("label-session", args=[session.pk])),
        "a rating": lambda: client.post(
            reverse("label-rate", args=[session.pk]), {"step_index": 0, "rating": 1}
        ),
        "a submission and the next solution": lambda: rate_all_and_submit(client, session),
    }
    for name, request in requests.items():
        before = solution_rows_read()
        request()
        # The capped count reads about a hundred rows; serving the next one a handful.
        assert solution_rows_read() - before < 250, name


def labeled_already(*, by, first: int) -> None:
    """The pool's first `first` solutions labeled by `by`, stored as an import stores labels
    and counted as it counts them."""
    ids = list(Solution.objects.order_by("id").values_list("pk", flat=True)[:first])
    done = set(LabelingSession.objects.filter(labeler=by).values_list("solution_id", flat=True))
    now = timezone.now()
    LabelingSession.objects.bulk_create(
        LabelingSession(labeler=by, solution_id=pk, submitted_at=now, finish_reason="solution")
        for pk in ids
        if pk not in done
    )
    workbench.recount_labels(solutions=Solution.objects.filter(pk__in=ids))


@pytest.mark.django_db
def test_serving_the_next_solution_costs_the_same_however_much_of_the_pool_is_labeled(
    problem, make_labeler
):
    """The queues start past the labeled solutions, and used to walk past them one by one on
    every serve (and the count of what is left did too): thousands of rows at a pool's
    scale. Now neither reads a labeled solution."""
    require(connection.vendor == "postgresql", "reads its row counts from PostgreSQL")
    pool(problem, 5_100)
    earlier, me = make_labeler("earlier"), make_labeler("me")
    ids = list(Solution.objects.order_by("id").values_list("pk", flat=True))
    costs = {}
    for labeled in (1_000, 5_000):
        labeled_already(by=earlier, first=labeled)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        with CaptureQueriesContext(connection) as statements:
            before = solution_rows_read()
            served = workbench.next_session(labeler=me)
            left = selectors.queue_left(labeler=me, besides=served.session.solution_id)
            rows = solution_rows_read() - before
        # The first solution nobody labeled, and what is left after it, counted up to 100.
        assert served.session.solution_id == ids[labeled]
        assert left == min(selectors.QUEUE_LEFT_AT_MOST, len(ids) - labeled - 1)
        costs[labeled] = rows, len(statements)
        workbench.skip_session(session_id=served.session.pk, labeler=me)
    (rows_1000, statements_1000), (rows_5000, statements_5000) = costs[1_000], costs[5_000]
    # The count reads its hundred rows, the claim a handful, at either size (on the code
    # before, over 2,000 at the first and over 10,000 at the second).
    assert rows_1000 < 150 and rows_5000 < rows_1000 + 20, costs
    assert statements_5000 == statements_1000, costs


@pytest.mark.django_db
def test_each_label_is_counted_once_and_a_deleted_label_gives_its_solution_back(
    problem, make_labeler
):
    """The queues skip a solution once its labels are counted: a repeated submission is not
    counted twice, and a label deleted by hand is no longer counted."""
    pool(problem, 2)
    ann, bob = make_labeler("ann"), make_labeler("bob")
    first = workbench.next_session(labeler=ann).session
    for step in range(len(first.solution.steps)):
        workbench.rate_step(session_id=first.pk, labeler=ann, step_index=step, rating=1)
    for _ in range(2):
        workbench.submit_session(session_id=first.pk, labeler=ann, finish_reason="solution")
    assert Solution.objects.get(pk=first.solution_id).labels_submitted == 1
    other = workbench.next_session(labeler=bob).session
    assert other.solution_id != first.solution_id
    workbench.skip_session(session_id=other.pk, labeler=bob)
    assert workbench.next_session(labeler=bob) is None

    # As the admin deletes a label: the solution is back in the queues at once.
    LabelingSession.objects.filter(pk=first.pk).delete()
    assert Solution.objects.get(pk=first.solution_id).labels_submitted == 0
    assert workbench.next_session(labeler=bob).session.solution_id == first.solution_id
    assert workbench.recount_labels() == 2


def test_an_upgrade_counts_the_labels_a_pool_holds(transactional_db, make_labeler):
    """A database labeled before the count existed migrates with its labels counted: the
    queues skip what has its labels and serve what still wants some."""
    migration = importlib.import_module("labeling.migrations.0018_solution_labels_submitted")
    before = migration.Migration.dependencies
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        problem = apps.get_model("labeling", "Problem").objects.create(
            text="Q", text_hash="q", answer="1"
        )
        full, half, none = (
            apps.get_model("labeling", "Solution").objects.create(
                problem=problem, steps=["s"], content_hash=str(n), is_correct=True, labels_wanted=2
            )
            for n in range(3)
        )
        labelers = [
            apps.get_model("labeling", "Labeler").objects.create(
                user=apps.get_model("auth", "User").objects.create(username=name)
            )
            for name in ("ann", "bob")
        ]
        now = timezone.now()
        for solution, labeled_by in ((full, labelers), (half, labelers[:1])):
            for labeler in labeled_by:
                apps.get_model("labeling", "LabelingSession").objects.create(
                    labeler=labeler, solution=solution, submitted_at=now, slot=None
                )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    counted = dict(Solution.objects.values_list("pk", "labels_submitted"))
    assert counted == {full.pk: 2, half.pk: 1, none.pk: 0}
    newcomer = make_labeler("newcomer")
    assert workbench.next_session(labeler=newcomer).session.solution_id == half.pk


# --- round trips of the hottest requests ---------------------------------------------------------


@pytest.mark.django_db
def test_a_ratings_answer_shows_what_the_write_left_not_an_earlier_read(problem, make_labeler):
    pool(problem, 1)
    me = make_labeler("me")
    client = signed_in(me.user)
    session = workbench.next_session(labeler=me).session
    url = reverse("label-rate", args=[session.pk])
    for index in range(3):
        client.post(url, {"step_index": index, "rating": 1})
    # A -1 on the first step drops the ratings after it: the answer must not show them.
    page = client.post(url, {"step_index": 0, "rating": -1}).content.decode()
    assert 'data-step="0" data-completion="0" data-rated="-1" data-flagged="0"' in page
    assert 'data-step="1" data-completion="0" data-rated' not in page
    assert 'data-step="2" data-completion="0" data-rated' not in page
    # Taken back to 0, flagged: the answer shows the new value, and the later steps open.
    page = client.post(url, {"step_index": 0, "rating": 0, "flagged": "1"}).content.decode()
    assert 'data-step="0" data-completion="0" data-rated="0" data-flagged="1"' in page
    assert 'data-step="1" data-completion="0" data-rated' not in page
    stored = dict(
        session.step_labels.values_list("index", "ratings__rating").filter(
            ratings__completion_index=0
        )
    )
    assert stored == {0: 0}


@pytest.mark.django_db
@pytest.mark.parametrize("display", ["hidden", "revealed"])
def test_a_rating_in_a_generation_reads_its_judge_display_with_the_session(
    problem, make_labeler, display
):
    # Every rating stores the display it was made under; it comes with the locked session,
    # not from a query of its own (hidden: nothing more; revealed: the judge's labels once).
    from labeling.models import Generation

    pool(problem, 4)
    counts = {}
    for name, generation in (
        ("none", None),
        ("generation", Generation.objects.create(number=7, judge_display=display)),
    ):
        me = make_labeler(name)
        client = signed_in(me.user)
        session = workbench.next_session(labeler=me).session
        LabelingSession.objects.filter(pk=session.pk).update(generation=generation)
        url = reverse("label-rate", args=[session.pk])
        client.post(url, {"step_index": 0, "rating": 1})
        with CaptureQueriesContext(connection) as rating:
            assert client.post(url, {"step_index": 1, "rating": 1}).status_code == 200
        counts[name] = [q["sql"] for q in rating.captured_queries]
    extra = 0 if display == "hidden" else 1
    assert len(counts["generation"]) == len(counts["none"]) + extra, counts["generation"]
    assert not any('FROM "labeling_generation"' in sql for sql in counts["generation"])


@pytest.mark.django_db
def test_a_rating_and_a_submission_take_a_fixed_handful_of_queries(problem, make_labeler):
    pool(problem, 20)
    me = make_labeler("me")
    client = signed_in(me.user)
    session = workbench.next_session(labeler=me).session
    url = reverse("label-rate", args=[session.pk])
    client.post(url, {"step_index": 0, "rating": 1})
    # Django's session; the user with its labeler and roles (labeling.auth); the session
    # locked with its solution (not the problem, which the answer does not show), its ratings
    # read, the step and its rating inserted, the session touched (in a savepoint here).
    # The answer renders what the write left: its ratings are not read a second time.
    with CaptureQueriesContext(connection) as rating:
        response = client.post(url, {"step_index": 1, "rating": 1, "flagged": "1"})
    assert response.status_code == 200
    assert len(rating) <= 9, [q["sql"][:90] for q in rating.captured_queries]
    # ...and renders it right: both ratings, the new one flagged "unsure".
    page = response.content.decode()
    assert 'data-step="0" data-completion="0" data-rated="1" data-flagged="0"' in page
    assert 'data-step="1" data-completion="0" data-rated="1" data-flagged="1"' in page
    client.post(url, {"step_index": 2, "rating": 1})
    with CaptureQueriesContext(connection) as submission:
        response = client.post(
            reverse("label-submit", args=[session.pk]),
            {"finish_reason": "solution"},
            HTTP_HX_REQUEST="true",
        )
    assert response.status_code == 200
    # Django's session, the user with its labeler and roles (2); the submission (5 with its
    # savepoint) and its count (1); the next solution served from the leftover queue (7 with
    # the savepoint: the labeler locked with the current generation read, its open session
    # looked for, screening and quality control tried in one claim, the leftover claim,
    # which says that nobody holds a place of it, the claimed solution read with its
    # problem (core.prepared: the claim's SQL is compiled once, and brings back only the id),
    # the session inserted); what is left,
    # shown (1: the session came with its solution and problem, and a new session has no
    # ratings to read).
    assert len(submission) <= 17, [q["sql"][:90] for q in submission.captured_queries]


@pytest.mark.django_db
def test_the_labeler_and_its_roles_come_in_one_query(make_user, make_labeler):
    both = make_labeler("both")
    both.user.groups.add(Group.objects.get_or_create(name="researcher")[0])
    with CaptureQueriesContext(connection) as read:
        found = selectors.labeler_with_roles(user=both.user)
        from core.permissions import ADMIN, RESEARCHER, has_role, role_names

        assert role_names(both.user) == {"annotator", "researcher"}
        assert has_role(both.user, RESEARCHER) and not has_role(both.user, ADMIN)
    assert len(read) == 1
    assert (found.pk, found.uuid, found.user) == (both.pk, both.uuid, both.user)
    # Before the first session there is no labeler, and roles are read as before.
    assert selectors.labeler_with_roles(user=make_user("new")) is None


@pytest.mark.django_db
def test_roles_read_with_the_user_are_read_again_on_every_request(problem, make_labeler):
    """The user, labeler and roles come in one statement, per request: a role taken away or
    a user deactivated applies to the very next request, and a session signed in through
    Django's own ModelBackend (before this backend existed) still works."""
    pool(problem, 3)
    me = make_labeler("me")
    client = signed_in(me.user)
    assert client.get(reverse("label-next")).status_code == 302
    me.user.groups.clear()
    assert client.get(reverse("label-next")).status_code == 403
    me.user.groups.add(Group.objects.get(name="annotator"))
    assert client.get(reverse("label-next")).status_code == 302
    me.user.is_active = False
    me.user.save(update_fields=["is_active"])
    assert client.get(reverse("label-next")).status_code == 302  # to the login page
    assert client.get(reverse("label-next"))["Location"].startswith(reverse("login"))

    other = make_labeler("other")
    old = Client()
    old.force_login(other.user, backend="django.contrib.auth.backends.ModelBackend")
    response = old.get(reverse("label-next"))
    assert response.status_code == 302
    assert not response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_an_api_rating_costs_the_same_queries_at_any_step(problem, make_labeler):
    pool(problem, 1)
    Solution.objects.update(steps=[f"Step {i}." for i in range(8)] + ["# Answer\n\n2"])
    me = make_labeler("me")
    client = signed_in(me.user)
    session = client.post(reverse("api-next-session")).json()["session"]
    counts = []
    for step in range(8):
        with CaptureQueriesContext(connection) as ctx:
            response = client.post(
                reverse("api-rate", args=[session["id"]]),
                json.dumps({"step": step, "rating": 1}),
                content_type="application/json",
            )
        assert response.status_code == 200
        assert len(response.json()["step_labels"]) == step + 1
        counts.append(len(ctx))
        throttle = [q["sql"] for q in ctx.captured_queries if "stepwise_cache" in q["sql"]]
        # The caller's throttle: one statement, and no count of the whole cache table.
        assert len(throttle) == 1 and "COUNT(" not in throttle[0].upper(), throttle
    assert len(set(counts)) == 1, counts


# --- throttles: one atomic count, shared by every process and thread -----------------------------


# Redis is a real server: its case is left out of the fast lane.
@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.slow)])
def throttle_store(request, settings):
    if request.param == "redis":
        settings.CACHES = {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": request.getfixturevalue("redis_url"),
            }
        }
    return request.param


@pytest.mark.django_db(transaction=True)
def test_requests_at_the_same_moment_pass_no_more_than_the_rate(throttle_store):
    """Twenty anonymous requests from one address at once, each on its own thread and
    database connection (as two server processes would be): five pass."""
    anonymous = next(c for c in api_settings.DEFAULT_THROTTLE_CLASSES if c.scope == "anon")
    address = f"198.51.100.{uuid.uuid4().int % 250 + 1}"
    start = threading.Barrier(20)
    passed = []

    def one_request():
        throttle = anonymous()
        throttle.rate = "5/min"
        throttle.num_requests, throttle.duration = throttle.parse_rate(throttle.rate)
        request = RequestFactory().get("/api/problems/", REMOTE_ADDR=address)
        request.user = AnonymousUser()
        try:
            start.wait()
            passed.append(throttle.allow_request(request, None))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one_request) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert passed.count(True) == 5, passed
