"""PRM800K import/export: lossless round trips, filters, and all-or-nothing bad input."""

import io
import json
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from labeling.models import (
    Generation,
    Labeler,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)

FIXTURES = Path(__file__).parent / "fixtures"
ROUND_TRIP_FILES = [
    "prm800k_phase1.jsonl",
    "prm800k_phase1_null_step.jsonl",
    "prm800k_phase2.jsonl",
    "prm800k_extra_keys.jsonl",
]
pytestmark = pytest.mark.django_db


def read_objects(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def export(*args: str) -> list[dict]:
    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", *args, stdout=out, stderr=io.StringIO())
    return [json.loads(line) for line in out.getvalue().splitlines()]


def table_counts() -> dict[str, int]:
    models = (Problem, Solution, Generation, Labeler, LabelingSession, StepLabel, StepRating)
    return {m.__name__: m.objects.count() for m in models}


@pytest.mark.parametrize("name", ROUND_TRIP_FILES)
def test_import_then_export_gives_back_every_object(name):
    originals = read_objects(FIXTURES / name)
    call_command("import_prm800k", str(FIXTURES / name), stdout=io.StringIO())
    assert export() == originals


def test_round_trip_of_all_files_together_and_again_after_reimport(tmp_path):
    originals = []
    for name in ROUND_TRIP_FILES:
        originals += read_objects(FIXTURES / name)
        call_command("import_prm800k", str(FIXTURES / name), stdout=io.StringIO())
    first = export()
    assert first == originals

    # Exported data is itself valid input: importing it into an empty database gives the
    # same export again (labelers, problems and solutions are recreated from the file).
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(obj) + "\n" for obj in first))
    LabelingSession.objects.all().delete()
    Solution.objects.all().delete()
    Problem.objects.all().delete()
    call_command("import_prm800k", str(dump), stdout=io.StringIO())
    assert export() == originals


def test_phase2_import_models_problems_solutions_and_grading():
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    lines = read_objects(FIXTURES / "prm800k_phase2.jsonl")
    assert Problem.objects.count() == len({obj["question"]["problem"] for obj in lines})
    # The same pre-generated solution labeled by several labelers is one solution.
    distinct = {
        (o["question"]["problem"], json.dumps(o["question"]["pre_generated_steps"])) for o in lines
    }
    assert Solution.objects.count() == len(distinct)
    assert LabelingSession.objects.count() == len(lines)
    for obj in lines:
        q = obj["question"]
        solution = Solution.objects.get(problem__text=q["problem"], steps=q["pre_generated_steps"])
        same_text = q["pre_generated_answer"].strip() == q["ground_truth_answer"].strip()
        if same_text:
            assert solution.is_correct, q["pre_generated_answer"]
    assert Labeler.objects.filter(uuid__in={o["labeler"] for o in lines}).count() == len(
        {o["labeler"] for o in lines}
    )
    # Imported labelers are pseudonymous accounts that cannot log in.
    assert not any(lab.user.has_usable_password() for lab in Labeler.objects.all())


