"""The grader's vocabulary: every token an answer may hold for the grader to call it equal or
not equal.

math-verify extracts the last expression it can parse from a text and ignores the rest, so
`\\sin 30^\\circ`, `x \\approx 3` or `5 \\pmod 7` would be graded on a fragment. Before an
answer reaches it, `unread` walks the whole normalised text; a token outside the vocabulary
(a relation symbol other than `=`, `<`, `>`, `\\le`, `\\ge`, `\\ne`; an unknown command; a
word; a leftover Unicode symbol) makes the verdict unsure. Adding a form to the grader means
adding it here too, on purpose.
"""

import re

_GREEK = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "varpi",
    "rho",
    "varrho",
    "sigma",
    "varsigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
]
_COMMANDS = frozenset(
    {
        # numbers, roots, fractions, binomials
        "frac",
        "sqrt",
        "binom",
        "choose",
        "infty",
        "pi",
        "e",
        # operations and the relations the grader compares
        "cdot",
        "times",
        "div",
        "pm",
        "mp",
        "le",
        "ge",
        "leq",
        "geq",
        "lt",
        "gt",
        "ne",
        "neq",
        "leqslant",
        "geqslant",
        # functions
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "arcsin",
        "arccos",
        "arctan",
        "sinh",
        "cosh",
        "tanh",
        "log",
        "ln",
        "lg",
        "exp",
        "lfloor",
        "rfloor",
        "lceil",
        "rceil",
        # sets, intervals, matrices
        "cup",
        "cap",
        "emptyset",
        "mathbb",
        "begin",
        "end",
    }  # fmt: skip
    | set(_GREEK)
    | {letter.capitalize() for letter in _GREEK}
)
# Letter runs of three or more are words unless they are functions written without `\`.
_FUNCTION_WORDS = frozenset({"sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp"})
_TOKEN = re.compile(
    r"\\(?:begin|end)\{[a-zA-Z]*matrix\*?\}"  # matrix environments
    r"|\\[a-zA-Z]+"  # commands
    r"|\\[{}|\\]"  # escaped braces, `\|`, a row break `\\`
    r"|\d+(?:\.\d+)?|\.\d+"
    r"|[a-zA-Z]+"
    r"|[-+*/^_()\[\]{},=<>!|'&. ]"
)


def unread(text: str) -> str | None:
    """The first part of `text` outside the vocabulary, or None when all of it is in it."""
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            return text[position : position + 12]
        token = match[0]
        if token.startswith("\\") and token[1:].isalpha() and token[1:] not in _COMMANDS:
            return token
        if token.isalpha() and len(token) > 2 and token not in _FUNCTION_WORDS:
            return token
        position = match.end()
    return None
