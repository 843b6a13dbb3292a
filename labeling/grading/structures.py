"""Stage 2b: compound answers read into parts: tuples, vectors, sets (and lists, read as sets),
intervals and unions of intervals, inequalities as intervals, matrices, numbers in a named
base, and powers too large to compute (compared by their smallest base and exponent).
"""

import math
from fractions import Fraction
from itertools import pairwise, product

import sympy

from core import patterns
from labeling.grading.normalise import IN_SET, squash
from labeling.grading.numbers import (
    DOUBLE_SUPERSCRIPT,
    MAX_DIGITS,
    NESTING_LIMIT,
    evaluate,
    exact_number,
)
from labeling.grading.vocabulary import DIGIT as D
from labeling.grading.vocabulary import SPACE as S
from labeling.grading.vocabulary import is_word

# `D` and `S` are Python's `\d` and `\s` (see `vocabulary`). RE2 has no lookaround and no
# backreference: where a pattern had one, its test is made on the match.

# `1210_5`, `1210_{5}`, `1210_{(5)}`, `(1210)_5`, `1210_{\text{five}}`.
_BASED = patterns.compile(rf"\(?([0-9A-Z]+)\)?_\{{?\(?({D}+|[a-z]+)\)?\}}?")
_BASE_NAMES = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16,
}  # fmt: skip

# The environment's name, at both ends (`_matrix` compares them).
_MATRIX = patterns.compile(r"\\begin\{([pbB]?matrix)\}(.*)\\end\{([pbB]?matrix)\}", patterns.DOTALL)

# `2\begin{pmatrix}1\\-3\end{pmatrix}`: a scalar times a vector. The first environment that
# ends the text under its own name: one alternative a name.
_SCALED_MATRIX = patterns.compile(
    rf"(.+?){S}*(?:\\cdot|\\times)?{S}*("
    + "|".join(
        rf"\\begin\{{{name}\}}.*\\end\{{{name}\}}"
        for name in ("matrix", "pmatrix", "bmatrix", "Bmatrix")
    )
    + ")",
    patterns.DOTALL,
)

_INEQUALITY_OPS = {
    "<": "<",
    ">": ">",
    "\\lt": "<",
    "\\gt": ">",
    "\\le": "<=",
    "\\leq": "<=",
    "\\leqslant": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\geqslant": ">=",
    "<=": "<=",
    ">=": ">=",
}
_OP = r"(<=|>=|<|>|\\leqslant|\\geqslant|\\leq|\\geq|\\le|\\ge|\\lt|\\gt)"
_BOUND = r"([^<>=]+?)"
_ONE_SIDED = patterns.compile(rf"([a-zA-Z]){S}*{_OP}{S}*{_BOUND}")
_ONE_SIDED_REVERSED = patterns.compile(rf"{_BOUND}{S}*{_OP}{S}*([a-zA-Z])")
_TWO_SIDED = patterns.compile(rf"{_BOUND}{S}*{_OP}{S}*([a-zA-Z]){S}*{_OP}{S}*{_BOUND}")
# `or` and `and` are words: RE2's `\b` places them by ASCII letters, and `_unions` checks the
# characters around them as Python's `\b` does (no letter, digit or `_` of any script). The
# spaces after a separator are `_unions`' too: a word refused must not take them along.
_OR = patterns.compile(rf"{S}*(?:\\text\{{{S}*(?:or|and){S}*\}}|\b(or|and)\b|\\cup|\\vee)")
# The same set of reals, written other ways: {x | x > 3}, R \ {4}, x != 4, all real numbers.
_SET_BUILDER = patterns.compile(
    rf"\\\{{{S}*([a-zA-Z]){S}*(?:\\in{S}*\\mathbb\{{?R\}}?{S}*)?(?:\\mid|\\vert|\||:){S}*(.+)\\\}}",
    patterns.DOTALL,
)
_REALS = patterns.compile(
    rf"\\mathbb\{{?R\}}?|\\R|all real numbers|all reals|\(-\\infty,{S}*\\infty\)"
)
# `x \ne 4`: `\ne` or `\neq` and no other letter after it, so the first character of what
# follows is a space (alternative one) or no letter (two).
_NOT_EQUAL = patterns.compile(rf"([a-zA-Z]){S}*\\neq?(?:{S}+(.+)|([^a-zA-Z\n].*))")
_WITHOUT = patterns.compile(rf"(?:\\mathbb\{{?R\}}?|\\R){S}*(?:\\setminus|\\backslash|-){S}*(.+)")
_INTERVAL = patterns.compile(r"([(\[])([^,]+),([^,]+)([)\]])")
# Values whose evaluation never ends: power towers, huge powers, huge factorials.
_POWER = patterns.compile(rf"({D}+)\^(?:\{{({D}+)\}}|({D}))")
_TOWER = patterns.compile(rf"({D}+|\(.+\))\^(?:\{{(.+)\}}|({D}))", patterns.DOTALL)
_FACTORIAL = patterns.compile(rf"({D}+)\)?{S}*!")
_LEADING_PLUS = patterns.compile(rf"^{S}*\+")
_COMMAND = patterns.compile(r"\\[a-zA-Z]+")
_BRACES = patterns.compile(r"[{}]")


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    parts, depth, current = [], 0, []
    i = 0
    while i < len(text):
        if text.startswith("\\{", i) or text.startswith("\\}", i):
            depth += 1 if text[i + 1] == "{" else -1
            current.append(text[i : i + 2])
            i += 2
            continue
        char = text[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current).strip())
    return parts


