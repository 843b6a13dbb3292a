"""The text a page shows of a problem, as plain words, for search.

A problem is stored as typed (TeX and all) and drawn by KaTeX; a researcher searches for what
they read: `15%` must find `15\\%` and `$15\\%$`, and `frac` must not find every `\\frac`. So
each problem also keeps `shown_text`, derived here when it is written (`Problem.save`, and the
problem manager's `bulk_create`), which the search reads through a trigram index on
PostgreSQL (docs/benchmarks.md, "Pages at PRM800K size").

The text parts come from the page's own splitter (`labeling.mathtext.segments`, TeX escapes
already made plain); in a math part, a symbol command becomes the character KaTeX draws
(`\\pi` π, `\\le` ≤, `\\%` %), the text of `\\text{…}` stays, and every other command,
brace, sub- and superscript mark goes: `\\frac{3}{4}` reads "34", as close to "3 over 4" as a
line of text gets. Linear in the text: one splitter pass and two RE2 substitutions.
"""

from core import patterns
from labeling.mathtext import segments

# What KaTeX draws for the commonest symbol commands of MATH problems and solutions.
SYMBOLS = {
    "pi": "π",
    "theta": "θ",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "Delta": "Δ",
    "epsilon": "ϵ",
    "varepsilon": "ε",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "Sigma": "Σ",
    "phi": "ϕ",
    "omega": "ω",
    "Omega": "Ω",
    "times": "×",
    "cdot": "⋅",
    "div": "÷",
    "pm": "±",
    "mp": "∓",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "approx": "≈",
    "equiv": "≡",
    "infty": "∞",
    "circ": "∘",
    "degree": "°",
    "angle": "∠",
    "triangle": "△",
    "perp": "⊥",
    "parallel": "∥",
    "cdots": "⋯",
    "ldots": "…",
    "dots": "…",
    "to": "→",
    "rightarrow": "→",
    "Rightarrow": "⇒",
    "implies": "⟹",
    "in": "∈",
    "cup": "∪",
    "cap": "∩",
    "sqrt": "√",
    "sum": "∑",
    "prod": "∏",
    "int": "∫",
}
# A command (a backslash and letters) or an escaped character (a backslash and one more).
_COMMAND = patterns.compile(r"\\([A-Za-z]+|.)", patterns.DOTALL)
_SPACES = patterns.compile(r"\s+")
# An environment's markers draw nothing of their names: `\begin{align}` is not the word.
_ENVIRONMENT_MARK = patterns.compile(r"\\(?:begin|end)\{[A-Za-z]*\*?\}")
# Characters that only lay out math: groups, scripts, alignment marks.
_LAYOUT = str.maketrans({"{": None, "}": None, "^": None, "_": None, "&": " ", "~": " "})
# Escaped characters KaTeX draws as themselves; the spacing commands draw a space.
_HELD = {"{": "\ue000", "}": "\ue001", "_": "\ue002", "&": "\ue003"}
_ESCAPED = {"%": "%", "$": "$", "#": "#", "\\": " ", **_HELD}
_RELEASED = str.maketrans({held: char for char, held in _HELD.items()})


def _command(match: patterns.Match) -> str:
    name = match[1]
    if name in SYMBOLS:
        return SYMBOLS[name]
    if len(name) == 1 and not name.isalpha():
        return _ESCAPED.get(name, " ")
    return " "  # \frac, \text, \left …: what they draw is their arguments, kept


def _math(tex: str) -> str:
    # Escaped braces are drawn, bare ones only group: the drawn ones are held aside (as
    # private-use characters) while the layout characters go.
    plain = _COMMAND.sub(_command, _ENVIRONMENT_MARK.sub(" ", tex)).translate(_LAYOUT)
    return plain.translate(_RELEASED)


def shown_text(text: str) -> str:
    """`text` as a page shows it, in plain words and symbols, spaces collapsed."""
    parts = [_math(part.text) if part.math else part.text for part in segments(text)]
    return _SPACES.sub(" ", "".join(parts)).strip()
