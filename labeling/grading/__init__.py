"""Final-answer grading: is a solution's answer the same as the MATH-style ground truth?

Three verdicts: equal, not equal, and unsure, for an answer holding anything the grader does
not read. Stages, one module each, in the order an answer goes through them:

- `normalise`: the answer read into a value and what is written with it (units, percent,
  degrees, currency, scale and number words; Unicode math as LaTeX). `quantities` reads units
  (pint), times of day, ratios, scale and number words.
- `numbers` and `structures`: exact values (rationals, plain arithmetic, repeating decimals)
  and compound answers (tuples, sets, intervals, inequalities, matrices, bases, towers).
- `compare`: the comparison, stage by stage, and `vocabulary`, the tokens it can read.
- `symbolic`: math-verify (sympy) for what is left, made exact, under a hard deadline.
- `verdicts`: the verdicts of stored solutions (cache, worker pool, regrading).

The corpus in `labeling/tests/fixtures/grading_corpus.tsv` is the measure of this package:
change the grader, run `test_grading.py`, and read the per-category misses and the unsure
share it prints. What the grader refuses on purpose is listed in docs/import-export.md,
"Grading".
"""

from labeling.grading.compare import grade, is_equivalent
from labeling.grading.normalise import MAX_ANSWER_CHARS
from labeling.grading.verdict import Verdict
from labeling.grading.verdicts import (
    GRADING_NICENESS,
    GradingPool,
    Regraded,
    cached,
    gradable,
    grade_answer,
    grade_answers,
    grade_pair,
    grading_pool,
    regrade_solutions,
    stored,
)

__all__ = [
    "GRADING_NICENESS", "MAX_ANSWER_CHARS", "GradingPool", "Regraded", "Verdict", "cached",
    "gradable", "grade", "grade_answer", "grade_answers", "grade_pair", "grading_pool",
    "is_equivalent", "regrade_solutions", "stored",
]  # fmt: skip
