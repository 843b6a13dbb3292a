"""Math is cut only by `math_excerpt`, which cuts between formulas: a template that truncates
text holding TeX before rendering it breaks a formula longer than the cut into raw TeX on the
page (issue 43, item 13). This reads every template's filter chains, so the next one is caught
without a page to render it."""

from pathlib import Path

from core import patterns

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
_VARIABLE = patterns.compile(r"\{\{(.*?)\}\}", patterns.DOTALL)
CUTS = {"truncatechars", "truncatewords", "truncatechars_html", "truncatewords_html", "slice"}
RENDERS_MATH = {"math", "step", "answer", "markdown"}
# Fields that hold TeX: a problem's text, a solution's steps and answers, a reference answer.
TEX_FIELDS = (".text", ".steps", ".answer", ".ground_truth", ".given_answer", "problem")


def cut_math(expression: str) -> bool:
    head, *filters = (part.strip() for part in expression.split("|"))
    names = [f.split(":", 1)[0].strip() for f in filters]
    cuts = [i for i, name in enumerate(names) if name in CUTS]
    if not cuts:
        return False
    renders_after = any(name in RENDERS_MATH for name in names[cuts[0] :])
    return renders_after or head.endswith(TEX_FIELDS)


def test_no_template_cuts_text_that_holds_math_but_math_excerpt():
    found = [
        f"{path.relative_to(TEMPLATES)}: {{{{{match[1].strip()}}}}}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for match in _VARIABLE.finditer(path.read_text(encoding="utf-8"))
        if cut_math(match[1])
    ]
    assert not found, "cut before rendering (use |math_excerpt:N):\n" + "\n".join(found)


def test_the_reader_sees_the_cut_it_forbids():
    assert cut_math(" row.solution.problem.text|truncatechars:120|math ")
    assert cut_math("solution.answer|truncatechars:20")
    assert not cut_math("row.solution.problem.text|math_excerpt:120")
    assert not cut_math("labeler.uuid|truncatechars:9")
