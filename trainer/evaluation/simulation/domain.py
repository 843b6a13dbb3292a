"""The synthetic domain: digit arithmetic modulo 10, with every step's rating known exactly.

A problem asks for the value of an expression of digits with + and × modulo 10:

    Work modulo 10. Evaluate 7 × (3 + 4) + 8 × 2.

A solution is a sequence of steps in the shape of real ones, ending with an answer step:

    7 × 3 = 1.                                  (a fact: +1 when true, -1 when false)
    Distribute: 7 × (3 + 4) = 7 × 3 + 7 × 4.    (a rewrite: +1, or -1 when it forgets a term)
    Let me look at the expression again.        (filler: 0, no progress)
    # Answer\\n\\n2                               (+1: it reports the value reached)

Why this domain (see issue 6's calibration advice): a step's validity is a lookup in a small
table (110 facts modulo 10), which the tiny CPU model can memorise in minutes, unlike open
multi-digit arithmetic. Correct solutions vary: sums and products are combined in any order
and products may be distributed, so one problem has many correct routes. And the simulated
generator fails the way models do: a fixed set of *misconceptions* (particular wrong facts,
and forgetting to distribute over the last term), each applied with its own probability
whenever the solution needs that fact, plus rare independent slips. After a wrong step the
solution carries on consistently from the wrong value, so the answer is usually wrong, yet
modulo 10 a later × 2 or × 5 can absorb the error: a wrong step that still reaches the right
answer. Wrong answers therefore cluster on the misconceptions' values, which is what makes
majority voting fallible and the PRM worth comparing with it.

With the default GeneratorConfig (seed 0): about 2 in 3 samples are right, 37% contain a
wrong step, 97% of first errors come from a misconception, and about 1 erroneous sample in
10 still reaches the right answer; majority voting over 64 samples is right on about 80% of
problems.

Everything is seeded: the same seed gives the same problems, generator and solutions.
"""

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations

MODULUS = 10
ADD, MUL = "+", "×"
OPS = (ADD, MUL)
ANSWER_MARKER = "# Answer\n\n"
SUBJECT = "Synthetic modular arithmetic"
KEY_PREFIX = "sim-"  # every problem's key (its unique_id once imported) starts with it
SOURCE = "simulated-generator"

# An expression: a digit, or (op, children) with two or more children. Sums and products are
# n-ary because both are associative and commutative modulo 10: that is what lets correct
# solutions take different routes.
Expr = int | tuple[str, tuple["Expr", ...]]

FACT_TEMPLATES = ("{a} {op} {b} = {r}.", "Then {a} {op} {b} = {r}.", "So {a} {op} {b} = {r}.")
DISTRIBUTE_TEMPLATE = "Distribute: {before} = {after}."
FILLERS = (
    "Let me look at the expression again.",
    "We keep only the last digit of each result.",
    "Next, combine two more numbers.",
    "So far so good.",
)
RESTATE_TEMPLATE = "What is left is {state}."


def apply(op: str, a: int, b: int) -> int:
    return (a + b) % MODULUS if op == ADD else (a * b) % MODULUS


def evaluate(expr: Expr) -> int:
    if isinstance(expr, int):
        return expr
    op, children = expr
    value = evaluate(children[0])
    for child in children[1:]:
        value = apply(op, value, evaluate(child))
    return value


def render(expr: Expr, parent: str | None = None) -> str:
    """Infix text with the only parentheses needed: a sum inside a product."""
    if isinstance(expr, int):
        return str(expr)
    op, children = expr
    text = f" {op} ".join(render(child, op) for child in children)
    return f"({text})" if op == ADD and parent == MUL else text


def _node(op: str, children: list[Expr]) -> Expr:
    """(op, children) with same-op children merged in and a single child unwrapped."""
    flat: list[Expr] = []
    for child in children:
        if not isinstance(child, int) and child[0] == op:
            flat.extend(child[1])
        else:
            flat.append(child)
    return flat[0] if len(flat) == 1 else (op, tuple(flat))


def _get(expr: Expr, path: tuple[int, ...]) -> Expr:
    for index in path:
        expr = expr[1][index]  # type: ignore[index]
    return expr


def _replace(expr: Expr, path: tuple[int, ...], new: Expr) -> Expr:
    if not path:
        return new
    op, children = expr  # type: ignore[misc]
    changed = list(children)
    changed[path[0]] = _replace(children[path[0]], path[1:], new)
    return _node(op, changed)


def _paths(expr: Expr, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Expr]]:
    yield path, expr
    if not isinstance(expr, int):
        for i, child in enumerate(expr[1]):
            yield from _paths(child, (*path, i))


