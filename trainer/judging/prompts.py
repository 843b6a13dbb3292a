"""What a judge is asked, and its reply read back.

Two formats:

- `per_step`: the judge writes one line per step, "Step N: R - reason", R in {+1, 0, -1};
- `first_error`: ProcessBench's critic prompt: the solution as numbered paragraphs from 0 and
  the index of the earliest wrong one (-1 when none) in a final \\boxed{k}. Read as per-step
  ratings: +1 before that step, -1 at it, nothing after (the paper supervises up to the first
  error; what follows is not judged).

Small models write junk, so the readers are tolerant of what they can read (bold, brackets,
words for ratings, a unicode minus, chatter around the lines) and say None for a reply they
cannot: the run records that solution as unreadable, stores no label, and goes on.

JUDGE_PROMPT_VERSION is stored on each judge run: change it whenever the words below change,
so labels made by different prompts are never taken for one source.
"""

import re
from dataclasses import dataclass

from trainer.judging.models import REASON_MAX_CHARS, JudgeFormat

JUDGE_PROMPT_VERSION = "judge-v1"

PER_STEP_SYSTEM = (
    "You check math solutions step by step. For each step of the solution write one line: "
    "'Step N: R - reason', where R is +1 if the step is correct and helps, 0 if it is correct "
    "but makes no progress, or -1 if it is wrong, and the reason is a few words. Rate every "
    "step, in order, and write nothing else."
)
# One worked example as a turn of its own: small models follow an example better than an
# instruction (generators.prompts measured it for solutions).
PER_STEP_EXAMPLE = (
    {
        "role": "user",
        "content": "Problem:\nWhat is $3 \\cdot 4 + 5$?\n\nSolution:\n"
        "Step 1: First multiply: $3 \\cdot 4 = 12$.\n\n"
        "Step 2: Then add: $12 + 5 = 18$.\n\n"
        "Step 3: # Answer\n\n18",
    },
    {
        "role": "assistant",
        "content": "Step 1: +1 - the product is right.\n"
        "Step 2: -1 - 12 + 5 is 17, not 18.\n"
        "Step 3: -1 - the answer follows the wrong sum.",
    },
)
# ProcessBench's critic template (Zheng et al., 2024), word for word.
FIRST_ERROR_TEMPLATE = (
    "The following is a math problem and a solution (split into paragraphs, enclosed with "
    "tags and indexed from 0):\n\n[Math Problem]\n\n{problem}\n\n[Solution]\n\n{tagged}\n\n"
    "Your task is to review and critique the solution paragraph by paragraph. Once you "
    "identify an error in a paragraph, return the index of the paragraph where the earliest "
    'error occurs. Otherwise, return the index of -1 (which typically denotes "not found").'
    "\n\nPlease put your final answer (i.e., the index) in \\boxed{{}}."
)


@dataclass(frozen=True)
class StepJudgement:
    index: int  # the step, from 0
    rating: int  # -1, 0 or +1
    reason: str


def judge_messages(*, problem: str, steps: list[str], format: str) -> tuple[dict, ...]:
    """The chat messages that ask a judge about `steps` of `problem` in `format`."""
    if format == JudgeFormat.FIRST_ERROR:
        tagged = "\n\n".join(
            f"<paragraph_{i}>\n{step}\n</paragraph_{i}>" for i, step in enumerate(steps)
        )
        content = FIRST_ERROR_TEMPLATE.format(problem=problem, tagged=tagged)
        return ({"role": "user", "content": content},)
    numbered = "\n\n".join(f"Step {i}: {step}" for i, step in enumerate(steps, start=1))
    return (
        {"role": "system", "content": PER_STEP_SYSTEM},
        *PER_STEP_EXAMPLE,
        {"role": "user", "content": f"Problem:\n{problem}\n\nSolution:\n{numbered}"},
    )


def read_reply(text: str, *, steps: int, format: str) -> list[StepJudgement] | None:
    """The judgements a reply gives of a solution of `steps` steps, or None when it gives none
    that can be read."""
    if format == JudgeFormat.FIRST_ERROR:
        index = read_first_error(text, steps=steps)
        return None if index is None else first_error_judgements(index, steps=steps)
    return read_per_step(text, steps=steps)


