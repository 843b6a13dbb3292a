"""Math as a labeler sees it: real MATH-style text drawn by KaTeX in Chromium, under the CSP.

The corpus (fixtures/math_corpus.txt) holds problems, steps and final "# Answer" blocks in
the forms MATH and PRM800K write them: fractions, roots, \\boxed, \\text, \\!, \\$, \\%,
environments without dollars, display math, thousands separators, degrees, intervals, sets.
"""

import re
import unicodedata
from pathlib import Path

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template import Context, Template
from django.test import RequestFactory
from django.utils.html import escape
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling import mathtext
from labeling.mathtext import (
    render_answer,
    render_excerpt,
    render_markdown,
    render_math,
    render_step,
)

CORPUS_FILE = Path(__file__).parent / "fixtures" / "math_corpus.txt"
ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
RAW_COMMAND = re.compile(r"\\[A-Za-z]+")


def corpus() -> list[str]:
    entries = CORPUS_FILE.read_text().split("\n%%\n")[1:]  # the first part is the header
    return [entry.strip("\n") for entry in entries if entry.strip()]


def without_math(html: str) -> str:
    """The markup with every math span's TeX taken out: what the page shows as text."""
    return re.sub(r'<span class="math" data-display="[01]">[^<]*</span>', "", html)


def test_the_corpus_is_real_math_text_of_every_kind():
    entries = corpus()
    assert len(entries) >= 200
    text = "\n".join(entries)
    for construct in (
        r"\frac", r"\dfrac", r"\sqrt", "^{", r"\boxed", r"\text", r"\!", r"\$", r"\%",
        r"\begin{align*}", r"\begin{cases}", r"\begin{array}", r"\begin{pmatrix}", "$$",
        r"\[", "# Answer", "^\\circ", r"\overline", r"\pi", r"\infty)", r"\{",
    ):  # fmt: skip
        assert construct in text, construct


@pytest.mark.parametrize("entry", corpus())
def test_the_server_leaves_no_tex_outside_math_and_no_markup_of_its_own(entry):
    html = render_step(entry)
    text = without_math(html)
    assert not RAW_COMMAND.search(text), text
    assert "# Answer" not in text
    # Only the renderer's own tags: the math spans, line breaks and the answer block.
    tags = set(re.findall(r"</?([a-z]+)", text))
    assert tags <= {"br", "span", "strong"}, tags


def test_text_escapes_answers_and_environments_are_split_as_a_reader_expects():
    html = render_math("It costs \\$5, or 20\\% of \\$25, and \\begin{align*} a &= b \\end{align*}")
    assert html.startswith("It costs $5, or 20% of $25, and ")
    assert '<span class="math" data-display="1">\\begin{align*} a &amp;= b \\end{align*}' in html
    answer = render_step("# Answer\n\n320,000")
    assert answer == (
        '<span class="final-answer"><strong>Answer:</strong> '
        '<span class="math" data-display="0">320{,}000</span></span>'
    )
    assert (
        render_answer("\\text{Monday}")
        == '<span class="math" data-display="0">\\text{Monday}</span>'
    )
    assert render_answer("Monday") == "Monday"
    # TeX is text: markup typed into a problem never becomes markup on the page.
    assert render_math("$<img src=x onerror=alert(1)>$ <b>") == (
        '<span class="math" data-display="0">&lt;img src=x onerror=alert(1)&gt;</span> &lt;b&gt;'
    )
    assert "<script" not in render_markdown("$x$ <script>alert(1)</script> \\$5")
    # A list's excerpt is cut between segments: never inside math, which would show raw TeX.
    long = "Let $\\frac{1}{2} + x$ be given. " * 10
    excerpt = render_excerpt(long, 60)
    assert excerpt.endswith("…") and excerpt.count('<span class="math"') == 2
    assert not RAW_COMMAND.search(without_math(excerpt))


CORPUS_PAGE = Template(
    '{% extends "base.html" %}{% load mathtext %}{% block content %}'
    '{% for entry in entries %}<div class="entry step-text">{{ entry|step }}</div>{% endfor %}'
    "{% endblock %}"
)


def corpus_page() -> str:
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    return CORPUS_PAGE.render(Context({"entries": corpus(), "request": request}))


