"""Public step-label datasets in: ProcessBench, PRMBench and TRL stepwise supervision (JSONL and
Parquet) imported as problems, solutions and imported labels, by command or by upload
(`POST /api/imports/`); a bad row stops the import with FILE:LINE and nothing stored; a
training run on the imported labels; a TRL file round-trips through `export_stepwise`."""

import json
from io import StringIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from labeling.models import ImportJob, Problem, Solution
from labeling.services import import_jobs
from trainer.evaluation import processbench
from trainer.models import ImportedLabel, ModelVersion, TrainingRun
from trainer.training import runs
from trainer.training.dataset import build_training_examples
from trainer.training.params import TrainingParams

pytestmark = pytest.mark.django_db

BINOM = r"Compute $\dbinom{8}{4}$."
MOD = r"What is the smallest positive integer $n$ such that $17n \equiv 1234 \pmod{7}?$"
ABS = r"If $x^2+y^2=1$, what is the largest possible value of $|x|+|y|$?"

PROCESSBENCH = [
    {
        "id": "math-0",
        "generator": "Qwen2-7B-Instruct",
        "problem": BINOM,
        "steps": [
            r"We have $\dbinom{8}{4} = \frac{8!}{4!\,4!}$.",
            r"That is $\frac{8 \cdot 7 \cdot 6 \cdot 5}{4!} = \frac{1680}{24}$.",
            r"So the answer is $\boxed{70}$.",
        ],
        "final_answer_correct": True,
        "label": -1,
    },
    {
        "id": "math-1",
        "generator": "Llama-3.1-8B-Instruct",
        "problem": MOD,
        "steps": [
            r"First, $1234 = 7 \cdot 176 + 2$, so $1234 \equiv 2 \pmod{7}$.",
            r"Also $17 \equiv 3 \pmod{7}$, so we need $3n \equiv 2 \pmod{7}$.",
            r"Since $3 \cdot 3 = 9 \equiv 2$, wait: $3 \cdot 4 = 12 \equiv 5$, so $n = 4$.",
            r"The answer is $\boxed{4}$.",
        ],
        "final_answer_correct": False,
        "label": 2,
    },
]

PRMBENCH = [
    {
        "idx": "prm-7",
        "original_question": ABS,
        "modified_question": ABS,
        "original_process": [
            r"By Cauchy-Schwarz, $(|x|+|y|)^2 \le 2(x^2+y^2) = 2$.",
            r"Equality holds at $x = y = \frac{\sqrt{2}}{2}$, so the maximum is $\sqrt{2}$.",
        ],
        "modified_process": [
            r"By Cauchy-Schwarz, $(|x|+|y|)^2 \le 2(x^2+y^2) = 2$.",
            r"So $|x|+|y| \le 2$, and the maximum is $2$.",
        ],
        "modified_steps": [2],
        "error_steps": [2],
        "reason": r"Taking the square root of $2$ gives $\sqrt{2}$, not $2$.",
        "classification": "deception",
    },
    {
        "idx": "prm-7",
        "original_question": ABS,
        "modified_question": ABS,
        "original_process": [
            r"By Cauchy-Schwarz, $(|x|+|y|)^2 \le 2(x^2+y^2) = 2$.",
            r"Equality holds at $x = y = \frac{\sqrt{2}}{2}$, so the maximum is $\sqrt{2}$.",
        ],
        "modified_process": [
            r"Note that $x^2 + y^2 = 1$ describes the unit circle.",
            r"By Cauchy-Schwarz, $(|x|+|y|)^2 \le 2(x^2+y^2) = 2$.",
            r"Equality holds at $x = y = \frac{\sqrt{2}}{2}$, so the maximum is $\sqrt{2}$.",
        ],
        "modified_steps": [1],
        "error_steps": [],
        "reason": "The first step restates the condition and makes no progress.",
        "classification": "redundency",
    },
]

