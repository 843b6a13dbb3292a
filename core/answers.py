"""A solution's final answer, read from its last steps: the one place answers are extracted.

In the order MATH and PRM800K graders look (PRM800K's `grader.py` grades what its sampler put
after "# Answer"; MATH's `last_boxed_only_string` takes the last box):
1. PRM800K's answer step, "# Answer" then the answer;
2. the last `\\boxed{...}` (or `\\fbox{...}`), braces counted, in the last step, else the one
   before it (a model often adds a closing sentence after the boxed step);
3. a stated answer in the last step: "The answer is X", "Answer: X", "final answer is X";
4. a number alone on the last line of the last step.
Nothing found is "": such a solution is ungraded, not wrong (`labeling/grading/verdicts.py`).
"""

from core import patterns

# PRM800K's answer step: "# Answer", a blank line, the answer.
ANSWER_MARKER = "# Answer"

_BOX = patterns.compile(r"\\(?:boxed|fbox)\s*(\{)|\\boxed +([^\s$]+)")
_STATED = patterns.compile(
    r"(?:\b(?:final\s+)?answer\s+is|\banswer\s*:|^\s*#+\s*answer\s*:?)\s*:?\s*(?P<answer>[^\n]+)",
    patterns.IGNORECASE | patterns.MULTILINE,
)
_MATH_SPAN = patterns.compile(
    r"^(?:\$\$?(?P<a>[^$]+)\$\$?|\\\((?P<b>.+)\\\)|\\\[(?P<c>.+)\\\])$", patterns.DOTALL
)
_LONE_NUMBER = patterns.compile(r"^\$?\s*(?P<n>[-+]?\d[\d,]*(?:\.\d+)?(?:/\d+)?)\s*\$?\s*\.?$")
# Steps before the last searched for a box: the answer step plus one of closing chatter.
BOX_STEPS = 2


def extract_answer(steps: list[str]) -> str:
    """The answer of PRM800K's answer step, when the last step is one; "" otherwise."""
    if not steps:
        return ""
    last = steps[-1].strip()
    if last.startswith(ANSWER_MARKER):
        return last[len(ANSWER_MARKER) :].strip()
    return ""


def _closing_braces(text: str) -> dict[int, int]:
    """Where each `{` of `text` is closed, in one pass (an unclosed one is absent)."""
    closing: dict[int, int] = {}
    open_at: list[int] = []
    for i, ch in enumerate(text):
        if ch == "{":
            open_at.append(i)
        elif ch == "}" and open_at:
            closing[open_at.pop()] = i
    return closing


def last_boxed(text: str) -> tuple[int, int, str] | None:
    """(start, end, content) of the last box in `text` with something in it; None if none.
    Braces nest (`\\boxed{\\frac{1}{2}}`), so a box is closed by counting, not by a regex; the
    braces are matched once for the whole text, so a reply of a thousand unclosed boxes costs
    one pass, not one per box."""
    found = None
    closing: dict[int, int] | None = None
    for match in _BOX.finditer(text):
        if match.group(2) is not None:  # `\boxed 5`, MATH's unbraced form
            found = (match.start(), match.end(), match.group(2))
            continue
        if closing is None:
            closing = _closing_braces(text)
        end = closing.get(match.start(1))
        if end is not None and (content := text[match.end(1) : end].strip()):
            found = (match.start(), end + 1, content)
    return found


def _unwrapped(text: str) -> str:
    """The answer without its sentence's full stop or the `$...$` around it."""
    text = text.strip()
    if text.endswith(".") and not text.endswith(".."):  # an ellipsis (0.333...) is the number's
        text = text[:-1].strip()
    if span := _MATH_SPAN.match(text):
        text = next(group for group in span.groups() if group is not None).strip()
    return text


def stated_answer(text: str) -> str:
    """The answer a sentence states ("The answer is $\\frac{1}{2}$." gives `\\frac{1}{2}`);
    the last such sentence wins; "" when there is none."""
    said = list(_STATED.finditer(text))
    return _unwrapped(said[-1].group("answer")) if said else ""


def final_answer(steps: list[str]) -> str:
    """The final answer of a solution's steps, or "" when none can be read (see the module)."""
    if not steps:
        return ""
    if answer := extract_answer(steps):
        return answer
    for step in reversed(steps[-BOX_STEPS:]):
        if boxed := last_boxed(step):
            return boxed[2]
    last = steps[-1].strip()
    if answer := stated_answer(last):
        return answer
    lines = [line for line in last.splitlines() if line.strip()]
    number = _LONE_NUMBER.match(lines[-1].strip()) if lines else None
    return number.group("n") if number else ""