def compound(text: str) -> tuple[str, list[str]] | None:
    """(kind, items) of a tuple, interval, set, list or matrix; None for a single value.

    Kinds with the same brackets compare entry by entry; "set" and "list" ignore order.
    """
    if _plus_minus(text):
        # `\pm 2, \pm 3` is four values, `(\pm 1, 0)` two points.
        items = _split_top_level(text, ";" if ";" in text else ",")
        values = [value for item in items for value in _signs(item)]
        if len(values) > 1:
            return "set", values
    if match := _SCALED_MATRIX.fullmatch(text):
        scalar, matrix = match[1].strip(), match[2]
        if scalar and not scalar.endswith(("=", "\\")):
            kind, items = compound(matrix) or ("", [])
            return (kind, [_scaled(scalar, item) for item in items]) if kind else None
    if (match := _MATRIX.fullmatch(text)) and match[1] == match[3]:
        rows = [_split_top_level(row, "&") for row in match[2].split("\\\\") if row.strip()]
        return f"matrix{len(rows)}x{len(rows[0]) if rows else 0}", [e for r in rows for e in r]
    if text.startswith("\\{") and text.endswith("\\}"):
        return "set", _split_top_level(text[2:-2])
    if len(text) >= 2 and text[0] in "([" and text[-1] in ")]":
        inner = text[1:-1]
        if _balanced(inner):
            items = _split_top_level(inner)
            if len(items) > 1:
                return text[0] + text[-1], items
    for separator in (";", ","):
        items = _split_top_level(text, separator)
        if len(items) > 1:
            return "set", items
    union = _unions(text)
    if len(union) > 1 and all(_balanced(part) for part in union):
        return "set", [part for part in union if part]
    return None


def _unions(text: str) -> list[str]:
    """`text` split at each `or`, `and`, `\\cup` or `\\vee` and the spaces around it."""
    parts, end = [], 0
    for match in _OR.finditer(text):
        if match[1] is not None:
            start, stop = match.span(1)
            if is_word(text[start - 1 : start] or " ") or is_word(text[stop : stop + 1] or " "):
                continue  # inside a word
        # The spaces before it may be the last separator's, which took them all.
        parts.append(text[end : max(match.start(), end)])
        end = match.end()
        while end < len(text) and text[end].isspace():
            end += 1
    return [*parts, text[end:]]


def _plus_minus(text: str) -> list[patterns.Match]:
    """The `\\pm` and `\\mp` commands in `text` (`\\pmod` is neither)."""
    return [match for match in _PLUS_MINUS.finditer(text) if not match[1]]


def _signs(item: str) -> list[str]:
    """The values of `item` with its signs chosen: `1 \\pm \\sqrt2` is two, `a \\pm b \\mp c`
    two (the signs go together), `\\pm 1 \\pm \\sqrt2` and `(\\pm 1, \\pm 1)` four (each sign
    on its own, as they are read)."""
    matches = _plus_minus(item)
    signs = [match[0] for match in matches]
    # The text around the signs: `parts[k]` follows the k-th sign.
    ends = [0, *(match.end() for match in matches)]
    starts = [*(match.start() for match in matches), len(item)]
    parts = [item[end:start] for end, start in zip(ends, starts, strict=True)]
    if "\\mp" in signs or signs.count("\\pm") == 1:
        plus = parts[0] + "".join(
            ("+" if sign == "\\pm" else "-") + part
            for sign, part in zip(signs, parts[1:], strict=True)
        )
        minus = parts[0] + "".join(
            ("-" if sign == "\\pm" else "+") + part
            for sign, part in zip(signs, parts[1:], strict=True)
        )
        values = [plus, minus]
    elif 1 < len(signs) <= 4:
        values = [
            parts[0] + "".join(sign + part for sign, part in zip(signs, parts[1:], strict=True))
            for signs in product("+-", repeat=len(parts) - 1)
        ]
    else:
        return [item]
    return [_LEADING_PLUS.sub("", value) for value in values]