# --- problems -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    key: str  # stable id, used as the MATH-style unique_id
    expression: Expr
    leaves: int

    @property
    def text(self) -> str:
        return f"Work modulo 10. Evaluate {render(self.expression)}."

    @property
    def answer(self) -> int:
        return evaluate(self.expression)


def _random_tree(rng: random.Random, leaves: int) -> Expr:
    if leaves == 1:
        return rng.randint(2, 9)
    left = rng.randint(1, leaves - 1)
    op = rng.choice(OPS)
    return _node(op, [_random_tree(rng, left), _random_tree(rng, leaves - left)])


def make_problems(
    count: int, *, seed: int, namespace: str = "train", leaves: tuple[int, int] = (3, 5)
) -> list[Problem]:
    """`count` distinct problems; another namespace gives problems disjoint from these."""
    rng = random.Random(_seed(seed, "problems", namespace))
    problems: list[Problem] = []
    seen: set[str] = set()
    while len(problems) < count:
        n = rng.randint(*leaves)
        expression = _random_tree(rng, n)
        text = render(expression)
        if text in seen or isinstance(expression, int):
            continue
        seen.add(text)
        problems.append(
            Problem(
                key=f"{KEY_PREFIX}{seed}-{namespace}-{len(problems)}",
                expression=expression,
                leaves=n,
            )
        )
    return problems


# --- the simulated generator ----------------------------------------------------------------


@dataclass(frozen=True)
class Misconception:
    """A wrong fact the generator believes: `a op b = wrong`, used with probability `rate`."""

    op: str
    a: int
    b: int  # a <= b: the fact is the same whichever operand comes first
    wrong: int
    rate: float


@dataclass(frozen=True)
class GeneratorConfig:
    misconceptions: int = 16  # wrong facts among the 72 (op, 2 <= a <= b) facts
    rate_range: tuple[float, float] = (0.35, 0.85)
    forget_distribute_rate: float = 0.4  # (a + b) × c written as a × c + b
    slip_rate: float = 0.005  # per fact, an independent random wrong result
    distribute_rate: float = 0.35  # share of samples that like to distribute
    filler_rate: float = 0.12  # per step, a filler step before it
    restate_rate: float = 0.3  # of fillers, a restatement of the expression


@dataclass(frozen=True)
class Step:
    text: str
    kind: str  # fact | distribute | filler | answer
    rating: int  # the step's own correctness: 1, 0 (no progress) or -1
    misconception: bool = False


@dataclass(frozen=True)
class Sample:
    """One generated solution and its exact labels."""

    problem: Problem
    steps: tuple[Step, ...]
    answer: int
    # What is left to evaluate after each step, as the generator believes it (a wrong step
    # carries its wrong value): where a rollout from that step's prefix starts.
    states: tuple[Expr, ...] = ()

    @property
    def texts(self) -> list[str]:
        return [step.text for step in self.steps]

    @property
    def final_answer(self) -> str:
        return str(self.answer)

    @property
    def is_correct(self) -> bool:
        return self.answer == self.problem.answer

    @property
    def first_error(self) -> int | None:
        return next((i for i, s in enumerate(self.steps) if s.rating == -1), None)

    @property
    def gold_ratings(self) -> list[int]:
        """Ratings up to and including the first -1, as a careful labeler gives them."""
        end = self.first_error
        ratings = [step.rating for step in self.steps]
        return ratings if end is None else ratings[: end + 1]

    @property
    def from_misconception(self) -> bool:
        end = self.first_error
        return end is not None and self.steps[end].misconception


