"""One word per thing, in people's words (issue 43, item 10): no page of any role shows a code
identifier (`found_error`, `top_p`, `convincing_wrong_answer`, `labeling.judge_display`, a
setting's name) or a number with the wrong plural ("1 solutions", "report(s)") as its text.

The pages are the accessibility test's (the URL tree, every role), fetched with Django's client;
what a person reads is the text outside tags, scripts, styles and code (`<code>`, `<kbd>`,
`<samp>`, `<pre>`: an identifier there is shown as one, on purpose).
"""

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.test import Client

from annotate.tests.test_every_page_browser import install  # noqa: F401 (a fixture)
from core import patterns
from core.tests.test_accessibility_browser import (  # noqa: F401 (a fixture)
    ROLES,
    pages,
    routes,
    skipped,
    url_of,
)

_IDENTIFIER = patterns.compile(r"(?:^|[^\w./-])([a-z][a-z0-9.]*_[a-z0-9_.]*[a-z0-9])")
# "1 solutions", not "+1 is" (a rating) nor "2.1 steps".
_BAD_PLURAL = patterns.compile(
    r"(?:^|[^\d.,+\-−])1 (?:[a-z]+s|replies|entries)(?:[^a-z]|$)|\w\(s\)"
)
# Words that end in s in the singular, and verbs.
_SINGULAR_S = {"class", "process", "status", "analysis", "axis", "basis", "focus", "bus", "is",
               "was", "has", "as", "does", "its", "this", "thus", "plus", "minus"}  # fmt: skip


class _Visible(HTMLParser):
    HIDDEN = {"script", "style", "code", "kbd", "samp", "pre", "textarea", "template"}

    def __init__(self):
        super().__init__()
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in self.HIDDEN and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def visible_text(html: str) -> str:
    reader = _Visible()
    reader.feed(html)
    return " ".join(" ".join(reader.parts).split())


def problems_in(text: str) -> list[str]:
    found = [f"identifier {m[1]!r}" for m in _IDENTIFIER.finditer(text)]
    for match in _BAD_PLURAL.finditer(text):
        word = match[0].strip(" .,;:()").split(" ")[-1]
        if word.rstrip(".,;:)") not in _SINGULAR_S:
            found.append(f"plural {match[0].strip()!r}")
    return found


@pytest.mark.django_db
def test_no_page_shows_a_code_identifier_or_a_wrong_plural(pages):  # noqa: F811
    users = pages[0]
    wrong = []
    for role in ROLES:
        client = Client()
        client.force_login(users[role])
        for route, name, converters in routes():
            if skipped(route) or "<" in route and not converters:
                continue
            url = url_of(route, name, converters, role=role, data=pages)
            response = client.get(url)
            if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                continue
            for problem in problems_in(visible_text(response.content.decode())):
                wrong.append(f"{role} {url}: {problem}")
    assert not wrong, f"{len(wrong)} words a person should not have to read:\n" + "\n".join(
        sorted(set(wrong))
    )


def test_the_reader_finds_what_it_forbids():
    assert problems_in("Finished: found_error") == ["identifier 'found_error'"]
    assert problems_in("see labeling.judge_display") == ["identifier 'labeling.judge_display'"]
    assert problems_in("1 solutions scored") == ["plural '1 solutions'"]
    assert problems_in("2 report(s)") == ["plural 't(s)'"]
    assert problems_in("1 solution, 21 solutions, 1 class, 0.1 steps, version 1.2") == []
    assert visible_text("<p>Top <code>top_p</code> <script>a_b()</script>ok</p>") == "Top ok"


TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
NOUNS = "|".join(
    [
        "solutions",
        "steps",
        "problems",
        "labels",
        "replies",
        "items",
        "runs",
        "labelers",
        "ratings",
        "sessions",
        "examples",
        "versions",
        "sets",
        "reports",
        "rows",
        "lines",
        "files",
        "answers",
        "pairs",
        "generations",
        "errors",
        "tokens",
    ]
)
_COUNTED = patterns.compile(
    r"\{\{ ([^}]*?) \}\}(?:</strong>|</a>|</span>)? (" + NOUNS + r")(?:[^a-z{]|$)"
)


def test_no_template_writes_a_count_before_a_fixed_plural():
    # The pages above show only the counts the fixture makes; this reads every template for a
    # count before a noun that does not follow it ("{{ n }} solutions": "1 solutions").
    found = [
        f"{path.relative_to(TEMPLATES)}: {match[0].strip()}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for match in _COUNTED.finditer(path.read_text(encoding="utf-8"))
        if not any(f in match[1] for f in ("|rate", "|percent", "|floatformat"))
    ]
    assert not found, "use noun{{ n|pluralize }}:\n" + "\n".join(found)