def _scaled(scalar: str, entry: str) -> str:
    scalar = {"-": "-1", "+": "1"}.get(scalar, scalar)
    factor, value = exact_number(scalar), exact_number(entry)
    if factor is not None and value is not None:
        product = factor * value
        return str(product.numerator) if product.denominator == 1 else str(product)
    return f"({scalar})({entry})"


def _balanced(text: str, *, max_depth: int | None = None) -> bool:
    depth = 0
    for char in text:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth < 0 or max_depth is not None and depth > max_depth:
            return False
    return depth == 0


def malformed(text: str) -> bool:
    """Unbalanced brackets, brackets nested deeper than any answer's, or a double superscript
    (`2^2^2`, a LaTeX error): text that cannot be an answer."""
    return (
        not _balanced(text, max_depth=NESTING_LIMIT) or DOUBLE_SUPERSCRIPT.search(text) is not None
    )


def as_set(text: str) -> str:
    """A set of reals as intervals: `{x | x > 3}`, `x > 3` as `(3,\\infty)`, `x \\neq 4` and
    `\\mathbb{R} \\setminus \\{4\\}` as `(-\\infty,4)\\cup(4,\\infty)`; anything else unchanged."""
    if match := _SET_BUILDER.fullmatch(text):
        text = IN_SET.sub("", match[2].strip())
    if _REALS.fullmatch(text):
        return "(-\\infty,\\infty)"
    if match := _NOT_EQUAL.fullmatch(text):
        excluded = match[2] if match[2] is not None else match[3]
        return _without(f"\\{{{excluded.strip()}\\}}") or text
    if match := _WITHOUT.fullmatch(text):
        return _without(match[1].strip()) or text
    return _as_interval(text)


def _without(removed: str) -> str | None:
    """The reals less `removed` (points `\\{a, b\\}` or one interval) as intervals."""
    if removed.startswith("\\{") and removed.endswith("\\}"):
        points = _split_top_level(removed[2:-2])
        values = [exact_number(point) for point in points]
        if len(points) > 1:
            if None in values:
                return None
            points = [p for _, p in sorted(zip(values, points, strict=True))]
        bounds = ["-\\infty", *points, "\\infty"]
        return "\\cup".join(_interval(a, False, b, False) for a, b in pairwise(bounds))
    if match := _INTERVAL.fullmatch(removed):
        opening, low, high, closing = match.groups()
        infinity = "\\infty"
        below = _interval(f"-{infinity}", False, low, opening == "(")
        return f"{below}\\cup{_interval(high, closing == ')', infinity, False)}"
    return None


_LETTER = patterns.compile(r"[a-zA-Z]")
# `\pm` and `\mp` as commands: `\pmod` is neither. A letter after the name is taken along
# (RE2 has no lookahead), and a match with one is no sign (`_plus_minus`).
_PLUS_MINUS = patterns.compile(r"\\(?:pm|mp)([a-zA-Z]?)")


def _as_interval(text: str) -> str:
    """`x > 3` as `(3,\\infty)`, `-2 \\le x < 5` as `[-2,5)`; anything else unchanged. A
    bound with an unknown in it (`a < b`) is a relation between unknowns, kept as written."""
    if len(_LETTER.findall(_COMMAND.sub("", text))) > 1:
        return text
    if match := _TWO_SIDED.fullmatch(text):
        low, first, _, second, high = match.groups()
        first, second = _INEQUALITY_OPS[first], _INEQUALITY_OPS[second]
        if first[0] == second[0] == "<":
            return _interval(low, first == "<=", high, second == "<=")
        if first[0] == second[0] == ">":
            return _interval(high, second == ">=", low, first == ">=")
        return text
    if match := _ONE_SIDED.fullmatch(text):
        _, op, bound = match.groups()
        op = _INEQUALITY_OPS[op]
    elif match := _ONE_SIDED_REVERSED.fullmatch(text):
        bound, op, _ = match.groups()
        op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[_INEQUALITY_OPS[op]]
    else:
        return text
    if op[0] == ">":
        return _interval(bound, op == ">=", "\\infty", False)
    return _interval("-\\infty", False, bound, op == "<=")


