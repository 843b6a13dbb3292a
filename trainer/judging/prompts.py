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

from dataclasses import dataclass

from core import patterns
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
# RE2's classes are ASCII; replies are not. Python's \s (what str.isspace() is true of), the
# same within a line (no line feed), Python's \w and \d (RE2's Unicode may be newer than this
# Python's: what \p{Nd} finds is checked with isdecimal() before int() reads it).
_S = r"\s\v\x1c-\x1f\x85\p{Z}"
_LINE_S = r"\t\v\f\r\x1c-\x1f\x85\p{Z}"
_W = r"\p{L}\p{N}_"
_D = r"\p{Nd}"
# What may follow a rating on its line (RE2 has no lookahead, so the line is read to its end
# and these say what its first characters may be; the reason is the rest). After a signed
# rating: no more of a number (a digit, `.`, `,`, `/`, or a letter: the rating ends a word)
# and no operator first after spaces; a bare 0 or 1 also not `- digit` (arithmetic: a step's
# maths, not a rating); a word rating ends a word. They look no further than the line: the
# bold, quote or list item that starts a next line is no arithmetic after a rating.
_AFTER_SIGNED = rf"(?:[{_LINE_S}]+(?:[^{_S}+*/=^<>][^\n]*)?|[^{_S}+*/=^<>.,/{_W}][^\n]*)?"
_NOT_MINUS_DIGIT = rf"-[{_LINE_S}]*(?:[^{_S}{_D}][^\n]*)?"
_AFTER_BARE = (
    rf"(?:[{_LINE_S}]+(?:[^{_S}+*/=^<>\-][^\n]*|{_NOT_MINUS_DIGIT})?"
    rf"|[^{_S}+*/=^<>.,/{_W}\-][^\n]*|{_NOT_MINUS_DIGIT})?"
)
_AFTER_WORD = rf"(?:[^\n{_W}][^\n]*)?"
# "Step 2: -1 - reason", "**Step 2:** (+1) reason", "2. -1 reason", "Step 2 - Correct: reason".
# A hyphen between the number and a bare rating ("Step 2 -1", "Step 2 - 1") is the rating's
# sign, not a separator: `read_per_step` reads it so.
_STEP_LINE = patterns.compile(
    rf"^[{_S}>*_#-]*(?:step|paragraph)?[{_S}_]*(?P<n>{_D}{{1,3}})[{_S}*_]*(?:[:.)\]]|-)*"
    rf"[{_S}*_]*(?:rating[{_S}*_]*[:=]?[{_S}*_]*)?[\[(]?[{_S}*_]*"
    # A signed rating is one; a bare 0 or 1 followed by arithmetic is a step's maths.
    rf"(?:(?P<signed>[+-][{_S}]?[01])(?P<after_signed>{_AFTER_SIGNED})"
    rf"|(?P<bare>[01])(?P<after_bare>{_AFTER_BARE})"
    rf"|(?P<word>incorrect|wrong|correct|neutral)(?P<after_word>{_AFTER_WORD}))$",
    patterns.IGNORECASE | patterns.MULTILINE,
)
# RE2's match takes a group's number, not its name, in start(); and a name costs it microseconds
# to look up, so the groups are read at once, in this order.
_BARE = _STEP_LINE.groupindex["bare"]
assert sorted(_STEP_LINE.groupindex, key=_STEP_LINE.groupindex.__getitem__) == [
    "n", "signed", "after_signed", "bare", "after_bare", "word", "after_word"
]  # fmt: skip
_WORDS = {"incorrect": -1, "wrong": -1, "correct": 1, "neutral": 0}
_REASON_LEAD = patterns.compile(rf"^[{_S}\-:,.;*_()\[\]]+")


def read_per_step(text: str, *, steps: int) -> list[StepJudgement] | None:
    """The ratings of a per-step reply, one per numbered line (steps numbered from 1); a step
    rated twice keeps its first rating, a number beyond the solution is ignored, a step left
    unrated gets no judgement. None when no step of the solution is rated."""
    text = text.translate(_MINUS)
    found: dict[int, StepJudgement] = {}
    for match in _STEP_LINE.finditer(text):
        n, signed, after_signed, bare, after_bare, word, after_word = match.groups()
        if not n.isdecimal():  # a digit newer than this Python's Unicode
            continue
        index = int(n) - 1
        if not 0 <= index < steps or index in found:
            continue
        if word is not None:
            rating, after = _WORDS[word.lower()], after_word
        elif signed is not None:
            rating, after = int(signed[0] + signed[-1]), after_signed
        else:
            rating, after = _bare_rating(text, bare, match.start(_BARE)), after_bare
        if after[:1] in ("]", ")"):
            after = after[1:]
        reason = after.lstrip(" \t*_")
        if lead := _REASON_LEAD.match(reason):
            reason = reason[lead.end() :]
        found[index] = StepJudgement(index=index, rating=rating, reason=_short(reason))
    return [found[i] for i in sorted(found)] or None


def _bare_rating(text: str, digit: str, at: int) -> int:
    """A bare 0 or 1 at `at`. A hyphen right before it, or one space before it, is its sign
    ("Step 2 -1"): only a separator hyphen can stand there, and one followed by a digit is none."""
    sign = "-" if text[at - 1] == "-" or (text[at - 1].isspace() and text[at - 2] == "-") else ""
    return int(sign + digit)


def _short(reason: str) -> str:
    reason = reason.strip().strip("*_").strip()
    if len(reason) <= REASON_MAX_CHARS:
        return reason
    return reason[: REASON_MAX_CHARS - 1].rstrip() + "…"


# --- first error (ProcessBench) --------------------------------------------------------------

_INDEX_MAX_CHARS = 20
_INTEGER = patterns.compile(rf"-?{_D}+")
_LAST_LINE_INDEX = patterns.compile(
    rf"(?:^|\n)[{_S}]*\**[{_S}]*(-?{_D}+)[{_S}]*\**[{_S}]*\.?[{_S}]*$"
)


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


def _index(number: str) -> int:
    """A whole number as an index; one too long to be any step's is none (-2): int() would
    refuse it past 4,300 digits, and a reply is what a model wrote."""
    return int(number) if len(number) <= _INDEX_MAX_CHARS else -2


def read_first_error(text: str, *, steps: int) -> int | None:
    """The index (from 0) of the first wrong step a critic's reply names, -1 for none: the
    last \\boxed{} holding exactly one whole number, else a last line that is one. None when
    there is no such number or it is no step of the solution (nor -1)."""
    text = text.translate(_MINUS)
    index = None
    for content in reversed(_boxes(text)):
        numbers = [n for n in _INTEGER.findall(content) if n.lstrip("-").isdecimal()]
        if len(numbers) == 1:
            index = _index(numbers[0])
            break
    if index is None:
        last = _LAST_LINE_INDEX.search(text.rstrip())
        index = _index(last[1]) if last and last[1].lstrip("-").isdecimal() else None
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
