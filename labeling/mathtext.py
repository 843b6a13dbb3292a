"""Math in problems, steps and answers: the server splits, the page draws with KaTeX.

The server splits text into escaped text and math segments and emits each math segment as
`<span class="math" data-display="0|1">escaped TeX</span>`; static/stepwise/math.js renders
those spans with KaTeX in the page. KaTeX builds DOM nodes and sets styles through the CSSOM,
which the strict Content-Security-Policy allows; server-rendered KaTeX HTML would carry style
attributes, which it refuses. No HTML from the text reaches the page: text and TeX are both
escaped, and a span shows its TeX as typed until (or unless) the script draws it.
"""

import re
import secrets
from dataclasses import dataclass

import markdown
import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# Environments that are math even without dollars around them, as MATH solutions write them.
_ENVIRONMENTS = (
    "align|alignat|aligned|alignedat|gather|gathered|equation|eqnarray|multline|split|"
    "cases|dcases|rcases|array|subarray|matrix|pmatrix|bmatrix|Bmatrix|vmatrix|Vmatrix|"
    "smallmatrix"
)
# Longest delimiters first: $$..$$ before $..$; an escaped \$ is a dollar sign, not math.
_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$"
    r"|\\\[(?P<db>.+?)\\\]"
    r"|\\\((?P<ip>.+?)\\\)"
    r"|(?<!\\)\$(?P<id>.+?)(?<!\\)\$"
    rf"|(?P<env>\\begin\{{(?P<name>(?:{_ENVIRONMENTS})\*?)\}}.*?\\end\{{(?P=name)\}})",
    re.S,
)
# KaTeX draws these only in display mode; MATH text sometimes puts them inside $..$.
_DISPLAY_ONLY = re.compile(r"\\begin\{(?:align|alignat|gather|equation|eqnarray|multline)\*?\}")
# KaTeX has no eqnarray; an rcl array lays it out the same way.
_EQNARRAY = re.compile(r"\\(begin|end)\{eqnarray\*?\}")
# Outside math, TeX escapes of characters that are plain text in the page.
_TEXT_ESCAPES = re.compile(r"\\([$%&#_{}])")
# A thousands separator in an answer ("320,000"): math mode would space it as a list comma.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# An answer that is words ("Monday", "no solution") reads as text, not as italic variables.
_WORDS = re.compile(r"[A-Za-z][A-Za-z ,.'-]*")
_ANSWER_HEADING = "# Answer"


@dataclass(frozen=True)
class Segment:
    text: str
    math: bool = False
    display: bool = False


def segments(text: str) -> list[Segment]:
    """`text` as plain-text and math segments, in order; TeX escapes in text made plain."""
    out: list[Segment] = []
    last = 0
    for match in _MATH.finditer(text):
        if match.start() > last:
            out.append(Segment(_plain(text[last : match.start()])))
        tex = next(g for g in match.group("dd", "db", "ip", "id", "env") if g is not None)
        display = bool(match["dd"] or match["db"] or match["env"] or _DISPLAY_ONLY.search(tex))
        out.append(Segment(_for_katex(tex.strip()), math=True, display=display))
        last = match.end()
    if last < len(text):
        out.append(Segment(_plain(text[last:])))
    return out


def _plain(text: str) -> str:
    return _TEXT_ESCAPES.sub(r"\1", text)


def _for_katex(tex: str) -> str:
    return _EQNARRAY.sub(
        lambda m: r"\begin{array}{rcl}" if m[1] == "begin" else r"\end{array}", tex
    )


def math_span(tex: str, *, display: bool) -> str:
    """The markup math.js draws: the TeX escaped, so it is text until KaTeX renders it."""
    return f'<span class="math" data-display="{int(display)}">{escape(tex)}</span>'


def _html(parts: list[Segment]) -> str:
    out = []
    for i, part in enumerate(parts):
        if part.math:
            out.append(math_span(part.text, display=part.display))
            continue
        text = part.text
        # Display math is a block of its own: the newlines around it would add blank lines.
        if i > 0 and parts[i - 1].display:
            text = text.lstrip("\n")
        if i + 1 < len(parts) and parts[i + 1].display:
            text = text.rstrip("\n")
        out.append(escape(text).replace("\n", "<br>"))
    return "".join(out)


def render_math(text: str) -> SafeString:
    """Escape `text`; its $…$, $$…$$, \\(…\\), \\[…\\] and bare environments become math."""
    return mark_safe(_html(segments(text)))


def render_excerpt(text: str, limit: int) -> SafeString:
    """At most about `limit` characters of `text`, cut between segments, never inside math."""
    kept: list[Segment] = []
    used = 0
    for part in segments(text):
        if used + len(part.text) > limit:
            if not part.math:
                kept.append(Segment(part.text[: max(limit - used, 0)].rstrip()))
            kept.append(Segment("…"))
            break
        kept.append(Segment(part.text, math=True, display=False) if part.math else part)
        used += len(part.text)
    return mark_safe(_html(kept))


def render_answer(answer: str) -> SafeString:
    """An answer is bare TeX (`\\frac{3}{4}`, `\\boxed{5}`, `320,000`): all of it is math."""
    answer = answer.strip()
    if not answer:
        return mark_safe("")
    if _MATH.search(answer):
        return render_math(answer)
    if _WORDS.fullmatch(answer) and re.search(r"[a-z]{3}", answer):
        return mark_safe(escape(answer))
    return mark_safe(math_span(_THOUSANDS.sub("{,}", answer), display=False))


def render_step(step: str) -> SafeString:
    """A step; a final '# Answer' block shows its answer as the solution's answer."""
    head, sep, answer = step.partition(_ANSWER_HEADING)
    if not sep:
        return render_math(step)
    block = f'<span class="final-answer"><strong>Answer:</strong> {render_answer(answer)}</span>'
    if not head.strip():
        return mark_safe(block)
    return mark_safe(f"{render_math(head.rstrip())}<br>{block}")


def render_markdown(text: str) -> SafeString:
    """Markdown (guidelines) with math rendered as in problems; raw HTML is sanitised away.

    Math spans are swapped for placeholders before Markdown runs, because Markdown would
    read TeX's `_`, `*` and `\\` as emphasis and escapes.
    """
    nonce = secrets.token_hex(4)
    spans: list[str] = []

    def hold(match: re.Match) -> str:
        (part,) = segments(match[0])
        spans.append(math_span(part.text, display=part.display))
        return f"math{nonce}x{len(spans) - 1}x"

    held = re.sub(r"\\([$%])", r"\1", _MATH.sub(hold, text))
    html = nh3.clean(markdown.markdown(held, extensions=["tables", "sane_lists"]))
    html = re.sub(rf"math{nonce}x(\d+)x", lambda m: spans[int(m.group(1))], html)
    return mark_safe(html)