# --- per step --------------------------------------------------------------------------------

_MINUS = str.maketrans({"−": "-", "–": "-", "—": "-"})
# "Step 2: -1 - reason", "**Step 2:** (+1) reason", "2. -1 reason", "Step 2 - Correct: reason".
_STEP_LINE = re.compile(
    r"^[\s>*_#-]*(?:step|paragraph)?[\s_]*(?P<n>\d{1,3})[\s*_]*(?:[:.)\]]|-(?!\s?\d))*[\s*_]*"
    r"(?:rating[\s*_]*[:=]?[\s*_]*)?[\[(]?[\s*_]*"
    # A signed rating is one; a bare 0 or 1 followed by arithmetic is a step's maths.
    r"(?P<rating>[+-]\s?[01](?![\d.,/]|\s*[+*/=^<>])|[01](?![\d.,/]|\s*[+*/=^<>]|\s*-\s*\d)"
    r"|incorrect|wrong|correct|neutral)\b[\])]?[ \t*_]*(?P<reason>.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_WORDS = {"incorrect": -1, "wrong": -1, "correct": 1, "neutral": 0}
_REASON_LEAD = re.compile(r"^[\s\-:,.;*_()\[\]]+")


def read_per_step(text: str, *, steps: int) -> list[StepJudgement] | None:
    """The ratings of a per-step reply, one per numbered line (steps numbered from 1); a step
    rated twice keeps its first rating, a number beyond the solution is ignored, a step left
    unrated gets no judgement. None when no step of the solution is rated."""
    found: dict[int, StepJudgement] = {}
    for match in _STEP_LINE.finditer(text.translate(_MINUS)):
        index = int(match.group("n")) - 1
        if not 0 <= index < steps or index in found:
            continue
        token = match.group("rating").replace(" ", "").lower()
        rating = _WORDS[token] if token in _WORDS else int(token)
        found[index] = StepJudgement(
            index=index, rating=rating, reason=_short(_REASON_LEAD.sub("", match.group("reason")))
        )
    return [found[i] for i in sorted(found)] or None


def _short(reason: str) -> str:
    reason = reason.strip().strip("*_").strip()
    if len(reason) <= REASON_MAX_CHARS:
        return reason
    return reason[: REASON_MAX_CHARS - 1].rstrip() + "…"


# --- first error (ProcessBench) --------------------------------------------------------------

_INTEGER = re.compile(r"-?\d+")
_LAST_LINE_INDEX = re.compile(r"(?:^|\n)\s*\**\s*(-?\d+)\s*\**\s*\.?\s*$")


def _boxes(text: str) -> list[str]:
    """The contents of every \\boxed{...} in `text`, braces balanced, in order."""
    found, start = [], text.find("\\boxed{")
    while start >= 0:
        depth, i = 0, start + len("\\boxed")
        for i in range(start + len("\\boxed"), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found.append(text[start + len("\\boxed{") : i])
                break
        start = text.find("\\boxed{", i)
    return found


def read_first_error(text: str, *, steps: int) -> int | None:
    """The index (from 0) of the first wrong step a critic's reply names, -1 for none: the
    last \\boxed{} holding exactly one whole number, else a last line that is one. None when
    there is no such number or it is no step of the solution (nor -1)."""
    text = text.translate(_MINUS)
    index = None
    for content in reversed(_boxes(text)):
        numbers = _INTEGER.findall(content)
        if len(numbers) == 1:
            index = int(numbers[0])
            break
    if index is None:
        last = _LAST_LINE_INDEX.search(text.rstrip())
        index = int(last.group(1)) if last else None
    if index is None or not -1 <= index < steps:
        return None
    return index


def first_error_judgements(index: int, *, steps: int) -> list[StepJudgement]:
    """+1 for each step before the first wrong one, -1 at it, nothing after; -1 (none wrong):
    +1 for every step."""
    if index == -1:
        return [StepJudgement(index=i, rating=1, reason="") for i in range(steps)]
    return [StepJudgement(index=i, rating=1, reason="") for i in range(index)] + [
        StepJudgement(index=index, rating=-1, reason="The first wrong step.")
    ]
