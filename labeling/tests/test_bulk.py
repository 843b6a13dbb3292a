"""The import's bulk writes (COPY on PostgreSQL): what goes in comes back, whatever it holds."""

from datetime import UTC, datetime

import pytest

from labeling.models import LabelingSession, Problem, Solution, StepLabel, StepRating
from labeling.services import bulk
from labeling.services.bulk import insert_rows
from labeling.tests.interleave import require_postgresql

pytestmark = pytest.mark.django_db

# Texts COPY's text format must escape, or that look like its escapes and must stay text.
HOSTILE = [
    "plain",
    "",
    "tab\there",
    "line\nbreak and \r\n and a lone \r",
    "\\frac{1}{2} and \\\\ a TeX line break",
    "\\N",
    "\\t not a tab",
    "ends with a backslash \\",
    "π ≤ 16π, r² × 3 — ünïcödé and 𝔽 beyond the BMP",
    "\u202e reversed \u200b",
]


@pytest.fixture
def problem():
    return Problem.objects.create(text="What is 1 + 1?", answer="2")


@pytest.fixture
def session(problem, make_solution, make_labeler):
    return LabelingSession.objects.create(labeler=make_labeler(), solution=make_solution(problem))


def test_copied_rows_come_back_as_they_went_in(session):
    require_postgresql()
    human = {"text": "tab\there \\N"}
    steps = insert_rows(
        StepLabel,
        ["session_id", "index", "chosen_completion", "human_completion", "extra"],
        [(session.pk, 0, None, None, {}), (session.pk, 1, 2, human, {"keys": {"n": "\\x"}})],
    )
    rows = [
        (steps[i % 2], i, text, (-1, 0, 1, None)[i % 4], (True, False, None)[i % 3], {})
        for i, text in enumerate(HOSTILE)
    ]
    columns = ["step_id", "completion_index", "text", "rating", "flagged", "extra"]
    insert_rows(StepRating, columns, rows, ids=False)

    stored = StepRating.objects.order_by("completion_index")
    assert [(r.step_id, r.completion_index, r.text, r.rating, r.flagged) for r in stored] == [
        row[:5] for row in rows
    ]
    assert {r.judge_display for r in stored} == {"hidden"}  # a column's default
    written = StepLabel.objects.get(pk=steps[1])
    assert (written.chosen_completion, written.human_completion) == (2, human)
    assert written.extra == {"keys": {"n": "\\x"}}


def test_nulls_numbers_times_and_texts_that_hold_the_separator(problem, make_labeler):
    require_postgresql()
    # A text column with NULLs or with the character that joins a column's texts is written
    # value by value; PostgreSQL refuses NUL itself, so the import never sends it.
    ids = insert_rows(
        Problem,
        ["text", "text_hash", "unique_id", "answer"],
        [(text, f"h{i}", None if i % 2 else f"u/{i}\t", "") for i, text in enumerate(HOSTILE)],
    )
    stored = Problem.objects.in_bulk(ids)
    assert [stored[pk].text for pk in ids] == HOSTILE
    assert [stored[pk].unique_id for pk in ids[:2]] == ["u/0\t", None]
    assert bulk._copy_texts(["a\x00b", "c"]) == ["a\x00b", "c"]

    solutions = insert_rows(
        Solution,
        ["problem_id", "steps", "answer", "content_hash", "source_score", "is_correct"],
        [
            (problem.pk, ["a\tb", "\\N"], "x", "c1", 1e-05, None),
            (problem.pk, [], "", "c2", None, True),
        ],
    )
    stored = Solution.objects.in_bulk(solutions)
    assert [stored[pk].steps for pk in solutions] == [["a\tb", "\\N"], []]
    assert [stored[pk].source_score for pk in solutions] == [1e-05, None]
    assert [stored[pk].is_correct for pk in solutions] == [None, True]

    when = datetime(2022, 8, 1, 12, 30, 0, 500, tzinfo=UTC)
    labeler = make_labeler()
    sessions = insert_rows(
        LabelingSession,
        ["labeler_id", "solution_id", "submitted_at", "total_time"],
        [(labeler.pk, solutions[0], when, 2**40), (labeler.pk, solutions[1], None, None)],
    )
    stored = LabelingSession.objects.in_bulk(sessions)
    assert [(stored[pk].submitted_at, stored[pk].total_time) for pk in sessions] == [
        (when, 2**40),
        (None, None),
    ]


def test_more_rows_than_one_copy_holds_are_all_written(session, monkeypatch):
    require_postgresql()
    monkeypatch.setattr(bulk, "COPY_ROWS", 10)
    steps = insert_rows(
        StepLabel,
        ["session_id", "index", "chosen_completion", "human_completion", "extra"],
        [(session.pk, i, i % 3, None, {}) for i in range(25)],
    )
    stored = StepLabel.objects.order_by("index").values_list("pk", "chosen_completion")
    assert list(stored) == [(pk, i % 3) for i, pk in enumerate(steps)]


def test_rows_of_the_wrong_width_are_refused(session):
    require_postgresql()
    with pytest.raises(ValueError):
        insert_rows(StepLabel, ["session_id", "index"], [(session.pk, 0, 1), (session.pk, 1, 2)])
    with pytest.raises(ValueError):
        insert_rows(StepLabel, ["session_id", "index"], [(session.pk, 0), (session.pk,)])
