"""Math in problems, steps and answers: the server splits, the page draws with KaTeX.

The server splits text into escaped text and math segments and emits each math segment as
`<span class="math" data-display="0|1">escaped TeX</span>`; static/stepwise/math.js renders
those spans with KaTeX in the page. KaTeX builds DOM nodes and sets styles through the CSSOM,
which the strict Content-Security-Policy allows; server-rendered KaTeX HTML would carry style
attributes, which it refuses. No HTML from the text reaches the page: text and TeX are both
escaped, and a span shows its TeX as typed until (or unless) the script draws it.

Text comes from imports, generators and labelers, so every renderer here runs in time linear
in its input, whatever its shape (docs/benchmarks.md, "Text rendering"), and shows invisible
format and control characters (bidi overrides, zero-width spaces) as visible marks, so that
what a labeler reads is what the text says. Over 500 lines: the splitter, the invisible-
character marks and the Markdown budget share one reading of the text and its linear-time
scans; split apart they would each need the others' internals.
"""

import bisect
import functools
import html  # html.escape: what django.utils.html.escape does, minus its lazy wrapper
import secrets
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

from core import patterns

# Environments that are math even without dollars around them, as MATH solutions write them.
_ENVIRONMENTS = (
    "align|alignat|aligned|alignedat|gather|gathered|equation|eqnarray|multline|split|"
    "cases|dcases|rcases|array|subarray|matrix|pmatrix|bmatrix|Bmatrix|vmatrix|Vmatrix|"
    "smallmatrix"
)
# Where math may start: $ ($$..$$ or $..$), \[, \( or \begin{.
_OPENERS = ("$", "\\[", "\\(", "\\begin{")
# A \begin{name} of the environments above, looked for where a \begin{ is (`_math_at`).
_ENVIRONMENT = patterns.compile(rf"\\begin\{{((?:{_ENVIRONMENTS})\*?)\}}")
# As long as the longest \begin{name*}: what `_ENVIRONMENT` is given to read.
_ENVIRONMENT_CHARS = len("\\begin{*}") + max(map(len, _ENVIRONMENTS.split("|")))
# KaTeX draws these only in display mode; MATH text sometimes puts them inside $..$.
_DISPLAY_ONLY = patterns.compile(
    r"\\begin\{(?:align|alignat|gather|equation|eqnarray|multline)\*?\}"
)
# KaTeX has no eqnarray; an rcl array lays it out the same way.
_EQNARRAY = patterns.compile(r"\\(begin|end)\{eqnarray\*?\}")
# Outside math, TeX escapes of characters that are plain text in the page (`_unescaped`).
_TEXT_ESCAPES = "$%&#_{}"
# A thousands separator in an answer ("320,000"): math mode would space it as a list comma.
# A comma and the three characters after it; that they are digits, that a digit comes before
# the comma and none after the three is checked on the match (`_thousands`): RE2 has no
# lookaround. The three are no comma, so no comma is passed over.
_THOUSANDS = patterns.compile(r",[^,]{3}")
# An answer that is words ("Monday", "no solution") reads as text, not as italic variables.
_WORDS = patterns.compile(r"[A-Za-z][A-Za-z ,.'-]*")
_LOWER_RUN = patterns.compile(r"[a-z]{3}")
_ANSWER_HEADING = "# Answer"

# Characters that change how text around them reads without showing themselves: Unicode's
# format characters (Cf: bidi embeddings, overrides and isolates, zero-width spaces and
# joiners, the BOM, tag characters), control characters (Cc) but tab and newline (and the
# carriage return of a CRLF), the line and paragraph separators (Zl, Zp) and the Hangul
# fillers, letters that draw nothing. Left out: Cf characters that draw a glyph of their own
# (Arabic and Syriac number signs, the Kaithi number signs). The class is Unicode 14.0's, as
# this Python has it; test_math_rendering.py checks it against unicodedata.
_CONTROL_CLASS = (
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)
# A carriage return is marked unless a line feed follows it (a CRLF line end). RE2 has no
# lookahead, so the character after a lone one is taken along: enough to say there is one.
# A run is one match, as few as a search needs.
_HAS_CONTROL = patterns.compile(rf"(?:{_CONTROL_CLASS}|\r(?:[^\n]|\z))+")
_CRLF = "\r\n"


