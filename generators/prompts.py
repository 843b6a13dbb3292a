"""PRM800K's step format, asked for and read back.

A solution is steps separated by blank lines, its last step "# Answer" then a blank line and
the final answer alone: the format labelers rate and PRM800K exports. The prompts ask for it
with one short worked example (small models follow an example better than an instruction);
`parse_solution` reads any reply back into steps, tolerating what models do (Windows line
ends, trailing chatter after the answer, a missing final blank line), and decides, once for
sampling, live proposals and rollouts alike, what of a reply is not a step (`_not_a_step`).
"""

from dataclasses import dataclass

from core import patterns
from core.answers import ANSWER_MARKER

SYSTEM = (
    "Solve the math problem step by step. Put each step in its own paragraph, separated by "
    "a blank line. After the last step write a line '# Answer', a blank line, and the final "
    "answer alone."
)
# The worked example is a turn of its own, not text in the instruction: SmolLM2-135M finished
# 5 of 8 samples with an answer this way, against 1 of 8 with the example inside the
# instruction (two MATH problems, 256 tokens, 2026-11-24).
EXAMPLE = (
    {"role": "user", "content": "What is $3 \\cdot 4 + 5$?"},
    {
        "role": "assistant",
        "content": "First multiply: $3 \\cdot 4 = 12$.\n\nThen add: $12 + 5 = 17$.\n\n"
        "# Answer\n\n17",
    },
)
CONTINUE = (
    "{problem}\n\nHere is the beginning of a solution:\n\n{steps}\n\n"
    "Continue this solution from the next step to the final answer, in the same format. "
    "Do not repeat the steps above."
)
# More steps than this is a reply that never ended, not a solution.
MAX_STEPS = 64
MAX_STEP_CHARS = 4000
_BLANK_LINES = patterns.compile(r"\n[ \t]*\n+")
# "The answer is $80$." closing a reply that has no "# Answer" line and no box.
_ANSWER_SENTENCE = patterns.compile(
    r"(?:^|[.!]\s+)(?:so,?\s+|therefore,?\s+|thus,?\s+)?(?:the\s+)?(?:final\s+)?answer\s+is"
    r"\s*:?\s*(?P<answer>[^\n]+?)\s*\.?\s*$",
    patterns.IGNORECASE,
)
_HEADING = patterns.compile(r"#+\s*Answer\s*:?", patterns.IGNORECASE)
_ANSWER_LINE = patterns.compile(
    r"^[ \t]*#+[ \t]*Answer[ \t]*:?[ \t]*(.*)$", patterns.IGNORECASE | patterns.MULTILINE
)


# What models write around their steps that is no step of a solution (`_not_a_step`):
# a preamble before the first step ("Sure!", "Here is the next part of the solution:", "Let's
# solve this problem step by step."). Only such words with no mathematics in them: "Let's
# multiply $3$ by $4$" is a step, and so is "Let's find the area first." (no opener here).
_PREAMBLE = patterns.compile(
    r"^[^\p{L}\p{N}_]*(?:sure|certainly|of course|okay|ok|alright|absolutely|great|"
    r"here(?:'s|\s+is|\s+are)|continuing|to continue|"
    r"(?:let's|let us|let me|i'll|i will|we'll|we will)\s+(?:now\s+)?"
    r"(?:(?:solve|tackle|approach|do|work\s+(?:through|on)|break\s+down|think\s+about)"
    r"\s+(?:this|the|it)\b|think\b|continue\b|go\b))",
    patterns.IGNORECASE,
)
# A heading alone ("Solution:", "**Step 2:**", "### Step 2", "---"): the step is the paragraph
# after it. Marked as a heading (a colon, "#", bold); "Step 3." is a sentence, not one.
_HEADING_ONLY = patterns.compile(
    r"[-*_=\s]*|(?:#+\s*|\*\*\s*)?(?:solution|step\s*\d*|next\s+step)\s*(?::\s*)?(?:\*\*)?\s*",
    patterns.IGNORECASE,
)
_MATH = patterns.compile(r"[0-9$\\=^+*/<>]")
# A paragraph that only states the answer ("This answer is $8$.", "So the final answer is 17.",
# "**Answer:** 5"): the final-answer line says it, as "# Answer" and the answer.
_ANSWER_ONLY = patterns.compile(
    r"^[^\p{L}\p{N}]*(?:(?:so|therefore|thus|hence),?\s+)?(?:(?:the|this|our|my)\s+)?(?:final\s+)?"
    r"answer\s*(?:is\b|:)[*_\s:]*(?P<answer>.+?)\s*\.?\s*$",
    patterns.IGNORECASE | patterns.DOTALL,
)
# The problem restated, possibly labelled: "Problem: What is 40% of 65?".
_LABELLED = patterns.compile(r"^[^\p{L}\p{N}]*(?:problem|question)\s*:[*_\s]*", patterns.IGNORECASE)
_NOT_ALNUM = patterns.compile(r"[^0-9a-z]+")
_COMMAND = patterns.compile(r"\\[a-zA-Z]+")
_SENTENCE_END = patterns.compile(r"[.!?]\s")
# An answer said in a paragraph of its own is short; longer, it is reasoning that mentions it.
_ANSWER_ONLY_MAX_CHARS = 80


