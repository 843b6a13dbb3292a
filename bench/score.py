"""Benchmark: PRM scoring, batched against one solution per forward call, on one machine.

    python bench/score.py [--solutions N] [--per-call K] [--batch-size B]

Stores N synthetic solutions (default 2,000, 3-12 steps of MATH-like text each), builds the
tiny built-in PRM, or on a GPU one on a Qwen2.5-0.5B-shaped backbone (`--shape`, bench/shapes.py;
random weights: speed does not depend on what it learned), saves it to a
temporary directory and loads it back as a worker would, then times `score_and_store`
twice: batched (length-sorted batches of B), and with batch size 1 on the first K solutions
(default 200), extrapolated per solution. Both paths read and write the database the same
way, so the ratio is what batching buys. Prints solutions/s of each, the ratio, and the
peak RSS while scoring (the issue's scale figure: `--solutions 100000`); exits non-zero when
the ratio is under 10x (`--smoke`, CI's run at a tiny size: only when a solution went unscored).

The database is never the developer's: with a PostgreSQL `DATABASE_URL` the benchmark
creates (and afterwards drops) `stepwise_score_bench` on that server; otherwise it uses a
SQLite file in a temporary directory.
"""

import argparse
import random
import sys
import time
from pathlib import Path

from shapes import SHAPES, backbone_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import current_rss_mb, peak_rss_mb, reset_peak_rss, throwaway_django  # noqa: E402

BENCH_DB = "stepwise_score_bench"
SEED = 4
STORE_CHUNK = 5_000
TOKENIZER_SAMPLE = 2_000
TARGET_RATIO = 10.0

PASSAGE = (
    "Let $x$ be the number of so we have Then the equation becomes which simplifies to "
    "Since $n$ is an integer, this means that the sum of the roots is $a+b=-\\frac{b}{a}$ "
    "Substituting into the first equation gives $2x^2-5x+3=0$, so $(2x-3)(x-1)=0$. The area "
    "of the triangle is $\\frac{1}{2}bh$ where $h=\\sqrt{3}$ and the circle has radius $r=4$. "
    "Notice that $\\binom{10}{3}=120$, hence the probability is $\\frac{3}{8}$."
)
WORDS = PASSAGE.split()


