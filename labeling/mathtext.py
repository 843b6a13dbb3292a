"""Math in problems, steps and answers, rendered on the server as MathML.

Browsers render MathML natively, so no JavaScript or font assets are needed. Text outside
math is escaped; the MathML itself is passed through an allowlist sanitizer, because the
converter copies `\\text{...}` contents and `\\href` targets into its output verbatim.
"""

import functools
import re
import secrets

import markdown
import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from latex2mathml.converter import convert

# Longest delimiters first: $$..$$ before $..$; an escaped \$ is a dollar sign, not math.
_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$|\\\[(?P<db>.+?)\\\]|\\\((?P<ip>.+?)\\\)|(?<!\\)\$(?P<id>.+?)(?<!\\)\$",
    re.S,
)
_MATHML_TAGS = {
    "math",
    "mrow",
    "mi",
    "mn",
    "mo",
    "ms",
    "mtext",
    "mspace",
    "msup",
    "msub",
    "msubsup",
    "mfrac",
    "msqrt",
    "mroot",
    "mover",
    "munder",
    "munderover",
    "mtable",
    "mtr",
    "mtd",
    "menclose",
    "mstyle",
    "mpadded",
    "mphantom",
    "semantics",
    "annotation",
}
_MATHML_ATTRIBUTES = {
    "*": {
        "display",
        "mathvariant",
        "stretchy",
        "fence",
        "separator",
        "notation",
        "width",
        "height",
        "depth",
        "lspace",
        "rspace",
        "columnalign",
        "rowspacing",
        "columnspacing",
        "displaystyle",
        "scriptlevel",
        "accent",
        "accentunder",
        "linethickness",
        "form",
        "minsize",
        "maxsize",
        "symmetric",
        "largeop",
        "movablelimits",
        "encoding",
        "xmlns",
    }
}


@functools.lru_cache(maxsize=8192)
def _mathml(tex: str, *, display: bool) -> str:
    # Cached: every rating re-renders the steps shown so far, and converting plus sanitising
    # is most of a rating's rendering time.
    try:
        markup = convert(tex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - malformed TeX is shown as typed, never an error page
        return f'<code class="tex">{escape(tex)}</code>'
    clean = nh3.clean(markup, tags=_MATHML_TAGS, attributes=_MATHML_ATTRIBUTES)
    return f'<span class="math" data-tex="{escape(tex.strip())}">{clean}</span>'


def render_math(text: str) -> SafeString:
    """Escape `text` and render its $…$, $$…$$, \\(…\\) and \\[…\\] spans as MathML."""
    out, last = [], 0
    for match in _MATH.finditer(text):
        out.append(escape(text[last : match.start()]))
        display = match.group("dd") is not None or match.group("db") is not None
        tex = next(g for g in match.groups() if g is not None)
        out.append(_mathml(tex, display=display))
        last = match.end()
    out.append(escape(text[last:]))
    return mark_safe("".join(out).replace("\n", "<br>"))


def render_answer(answer: str) -> SafeString:
    """An answer is bare TeX (`\\frac{3}{4}`, `\\boxed{5}`): all of it is math."""
    if not answer.strip():
        return mark_safe("")
    if _MATH.search(answer):
        return render_math(answer)
    return mark_safe(_mathml(answer, display=False))


def render_step(step: str) -> SafeString:
    """A step; the final '# Answer' step shows its answer as math."""
    head, sep, answer = step.partition("# Answer")
    if sep and not head.strip():
        return mark_safe(f"<strong>Answer:</strong> {render_answer(answer.strip())}")
    return render_math(step)


def render_markdown(text: str) -> SafeString:
    """Markdown (guidelines) with math rendered as in problems; raw HTML is sanitised away.

    Math spans are swapped for placeholders before Markdown runs, because Markdown would
    read TeX's `_`, `*` and `\\` as emphasis and escapes.
    """
    nonce = secrets.token_hex(4)
    spans: list[str] = []

    def hold(match: re.Match) -> str:
        display = match.group("dd") is not None or match.group("db") is not None
        tex = next(g for g in match.groups() if g is not None)
        spans.append(_mathml(tex, display=display))
        return f"math{nonce}x{len(spans) - 1}x"

    html = markdown.markdown(_MATH.sub(hold, text), extensions=["tables", "sane_lists"])
    html = nh3.clean(html)
    html = re.sub(rf"math{nonce}x(\d+)x", lambda m: spans[int(m.group(1))], html)
    return mark_safe(html)