@dataclass(frozen=True)
class ParsedSolution:
    steps: list[str]  # the last one is "# Answer\n\n<answer>" when `finished`
    answer: str
    finished: bool  # the reply reached a "# Answer" line with an answer


def _messages(content: str) -> tuple[dict[str, str], ...]:
    return ({"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": content})


def solution_messages(*, problem: str) -> tuple[dict[str, str], ...]:
    return _messages(problem)


def continuation_messages(*, problem: str, steps: list[str]) -> tuple[dict[str, str], ...]:
    """Messages asking for the rest of a solution whose first steps are `steps`. Portable
    across servers: no server-specific "continue the assistant's message" option is needed."""
    if not steps:
        return solution_messages(problem=problem)
    return _messages(CONTINUE.format(problem=problem, steps="\n\n".join(steps)))


def _paragraphs(body: str) -> list[str]:
    """Paragraphs split at blank lines, except inside display math ($$...$$ or \\[...\\]):
    LaTeX allows no blank line there, so one a model writes is not a step boundary; it is
    dropped, since a step holding a blank line would split again in PRM800K's format. Whether
    display math is open is carried from part to part, so each part is read once."""
    paragraphs: list[list[str]] = []
    dollars = brackets = 0  # "$$" seen, and "\\[" less "\\]", in the last paragraph
    for part in _BLANK_LINES.split(body.strip()):
        part = part.strip()
        if not part:
            continue
        if paragraphs and (dollars % 2 == 1 or brackets > 0):
            paragraphs[-1].append(part)
        else:
            paragraphs.append([part])
            dollars = brackets = 0
        dollars += part.count("$$")
        brackets += part.count("\\[") - part.count("\\]")
    return ["\n".join(parts) for parts in paragraphs]


