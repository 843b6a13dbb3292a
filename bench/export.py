"""Benchmark: PRM800K import and export at full scale, on a throwaway database.

    python bench/export.py [--solutions N] [--steps-per-solution K] [--keep-db | --reuse-db]
                           [--database NAME]

Generates a synthetic PRM800K phase-2 file of N labeled solutions (default 100,000 lines of
about 10 rated steps each, ~1,000,000 step ratings: the size of PRM800K), imports it with
`import_prm800k`, exports it with `write_prm800k`, and compares the export with plain
`json.dumps` of the same objects. Import and export each run in a fresh subprocess
(`--phase import|export`), so that each one's peak RSS is its own and not the generator's
or the other phase's.

The database is never the developer's: with a PostgreSQL `DATABASE_URL` the benchmark
creates (and afterwards drops) a database named `stepwise_bench` (or `--database NAME`, so
that two runs on one server do not drop each other's) on that server; otherwise it uses a
SQLite file in a temporary directory. Exits non-zero when a target is missed: the import must
take at most 60 s, the export at most twice as long as `json.dumps` of the same objects, and
no phase may peak above 300 MB RSS. The targets are PostgreSQL's; on SQLite they are reported.

To iterate on the export, run once with
`--keep-db` (the database outlives the run: `stepwise_bench`, or `var/bench_export.sqlite3`)
and then with `--reuse-db`, which skips the import and times the export alone
against the kept database (the input file is regenerated from the same seed for the check).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import (  # noqa: E402  (after the repository joins the path)
    current_rss_mb,
    database_url,
    is_postgres,
    peak_rss_mb,
    recreate_database,
    setup_django,
)

BENCH_DB = "stepwise_bench"
SEED = 800_000
IMPORT_TARGET_S = 60.0
EXPORT_TARGET_RATIO = 2.0  # export seconds over json.dumps seconds
RSS_TARGET_MB = 300.0
SAMPLE_LINES = 200


# ---------------------------------------------------------------------------------------------
# Django and the throwaway database


def kept_sqlite_path() -> Path:
    return Path(os.environ.get("STEPWISE_VAR_DIR", REPO / "var")) / "bench_export.sqlite3"


# ---------------------------------------------------------------------------------------------
# Synthetic PRM800K data

# Words and LaTeX fragments of the kind PRM800K steps are made of; a few non-ASCII
# characters make the exporter's ensure_ascii=False path do real work.
PASSAGE = (
    "Let $x$ be the number of so we have Then the equation becomes which simplifies to "
    "Since $n$ is an integer, this means that the sum of the roots is equal to By Vieta's "
    "formulas, $a+b=-\\frac{b}{a}$ and $ab=\\frac{c}{a}$. Substituting into the first "
    "equation gives $2x^2-5x+3=0$, so $(2x-3)(x-1)=0$. The area of the triangle is "
    "$\\frac{1}{2}bh$ where $h=\\sqrt{3}$ and the circle has radius $r=4$, so π r² = 16π. "
    "I need to find the remainder when $7^{100}$ is divided by $13$. Notice that "
    "$\\binom{10}{3}=120$ and $3 × 40 = 120$, hence the probability is $\\frac{3}{8}$. "
    "We know $\\sin^2\\theta+\\cos^2\\theta=1$, therefore $\\cos\\theta=\\pm\\frac{4}{5}$ ≤ 1. "
    "This is a geometric series with first term $a$ and common ratio $r$, so the sum is "
    "$\\frac{a}{1-r}$. Adding the two equations, I get $3y = 12$ and $y = 4$."
)
VOCABULARY = PASSAGE.split()
# MATH-like final answers: mostly integers, then fractions, radicals and the odd tuple,
# interval, polynomial or multiple-choice letter. Their variety matters: the importer grades
# each distinct (answer, ground truth) pair, and a tiny answer pool would hide that cost.
ANSWER_KINDS = {
    "integer": (55, lambda r: str(r.choice((r.randint(0, 20), r.randint(-50, 5000))))),
    "fraction": (14, lambda r: f"\\frac{{{r.randint(1, 30)}}}{{{r.randint(31, 99)}}}"),
    "radical": (8, lambda r: f"{r.randint(2, 12)}\\sqrt{{{r.choice((2, 3, 5, 6, 7))}}}"),
    "pi": (4, lambda r: f"{r.randint(2, 64)}\\pi"),
    "decimal": (5, lambda r: f"{r.randint(0, 99)}.{r.randint(1, 99)}"),
    "tuple": (4, lambda r: f"({r.randint(-9, 9)}, {r.randint(-9, 9)})"),
    "interval": (3, lambda r: f"[{r.randint(-9, 0)}, {r.randint(1, 9)})"),
    "polynomial": (4, lambda r: f"x^2+{r.randint(1, 9)}x+{r.randint(1, 9)}"),
    "letter": (3, lambda r: f"\\text{{({r.choice('ABCDE')})}}"),
}


def make_answers(rng: random.Random) -> tuple[str, list[str]]:
    """A ground truth and the few wrong answers (of the same kind) models tend to give."""
    weights = [w for w, _ in ANSWER_KINDS.values()]
    _, make = rng.choices(list(ANSWER_KINDS.values()), weights=weights)[0]
    truth = make(rng)
    return truth, [make(rng) for _ in range(3)]


class TextSource:
    """Fast realistic text: slices of one long pre-shuffled string, cut at word starts."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.corpus = " ".join(rng.choices(VOCABULARY, k=200_000))

    def text(self, low: int, high: int) -> str:
        length = self.rng.randint(low, high)
        start = self.corpus.find(" ", self.rng.randrange(len(self.corpus) - high - 100)) + 1
        return self.corpus[start : start + length].strip()


