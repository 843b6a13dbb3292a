"""Simulated labelers: they label through the same services as humans do.

A simulated labeler asks `labeling.services.workbench.next_session` for a labeling session,
rates the solution's steps one at a time with `workbench.rate_step` until it rates a step -1
(or reaches the end), then finishes with `workbench.submit_session` (`found_error` or
`solution`). It knows the truth from the
solution's `meta["simulation"]` (written by the simulation's import): each step's own rating.

Noise: with probability `noise` a step's rating is replaced by one of the other two ratings,
chosen at random. A labeler who misses the real error carries on rating the following steps
by their own merit (a step that follows consistently from a wrong value is itself fine); one
who flags a good step -1 stops there, as the guidelines ask.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q

from core.prm800k import RATINGS
from labeling.models import Generation, Labeler, LabelingSession, Solution
from labeling.selectors import has_submitted_label
from labeling.services import labelers, workbench

USERNAME_PREFIX = "sim-labeler-"
ANNOTATOR_ROLE = "annotator"


@dataclass
class SimulatedLabeler:
    labeler: Labeler
    noise: float
    rng: random.Random

    def rating(self, truth: int) -> int:
        return noisy_rating(truth, noise=self.noise, rng=self.rng)

    def label_next(self) -> LabelingSession | None:
        """Take the next labeling session and label it to the end; None when none is served."""
        served = workbench.next_session(labeler=self.labeler)
        if served is None:
            return None
        session = served.session
        truth = step_truth(session.solution)
        finish = "solution"
        for index, true_rating in enumerate(truth):
            given = self.rating(true_rating)
            workbench.rate_step(
                session_id=session.pk, labeler=self.labeler, step_index=index, rating=given
            )
            if given == -1:
                finish = "found_error"
                break
        return workbench.submit_session(
            session_id=session.pk, labeler=self.labeler, finish_reason=finish
        )


def noisy_rating(truth: int, *, noise: float, rng: random.Random) -> int:
    """The rating a labeler with this noise rate gives a step whose own rating is `truth`."""
    if noise and rng.random() < noise:
        return rng.choice([r for r in RATINGS if r != truth])
    return truth


def session_ratings(truth: list[int], *, noise: float, rng: random.Random) -> list[int]:
    """The ratings one labeling session gives: step by step until the first -1 given, as
    `SimulatedLabeler.label_next` rates through the workbench."""
    given: list[int] = []
    for true_rating in truth:
        given.append(noisy_rating(true_rating, noise=noise, rng=rng))
        if given[-1] == -1:
            break
    return given


def suggested_ratings(
    truth: Sequence[int],
    suggestion: Sequence[int],
    *,
    noise: float,
    follow: float,
    rng: random.Random,
) -> list[int]:
    """A session of a labeler shown a suggestion per step: with probability `follow` they take
    it, else they rate as a labeler who saw nothing; steps the judge did not rate (after its
    first -1) they rate on their own."""
    given: list[int] = []
    for index, true_rating in enumerate(truth):
        own = noisy_rating(true_rating, noise=noise, rng=rng)
        followed = index < len(suggestion) and rng.random() < follow
        given.append(suggestion[index] if followed else own)
        if given[-1] == -1:
            break
    return given


def step_truth(solution: Solution) -> list[int]:
    """Every step's own rating, as the simulation recorded it at import."""
    return list(solution.meta["simulation"]["step_ratings"])


def make_labelers(*, count: int, noise: float, seed: int) -> list[SimulatedLabeler]:
    """`count` annotator accounts (created once, reused) with their seeded noise."""
    if not 0.0 <= noise <= 1.0:
        raise ValueError("noise must be between 0 and 1.")
    group, _ = Group.objects.get_or_create(name=ANNOTATOR_ROLE)
    users = get_user_model().objects
    simulated = []
    for k in range(count):
        user, created = users.get_or_create(username=f"{USERNAME_PREFIX}{k}")
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            user.groups.add(group)
        simulated.append(
            SimulatedLabeler(
                labeler=labelers.get_or_create_labeler(user=user),
                noise=noise,
                rng=random.Random(f"{seed}:labeler:{k}"),
            )
        )
    return simulated


def work_left(*, labeler: Labeler, generation: Generation) -> bool:
    """Is anything of this generation still to be labeled by this labeler?

    Its shared solutions that nobody submitted yet, and its quality-control solutions this
    labeler has not done. Checked before asking for a session, so that a labeler never
    falls through to the leftover queue (older or unselected solutions), which would label
    outside the strategy's choice.
    """
    in_generation = Solution.objects.filter(generation=generation, problem__is_bad=False)
    shared = Q(is_quality_control=False, is_screening=False) & ~Q(has_submitted_label())
    quality_control = Q(is_quality_control=True) & ~Q(has_submitted_label(labeler=labeler))
    return in_generation.filter(shared | quality_control).exists()


def label_generation(
    *, labelers: list[SimulatedLabeler], generation: Generation, budget: int
) -> int:
    """Labelers take turns on the generation until `budget` sessions are submitted or it is
    done; returns the number of sessions submitted."""
    submitted = 0
    active = list(labelers)
    while active and submitted < budget:
        for simulated in list(active):
            if submitted >= budget:
                break
            if not work_left(labeler=simulated.labeler, generation=generation):
                active.remove(simulated)
                continue
            session = simulated.label_next()
            if session is None:
                active.remove(simulated)
                continue
            submitted += 1
    return submitted