@pytest.mark.django_db(transaction=True)
def test_chromium_draws_every_corpus_entry_with_katex_under_the_csp(browser, live_server):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    url = f"{live_server.url}/math-corpus/"

    def serve(route):
        # The app's own response headers (its Content-Security-Policy) around the corpus page.
        real = route.fetch(url=f"{live_server.url}/accounts/login/")
        route.fulfill(response=real, body=corpus_page())

    page.route(url, serve)
    page.goto(url)
    # Locators, not wait_for_function: that evaluates a string, which the CSP forbids.
    expect(page.locator(".math:not([data-rendered])")).to_have_count(0)
    page.evaluate("document.fonts.ready")

    entries = page.locator(".entry")
    texts = entries.evaluate_all("els => els.map((e) => e.innerText)")
    assert len(texts) == len(corpus()) >= 200
    raw = [(i, t) for i, t in enumerate(texts) if RAW_COMMAND.search(t) or "# Answer" in t]
    assert not raw, raw[:20]
    assert page.locator(".katex-error").count() == 0
    assert page.locator(".math .katex").count() == page.locator(".math").count() > 300
    # The constructs the old renderer got wrong, as a reader sees them.
    assert page.locator(".math .fbox").count() >= 10  # \boxed draws a box
    assert page.evaluate("document.fonts.check('16px KaTeX_Main')")
    # What a reader sees: the drawn math (KaTeX's HTML part) within the text around it.
    seen = entries.evaluate_all(
        """els => els.map((e) => {
            const copy = e.cloneNode(true);
            copy.querySelectorAll(".katex-mathml").forEach((m) => m.remove());
            return copy.textContent;
        })"""
    )
    shown = dict(zip(corpus(), seen, strict=True))
    assert shown["# Answer\n\n320,000"] == "Answer: 320,000"
    assert shown["# Answer\n\n\\$5.25"] == "Answer: $5.25"
    assert (
        shown["There are $200,\\!000$ people in the town."]
        == "There are 200,000 people in the town."
    )
    assert shown["The price dropped by 20\\%, so it is now 80\\% of the original."] == (
        "The price dropped by 20%, so it is now 80% of the original."
    )
    assert not violations, violations[:3]  # KaTeX drew it all within the CSP
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "math-corpus.png"))
    page.close()


WORKBENCH_PROBLEM = (
    "The graph of $y = ax^2 + bx + c$ has a maximum value of 54, and passes through the "
    "points $(-2,0)$ and $(4,0).$ Find $a + b + c.$"
)
WORKBENCH_STEPS = [
    "Since the graph passes through $(-2,0)$ and $(4,0)$, the roots are $-2$ and $4$, so "
    "$y = a(x + 2)(x - 4)$.",
    "The vertex is halfway between the roots, at $x = \\dfrac{-2 + 4}{2} = 1$.",
    "The maximum value is at the vertex:\n\\begin{align*}\ny(1) &= a(1 + 2)(1 - 4) \\\\\n"
    "&= -9a = 54,\n\\end{align*}\nso $a = -6$.",
    "Then $a + b + c = y(1) = 54$, which is $\\boxed{54}$; the area costs \\$5, or 20\\%.",
    "# Answer\n\n54",
]


@pytest.mark.django_db(transaction=True)
def test_the_workbench_draws_real_math_in_problem_steps_and_answer(page, live_server):
    from playwright.sync_api import expect

    from labeling.models import Problem, Solution

    problem = Problem.objects.create(text=WORKBENCH_PROBLEM, answer="54")
    Solution.objects.create(problem=problem, steps=WORKBENCH_STEPS, answer="54", is_correct=True)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    for rated in range(1, len(WORKBENCH_STEPS) + 1):
        page.keyboard.press("3")
        expect(page.locator("#steps button.chosen")).to_have_count(rated)
    expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)
    # Math swapped in after each rating is drawn too, not only what came with the page.
    expect(page.locator(".math:not([data-rendered])")).to_have_count(0)
    shown = page.locator("main").inner_text()
    assert not RAW_COMMAND.search(shown), shown
    assert "# Answer" not in shown and "Answer:" in shown and "$5, or 20%" in shown
    assert page.locator("#steps .katex-display").count() == 1  # the align* block
    assert page.locator("#steps .fbox").count() == 1  # \boxed draws a box
    assert page.locator(".katex-error").count() == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workbench-math.png"))


# --- invisible characters and the one-pass splitter (issue 27) ------------------------------

# Cf characters that draw a glyph of their own (Unicode's Prepended_Concatenation_Mark).
VISIBLE_FORMAT = set("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2")
VISIBLE_FORMAT |= {"\U000110bd", "\U000110cd"}
HANGUL_FILLERS = set("\u115f\u1160\u3164\uffa0")


def test_the_marked_characters_are_every_invisible_format_and_control_character():
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    invisible = {
        c
        for c in every
        if unicodedata.category(c) in ("Cf", "Cc", "Zl", "Zp") and c not in "\t\n\r"
    }
    expected = (invisible - VISIBLE_FORMAT) | HANGUL_FILLERS
    # Joined by "x", each stands alone: a carriage return is marked unless a newline follows.
    marked = set(mathtext.control_characters("x".join(sorted(expected | {"\r"})) + "x"))
    assert marked == {f"U+{ord(c):04X}" for c in expected | {"\r"}}
    assert not mathtext.control_characters("a\r\nb\tc\nd" + "".join(VISIBLE_FORMAT))
    # One at a time, in text that is otherwise clean (the quick test for clean text lets none by).
    for c in expected | {"\r"}:
        assert mathtext.control_characters(f"x {c}\ty\nπ") == {f"U+{ord(c):04X}": 1}