def make_problems(rng: random.Random, texts: TextSource, count: int) -> list[dict]:
    problems = []
    for i in range(count):
        answer, wrong = make_answers(rng)
        problems.append(
            {
                # The index keeps problem texts distinct: PRM800K names problems by text.
                "problem": f"Problem {i}: {texts.text(120, 400)}",
                "ground_truth_solution": f"{texts.text(300, 900)} The answer is "
                f"$\\boxed{{{answer}}}$.",
                "ground_truth_answer": answer,
                "wrong_answers": wrong,  # not written: kept to draw wrong solutions from
            }
        )
    return problems


def make_step(rng: random.Random, texts: TextSource, text: str) -> dict:
    rating = rng.choices((1, 0, -1), weights=(75, 15, 10))[0]
    completions = [{"text": text, "rating": rating, "flagged": rng.random() < 0.01 or None}]
    if rng.random() < 0.03:
        # A few steps carry rated alternative completions next to the pre-generated one.
        for _ in range(rng.randint(1, 2)):
            completions.append(
                {
                    "text": texts.text(80, 200),
                    "rating": rng.choice((1, 0, -1)),
                    "flagged": None,
                }
            )
    return {
        "completions": completions,
        "human_completion": None,
        "chosen_completion": None if rating == -1 else 0,
    }


def make_line(
    rng: random.Random,
    texts: TextSource,
    *,
    problem: dict,
    labeler: str,
    moment: datetime,
    steps_per_solution: int,
) -> dict:
    truth = problem["ground_truth_answer"]
    answer = truth if rng.random() < 0.4 else rng.choice(problem["wrong_answers"])
    count = rng.randint(max(1, steps_per_solution - 4), steps_per_solution + 4)
    steps = [texts.text(80, 200) for _ in range(count - 1)] + [f"# Answer\n\n{answer}"]
    label_steps = [make_step(rng, texts, text) for text in steps]
    has_error = any(s["completions"][0]["rating"] == -1 for s in label_steps)
    return {
        "labeler": labeler,
        "timestamp": moment.replace(microsecond=rng.randint(1, 999_999)).isoformat(),
        "generation": rng.randint(1, 10),
        "is_quality_control_question": False,
        "is_initial_screening_question": False,
        "question": {
            "problem": problem["problem"],
            "ground_truth_solution": problem["ground_truth_solution"],
            "ground_truth_answer": truth,
            "pre_generated_steps": steps,
            "pre_generated_answer": answer,
            "pre_generated_verifier_score": rng.random(),
        },
        "label": {
            "steps": label_steps,
            "total_time": rng.randint(20_000, 900_000),
            "finish_reason": "found_error" if has_error else "solution",
        },
    }


