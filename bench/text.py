"""Benchmark: the text renderers on hostile input, 5 kB to 500 kB; grading a 50 kB answer.

    python bench/text.py [--sizes 5000 50000 500000] [--shapes NAME ...] [--renderers NAME ...]

Every shape of labeling/tests/hostile_text.py (runs of math delimiters, Markdown brackets,
emphasis, tags, nestings, one long line, invisible characters) goes through `render_math`,
`render_step`, `render_answer` and `render_markdown` at each size; the figure is the least CPU
time of five runs (one at the largest size), which other work on the machine disturbs less
than the wall clock, shown for 50 kB beside it. Linear time shows as a ratio of about 10
between sizes ten times apart; the quadratic splitting this replaced showed 100.
`render_markdown` gives Markdown at most `MARKDOWN_MAX_CHARS` characters (longer text is
shown as plain text with its math), so it is also timed at that limit, where Markdown runs.

Then `labeling.grading.grade_answer` (the public verdict) grades 1 kB and 50 kB answers
against a short ground truth, each in a child process with a time limit, and reports what
each took (grading has its own owner and limits; this only reports).

Exits non-zero when a target is missed: each renderer under 0.5 s on 50 kB of any shape, and
no more than 30 times slower at 500 kB than at 50 kB (quadratic would be 100 times).
"""

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from labeling.tests.hostile_text import HOSTILE_TEXT, hostile_text  # noqa: E402 (no Django)

RENDERERS = ["render_math", "render_step", "render_answer", "render_markdown"]

FAST_S = 0.5  # 50 kB of any shape through any renderer
GROWTH_MAX = 30.0  # 500 kB against 50 kB: ~10 linear, ~100 quadratic
GRADE_LIMIT_S = 120
GRADED = {  # 50 kB answers a generator or an import could hand the grader
    "digits": "9",
    "open-frac": "\\frac{",
    "open-paren": "(",
    "nested-boxed": "\\boxed{",
    "commas": "1,",
    "sqrt": "\\sqrt{2}+",
    "text": "\\text{a}",
    "dollars": "$",
}


def setup_django() -> None:
    os.environ["DEBUG"] = "false"  # production behaviour whatever the shell says
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")
    import django

    django.setup()


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.platform()}, {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )


def best_of(call, runs: int) -> tuple[float, float]:
    """The least CPU seconds and the least wall-clock seconds of `runs` calls."""
    cpu = wall = float("inf")
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        cpu = min(cpu, time.process_time() - started_cpu)
        wall = min(wall, time.perf_counter() - started)
    return cpu, wall


def renderer(name: str):
    from labeling import mathtext

    return getattr(mathtext, name)


def time_renderers(*, shapes: list[str], names: list[str], sizes: list[int]) -> list[str]:
    """Print the table; return the targets missed."""
    missed = []
    header = "".join(f"{f'{size // 1000} kB':>10}" for size in sizes)
    ratios = "".join(f"{f'x{b // a}':>7}" for a, b in zip(sizes, sizes[1:], strict=False))
    print(
        f"\n{'renderer':<16}{'shape':<19}{header}{ratios}{'wall 50 kB':>12}\n"
        f"{'':<35}(CPU seconds, best of 5; one run at 500 kB; growth from the size before)"
    )
    for name in names:
        render = renderer(name)
        for shape in shapes:
            cpu, wall = {}, {}
            for size in sizes:
                text = hostile_text(shape, size)
                runs = 1 if size >= 500_000 else 5
                cpu[size], wall[size] = best_of(lambda r=render, t=text: r(t), runs)
            figures = [cpu[size] for size in sizes]
            growth = [b / max(a, 1e-4) for a, b in zip(figures, figures[1:], strict=False)]
            row = "".join(f"{s:10.4f}" for s in figures) + "".join(f"{g:7.1f}" for g in growth)
            fifty = f"{wall[50_000]:12.4f}" if 50_000 in wall else ""
            print(f"{name:<16}{shape:<19}{row}{fifty}", flush=True)
            if wall.get(50_000, 0) >= FAST_S:
                missed.append(f"{name} {shape}: {wall[50_000]:.2f} s at 50 kB")
            if 50_000 in cpu and 500_000 in cpu:
                big = cpu[500_000] / max(cpu[50_000], 1e-3)
                if big > GROWTH_MAX:
                    missed.append(f"{name} {shape}: {big:.0f}x from 50 kB to 500 kB")
    return missed