INVISIBLE = {
    "\u200b": "zero width space",
    "\u200c": "zero width non-joiner",
    "\u200d": "zero width joiner",
    "\u200e": "left-to-right mark",
    "\u200f": "right-to-left mark",
    "\u202a": "left-to-right embedding",
    "\u202b": "right-to-left embedding",
    "\u202c": "pop directional formatting",
    "\u202d": "left-to-right override",
    "\u202e": "right-to-left override",
    "\u2060": "word joiner",
    "\u2061": "function application",
    "\u2062": "invisible times",
    "\u2063": "invisible separator",
    "\u2064": "invisible plus",
    "\u2066": "left-to-right isolate",
    "\u2067": "right-to-left isolate",
    "\u2068": "first strong isolate",
    "\u2069": "pop directional isolate",
    "\ufeff": "zero width no-break space",
    "\u061c": "arabic letter mark",
    "\u180e": "mongolian vowel separator",
    "\u00ad": "soft hyphen",
    "\u2028": "line separator",
    "\u2029": "paragraph separator",
    "\u3164": "hangul filler",
    "\U000e0041": "tag latin capital letter a",
    "\x07": "control character",
    "\x1b": "control character",
    "\x7f": "control character",
    "\x85": "control character",
}


def mark(char: str) -> str:
    return f'<span class="ctl" title="{INVISIBLE[char]}">⟨U+{ord(char):04X}⟩</span>'


# Text in other scripts, as it is written: nothing in it is marked or changed.
OTHER_SCRIPTS = [
    "مجموع الزاويتين يساوي $90^\\circ$، إذن الجواب هو ٤٥.",
    "סכום הזוויות הוא $180^\\circ$, ולכן התשובה היא 45.",
    "三角形の内角の和は $180^\\circ$ です。答えは四十五。",
    "所以 $x = 2$，答案是二。한국어: 답은 $2$ 입니다.",
    "Ελληνικά: η απάντηση είναι $\\pi$. Русский: ответ — $2$.",
]


@pytest.mark.parametrize("char", INVISIBLE, ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
def test_invisible_characters_are_marked_in_text_math_and_answers(char):
    step = f"Add{char} 2 and $3{char}$ to get 5.\n\n# Answer\n\n1{char}5"
    html = render_step(step)
    assert char not in html
    assert html.count(mark(char)) == 3, html
    # Math that hides one is shown as typed, with its mark: KaTeX would draw around it.
    assert f"$3{mark(char)}$" in html and '<span class="math"' not in html
    for render in (render_math, render_answer, lambda t: render_excerpt(t, 100)):
        assert mark(char) in render(f"x{char}y") and char not in render(f"x{char}y")
    # Guidelines show its code as text (Markdown, TeX and HTML all leave it alone).
    guideline = render_markdown(f"Rate *this*{char} step; $a{char}$.")
    assert char not in guideline and guideline.count(f"⟨U+{ord(char):04X}⟩") == 2


def test_other_scripts_and_real_math_text_are_left_as_they_are():
    for text in OTHER_SCRIPTS:
        html = render_math(text)
        assert "ctl" not in html and "⟨" not in html
        assert without_math(html) == escape(re.sub(r"\$[^$]+\$", "", text))
    assert not any('class="ctl"' in render_step(entry) for entry in corpus())
    assert 'class="ctl"' not in render_markdown(
        "\n\n".join(OTHER_SCRIPTS) + "\n\n" + "\n\n".join(corpus()[:40])
    )


# The regular expression the splitter was before it became one pass: what it found is what
# the splitter must find, on MATH text and on any mix of delimiters.
REFERENCE_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$"
    r"|\\\[(?P<db>.+?)\\\]"
    r"|\\\((?P<ip>.+?)\\\)"
    r"|(?<!\\)\$(?P<id>.+?)(?<!\\)\$"
    rf"|(?P<env>\\begin\{{(?P<name>(?:{mathtext._ENVIRONMENTS})\*?)\}}.*?\\end\{{(?P=name)\}})",
    re.S,
)


def reference_parts(text: str) -> list[tuple[int, int, str]]:
    return [
        (m.start(), m.end(), next(g for g in m.group("dd", "db", "ip", "id", "env") if g))
        for m in REFERENCE_MATH.finditer(text)
    ]


ATOMS = [
    "$", "$$", "\\", "\\(", "\\)", "\\[", "\\]", "a", " ", "\n", "{", "}", "\\$", "x",
    "\\begin{align}", "\\end{align}", "\\begin{align*}", "\\end{align*}", "\\begin{cases}",
    "\\end{cases}", "\\begin{foo}", "\\end{", "\\begin{", "%", "# Answer", "1,000",
]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=40).map("".join))
def test_the_one_pass_splitter_finds_what_the_regular_expression_found(text):
    found = [(start, end, tex) for start, end, _, tex in mathtext._math_matches(text)]
    assert found == reference_parts(text)


def test_the_one_pass_splitter_finds_what_the_regular_expression_found_in_math_text():
    for entry in corpus():
        found = [(start, end, tex) for start, end, _, tex in mathtext._math_matches(entry)]
        assert found == reference_parts(entry), entry