TRL = [
    {
        "prompt": BINOM,
        "completions": [
            r"$\dbinom{8}{4} = \dbinom{7}{3} + \dbinom{7}{4} = 35 + 35$.",
            r"So $\dbinom{8}{4} = \boxed{70}$.",
        ],
        "labels": [True, True],
    },
    {
        "prompt": MOD,
        "completions": [
            r"$17 \equiv 3$ and $1234 \equiv 2 \pmod{7}$.",
            r"The inverse of $3$ modulo $7$ is $4$, so $n \equiv 8 \equiv 1 \pmod{7}$.",
            r"So $n = \boxed{1}$.",
        ],
        "labels": [True, False, False],
    },
    {
        "prompt": ABS,
        "completions": [
            r"Let $x = \cos\theta$, $y = \sin\theta$ with $0 \le \theta \le \frac{\pi}{2}$.",
            r"Then $|x|+|y| = \sqrt{2}\sin\left(\theta + \frac{\pi}{4}\right) \le \sqrt{2}$.",
            r"The answer is $\boxed{\sqrt{2}}$.",
        ],
        "labels": [True, True, True],
    },
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def import_file(path, format) -> str:
    out = StringIO()
    call_command("import_labels", str(path), "--format", format, stdout=out)
    return out.getvalue()


def labels_by_problem() -> dict[str, list[list[int]]]:
    found: dict[str, list[list[int]]] = {}
    for label in ImportedLabel.objects.select_related("solution__problem").order_by("pk"):
        found.setdefault(label.solution.problem.text, []).append(label.ratings)
    return found


def test_processbench_is_imported_with_its_own_correctness_and_labels_up_to_the_error(tmp_path):
    path = write_jsonl(tmp_path / "processbench_math.jsonl", PROCESSBENCH)

    output = import_file(path, "processbench")

    assert "2 lines, 2 created" in output
    assert labels_by_problem() == {BINOM: [[1, 1, 1]], MOD: [[1, 1, -1]]}
    right, wrong = Solution.objects.order_by("pk")
    assert (right.is_correct, wrong.is_correct) == (True, False)
    assert (right.source, wrong.source) == ("Qwen2-7B-Instruct", "Llama-3.1-8B-Instruct")
    label = ImportedLabel.objects.get(solution=wrong)
    assert (label.format, label.file_name, label.row) == ("processbench", path.name, 2)
    # Imported again: nothing is stored twice.
    assert "0 created" in import_file(path, "processbench")
    assert ImportedLabel.objects.count() == 2 and Solution.objects.count() == 2


def test_prmbench_labels_its_error_steps_and_keeps_the_original_once_ungraded(tmp_path):
    import_file(write_jsonl(tmp_path / "prmbench_preview.jsonl", PRMBENCH), "prmbench")

    # The modified processes, each with its error steps (1-based) at -1, and the original
    # process, shared by both rows, once with every step +1.
    assert labels_by_problem() == {ABS: [[1, -1], [1, 1], [1, 1, 1]]}
    assert Problem.objects.get().answer == ""
    # No answer in the format: ungraded, not wrong.
    assert set(Solution.objects.values_list("is_correct", flat=True)) == {None}


def test_a_trl_parquet_file_is_imported_and_a_bad_row_is_named_by_file_and_row(tmp_path):
    import_file(write_parquet(tmp_path / "math_shepherd.parquet", TRL), "trl")
    assert labels_by_problem() == {BINOM: [[1, 1]], MOD: [[1, -1, -1]], ABS: [[1, 1, 1]]}
    assert list(ImportedLabel.objects.values_list("row", flat=True)) == [1, 2, 3]

    bad = [TRL[0], {**TRL[1], "labels": [True, False]}]
    with pytest.raises(CommandError, match=r"bad\.parquet:2: labels must be 3 booleans"):
        import_file(write_parquet(tmp_path / "bad.parquet", bad), "trl")


@pytest.mark.parametrize(
    ("format", "rows", "message"),
    [
        ("processbench", [PROCESSBENCH[0], {**PROCESSBENCH[1], "label": 4}], "label must be -1"),
        ("prmbench", [PRMBENCH[0], {**PRMBENCH[1], "error_steps": [0]}], "error_steps must be"),
        ("trl", [TRL[0], {**TRL[1], "completions": []}], "completions must be a non-empty"),
    ],
)
def test_a_bad_row_names_file_and_line_and_imports_nothing(tmp_path, format, rows, message):
    path = write_jsonl(tmp_path / "public.jsonl", rows)

    with pytest.raises(CommandError, match=rf"public\.jsonl:2: {message}.*nothing was imported"):
        import_file(path, format)

    assert not Problem.objects.exists()
    assert not Solution.objects.exists()
    assert not ImportedLabel.objects.exists()


def test_a_trl_file_imported_then_exported_gives_the_same_rows(tmp_path):
    path = write_jsonl(tmp_path / "prm800k_trl.jsonl", TRL)
    import_file(path, "trl")
    out = tmp_path / "out.jsonl"

    call_command("export_stepwise", "--out", str(out), "--label-source", "imported")

    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows == TRL


def test_imported_labels_are_a_source_of_their_own_and_a_run_trains_on_them(
    tmp_path, settings, make_user
):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600  # as trainer/tests/test_runs.py: no heartbeat thread
    import_file(write_jsonl(tmp_path / "trl.jsonl", TRL), "trl")
    assert build_training_examples(params=TrainingParams()) == []  # human labels only
    params = {"label_source": "imported", "epochs": 1, "batch_size": 8, "eval_fraction": 0.34}
    examples = build_training_examples(params=TrainingParams.from_dict(params))
    assert [e.labels for e in examples] == [[1, 1], [1, -1, -1], [1, 1, 1]]
    assert {e.source for e in examples} == {"imported"}

    run = runs.request_training_run(user=make_user("rita", "researcher"), params=params)
    run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert run.dataset_size == 3
    assert ModelVersion.objects.filter(training_run=run).exists()


def test_the_processbench_evaluation_reads_parquet_with_the_same_parser(tmp_path):
    items = processbench.read_items(path=write_parquet(tmp_path / "gsm8k.parquet", PROCESSBENCH))
    assert [(i.problem, i.label) for i in items] == [(BINOM, -1), (MOD, 2)]


def test_an_uploaded_parquet_file_is_imported_by_a_job_and_a_bad_one_is_refused(
    tmp_path, make_user, django_capture_on_commit_callbacks
):
    client = APIClient()
    client.force_authenticate(make_user("ada", "admin"))

    def upload(path, kind):
        file = SimpleUploadedFile(path.name, path.read_bytes())
        return client.post("/api/imports/", {"kind": kind, "file": file}, format="multipart")

    bad = write_parquet(tmp_path / "bad.parquet", [TRL[0], {**TRL[1], "labels": [True]}])
    response = upload(bad, "trl")
    assert response.status_code == 400
    assert "bad.parquet:2: labels must be 3 booleans" in json.dumps(response.json())
    assert not ImportJob.objects.exists() and not Problem.objects.exists()

    with django_capture_on_commit_callbacks(execute=False):
        response = upload(write_parquet(tmp_path / "pb.parquet", PROCESSBENCH), "processbench")
    assert response.status_code == 202, response.json()
    job = import_jobs.run_import_job(job_id=response.json()["id"])
    assert job.status == ImportJob.Status.SUCCEEDED, job.error
    assert job.result["created"] == 2
    assert labels_by_problem() == {BINOM: [[1, 1, 1]], MOD: [[1, 1, -1]]}
    assert set(ImportedLabel.objects.values_list("file_name", flat=True)) == {"pb.parquet"}
