"""The one owner of regular expressions: every pattern in stepwise is compiled here.

Text that people and models write is hostile input. A generator's reply of 100 kB built so a
backtracking engine tries every way to split it holds a web thread or a worker for minutes,
and one careless `\\s*.*\\s*` in a new reader is enough. So no module imports `re`: each one
compiles its patterns through `compile()`, once, where the module is defined, and they run on
RE2, whose time is linear in the text whatever the pattern (no backtracking, no lookaround,
no backreference).

A pattern RE2 cannot express says so: `compile(pattern, backtracking="why")` runs it on
Python's engine. `core/tests/test_patterns.py` holds both kinds to account: it sweeps the
tree for any regular expression built another way or inside a function, refuses a
`backtracking` pattern that RE2 could run, and times every pattern on adversarial strings of
100 kB built from the pattern's own characters, so the next slow one fails a test before it
reaches a worker.

RE2's classes are ASCII: `\\d` is `[0-9]`, `\\w` is `[0-9A-Za-z_]`, `\\s` is `[\\t\\n\\f\\r ]`
and `$` is the end of the text (Python's also matches before a final newline). Where other
scripts matter, say so: `\\p{L}`, `\\p{Nd}`, `\\p{Z}`.
"""

import re
import sys
from dataclasses import dataclass
from typing import Any

import re2

IGNORECASE = re.IGNORECASE
MULTILINE = re.MULTILINE
DOTALL = re.DOTALL
escape = re.escape
# What a search returns: `re.Match` or RE2's match, with the same methods.
Match = Any

_INLINE = {IGNORECASE: "i", MULTILINE: "m", DOTALL: "s"}

# Big alternations (a unit vocabulary, a list of code points) need more than RE2's 8 MiB.
_RE2_MAX_MEM = 64 << 20


@dataclass(frozen=True)
class Registered:
    """A compiled pattern and where it was defined, for the sweep."""

    pattern: str
    flags: int
    backtracking: str  # why Python's engine runs it; "" on RE2
    module: str
    compiled: object


REGISTERED: list[Registered] = []


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False
    return options


def on_re2(pattern: str, flags: int = 0):
    """The pattern compiled by RE2, or `re2.error` when RE2 cannot express it."""
    unknown = flags & ~sum(_INLINE)
    if unknown:
        raise ValueError(f"flags RE2 does not take: {re.RegexFlag(unknown)!r}")
    inline = "".join(letter for flag, letter in _INLINE.items() if flags & flag)
    return re2.compile(f"(?{inline}){pattern}" if inline else pattern, _re2_options())


def compile(pattern: str, flags: int = 0, *, backtracking: str = ""):
    """Compile `pattern` with `flags` (IGNORECASE, MULTILINE, DOTALL) for untrusted text.

    On RE2 unless `backtracking` gives the reason it needs Python's engine (a lookaround or a
    backreference RE2 has no way to say). Call it at module level, never per call: the sweep
    finds every pattern by importing the modules. The result has `re.Pattern`'s methods.
    """
    caller = sys._getframe(1).f_globals.get("__name__", "?")
    compiled = re.compile(pattern, flags) if backtracking else on_re2(pattern, flags)
    REGISTERED.append(Registered(pattern, flags, backtracking, caller, compiled))
    return compiled
