"""The grader's three verdicts, and how the verdicts of an answer's parts combine."""

import enum
from collections.abc import Iterable


class Verdict(enum.Enum):
    """Equal and not equal are claims the grader can back; unsure is everything else.

    A verdict has no truth value on purpose: `if verdict:` would read unsure as one of the
    other two, which is the mistake the three verdicts exist to stop.
    """

    EQUAL = "equal"
    NOT_EQUAL = "not equal"
    UNSURE = "unsure"

    @classmethod
    def of(cls, same: bool) -> "Verdict":
        return cls.EQUAL if same else cls.NOT_EQUAL

    def __bool__(self) -> bool:
        raise TypeError("a Verdict is equal, not equal or unsure; compare it to one of them")


def every(verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict of parts that must all be equal: not equal as soon as one part is, equal
    when every part is, unsure otherwise."""
    unsure = False
    for verdict in verdicts:
        if verdict is Verdict.NOT_EQUAL:
            return verdict
        unsure = unsure or verdict is Verdict.UNSURE
    return Verdict.UNSURE if unsure else Verdict.EQUAL
