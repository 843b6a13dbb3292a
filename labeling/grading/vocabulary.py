"""The grader's vocabulary: every token an answer may hold for the grader to call it equal or
not equal.

math-verify extracts the last expression it can parse from a text and ignores the rest, so
`\\sin 30^\\circ`, `x \\approx 3` or `5 \\pmod 7` would be graded on a fragment. Before an
answer reaches it, `unread` walks the whole normalised text; a token outside the vocabulary
(a relation symbol other than `=`, `<`, `>`, `\\le`, `\\ge`, `\\ne`; an unknown command; a
word; a leftover Unicode symbol) makes the verdict unsure. Adding a form to the grader means
adding it here too, on purpose.
"""

from core import patterns

# Python's `\s`, `\d` and `\w` are Unicode; RE2's are ASCII. The grader's patterns spell
# Python's out, so that an answer with other scripts' digits (`٣`) or spaces (U+2028, which
# NFKC keeps) reads as it always has: the same characters for every code point Python's
# unicodedata assigns. Inside a class: `[{SPACE_CHARS}\-]`.
SPACE_CHARS = r"\t-\r\x1c-\x1f\x85\p{Z}"
WORD_CHARS = r"\p{L}\p{N}_"
SPACE = rf"[{SPACE_CHARS}]"
DIGIT = r"\p{Nd}"
WORD = rf"[{WORD_CHARS}]"
# Under IGNORECASE, Python's engine also takes the Turkish `ı` and `İ` for `i`, and RE2 does
# not: text goes through this before a case-blind pattern. It keeps the length, so a match's
# spans index the text as written.
AS_I = str.maketrans("ıİ", "ii")


# English's closed word classes (negations, pronouns, auxiliaries, prepositions, conjunctions,
# determiners, degree words): a word after a number is read as the noun that is counted
# (`5 students`) only when none of its words is one of these, which change or qualify the value
# (`5 not`, `5 more`, `5 at most`, `5 is wrong`). Nouns are an open class; these are not.
FUNCTION_WORDS = frozenset(
    """
    not no never none nor neither either yes
    is are was were be been being am isn aren can cannot could would should will shall may
    might must do does did done has have had
    it its this that these those there here they them their he she we you his her our your
    and or but if then so because since than as also only just even still yet thus hence
    therefore else otherwise
    of to in on at by for from with without into onto over under above below between among
    about around after before until via within
    more less fewer most least much many few several some any all each every both other
    exactly approximately nearly almost roughly about around up down off out away
    too very quite rather extra plus minus times
    what which who whom whose when where why how whether
    true false wrong right correct incorrect possible impossible
    """.split()  # noqa: SIM905 - read as word lists, one class per line
)


def is_word(char: str) -> bool:
    """Whether `char` is in Python's `\\w`: RE2 places `\\b` by ASCII letters alone."""
    return char.isalnum() or char == "_"


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
_TOKEN = patterns.compile(
    r"\\(?:begin|end)\{[a-zA-Z]*matrix\*?\}"  # matrix environments
    r"|\\[a-zA-Z]+"  # commands
    r"|\\[{}|\\]"  # escaped braces, `\|`, a row break `\\`
    rf"|{DIGIT}+(?:\.{DIGIT}+)?|\.{DIGIT}+"
    r"|[a-zA-Z]+"
    r"|[-+*/^_()\[\]{},=<>!|'&. ]"
)


def unread(text: str) -> str | None:
    """The first part of `text` outside the vocabulary, or None when all of it is in it."""
    # One scan, not a match per position: RE2's binding encodes the whole text on every call.
    # Tokens follow each other; the first gap between them is the part not read.
    position = 0
    for match in _TOKEN.finditer(text):
        if match.start() != position:
            break
        token = match[0]
        if token.startswith("\\") and token[1:].isalpha() and token[1:] not in _COMMANDS:
            return token
        if token.isalpha() and len(token) > 2 and token not in _FUNCTION_WORDS:
            return token
        position = match.end()
    return text[position : position + 12] if position < len(text) else None