@dataclass
class Generator:
    """A seeded policy with fixed misconceptions; `sample` writes one solution."""

    seed: int
    config: GeneratorConfig = field(default_factory=GeneratorConfig)
    misconceptions: dict[tuple[str, int, int], Misconception] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(_seed(self.seed, "misconceptions"))
        facts = [(op, a, b) for op in OPS for a in range(MODULUS) for b in range(a, MODULUS)]
        # Facts with a 0 or 1 are too easy to get wrong systematically.
        facts = [f for f in facts if f[1] >= 2]
        chosen = rng.sample(facts, self.config.misconceptions)
        low, high = self.config.rate_range
        self.misconceptions = {}
        for op, a, b in chosen:
            right = apply(op, a, b)
            # Plausible: off by one or two (a product's neighbour, a lost carry).
            wrong = (right + rng.choice((-2, -1, 1, 2))) % MODULUS
            self.misconceptions[(op, a, b)] = Misconception(
                op, a, b, wrong, round(rng.uniform(low, high), 2)
            )

    def sample(self, problem: Problem, index: int) -> Sample:
        """The `index`-th sample for this problem: the same on every call and machine."""
        rng = random.Random(_seed(self.seed, "sample", problem.key, index))
        walked = self._walk(rng, problem.expression)
        answer = walked[-1][1] if walked else problem.expression
        steps = [step for step, _ in walked]
        states = [state for _, state in walked]
        steps.append(Step(f"{ANSWER_MARKER}{answer}", "answer", 1))
        states.append(answer)
        return Sample(problem=problem, steps=tuple(steps), answer=answer, states=tuple(states))

    def finish(self, problem: Problem, state: Expr, *, salt: str) -> int:
        """A rollout: the generator writes the rest of a solution from `state` (the value left
        after some prefix) and reports the answer it reaches. Seeded by `salt`."""
        rng = random.Random(_seed(self.seed, "rollout", problem.key, salt))
        walked = self._walk(rng, state)
        return walked[-1][1] if walked else state  # type: ignore[return-value]

    def _walk(self, rng: random.Random, state: Expr) -> list[tuple[Step, Expr]]:
        """Steps from `state` until a single digit is left, each with the state after it."""
        config = self.config
        likes_distributing = rng.random() < config.distribute_rate
        walked: list[tuple[Step, Expr]] = []
        while not isinstance(state, int):
            if rng.random() < config.filler_rate:
                walked.append((self._filler(rng, state), state))
            moves = list(_combinations(state))
            distributions = list(_distributions(state))
            if distributions and (likes_distributing or not moves):
                path = rng.choice(distributions)
                state, step = self._distribute(rng, state, path)
            else:
                path, i, j = rng.choice(moves)
                state, step = self._combine(rng, state, path, i, j)
            walked.append((step, state))
        return walked

    def samples(self, problem: Problem, count: int, *, start: int = 0) -> list[Sample]:
        return [self.sample(problem, start + k) for k in range(count)]

    # --- moves ---

    def _combine(self, rng, state, path, i, j) -> tuple[Expr, Step]:
        op, children = _get(state, path)  # type: ignore[misc]
        a, b = children[i], children[j]
        right = apply(op, a, b)
        result, misconception = right, False
        known = self.misconceptions.get((op, min(a, b), max(a, b)))
        if known is not None and rng.random() < known.rate:
            result, misconception = known.wrong, True
        elif rng.random() < self.config.slip_rate:
            result = rng.choice([d for d in range(MODULUS) if d != right])
        rest = [c for k, c in enumerate(children) if k not in (i, j)]
        # The result takes the place of the first operand, so the expression reads naturally.
        rest.insert(i, result)
        new_state = _replace(state, path, _node(op, rest))
        x, y = (a, b) if rng.random() < 0.5 else (b, a)
        text = rng.choice(FACT_TEMPLATES).format(a=x, op=op, b=y, r=result)
        return new_state, Step(text, "fact", 1 if result == right else -1, misconception)

    def _distribute(self, rng, state, path) -> tuple[Expr, Step]:
        node = _get(state, path)
        _, (first, second) = node  # type: ignore[misc]
        factor, total = (first, second) if isinstance(first, int) else (second, first)
        terms = list(total[1])
        forget = rng.random() < self.config.forget_distribute_rate
        products: list[Expr] = [_node(MUL, [factor, t]) for t in terms]
        if forget:
            products[-1] = terms[-1]
        after = _node(ADD, products)
        step = Step(
            DISTRIBUTE_TEMPLATE.format(before=render(node), after=render(after)),
            "distribute",
            -1 if forget else 1,
            misconception=forget,
        )
        return _replace(state, path, after), step

    def _filler(self, rng, state) -> Step:
        if rng.random() < self.config.restate_rate:
            return Step(RESTATE_TEMPLATE.format(state=render(state)), "filler", 0)
        return Step(rng.choice(FILLERS), "filler", 0)


def _combinations(state: Expr) -> Iterator[tuple[tuple[int, ...], int, int]]:
    """(path, i, j): two digits under the same sum or product that can be combined."""
    for path, node in _paths(state):
        if isinstance(node, int):
            continue
        digits = [k for k, child in enumerate(node[1]) if isinstance(child, int)]
        for i, j in combinations(digits, 2):
            yield path, i, j


def _distributions(state: Expr) -> Iterator[tuple[int, ...]]:
    """Paths of `digit × (sum of digits)` products, which may be distributed."""
    for path, node in _paths(state):
        if isinstance(node, int) or node[0] != MUL or len(node[1]) != 2:
            continue
        kinds = [isinstance(child, int) for child in node[1]]
        other = node[1][kinds.index(False)] if kinds.count(True) == 1 else None
        if other is not None and other[0] == ADD and all(isinstance(t, int) for t in other[1]):
            yield path


def _seed(*parts) -> int:
    """A seed from any parts, stable across processes (unlike hash() of a str)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")