def time_markdown_at_its_limit(shapes: list[str]) -> list[str]:
    from labeling import mathtext

    size = mathtext.MARKDOWN_MAX_CHARS
    missed = []
    print(f"\nrender_markdown at its limit ({size:,} characters): Markdown, or why not")
    for shape in shapes:
        text = hostile_text(shape, size)
        seconds = best_of(lambda t=text: mathtext.render_markdown(t), 3)[1]
        why = mathtext.markdown_refusal(text)
        print(f"{shape:<20}{seconds:10.4f}   {'Markdown' if why is None else 'plain: ' + why}")
        if seconds >= FAST_S:
            missed.append(f"render_markdown {shape}: {seconds:.2f} s at {size:,} characters")
    return missed


def grade_one(shape: str, size: int) -> None:
    """In a child process: grade one answer, print the seconds and the verdict."""
    from labeling.grading import grade_answer

    answer = (GRADED[shape] * size)[:size]
    started = time.perf_counter()
    verdict = grade_answer(answer, "42")
    print(f"graded {time.perf_counter() - started:.4f} {verdict}")


def time_grading() -> None:
    print(
        f"\nlabeling.grading.grade_answer of an answer against '42', seconds "
        f"(a child process each, limit {GRADE_LIMIT_S} s)\n{'shape':<20}{'1 kB':>10}{'50 kB':>10}"
    )
    for shape in GRADED:
        shown = []
        for size in (1_000, 50_000):
            try:
                done = subprocess.run(
                    [sys.executable, __file__, "--grade-one", shape, "--grade-size", str(size)],
                    capture_output=True,
                    text=True,
                    timeout=GRADE_LIMIT_S,
                    check=False,
                )
                graded = [line.split() for line in done.stdout.splitlines()]
                graded = [words for words in graded if words[:1] == ["graded"]]
                shown.append(f"{float(graded[-1][1]):10.4f}" if graded else f"{'failed':>10}")
            except subprocess.TimeoutExpired:
                shown.append(f"{f'>{GRADE_LIMIT_S}':>10}")
        print(f"{shape:<20}{''.join(shown)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 50_000, 500_000])
    parser.add_argument("--shapes", nargs="+", choices=HOSTILE_TEXT, help="default: all")
    parser.add_argument("--renderers", nargs="+", choices=RENDERERS, help="default: all four")
    parser.add_argument("--no-grading", action="store_true")
    parser.add_argument("--grade-one", help=argparse.SUPPRESS)
    parser.add_argument("--grade-size", type=int, default=50_000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    setup_django()
    if args.grade_one:
        grade_one(args.grade_one, args.grade_size)
        return
    shapes = args.shapes or list(HOSTILE_TEXT)
    names = args.renderers or list(RENDERERS)
    print(f"bench/text.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, on {machine()}")
    missed = time_renderers(shapes=shapes, names=names, sizes=sorted(args.sizes))
    if "render_markdown" in names:
        missed += time_markdown_at_its_limit(shapes)
    if not args.no_grading:
        time_grading()
    if missed:
        print("\nmissed:\n  " + "\n  ".join(missed))
        sys.exit(1)
    print(f"\nall targets met: under {FAST_S} s at 50 kB, at most {GROWTH_MAX:.0f}x to 500 kB")


if __name__ == "__main__":
    main()