def generate(path: Path, *, solutions: int, steps_per_solution: int) -> None:
    rng = random.Random(SEED)
    texts = TextSource(rng)
    problems = make_problems(rng, texts, max(1, solutions // 8))
    labelers = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(80)]
    moment = datetime(2022, 8, 1)  # PRM800K timestamps are naive UTC
    recent: list[dict] = []
    with path.open("w", encoding="utf-8") as f:
        for _ in range(solutions):
            moment += timedelta(seconds=rng.randint(1, 60))
            labeler = rng.choice(labelers)
            if recent and rng.random() < 0.02:
                # Quality-control lines give an already labeled solution to another labeler,
                # so the importer's "same solution, several sessions" path is exercised.
                line = dict(rng.choice(recent), labeler=labeler, is_quality_control_question=True)
                line["timestamp"] = moment.replace(microsecond=rng.randint(1, 999_999)).isoformat()
            else:
                line = make_line(
                    rng,
                    texts,
                    problem=rng.choice(problems),
                    labeler=labeler,
                    moment=moment,
                    steps_per_solution=steps_per_solution,
                )
                recent = (recent + [line])[-50:]
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------
# Phases run in their own process, so that ru_maxrss is the phase's own peak


def phase_import(path: Path) -> dict:
    from django.conf import settings

    from labeling import grading
    from labeling.services import prm800k_import

    # Answer grading (math-verify, sympy) costs the same on any database; timing it apart
    # tells how much of the import is grading and how much is storing.
    graded = {"seconds": 0.0, "pairs": 0}
    grade_answers = grading.grade_answers

    def timed_grade_answers(*, pairs, pool) -> None:
        pairs = list(pairs)
        start = time.perf_counter()
        graded["pairs"] += len({p for p in pairs if grading.cached(p) is None})
        try:
            grade_answers(pairs=pairs, pool=pool)
        finally:
            graded["seconds"] += time.perf_counter() - start

    prm800k_import.grade_answers = timed_grade_answers
    baseline = current_rss_mb()
    start = time.perf_counter()
    result = prm800k_import.import_prm800k(path=path, name=path.name)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "lines": result.lines,
        "ratings": result.details["ratings"],
        "grading_seconds": graded["seconds"],
        "distinct_graded": graded["pairs"],
        "grading_processes": settings.IMPORT_GRADING_PROCESSES,
        "baseline_mb": baseline,
        "peak_mb": peak_rss_mb(),
    }


def phase_export(path: Path) -> dict:
    from labeling.export import ExportFilters, write_prm800k

    baseline = current_rss_mb()
    start = time.perf_counter()
    with path.open("w", encoding="utf-8") as out:
        lines = write_prm800k(out=out, filters=ExportFilters())
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "lines": lines, "baseline_mb": baseline, "peak_mb": peak_rss_mb()}


def run_phase(phase: str, *, db: str, file: Path) -> dict:
    """Run one phase in a fresh interpreter; its last stdout line is the JSON result."""
    command = [sys.executable, __file__, "--phase", phase, "--db", db, "--file", str(file)]
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Echoed at once: a long run that fails in a later phase still shows this one's figures.
    print(f"{phase}: {json.dumps(result)}", file=sys.stderr)
    return result


# ---------------------------------------------------------------------------------------------
# The peer and the correctness check