def _interval(low: str, low_closed: bool, high: str, high_closed: bool) -> str:
    return f"{'[' if low_closed else '('}{low.strip()},{high.strip()}{']' if high_closed else ')'}"


_Bound = tuple[Fraction | float, bool]


def union(text: str) -> tuple[tuple[_Bound, _Bound], ...] | None:
    """A union of intervals with numeric ends, merged and sorted (`(-\\infty,2]\\cup(2,\\infty)`
    is all reals); None for anything else (a tuple, non-numeric ends)."""
    intervals = []
    for part in text.split("\\cup"):
        part = part.strip()
        if part.startswith("\\{") and part.endswith("\\}"):
            value = exact_number(part[2:-2])
            if value is None:
                return None
            intervals.append(((value, True), (value, True)))
            continue
        match = _INTERVAL.fullmatch(part)
        if match is None:
            return None
        opening, low, high, closing = match.groups()
        low_value, high_value = _end(low), _end(high)
        if low_value is None or high_value is None or low_value > high_value:
            return None
        if low_value == high_value and not (opening == "[" and closing == "]"):
            return None
        low_closed = opening == "[" and not isinstance(low_value, float)  # never at infinity
        high_closed = closing == "]" and not isinstance(high_value, float)
        intervals.append(((low_value, low_closed), (high_value, high_closed)))
    intervals.sort(key=lambda i: (i[0][0], not i[0][1]))
    merged = [intervals[0]]
    for low, high in intervals[1:]:
        last_low, last_high = merged[-1]
        if low[0] < last_high[0] or low[0] == last_high[0] and (low[1] or last_high[1]):
            if high[0] > last_high[0] or high[0] == last_high[0] and high[1]:
                last_high = high
            merged[-1] = (last_low, last_high)
        else:
            merged.append((low, high))
    return tuple(merged)


def _end(text: str) -> Fraction | float | None:
    text = text.strip()
    if text in ("\\infty", "+\\infty"):
        return math.inf
    if text == "-\\infty":
        return -math.inf
    return exact_number(text)


def in_base(text: str) -> tuple[str, int] | None:
    """(digits, base) of a number written in a base: `1210_5`, `1210_{(5)}`, `(1210)_5`."""
    match = _BASED.fullmatch(text)
    if match is None:
        return None
    base = int(match[2]) if match[2].isdigit() else _BASE_NAMES.get(match[2])
    return (match[1], base) if base and 2 <= base <= 36 else None


def unending(text: str) -> str | None:
    """`text` with its small powers worked out, when evaluating it could run for ever
    (9^{9^{9}}, 1000000!); None when it is safe. Such answers are compared as written, never
    evaluated, as the PRM800K grader does."""
    huge = False

    def power(match: patterns.Match) -> str:
        nonlocal huge
        base, exponent = int(match[1]), match[2] or match[3]
        if len(exponent) > 9 or base > 1 and int(exponent) * math.log10(base) > MAX_DIGITS:
            huge = True
            return match[0]
        return str(base ** int(exponent))

    # Towers are worked from the top: 3^{3^{3}} is 3^{27}, fine; 9^{9^{9}} is 9^{387420489}.
    for _ in range(8):
        reduced = _POWER.sub(power, text)
        if reduced == text:
            break
        text = reduced
    else:
        huge = True
    huge = huge or any(len(n) > 4 or int(n) > 3000 for n in _FACTORIAL.findall(text))
    return squash(_BRACES.sub("", text)) if huge else None


def tower(text: str) -> tuple[int, int] | None:
    """A power too large to compute as (root, exponent) with the smallest root: 4^{10^{10}} and
    2^{2\\cdot 10^{10}} are both (2, 2*10^10). None when the exponent itself is too large."""
    match = _TOWER.fullmatch(text)
    if match is None or match[2] is not None and not _balanced(match[2]):
        return None
    base, exponent = evaluate(match[1]), evaluate(match[2] or match[3])
    if base is None or exponent is None or base.denominator != 1 or exponent.denominator != 1:
        return None
    base, exponent = int(base), int(exponent)
    if base < 2 or exponent < 1 or base.bit_length() > 256:
        return None
    for k in range(base.bit_length(), 1, -1):
        root, exact = sympy.integer_nthroot(base, k)
        if exact:
            return int(root), k * exponent
    return base, exponent