def _boxed(text: str) -> tuple[int, str] | None:
    """(end, content) of the last \\boxed{...} in `text`, braces balanced; None if none."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for i in range(start + len("\\boxed"), len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            content = text[start + len("\\boxed{") : i].strip()
            return (i + 1, content) if content else None
    return None


def parse_solution(text: str, *, problem: str = "") -> ParsedSolution:
    """A reply read as PRM800K steps. Text after the answer's paragraph is dropped, and so is
    what is no step (`_not_a_step`): a preamble or `problem` restated before the first step,
    a heading alone, and a closing paragraph that only states the answer, which the final
    "# Answer" step holds.

    The answer is what follows "# Answer"; a reply with no such line whose steps box an
    answer (MATH's \\boxed{...}, what math-tuned models write) ends at the paragraph holding
    the last box, and the boxed expression is its answer; else a closing paragraph that says
    "the answer is ..." gives it."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    answer = ""
    finished = False
    match = _ANSWER_LINE.search(text)
    if match:
        body = text[: match.start()]
        rest = match.group(1).strip() or text[match.end() :].strip()
        # The answer is its paragraph's first line: "17", not "17\n\nI hope this helps."
        # The answer's paragraph, past any repeated "# Answer" heading.
        answer = next(
            (
                _clean_answer(part)
                for part in _BLANK_LINES.split(rest.strip())
                if part.strip() and not _HEADING.fullmatch(part.strip())
            ),
            "",
        )
        finished = bool(answer)
    else:
        body = text
        boxed = _boxed(text)
        if boxed is not None:
            end, answer = boxed
            # The box's paragraph is the last step: chatter after it is dropped.
            following = _BLANK_LINES.search(text, end)
            body = text[: following.start()] if following else text
            finished = True
        else:
            paragraphs = _paragraphs(text)
            last = paragraphs[-1] if paragraphs else ""
            said = _answer_only(last) or _ANSWER_SENTENCE.search(last)
            if said is not None:
                answer = _clean_answer(said.group("answer"))
                finished = bool(answer)
    kept = _steps(_paragraphs(body), problem=problem, answered=finished)
    steps = [s[:MAX_STEP_CHARS] for s in kept[:MAX_STEPS]]
    if finished:
        steps.append(f"{ANSWER_MARKER}\n\n{answer}")
    return ParsedSolution(steps=steps, answer=answer, finished=finished)


def _steps(paragraphs: list[str], *, problem: str, answered: bool) -> list[str]:
    """The paragraphs that are steps: what comes before the first step and is none, and (in a
    reply that reached its answer) the closing paragraphs that only state it, left out."""
    steps: list[str] = []
    for paragraph in paragraphs:
        if not _not_a_step(paragraph, problem=problem, leading=not steps):
            steps.append(paragraph)
    while answered and steps and _answer_only(steps[-1]):
        steps.pop()
    return steps


def _not_a_step(paragraph: str, *, problem: str, leading: bool) -> bool:
    """Whether a paragraph of a reply is no step of a solution: a heading alone anywhere;
    before the first step, a preamble or the problem restated. (A closing statement of the
    answer is the final "# Answer" step's, see `_steps`.)"""
    text = paragraph.strip()
    heading = _HEADING_ONLY.fullmatch(text)
    if heading and (text[-1:] in ":*" or text.startswith("#") or not text.strip("-*_= ")):
        return True
    if not leading:
        return False
    if _PREAMBLE.match(paragraph) and not _MATH.search(paragraph):
        return True
    return _restates(paragraph, problem)


def _restates(paragraph: str, problem: str) -> bool:
    """The problem said again: all of it, or its question ("What is 40% of 65?" of a longer
    problem), labelled "Problem:" or not; LaTeX and punctuation aside ("$40\\%$" is "40%")."""
    unlabelled = _LABELLED.sub("", paragraph)
    said, asked = _squeezed(unlabelled), _squeezed(problem)
    if not said or not asked:
        return False
    if said == asked:
        return True
    question = unlabelled.rstrip().rstrip("$").endswith("?") or unlabelled != paragraph
    return question and len(said) >= 8 and said in asked


def _squeezed(text: str) -> str:
    return _NOT_ALNUM.sub("", _COMMAND.sub("", text).lower())


def _answer_only(paragraph: str) -> patterns.Match | None:
    """A paragraph that states the answer and nothing else: one short sentence."""
    said = _ANSWER_ONLY.fullmatch(paragraph.strip())
    if said is None:
        return None
    answer = said.group("answer")
    if len(answer) > _ANSWER_ONLY_MAX_CHARS or "\n" in answer or _SENTENCE_END.search(answer):
        return None
    return said


def _clean_answer(text: str) -> str:
    """The answer alone: its first line that is not another "# Answer" heading, without a
    leading "The answer is" or a closing full stop."""
    lines = [line.strip() for line in text.strip().split("\n")]
    line = next((line for line in lines if line and not _HEADING.fullmatch(line)), "")
    said = _answer_only(line) or _ANSWER_SENTENCE.search(line)
    if said is not None:
        line = said.group("answer")
    return line.rstrip(".").strip(" *_")


def step_answer(step: str) -> str:
    """The final answer of a step that is PRM800K's answer step ("# Answer" then the answer),
    else "". A step that only says "the answer is 4" is not one: in phase 1 the trajectory
    ends at the step a labeler chose or wrote as the answer step, not at a sentence."""
    match = _ANSWER_LINE.search(step)
    return parse_solution(step).answer if match else ""