def time_json_dumps(source: Path, out_path: Path) -> float:
    """Seconds to write the same objects with json.dumps alone, as the exporter formats them."""
    with source.open(encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    start = time.perf_counter()
    with out_path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return time.perf_counter() - start


def canonical(line: str) -> str:
    # Compare as sorted JSON text, not with ==, which would take 1, 1.0 and true as equal.
    return json.dumps(json.loads(line), sort_keys=True)


def check_round_trip(source: Path, exported: Path, lines: int) -> tuple[int, int, int]:
    """(exported line count, sampled lines, sampled lines equal to their input line)."""
    with exported.open(encoding="utf-8") as f:
        count = sum(1 for _ in f)
    # Sessions are exported in primary-key order, which is the order they were imported in,
    # so line i of the export must be line i of the input.
    sample = set(random.Random(SEED).sample(range(lines), min(SAMPLE_LINES, lines)))
    equal = 0
    with source.open(encoding="utf-8") as a, exported.open(encoding="utf-8") as b:
        for i, (want, got) in enumerate(zip(a, b, strict=False)):
            if i in sample and canonical(want) == canonical(got):
                equal += 1
    return count, len(sample), equal


# ---------------------------------------------------------------------------------------------
# Orchestration


def rate(lines: int, seconds: float) -> str:
    return f"{lines / seconds:,.0f}" if seconds else "-"


def report(*, lines: int, imp: dict | None, exp: dict, dumps_s: float, check, backend: str) -> bool:
    """Print the figures; `imp` is None when the import was skipped (`--reuse-db`)."""
    exported, sampled, equal = check
    ratio = exp["seconds"] / dumps_s
    peaks = [exp["peak_mb"]] + ([imp["peak_mb"]] if imp else [])
    checks = [
        (
            f"export at most {EXPORT_TARGET_RATIO:.0f}x json.dumps ({ratio:.2f}x)",
            ratio <= EXPORT_TARGET_RATIO,
        ),
        (
            f"RSS under {RSS_TARGET_MB:.0f} MB ({'import and ' if imp else ''}export)",
            max(peaks) < RSS_TARGET_MB,
        ),
        (f"export has {lines:,} lines", exported == lines),
        *(
            [(f"import at most {IMPORT_TARGET_S:.0f} s", imp["seconds"] <= IMPORT_TARGET_S)]
            if imp
            else []
        ),
        (f"{sampled} sampled lines equal their input", equal == sampled),
    ]
    rows = [("phase", "seconds", "lines/s", "peak RSS MB", "baseline MB")]
    if imp:
        rows.append(
            (
                "import",
                f"{imp['seconds']:.1f}",
                rate(lines, imp["seconds"]),
                f"{imp['peak_mb']:.0f}",
                f"{imp['baseline_mb']:.0f}",
            )
        )
    rows += [
        (
            "export",
            f"{exp['seconds']:.1f}",
            rate(lines, exp["seconds"]),
            f"{exp['peak_mb']:.0f}",
            f"{exp['baseline_mb']:.0f}",
        ),
        ("json.dumps", f"{dumps_s:.1f}", rate(lines, dumps_s), "", ""),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(f"\nstepwise export benchmark ({backend})")
    print(f"lines {lines:,}   step ratings {imp['ratings']:,}" if imp else f"lines {lines:,}")
    for row in rows:
        print(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    if imp:
        print(
            f"import: grading answers took {imp['grading_seconds']:.1f} s, beside the storing "
            f"({imp['distinct_graded']:,} distinct answer/truth pairs, "
            f"{imp['grading_processes']} grading processes)"
        )
    else:
        print("import: skipped (--reuse-db), export timed against the kept database")
    print(f"export / json.dumps: {ratio:.2f}x")
    print("(baseline: the phase process's RSS after django.setup() and imports, before its work)")
    # The time targets are PostgreSQL's: on SQLite a missed one is reported, not failed.
    timed = ("export at most", "import at most")
    for i, (name, ok) in enumerate(checks):
        if not ok and backend != "PostgreSQL" and name.startswith(timed):
            checks[i] = (name, True)
            print(f"[missed, PostgreSQL's target] {name}")
        else:
            print(f"[{'ok' if ok else 'FAIL'}] {name}")
    return all(ok for _, ok in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solutions", type=int, default=100_000, help="lines (sessions)")
    parser.add_argument(
        "--steps-per-solution", type=int, default=10, help="mean steps; each varies by ±4"
    )
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument(
        "--keep-db",
        action="store_true",
        help="keep the imported database after the run, for later --reuse-db runs",
    )
    kept.add_argument(
        "--reuse-db",
        action="store_true",
        help="skip the import: time the export of a database kept by --keep-db "
        "(same --solutions and --steps-per-solution)",
    )
    parser.add_argument(
        "--database",
        default=BENCH_DB,
        help=f"the throwaway PostgreSQL database's name (default {BENCH_DB})",
    )
    parser.add_argument("--phase", choices=("import", "export"), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        setup_django(args.db)
        result = (phase_import if args.phase == "import" else phase_export)(args.file)
        print(json.dumps(result))
        return 0

    server_url = os.environ.get("DATABASE_URL", "")
    postgres = is_postgres(server_url)
    keep = args.keep_db or args.reuse_db
    with tempfile.TemporaryDirectory(prefix="stepwise-bench-") as tmp:
        tmpdir = Path(tmp)
        if postgres:
            db = database_url(server_url, args.database) if args.reuse_db else None
            db = db or recreate_database(server_url, args.database)
        else:
            sqlite_path = kept_sqlite_path() if keep else tmpdir / "bench.sqlite3"
            if args.keep_db:
                sqlite_path.parent.mkdir(parents=True, exist_ok=True)
                sqlite_path.unlink(missing_ok=True)
            elif args.reuse_db and not sqlite_path.exists():
                parser.error(f"--reuse-db: {sqlite_path} does not exist; run with --keep-db")
            db = f"sqlite:///{sqlite_path}"
        imp = None
        try:
            setup_django(db)
            from django.core.management import call_command
            from django.db import connections

            if not args.reuse_db:
                call_command("migrate", verbosity=0, interactive=False)
            # The phases open their own connections; SQLite must not see a second writer.
            connections.close_all()

            source, exported = tmpdir / "input.jsonl", tmpdir / "export.jsonl"
            print(f"generating {args.solutions:,} lines ...", file=sys.stderr)
            generate(source, solutions=args.solutions, steps_per_solution=args.steps_per_solution)
            if not args.reuse_db:
                print("importing ...", file=sys.stderr)
                imp = run_phase("import", db=db, file=source)
            print("exporting ...", file=sys.stderr)
            exp = run_phase("export", db=db, file=exported)
            print("json.dumps peer and round-trip check ...", file=sys.stderr)
            dumps_s = time_json_dumps(source, tmpdir / "dumps.jsonl")
            check = check_round_trip(source, exported, args.solutions)
        finally:
            if postgres and not keep:
                from django.db import connections

                connections.close_all()  # DROP DATABASE refuses while we are connected
                recreate_database(server_url, args.database, create=False)
    backend = "PostgreSQL" if postgres else "SQLite"
    ok = report(
        lines=args.solutions, imp=imp, exp=exp, dumps_s=dumps_s, check=check, backend=backend
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