def _class_chars(char_class: str) -> frozenset[str]:
    """The characters of a class written as above: `[`, characters and `a-b` ranges, `]`."""
    inner, chars, i = char_class[1:-1], set(), 0
    while i < len(inner):
        if inner[i + 1 : i + 2] == "-":
            chars.update(map(chr, range(ord(inner[i]), ord(inner[i + 2]) + 1)))
            i += 3
        else:
            chars.add(inner[i])
            i += 1
    return frozenset(chars)


# The class's characters, marked by str.translate rather than by a regular expression's sub:
# text can be made of nothing else, and RE2's Python binding costs microseconds a match.
_CONTROL_CHARS = _class_chars(_CONTROL_CLASS)


# str.isprintable() is False for every character above but the Hangul fillers (letters), and
# for line feeds and tabs, which are not marked.
_PRINTABLE_MARKED = ("\u115f", "\u1160", "\u3164", "\uffa0")


def _none_marked(text: str) -> bool:
    """True only if `text` has none of the characters above: a test of a few C loops, a third
    of the expression's time, for the texts of a 100,000-line import, nearly all clean."""
    if not text.isascii() and any(c in text for c in _PRINTABLE_MARKED):
        return False
    return text.replace("\n", "").replace("\t", "").isprintable()


def control_characters(text: str) -> Counter[str]:
    """How often each invisible format or control character occurs in `text`, as 'U+202E'."""
    if _none_marked(text):
        return Counter()
    found = Counter({f"U+{ord(c):04X}": text.count(c) for c in _CONTROL_CHARS.intersection(text)})
    if lone := text.count("\r") - text.count(_CRLF):
        found["U+000D"] = lone
    return found


@functools.cache
def _control_label(char: str) -> str:
    return f"\u27e8U+{ord(char):04X}\u27e9"  # ⟨U+202E⟩: no TeX, Markdown or HTML reads it


@functools.cache
def _control_mark(char: str) -> str:
    name = unicodedata.name(char, "control character").lower()
    return f'<span class="ctl" title="{html.escape(name)}">{_control_label(char)}</span>'


# For str.translate: each marked character (a carriage return here is a lone one, the text
# being split at CRLFs first) as its mark on the page, and as its code in text.
_MARKS = {ord(c): _control_mark(c) for c in _CONTROL_CHARS | {"\r"}}
_LABELS = {ord(c): _control_label(c) for c in _CONTROL_CHARS | {"\r"}}


def _has_controls(text: str) -> bool:
    return not _none_marked(text) and _HAS_CONTROL.search(text) is not None


def _show_controls(escaped: str) -> str:
    """`escaped` text with each invisible character replaced by a visible mark."""
    if _none_marked(escaped):
        return escaped
    return _CRLF.join(line.translate(_MARKS) for line in escaped.split(_CRLF))


def _label_controls(text: str) -> str:
    """`text` with each invisible character replaced by its code, as text."""
    if _none_marked(text):
        return text
    return _CRLF.join(line.translate(_LABELS) for line in text.split(_CRLF))


@dataclass(frozen=True)
class Segment:
    text: str
    math: bool = False
    display: bool = False


class _Next:
    """Where a closing delimiter next occurs, for positions that only grow.

    A delimiter that never closes would otherwise be looked for again from every opener, so
    that 50 kB of `\\(` cost seconds; remembering the last answer looks at each character
    once per delimiter.
    """

    def __init__(self, text: str, needle: str, *, unescaped: bool = False):
        self.text, self.needle, self.unescaped = text, needle, unescaped
        self.asked, self.found = -1, -1

    def at_or_after(self, start: int) -> int:
        # What was found from `asked` holds for any later start up to (or without) `found`.
        if self.asked < 0 or start < self.asked or 0 <= self.found < start:
            self.asked, self.found = start, self._find(start)
        return self.found

    def _find(self, start: int) -> int:
        found = self.text.find(self.needle, start)
        # A closing $ is not one escaped as \$.
        while self.unescaped and found > 0 and self.text[found - 1] == "\\":
            found = self.text.find(self.needle, found + 1)
        return found


