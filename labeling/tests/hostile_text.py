"""Hostile shapes of text, as imports, generators and labelers can send them (issue 27).

Each is a unit repeated to a size, or built for one: runs of every math delimiter, of
Markdown's brackets, emphasis, tags, entities, code and containers, nestings, one long line,
and invisible characters. Used by test_hostile_input.py (50 kB through every renderer and
the pages that show steps) and by bench/text.py (5 kB to 500 kB, linear growth).
"""

from collections.abc import Callable


def _nested_lists(size: int) -> str:
    lines, depth, length = [], 0, 0
    while length < size:
        lines.append("  " * depth + "- x\n")
        depth, length = depth + 1, length + len(lines[-1])
    return "".join(lines)[:size]


HOSTILE_TEXT: dict[str, str | Callable[[int], str]] = {
    "inline-math-open": "\\(",
    "display-math-open": "\\[",
    "dollar": "$",
    "double-dollar": "$$",
    "dollar-letter": "$a",
    "escaped-dollar": "\\$",
    "begin": "\\begin{",
    "begin-align": "\\begin{align}",
    "open-brace": "{",
    "backslash": "\\",
    "open-bracket": "[",
    "close-bracket": "]",
    "image": "![",
    "link-target": "[a](",
    "reference": "[a][",
    "parenthesis": "(",
    "star": "*",
    "emphasis": "*a",
    "underscore": "_a",
    "strong": "**a",
    "angle": "<",
    "tag": "<a",
    "autolink": "<http://a",
    "attribute": "<a href='",
    "comment": "<!--",
    "ampersand": "&",
    "entity": "&#",
    "backtick": "`a",
    "quote": "> ",
    "ordered-list": "1. ",
    "bullet-list": "+ ",
    "setext-heading": "a\n=\n",
    "table": "a|b\n-|-\n",
    "line-breaks": "a  \n",
    "long-line": "x",
    "answer-heading": "# Answer",
    "invisible": "\u202e\u200b",
    "nested-quotes": ">",
    "nested-brackets": lambda n: "[" * (n // 2) + "]" * (n - n // 2),
    "nested-emphasis": lambda n: "*" * (n // 2) + "a" + "*" * (n - n // 2 - 1),
    "nested-lists": _nested_lists,
}


def hostile_text(shape: str, size: int) -> str:
    """`size` characters of `shape`."""
    make = HOSTILE_TEXT[shape]
    text = make(size) if callable(make) else (make * (size // len(make) + 1))[:size]
    assert len(text) == size
    return text