def test_export_filters():
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    lines = read_objects(FIXTURES / "prm800k_phase2.jsonl")

    generation = next(o["generation"] for o in lines if o["generation"] not in (None, -1))
    assert export("--generation", str(generation)) == [
        o for o in lines if o["generation"] == generation
    ]
    assert export("--no-quality-control") == [
        o for o in lines if not o["is_quality_control_question"]
    ]
    labeler = lines[0]["labeler"]
    assert export("--labeler", labeler) == [o for o in lines if o["labeler"] == labeler]

    stamps = sorted(o["timestamp"] for o in lines)
    middle = stamps[len(stamps) // 2]
    since = datetime.fromisoformat(middle).replace(tzinfo=UTC)
    assert export("--since", middle) == [
        o for o in lines if datetime.fromisoformat(o["timestamp"]).replace(tzinfo=UTC) >= since
    ]


def test_export_names_labelers_by_uuid_only(django_user_model):
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    text = json.dumps(export())
    for user in django_user_model.objects.all():
        assert user.username not in text


def test_export_to_file(tmp_path):
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase1.jsonl"), stdout=io.StringIO())
    out = tmp_path / "labels.jsonl"
    call_command("export_prm800k", "--out", str(out), stderr=io.StringIO())
    assert read_objects(out) == read_objects(FIXTURES / "prm800k_phase1.jsonl")


def test_export_rejects_bad_filters():
    with pytest.raises(CommandError, match="--since"):
        export("--since", "yesterday")
    with pytest.raises(CommandError, match="--labeler"):
        export("--labeler", "alice")


# --- bad input -------------------------------------------------------------------------------

BAD_FILES = {
    "not_json.jsonl": "not valid JSON",
    "missing_label.jsonl": "label",
    "bad_rating.jsonl": "rating",
    "missing_problem.jsonl": "problem",
    "steps_not_list.jsonl": "steps",
}


def bad_line_number(path: Path) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            return number
        label = obj.get("label")
        q = obj.get("question", {})
        if not isinstance(label, dict) or "problem" not in q:
            return number
        if not isinstance(label.get("steps"), list):
            return number
        ratings = [c.get("rating") for s in label["steps"] for c in s["completions"]]
        if any(r not in (-1, 0, 1, None) for r in ratings):
            return number
    raise AssertionError(f"{path} has no bad line")


@pytest.mark.parametrize("name,what", BAD_FILES.items())
def test_bad_prm800k_line_names_file_and_line_and_imports_nothing(name, what, tmp_path):
    # Something already in the database must survive a failed import untouched.
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase1.jsonl"), stdout=io.StringIO())
    before = table_counts()
    path = tmp_path / name
    shutil.copy(FIXTURES / "bad" / name, path)
    line = bad_line_number(path)

    with pytest.raises(CommandError) as failure:
        call_command("import_prm800k", str(path), stdout=io.StringIO())

    message = str(failure.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert what in message
    assert table_counts() == before


def test_bad_line_late_in_a_large_file_rolls_back_earlier_batches(tmp_path):
    good = (FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()[0]
    records = []
    for i in range(2500):  # more than two import batches
        obj = json.loads(good)
        obj["labeler"] = str(uuid.UUID(int=i + 1))
        obj["question"]["problem"] += f" (variant {i})"
        records.append(json.dumps(obj))
    records.append('{"labeler": "oops"')
    path = tmp_path / "large.jsonl"
    path.write_text("\n".join(records) + "\n")
    before = table_counts()

    with pytest.raises(CommandError, match=r"large.jsonl:2501: not valid JSON"):
        call_command("import_prm800k", str(path), stdout=io.StringIO())
    assert table_counts() == before


def test_not_utf8_is_reported_with_its_line(tmp_path):
    good = (FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()[0]
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(good.encode() + b"\n" + good.replace("a", "\xe9").encode("latin-1") + b"\n")
    with pytest.raises(CommandError, match=r"latin1.jsonl:2: not UTF-8"):
        call_command("import_prm800k", str(path), stdout=io.StringIO())
    assert LabelingSession.objects.count() == 0


def test_rating_outside_domain_names_the_field(tmp_path):
    obj = read_objects(FIXTURES / "prm800k_phase2.jsonl")[0]
    obj["label"]["steps"][0]["completions"][0]["rating"] = True
    path = tmp_path / "bool_rating.jsonl"
    path.write_text(json.dumps(obj) + "\n")
    with pytest.raises(CommandError, match=r"bool_rating.jsonl:1: .*completions\[0\].rating"):
        call_command("import_prm800k", str(path), stdout=io.StringIO())


def test_imported_labels_are_counted_on_their_solutions(tmp_path, monkeypatch):
    # The queues skip a solution by its count of submitted labels (Solution.labels_submitted);
    # an import writes labels without the workbench's submission, and must count them too:
    # a solution labeled twice in one batch, again in a later batch, and by a later import.
    from django.db.models import Count, Q

    from labeling.services import prm800k_import

    monkeypatch.setattr(prm800k_import, "BATCH_SIZE", 2)
    fixture = FIXTURES / "prm800k_phase2.jsonl"
    lines = [line for line in fixture.read_text().splitlines() if line.strip()]
    once = (FIXTURES / "prm800k_phase1.jsonl").read_text().splitlines()[0]
    path = tmp_path / "repeated.jsonl"
    path.write_text("\n".join([lines[0], lines[0], *lines, once, once, lines[0]]) + "\n")
    call_command("import_prm800k", str(path), stdout=io.StringIO())
    call_command("import_prm800k", str(fixture), stdout=io.StringIO())

    counted = Solution.objects.annotate(
        labels=Count("sessions", filter=Q(sessions__submitted_at__isnull=False))
    )
    assert counted.get(source="prm800k-phase1").labels == 2
    assert max(s.labels for s in counted) >= 5
    assert [s.labels_submitted for s in counted] == [s.labels for s in counted]


def test_a_generated_file_of_several_batches_round_trips_with_every_answer_graded(
    tmp_path, monkeypatch, settings
):
    # PRM800K-shaped lines (LaTeX backslashes, line breaks, non-ASCII, alternatives, repeated
    # solutions) over several import batches and export chunks, graded on worker processes
    # while the rows are stored: the bulk paths (COPY on PostgreSQL) must lose nothing.
    from bench.export import generate
    from labeling import export as exporting
    from labeling.grading import is_equivalent
    from labeling.services import prm800k_import

    settings.IMPORT_GRADING_PROCESSES = 2
    monkeypatch.setattr(prm800k_import, "BATCH_SIZE", 150)
    monkeypatch.setattr(exporting, "EXPORT_CHUNK", 70)
    path = tmp_path / "generated.jsonl"
    generate(path, solutions=300, steps_per_solution=5)
    originals = read_objects(path)
    # Texts COPY must escape, and keys only `extra` keeps, at a step and at a completion.
    step = originals[3]["label"]["steps"][0]
    step["completions"][0]["text"] = "tab\there\r\nback\\slash \\N end"
    step["completions"][0]["source"] = "human"
    originals[5]["label"]["steps"][1]["note"] = {"why": "kept"}
    del originals[7]["label"]["steps"][0]["completions"][0]["flagged"]
    path.write_text("".join(json.dumps(obj, ensure_ascii=False) + "\n" for obj in originals))

    call_command("import_prm800k", str(path), stdout=io.StringIO())

    assert export() == originals
    solutions = Solution.objects.select_related("problem")
    assert solutions.count() > 200
    assert all(s.is_correct == is_equivalent(s.answer, s.problem.answer) for s in solutions)
    assert {s.is_correct for s in solutions} == {True, False}


def test_an_import_reads_answers_by_the_rule_regrade_uses(tmp_path):
    # A phase-2 line without a pre-generated answer, its answer boxed in the last step: the
    # import reads it as `regrade` would (issue 46, item 3), so a regrade changes nothing, and
    # the export still gives the line back as it came.
    line = read_objects(FIXTURES / "prm800k_phase2.jsonl")[0]
    truth = line["question"]["ground_truth_answer"]
    line["question"]["pre_generated_answer"] = None
    line["question"]["pre_generated_steps"] = [
        *line["question"]["pre_generated_steps"][:-1],
        f"So the answer is $\\boxed{{{truth}}}$.",
    ]
    path = tmp_path / "boxed.jsonl"
    path.write_text(json.dumps(line) + "\n")
    call_command("import_prm800k", str(path), stdout=io.StringIO())
    solution = Solution.objects.get()
    assert solution.answer == truth and solution.is_correct is True
    call_command("regrade", stdout=io.StringIO())
    solution.refresh_from_db()
    assert solution.answer == truth and solution.is_correct is True
    [exported] = export()
    assert exported["question"] == line["question"]
