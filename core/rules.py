"""The workbench's labeling rules, written once: what a label's ratings allow next.

A label rates the solution's steps in order and stops at the first -1; the alternatives offered
for that step (PRM800K phase 2) are rated then, in order, before the label can end. Everything
that applies these rules reads them here: `rate_step` refuses what `refusal` refuses and drops
what `dropped` drops, `submit_session` asks `submit_refusal`, `session_state` shows what
`Progress` says, and the page and API clients get `next_actions`: for every item whether it
may be rated now (or why not), and which item the rating keys go to after each rating. The
page follows that answer and applies no rule of its own.

Pure: no database and no Django, so a caller builds a `Progress` from rows it already holds.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.prm800k import RATINGS

FOUND_ERROR, SOLUTION = "found_error", "solution"

Item = tuple[int, int]  # (step index, completion): completion 0 is the step, 1..n its alternatives


def item_key(step: int, completion: int = 0) -> str:
    """How an item is named in the page and in `next_actions`: "s3", or "s3c1" for its first
    alternative."""
    return f"s{step}c{completion}" if completion else f"s{step}"


def offered_per_step(alternatives: Mapping | None) -> dict[int, int]:
    """How many alternatives each step offers, from `Solution.alternatives`."""
    return {
        int(step): len(texts)
        for step, texts in (alternatives or {}).items()
        if str(step).isdigit() and isinstance(texts, list) and texts
    }


@dataclass(slots=True)
class Progress:
    """A label as the rules read it. (Not frozen: next_actions builds a few per item on every
    answer, and a frozen dataclass is slower to build.)"""

    total_steps: int
    # Ratings of the solution's own steps, from step 0 on (the steps rated so far).
    own: tuple[int | None, ...] = ()
    # How many alternatives each step offers (steps offering none left out).
    offered: Mapping[int, int] = field(default_factory=dict)
    # How many alternatives of the first -1 step are rated (they are rated in order).
    alternatives_done: int = 0

    @property
    def error_step(self) -> int | None:
        """The first step rated -1: the label stops there."""
        return self.own.index(-1) if -1 in self.own else None

    def rating_of(self, step: int) -> int | None:
        return self.own[step] if step < len(self.own) else None

    def current(self) -> Item | None:
        """The item to rate next; None when nothing is left to rate."""
        error = self.error_step
        if error is None:
            return (len(self.own), 0) if len(self.own) < self.total_steps else None
        if self.alternatives_done < self.offered.get(error, 0):
            return (error, self.alternatives_done + 1)
        return None

    def _steps_shown(self) -> int:
        if self.error_step is not None:
            return len(self.own)
        return min(len(self.own) + 1, self.total_steps)

    def _alternatives_shown(self) -> int:
        """Of the first -1 step: every one rated, then the next."""
        error = self.error_step
        return 0 if error is None else min(self.alternatives_done + 1, self.offered.get(error, 0))

    def shown(self) -> list[Item]:
        """The items the page shows, in its order: every rated step, then the one to rate next
        (none after a -1), the -1 step followed by its alternatives rated so far and the next."""
        error, alternatives = self.error_step, self._alternatives_shown()
        items: list[Item] = []
        for step in range(self._steps_shown()):
            items.append((step, 0))
            if step == error:
                items.extend((step, c) for c in range(1, alternatives + 1))
        return items

    def last_shown(self) -> Item | None:
        """`shown()[-1]`, without the list (next_actions asks it for every item)."""
        steps = self._steps_shown()
        if not steps:
            return None
        last = steps - 1
        alternatives = self._alternatives_shown() if last == self.error_step else 0
        return (last, alternatives)

    def active(self) -> Item | None:
        """The item a rating key rates now: the one to rate next, else the last one shown;
        none once a -1 has ended the label with nothing left to rate. A key typed ahead past
        that -1 must not overwrite it: changing it is a deliberate act (Backspace to it, or a
        click on its buttons)."""
        current = self.current()
        if current is not None:
            return current
        last = self.last_shown()
        if last is not None and last == (self.error_step, 0):
            return None
        return last

    def outcome(self) -> str | None:
        """The finish reason that can be submitted now (found_error or solution), if any."""
        for reason in (FOUND_ERROR, SOLUTION):
            if submit_refusal(self, finish_reason=reason) is None:
                return reason
        return None


def refusal(progress: Progress, *, step_index: int, completion_index: int = 0) -> str | None:
    """Why this item may not be rated now; None: it may."""
    step, total = step_index, progress.total_steps
    if not 0 <= step < total:
        return f"There is no step {step + 1}: the solution has {total} steps."
    error = progress.error_step
    if error is not None and error < step:
        return (
            f"Step {step + 1} is not reached: step {error + 1} is rated -1, and a label stops "
            "at its first -1."
        )
    if step > len(progress.own):
        return f"Step {step + 1} is not reached yet: rate the steps before it first."
    if not completion_index:
        return None
    if not 1 <= completion_index <= progress.offered.get(step, 0):
        return f"Step {step + 1} has no alternative {completion_index}."
    if progress.rating_of(step) != -1:
        return f"Alternatives of step {step + 1} are rated after a -1 on that step."
    if completion_index > progress.alternatives_done + 1:
        return f"Alternative {completion_index} is not reached yet."
    return None


@dataclass(frozen=True)
class Dropped:
    """What rating a step takes out of the label."""

    later_steps: bool  # a -1: the label stops there, the steps after it are no longer part of it
    alternatives: bool  # no longer -1: its alternatives, and a step written in its place, go


def dropped(progress: Progress, *, step_index: int, rating: int) -> Dropped:
    before = progress.rating_of(step_index)
    return Dropped(
        later_steps=rating == -1 and len(progress.own) > step_index + 1,
        alternatives=rating != -1 and before == -1,
    )


def after(progress: Progress, *, step_index: int, completion_index: int, rating: int) -> Progress:
    """The label once this rating is stored (what `rate_step` stores)."""
    if completion_index:
        done = max(progress.alternatives_done, completion_index)
        return Progress(progress.total_steps, progress.own, progress.offered, done)
    gone = dropped(progress, step_index=step_index, rating=rating)
    own = progress.own
    own = own[:step_index] + (rating,) + (() if gone.later_steps else own[step_index + 1 :])
    # A new first -1 has no alternative rated yet; one that is no longer -1 loses them.
    new_error = rating == -1 and progress.rating_of(step_index) != -1
    done = 0 if gone.alternatives or new_error else progress.alternatives_done
    # Built directly, not with dataclasses.replace: next_actions builds hundreds per rating.
    return Progress(progress.total_steps, own, progress.offered, done)


def submit_refusal(progress: Progress, *, finish_reason: str) -> str | None:
    """Why the label cannot end with this finish reason now (found_error or solution)."""
    error = progress.error_step
    if finish_reason == FOUND_ERROR:
        if error is None:
            return "No step is rated -1."
        if progress.alternatives_done < progress.offered.get(error, 0):
            return "Rate the alternatives of the -1 step first."
        return None
    if len(progress.own) < progress.total_steps or error is not None:
        return "Rate every step first; a -1 step ends with found_error."
    return None


def _reached(progress: Progress, item: Item) -> Progress:
    """The label as it would be once the labeler reaches `item` (now closed): the steps before
    it rated without a -1, and for an alternative, its step rated -1 and the alternatives before
    it rated. What keys typed ahead lead to from an item the page has not reached yet."""
    step, completion = item
    before = tuple(1 if r == -1 else r for r in progress.own[:step])
    before += (1,) * (step - len(before))
    if not completion:
        return Progress(progress.total_steps, before, progress.offered, 0)
    return Progress(progress.total_steps, (*before, -1), progress.offered, completion - 1)


def next_actions(progress: Progress) -> dict:
    """What the labeler may do next, for the page and API clients alike.

    `items` lists every item of the solution in the page's order: whether it may be rated now
    (`open`, else `reason`), the item before it (`back`, where Backspace goes), and for each
    rating the item the keys go to once it is stored (`then`; for an item not reached yet, once
    it is reached and rated). `active` is the item a rating key rates now (`next`, else the last
    one shown, `last`; none after a -1 that ended the label, and `active_reason` says why);
    `outcome` the finish reason that can be submitted now, else `submit_refusal`
    says why not.
    """
    active = progress.active()
    outcome = progress.outcome()
    error = progress.error_step
    items = []
    for step in range(progress.total_steps):
        for completion in range(progress.offered.get(step, 0) + 1):
            reason = refusal(progress, step_index=step, completion_index=completion)
            base = progress if reason is None else _reached(progress, (step, completion))
            then = {}
            for rating in RATINGS:
                stored = after(base, step_index=step, completion_index=completion, rating=rating)
                following = stored.active()
                then[str(rating)] = item_key(*following) if following else None
            if completion:
                back = item_key(step, completion - 1)
            else:
                back = item_key(step - 1) if step else None
            entry = {
                "key": item_key(step, completion),
                "step": step,
                "completion": completion,
                "open": reason is None,
                "reason": reason,
                "back": back,
                "then": then,
            }
            if not completion:
                entry["alternatives_open"] = step == error and progress.offered.get(step, 0) > 0
            items.append(entry)
    current = progress.current()
    last = progress.last_shown()
    return {
        "ratings": list(RATINGS),
        "next": item_key(*current) if current else None,
        "active": item_key(*active) if active else None,
        # Where Backspace goes when no item is active (after a -1 that ended the label).
        "last": item_key(*last) if last else None,
        "active_reason": None
        if active
        else f"Step {error + 1} is rated -1, so the label is ready to submit (Enter). To change "
        "that -1, go back to it (Backspace) or click one of its ratings."
        if error is not None
        else "Nothing to rate.",
        "outcome": outcome,
        "submit_refusal": None
        if outcome
        else submit_refusal(progress, finish_reason=FOUND_ERROR if error is not None else SOLUTION),
        "items": items,
    }