def store_solutions(count: int) -> list[int]:
    """`count` solutions of 3-12 steps, stored in chunks so that a 100,000-solution pool
    never sits in memory as model objects."""
    from labeling.models import Problem, Solution, solution_digest, text_digest

    rng = random.Random(SEED)

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))

    problems = []
    for i in range(max(1, count // 8)):
        text = f"Problem {i}: {sentence(15, 60)}"
        problems.append(Problem(text=text, text_hash=text_digest(text), answer=str(i)))
    problems = Problem.objects.bulk_create(problems, batch_size=STORE_CHUNK)
    ids: list[int] = []
    for start in range(0, count, STORE_CHUNK):
        solutions = []
        for i in range(start, min(start + STORE_CHUNK, count)):
            steps = [sentence(8, 40) for _ in range(rng.randint(3, 12))]
            answer = str(rng.randint(0, 99))
            steps[-1] += f"\n\n# Answer\n\n{answer}"
            solutions.append(
                Solution(
                    problem=problems[i % len(problems)],
                    steps=steps,
                    answer=answer,
                    content_hash=solution_digest(steps=steps, answer=answer),
                    is_correct=rng.random() < 0.3,
                )
            )
        ids += [s.pk for s in Solution.objects.bulk_create(solutions, batch_size=500)]
    return ids


def shaped_module(shape: str, *, vocab_size: int):
    """The PRM's module on a backbone of `shape` (bench/shapes.py, random weights), with the
    built-in tokenizer's vocabulary: the speed of a real backbone without its download."""
    from transformers import AutoModel

    from trainer.training.ml.prm import PRMModule

    config = backbone_config(shape, vocab_size=vocab_size, attn_implementation="sdpa")
    return PRMModule(AutoModel.from_config(config), config.hidden_size)


def run(args, tmpdir: Path) -> bool:
    from django.core.management import call_command

    from labeling.models import Problem, Solution
    from trainer.models import ModelVersion
    from trainer.scoring.store import score_and_store
    from trainer.training.ml.prm import PRM

    call_command("migrate", verbosity=0, interactive=False)
    ids = store_solutions(args.solutions)
    # The tokenizer learns from a sample: the text is drawn from one small vocabulary.
    corpus = list(Problem.objects.values_list("text", flat=True)[:TOKENIZER_SAMPLE])
    for steps in Solution.objects.order_by("pk").values_list("steps", flat=True)[:TOKENIZER_SAMPLE]:
        corpus += steps
    built = PRM.build(base_model=None, corpus=corpus, seed=SEED)
    built.module = shaped_module(args.shape, vocab_size=len(built.tokenizer))
    built.save(tmpdir / "model")
    prm = PRM.load(tmpdir / "model")
    version = ModelVersion.objects.create(name="bench", checkpoint=str(tmpdir / "model"))

    reset = reset_peak_rss()
    before_mb = current_rss_mb()
    start = time.perf_counter()
    batched = score_and_store(
        prm=prm, solution_ids=ids, model_version_id=version.pk, batch_size=args.batch_size
    )
    batched_s = time.perf_counter() - start
    scoring_peak_mb = peak_rss_mb()

    sample = ids[: args.per_call]
    start = time.perf_counter()
    per_call = score_and_store(
        prm=prm, solution_ids=sample, model_version_id=version.pk, batch_size=1
    )
    per_call_s = time.perf_counter() - start

    written = Solution.objects.filter(prm_model_version=version, prm_score__isnull=False).count()
    batched_rate = batched / batched_s
    per_call_rate = per_call / per_call_s
    ratio = batched_rate / per_call_rate
    steps = sum(len(s) for s in Solution.objects.values_list("steps", flat=True))
    print(f"\nstepwise scoring benchmark ({prm.device}, {sys.argv[0]})")
    print(f"solutions {batched:,}   steps {steps:,}   {args.shape} PRM, random weights")
    print(
        f"batched (batch {args.batch_size}, length-sorted): {batched_s:.1f} s, "
        f"{batched_rate:,.1f} solutions/s"
    )
    print(
        f"one per forward call ({per_call} solutions, extrapolated): {per_call_s:.1f} s, "
        f"{per_call_rate:,.1f} solutions/s -> {batched / per_call_rate:.1f} s for all"
    )
    print(
        f"memory: {before_mb:,.0f} MB RSS before scoring, peak "
        f"{scoring_peak_mb:,.0f} MB while scoring"
        + ("" if reset else " (peak since process start: /proc/self/clear_refs unavailable)")
    )
    print(f"batched / one-by-one: {ratio:.1f}x")
    checks = [(f"every one of {batched:,} solutions scored", written == batched == len(ids))]
    if not args.smoke:
        checks.append((f"batched at least {TARGET_RATIO:.0f}x faster", ratio >= TARGET_RATIO))
    for name, ok in checks:
        print(f"[{'ok' if ok else 'FAIL'}] {name}")
    return all(ok for _, ok in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solutions", type=int, default=2_000)
    parser.add_argument("--per-call", type=int, default=200, help="solutions timed one by one")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--smoke", action="store_true", help="a run that checks it works: no speed target"
    )
    parser.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default=None,
        help="backbone shape (random weights); default qwen-0.5b on CUDA, the tiny one elsewhere",
    )
    args = parser.parse_args()
    if args.shape is None:
        import torch

        args.shape = "qwen-0.5b" if torch.cuda.is_available() else "tiny"

    with throwaway_django(BENCH_DB) as tmpdir:
        ok = run(args, tmpdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