def _math_matches(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, kind, TeX) of each math part of `text`, left to right.

    At each place, in this order: $$…$$, \\[…\\], \\(…\\), $…$ (neither dollar escaped as
    \\$) and an environment from \\begin{name} to \\end{name}; each closes at the first
    closing delimiter after at least one character (an environment's may be empty), and the
    search goes on after the part found. Each closing delimiter's next place is remembered, so
    the whole is one pass over the text.
    """
    closers = {
        "$$": _Next(text, "$$"),
        "\\]": _Next(text, "\\]"),
        "\\)": _Next(text, "\\)"),
        "$": _Next(text, "$", unescaped=True),
    }
    # Every place math may start (_OPENERS), by str.find: a page renders every step through
    # here, and RE2's Python binding costs microseconds a search (it encodes the whole text
    # again each time). No two openers start at one place.
    starts = sorted(at for opener in _OPENERS for at in _places(text, opener))
    i = 0
    while i < len(starts):
        found = _math_at(text, starts[i], closers)
        if found is None:
            i += 1
            continue
        yield found
        i = bisect.bisect_left(starts, found[1], i + 1)  # the search goes on after the part


def _places(text: str, needle: str) -> Iterator[int]:
    at = text.find(needle)
    while at >= 0:
        yield at
        at = text.find(needle, at + 1)


def _math_at(text: str, start: int, closers: dict[str, _Next]) -> tuple[int, int, str, str] | None:
    """The math part starting at `start`, if one does, as (start, end, kind, TeX)."""
    head = text[start : start + 2]
    if head == "$$" and (end := closers["$$"].at_or_after(start + 3)) >= 0:
        return start, end + 2, "dd", text[start + 2 : end]
    if head in ("\\[", "\\("):
        kind, close = ("db", "\\]") if head == "\\[" else ("ip", "\\)")
        end = closers[close].at_or_after(start + 3)
        return (start, end + 2, kind, text[start + 2 : end]) if end >= 0 else None
    if head[:1] == "$":
        if start > 0 and text[start - 1] == "\\":
            return None
        end = closers["$"].at_or_after(start + 2)
        return (start, end + 1, "id", text[start + 1 : end]) if end >= 0 else None
    # A slice as long as the longest name: RE2 would encode the whole text for each \begin{.
    environment = _ENVIRONMENT.match(text[start : start + _ENVIRONMENT_CHARS])
    if environment is None:
        return None
    close = f"\\end{{{environment[1]}}}"
    end = closers.setdefault(close, _Next(text, close)).at_or_after(start + environment.end())
    return (start, end + len(close), "env", text[start : end + len(close)]) if end >= 0 else None


def _math_segment(kind: str, tex: str) -> Segment:
    # The substring tests spare most parts the regular expressions: a part per few characters
    # is what hostile text brings, and each costs its share of the time.
    display = kind in ("dd", "db", "env") or ("\\begin" in tex and bool(_DISPLAY_ONLY.search(tex)))
    return Segment(_for_katex(tex.strip()), True, display)


def segments(text: str) -> list[Segment]:
    """`text` as plain-text and math segments, in order; TeX escapes in text made plain."""
    out: list[Segment] = []
    last = 0
    controls = _has_controls(text)
    for start, end, kind, tex in _math_matches(text):
        if start > last:
            out.append(Segment(_plain(text[last:start])))
        if controls and _has_controls(tex):
            # Shown as typed, the invisible character marked: KaTeX would draw the TeX around
            # it, and a bidi control would still reorder what it draws.
            out.append(Segment(text[start:end]))
        else:
            out.append(_math_segment(kind, tex))
        last = end
    if last < len(text):
        out.append(Segment(_plain(text[last:])))
    return out


def _has_math(text: str) -> bool:
    return next(_math_matches(text), None) is not None


def _plain(text: str) -> str:
    return _unescaped(text, _TEXT_ESCAPES)


def _unescaped(text: str, chars: str) -> str:
    """`text` with each backslash before one of `chars` taken out, as a substitution of
    `\\([chars])` by its group would: str.replace, one C pass per character, where text of
    nothing but escapes would cost RE2's Python binding microseconds a match. The same: such
    pairs never overlap, and taking a backslash out only puts the one before it next to the
    character just done, so no pass makes a pair for a later one."""
    if "\\" not in text:
        return text
    for char in chars:
        text = text.replace("\\" + char, char)
    return text


def _for_katex(tex: str) -> str:
    if "eqnarray" not in tex:
        return tex
    return _EQNARRAY.sub(
        lambda m: r"\begin{array}{rcl}" if m[1] == "begin" else r"\end{array}", tex
    )


def math_span(tex: str, *, display: bool) -> str:
    """The markup math.js draws: the TeX escaped, so it is text until KaTeX renders it."""
    return f'<span class="math" data-display="{int(display)}">{html.escape(tex)}</span>'


def _html(parts: list[Segment]) -> str:
    return "".join(_html_parts(parts))


def _html_parts(parts: list[Segment]) -> Iterator[str]:
    for i, part in enumerate(parts):
        if part.math:
            yield math_span(part.text, display=part.display)
            continue
        text = part.text
        # Display math is a block of its own: the newlines around it would add blank lines.
        if i > 0 and parts[i - 1].display:
            text = text.lstrip("\n")
        if i + 1 < len(parts) and parts[i + 1].display:
            text = text.rstrip("\n")
        yield _show_controls(html.escape(text)).replace("\n", "<br>")


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
    # An answer with an invisible character in it is shown as text, the character marked.
    if _has_math(answer) or _has_controls(answer):
        return render_math(answer)
    if _WORDS.fullmatch(answer) and _LOWER_RUN.search(answer):
        return mark_safe(html.escape(answer))
    return mark_safe(math_span(_thousands(answer), display=False))


def _thousands(answer: str) -> str:
    """`answer` with each comma between a digit and exactly three more braced, `{,}`."""

    def braced(comma: patterns.Match) -> str:
        start, end = comma.span()
        if (
            start > 0
            and answer[start - 1].isdecimal()  # Python's \d: Unicode's decimal digits
            and comma[0][1:].isdecimal()
            and not answer[end : end + 1].isdecimal()
        ):
            return "{,}" + comma[0][1:]
        return comma[0]

    return _THOUSANDS.sub(braced, answer)


def render_step(step: str) -> SafeString:
    """A step; a final '# Answer' block shows its answer as the solution's answer."""
    head, sep, answer = step.partition(_ANSWER_HEADING)
    if not sep:
        return render_math(step)
    block = f'<span class="final-answer"><strong>Answer:</strong> {render_answer(answer)}</span>'
    if not head.strip():
        return mark_safe(block)
    return mark_safe(f"{render_math(head.rstrip())}<br>{block}")


# --- Markdown (guidelines) -------------------------------------------------------------------
#
# python-markdown (and the html.parser it reads raw HTML with) has corners whose time grows with
# the square of the input, or that recurse once per nesting level: a link's text and target are
# read from each `[` and `](` to their match or the end of the paragraph; a paragraph is split
# at each heading, rule or link definition in it and the rest read again; raw HTML is parsed
# again from each unclosed tag; each inline match copies its whole paragraph. Rather than patch
# a third-party parser, the text is first measured, in one pass, against a budget for each:
# text within them renders in a tenth of a second at most, whatever its shape (bench/text.py),
# and the admin refuses a guideline over one (labeling/admin.py). Text over a budget that
# reaches the page anyway is shown as plain text with its math, saying why. The budgets leave
# room: the default guideline uses under 1% of each, a 200-row table of three columns a quarter.

MARKDOWN_MAX_CHARS = 20_000
MARKDOWN_MAX_DEPTH = 10
MARKDOWN_RENDER_LIMIT_S = 0.25  # CPU seconds, for the form
# Lists and quotes opened on one line, which Markdown follows by recursion (its \d, Python's,
# takes any decimal digit: \p{Nd} on RE2).
_CONTAINERS = patterns.compile(
    rf"^(?:[ \t]*(?:>|[-+*][ \t]|\p{{Nd}}+[.)][ \t])){{{MARKDOWN_MAX_DEPTH + 1}}}",
    patterns.MULTILINE,
)
# Characters of link text and targets read, from each `[` and `](` (a Python loop, run by
# links, images and references alike; ~0.2 µs each).
_LINK_READ_BUDGET = 20_000
_BRACKETS = frozenset("[]()\\`")  # read in a loop: RE2's Python binding costs µs a match
_PLACEHOLDER_CHARS = 16
# Lines at which a paragraph is split and the rest read again, times the paragraph's length.
_SPLIT_LINE = patterns.compile(r"^ {0,3}(?:#|\[[^\]\n]*\]:|[-*_=][-*_= ]*$)", patterns.MULTILINE)
_SPLIT_BUDGET = 2_000_000
# Places an inline pattern may match, times the paragraph's length (copies, ~1 ns a character):
# these characters and two spaces before a line feed (`_inline_places`).
_INLINE = ("*", "_", "`", "\\", "&", "<", "[", "!", "  \n")
_INLINE_BUDGET = 100_000_000
# Starts of raw HTML, times the text's length (html.parser, up to ~30 ns a character).
_TAG = patterns.compile(r"<[A-Za-z!/?]")
_TAG_BUDGET = 2_000_000
# Table cells: rows of a paragraph with a delimiter row times its columns (~20 µs a cell).
# A line of these characters is a delimiter row if it has `|` and `-`.
_TABLE_ROW = patterns.compile(r"^[ |:-]+$", patterns.MULTILINE)
_CELL_BUDGET = 2_500
_PARAGRAPH_BREAK = patterns.compile(r"\n[ \t]*\n")
# TeX's \$ and \% outside math, which Markdown would leave escaped.
_MARKDOWN_ESCAPES = "$%"
# A math span's placeholder, `math<nonce>x<index>x`: the nonce is a page's own (token_hex of
# _NONCE_BYTES), compared on the match, so a guideline cannot name a span by writing one.
_NONCE_BYTES = 4
_PLACEHOLDER = patterns.compile(rf"math([0-9a-f]{{{2 * _NONCE_BYTES}}})x(\d+)x")


def _hold_math(text: str, nonce: str) -> tuple[str, list[str]]:
    """`text` with each math part replaced by a placeholder, and the spans they stand for."""
    spans: list[str] = []
    out: list[str] = []
    last = 0
    for start, end, kind, tex in _math_matches(text):
        part = _math_segment(kind, tex)
        out += [text[last:start], f"math{nonce}x{len(spans)}x"]
        spans.append(math_span(part.text, display=part.display))
        last = end
    out.append(text[last:])
    return _unescaped("".join(out), _MARKDOWN_ESCAPES), spans


def _link_reads(paragraph: str) -> int:
    """What link parsing reads of `paragraph`: from each `[` to its `]` and from each `](` to
    its `)`, or to the end where one does not close.

    Backslash escapes and code spans are read as placeholders of up to 16 characters (they
    are replaced before links are looked for), so each counts that long.
    """
    reads = grown = 0
    squares: list[int] = []
    rounds: list[int] = []  # -1: a parenthesis that starts no link target
    for place, char in enumerate(paragraph):
        if char not in _BRACKETS:
            continue
        at = place + grown
        if char in "\\`":
            grown += _PLACEHOLDER_CHARS
        elif char == "[":
            squares.append(at)
        elif char == "(":
            starts_target = paragraph[place - 1 : place] == "]"
            rounds.append(at if starts_target else -1)
        elif char == "]" and squares:
            reads += at - squares.pop()
        elif char == ")" and rounds and (start := rounds.pop()) >= 0:
            reads += at - start
    end = len(paragraph) + grown
    return reads + sum(end - at for at in squares) + sum(end - at for at in rounds if at >= 0)


def _inline_places(paragraph: str) -> int:
    """How often `_INLINE` occurs in `paragraph`: by str.count, as none of them overlaps
    another (the characters are single, and two spaces before a line feed end at it)."""
    return sum(map(paragraph.count, _INLINE))


def _over_budget(held: str) -> str | None:
    """Why Markdown would take long over `held` (math held out), or None."""
    held = held.expandtabs(4)  # as Markdown reads it
    if nested := _CONTAINERS.search(held):
        line = held.count("\n", 0, nested.start()) + 1
        return f"line {line} nests lists or quotes more than {MARKDOWN_MAX_DEPTH} deep"
    if (tags := len(_TAG.findall(held))) * len(held) > _TAG_BUDGET:
        return f"it has {tags:,} HTML tags (or '<' before a letter), too many for its length"
    link_reads = splits = inline = cells = 0
    start, line = 0, 1
    for paragraph_break in [*_PARAGRAPH_BREAK.finditer(held), None]:
        end = paragraph_break.start() if paragraph_break else len(held)
        paragraph = held[start:end]
        link_reads += _link_reads(paragraph)
        splits += len(_SPLIT_LINE.findall(paragraph)) * len(paragraph)
        inline += _inline_places(paragraph) * len(paragraph)
        if rows := [r for r in _TABLE_ROW.findall(paragraph) if "|" in r and "-" in r]:
            cells += (max(row.count("|") for row in rows) + 1) * (paragraph.count("\n") + 1)
        where = f"the paragraph on line {line}"
        if link_reads > _LINK_READ_BUDGET:
            return f"{where} has `[`, `]` or `(` that do not close, or close too far away"
        if splits > _SPLIT_BUDGET:
            return (
                f"{where} has too many headings, rules or link definitions for its length; "
                "put blank lines between them"
            )
        if cells > _CELL_BUDGET:
            return f"its tables have more than {_CELL_BUDGET:,} cells"
        if inline > _INLINE_BUDGET:
            return (
                f"{where} is too dense with emphasis, code, escapes or tags for its length; "
                "break it up with blank lines"
            )
        if paragraph_break:
            line += held.count("\n", start, paragraph_break.end())
            start = paragraph_break.end()
    return None


def _markdown_source(text: str, nonce: str) -> tuple[str, list[str], str | None]:
    """What Markdown is given for `text`, the math spans it holds, and why it should not be."""
    if len(text) > MARKDOWN_MAX_CHARS:
        reason = (
            f"it is {len(text):,} characters long; guidelines are rendered as Markdown up to "
            f"{MARKDOWN_MAX_CHARS:,}"
        )
        return "", [], reason
    # Invisible characters as their code, ⟨U+202E⟩: text to Markdown, TeX and HTML alike.
    held, spans = _hold_math(_label_controls(text), nonce)
    return held, spans, _over_budget(held)


def markdown_refusal(text: str) -> str | None:
    """Why `text` should not be a guideline, or None: for the form that edits it.

    Within the budgets the text is also rendered once, and refused if that took long: a shape
    the budgets do not foresee is stopped where it enters, not on every page view.
    """
    reason = _markdown_source(text, "0" * 2 * _NONCE_BYTES)[2]  # as long as the page's
    if reason is None:
        started = time.thread_time()
        render_markdown(text)
        if (spent := time.thread_time() - started) > MARKDOWN_RENDER_LIMIT_S:
            reason = (
                f"Markdown took {spent:.2f} s to render it, more than {MARKDOWN_RENDER_LIMIT_S} s"
            )
    return reason


def render_markdown(text: str) -> SafeString:
    """Markdown (guidelines) with math rendered as in problems; raw HTML is sanitised away.

    Math spans are swapped for placeholders before Markdown runs, because Markdown would
    read TeX's `_`, `*` and `\\` as emphasis and escapes.
    """
    nonce = secrets.token_hex(_NONCE_BYTES)
    held, spans, reason = _markdown_source(text, nonce)
    if reason is None:
        try:
            out = nh3.clean(markdown.markdown(held, extensions=["tables", "sane_lists"]))
        except RecursionError:  # a nesting the budget did not foresee: still a page
            reason = "it nests too deep"
    if reason is not None:
        return mark_safe(
            f'<p class="markdown-refused">Shown as plain text: {html.escape(reason)}.</p>'
            f'<p class="markdown-plain">{render_math(text)}</p>'
        )
    return mark_safe(_PLACEHOLDER.sub(lambda m: spans[int(m[2])] if m[1] == nonce else m[0], out))
