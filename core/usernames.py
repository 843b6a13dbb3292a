"""When two usernames are the same person's name to a reader: the one definition.

Django compares usernames code point by code point, so Latin "admin" and "аdmin" (a Cyrillic
а), "ＡＤＭＩＮ" (full width) and "Admin" are four accounts that render alike: a labeler or an
admin can be impersonated on every page that shows a name. The identity of a username is its
skeleton (Unicode UTS #39, confusables.txt, through the `confusable-homoglyphs` data): NFKC,
case folded, each character replaced by the prototype it is confusable with, until nothing
changes. Two usernames with one skeleton are one name; labeling.services.usernames refuses the
second and stores the skeleton under a unique constraint.
"""

import functools
import unicodedata
from collections import defaultdict

# The package ships its data wrapped in LEFT-TO-RIGHT MARKs around right-to-left characters.
_LRM = "\u200e"


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character (or sequence) to its prototype.

    The data lists both directions of every source -> prototype line of confusables.txt, so
    each group is a star: the prototype is the member confusable with all the others; in a
    group of two the longer one (a sequence such as "rn" for "m"), else the smaller.
    """
    from confusable_homoglyphs.confusables import confusables_data

    neighbours: dict[str, set[str]] = defaultdict(set)
    for key, entries in confusables_data.items():
        for entry in entries:
            a, b = key.replace(_LRM, ""), entry["c"].replace(_LRM, "")
            neighbours[a].add(b)
            neighbours[b].add(a)
    mapping: dict[str, str] = {}
    for node, others in neighbours.items():
        group = {node, *others}
        hub = max(group, key=lambda m: (len(neighbours[m]), len(m), [-ord(ch) for ch in m]))
        if len(node) == 1 and node != hub:
            mapping[node] = hub
    return mapping


def _visible(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    # Invisible format characters (zero width joiners, marks of direction) change no glyph.
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def username_skeleton(username: str) -> str:
    """The identity of `username`: equal skeletons, the same name to a reader."""
    prototypes = _prototypes()
    # Case folded first: "ADMIN" is "admin" (its "I" would otherwise become the prototype "l"
    # and miss "i"); the price is that "IOI" and "l0l" stay two names.
    current = _visible(username).casefold()
    for _ in range(4):
        mapped = _visible("".join(prototypes.get(ch, ch) for ch in current).casefold())
        if mapped == current:
            break
        current = mapped
    return current
