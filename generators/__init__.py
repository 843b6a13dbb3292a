"""Generators behind one interface, and the three things stepwise asks of them.

- `sample_solutions`: N whole solutions of a problem (sampling runs fill the pool with them);
- `propose_next_steps`: k candidate next steps after a prefix (phase-1 live labeling);
- `roll_out`: k completions of a prefix to a final answer (rollout labels, Math-Shepherd).

`open_generator(spec)` gives the backend the spec names; callers `close()` it when done.
Sample i of a call is drawn with seed `settings.seed + seed_offset + i`: the same call asks for
the same samples again, which is what makes a resumed sampling run reproducible.
"""

from generators.base import (
    BACKENDS,
    GenerationRequest,
    Generator,
    GeneratorChoice,
    GeneratorSpec,
    GeneratorUnavailable,
    InvalidGenerator,
    SamplingSettings,
    Usage,
)
from generators.prompts import (
    ParsedSolution,
    continuation_messages,
    parse_solution,
    solution_messages,
    step_answer,
)

# A proposal is one step: a short budget keeps a live proposal quick. Live labeling's sampling
# settings default to it (its form and its API), the one override of SamplingSettings' defaults.
PROPOSAL_MAX_TOKENS = 160
PROPOSAL_SETTINGS = SamplingSettings(max_tokens=PROPOSAL_MAX_TOKENS)

__all__ = [
    "BACKENDS",
    "GenerationRequest",
    "Generator",
    "GeneratorChoice",
    "GeneratorSpec",
    "GeneratorUnavailable",
    "InvalidGenerator",
    "Metered",
    "PROPOSAL_SETTINGS",
    "ParsedSolution",
    "SamplingSettings",
    "Usage",
    "open_generator",
    "parse_solution",
    "propose_next_steps",
    "roll_out",
    "roll_out_prefixes",
    "sample_solutions",
    "step_answer",
]


def open_generator(spec: GeneratorSpec) -> Generator:
    if spec.backend == "openai":
        from generators.openai_compatible import OpenAICompatibleGenerator

        return OpenAICompatibleGenerator(spec)
    if spec.backend == "local":
        from generators.local import LocalGenerator

        return LocalGenerator(spec)
    raise InvalidGenerator(f"backend must be one of {', '.join(BACKENDS)}.")


class Metered:
    """A generator with what is asked of it counted in `usage`: one call per request, and the
    completion tokens its backend reports (a generator that keeps no `usage` of its own reports
    none: its calls are counted, their tokens unreported)."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator
        self.spec = generator.spec
        self.usage = Usage()

    def generate(
        self, *, requests: list[GenerationRequest], settings: SamplingSettings
    ) -> list[str]:
        inner = getattr(self.generator, "usage", None)
        before = inner.copy() if isinstance(inner, Usage) else None
        texts = self.generator.generate(requests=requests, settings=settings)
        if before is None:
            self.usage += Usage(calls=len(requests), unreported=len(requests))
        else:
            self.usage += inner.since(before)
        return texts

    def close(self) -> None:
        self.generator.close()


def _requests(messages, *, n: int, settings: SamplingSettings, seed_offset: int, max_tokens=None):
    return [
        GenerationRequest(
            messages=messages, seed=settings.seed + seed_offset + i, max_tokens=max_tokens
        )
        for i in range(n)
    ]


def sample_solutions(
    *,
    generator: Generator,
    problem: str,
    n: int,
    settings: SamplingSettings,
    seed_offset: int = 0,
) -> list[ParsedSolution]:
    """N solutions of `problem`, parsed into steps (unfinished ones included, `finished` False)."""
    requests = _requests(
        solution_messages(problem=problem), n=n, settings=settings, seed_offset=seed_offset
    )
    return [
        parse_solution(text, problem=problem)
        for text in generator.generate(requests=requests, settings=settings)
    ]


def propose_next_steps(
    *,
    generator: Generator,
    problem: str,
    steps: list[str],
    k: int,
    settings: SamplingSettings,
    seed_offset: int = 0,
) -> list[str]:
    """k candidate next steps after `steps` (duplicates and empty replies kept out: fewer than
    k come back when the generator repeats itself)."""
    requests = _requests(
        continuation_messages(problem=problem, steps=steps),
        n=k,
        settings=settings,
        seed_offset=seed_offset,
        max_tokens=min(PROPOSAL_MAX_TOKENS, settings.max_tokens),
    )
    proposals: list[str] = []
    for text in generator.generate(requests=requests, settings=settings):
        # Small models often copy the steps they were given before going on: the proposal is
        # the first step of the reply that is not one of them.
        step = next((s for s in parse_solution(text, problem=problem).steps if s not in steps), "")
        if step and step not in proposals and step not in steps[-1:]:
            proposals.append(step)
    return proposals


def roll_out(
    *,
    generator: Generator,
    problem: str,
    steps: list[str],
    k: int,
    settings: SamplingSettings,
    seed_offset: int = 0,
) -> list[ParsedSolution]:
    """k completions of the solution that begins with `steps`; each holds only the new steps
    and its final answer (`finished` False when a completion never reached one)."""
    return roll_out_prefixes(
        generator=generator,
        problem=problem,
        prefixes=[steps],
        k=k,
        settings=settings,
        seed_offsets=[seed_offset],
    )[0]


def roll_out_prefixes(
    *,
    generator: Generator,
    problem: str,
    prefixes: list[list[str]],
    k: int,
    settings: SamplingSettings,
    seed_offsets: list[int],
) -> list[list[ParsedSolution]]:
    """`roll_out` of several prefixes of one problem, all asked in one call (a server answers
    them concurrently, a local model batches them); prefix i draws with seed offset i."""
    requests = [
        request
        for prefix, offset in zip(prefixes, seed_offsets, strict=True)
        for request in _requests(
            continuation_messages(problem=problem, steps=prefix),
            n=k,
            settings=settings,
            seed_offset=offset,
        )
    ]
    texts = generator.generate(requests=requests, settings=settings) if requests else []
    parsed = [parse_solution(text, problem=problem) for text in texts]
    return [parsed[i * k : (i + 1) * k] for i in range(len(prefixes))]
