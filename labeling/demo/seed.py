"""Demo data: the shipped problems and solutions, labels from demo labelers, and one account
per role."""

import random
from datetime import timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from core.prm800k import RATINGS
from core.roles import sync_role_groups
from labeling import quality
from labeling.models import LabelingSession, Solution, StepLabel, StepRating
from labeling.services.importing import ImportResult, import_problems, import_solutions
from labeling.services.labelers import get_or_create_labeler
from labeling.services.workbench import recount_labels

DEMO_DIR = Path(__file__).resolve().parent
# Demo credentials are public on purpose: they exist only on installs seeded with demo data.
DEMO_ACCOUNTS = (
    ("admin", "admin-demo", "admin"),
    ("researcher", "researcher-demo", "researcher"),
    ("annotator", "annotator-demo", "annotator"),
    ("annotator2", "annotator2-demo", "annotator"),
)


def create_demo_accounts() -> list[tuple[str, str, str]]:
    """Create (or reset) one account per role; return (username, password, role) triples."""
    sync_role_groups()
    user_model = get_user_model()
    for username, password, role in DEMO_ACCOUNTS:
        user, _ = user_model.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_staff = role == "admin"
        user.is_superuser = role == "admin"
        user.is_active = True
        user.save()
        user.groups.set([Group.objects.get_or_create(name=role)[0]])
        get_or_create_labeler(user=user)
    return list(DEMO_ACCOUNTS)


def seed_demo() -> dict[str, ImportResult]:
    """Load the shipped demo problems and solutions, a few as QC/screening; idempotent."""
    with transaction.atomic():
        results = {
            "problems": import_problems(path=DEMO_DIR / "problems.jsonl", name="problems.jsonl"),
            "solutions": import_solutions(
                path=DEMO_DIR / "solutions.jsonl", name="solutions.jsonl"
            ),
        }
        changed, unchanged = quality.mark_demo_quality_control()
        results["quality-control solutions"] = ImportResult(created=changed, unchanged=unchanged)
        return results


# Labels the demo ships with, so that a first training run has data: demo labelers (no
# password: nobody logs in as them) label most shared demo solutions once, and each does the
# quality-control ones, with the demo's known step ratings and some noise. A share of the pool
# stays unlabeled for the demo annotators and for the first generation's selection.
DEMO_LABELERS = ("demo-labeler-1", "demo-labeler-2", "demo-labeler-3")
DEMO_SHARED_LABELS = 250
DEMO_LABEL_NOISE = 0.06


def _noisy(gold: list[int], rng: random.Random) -> list[int]:
    """The gold ratings, each replaced by another rating with probability DEMO_LABEL_NOISE;
    the label stops at its first -1, as the guidelines ask."""
    given = []
    for truth in gold:
        rating = truth
        if rng.random() < DEMO_LABEL_NOISE:
            rating = rng.choice([r for r in RATINGS if r != truth])
        given.append(rating)
        if rating == -1:
            break
    return given


def seed_demo_labels() -> int:
    """Submitted labeling sessions from the demo labelers; returns how many were created.

    Idempotent: nothing is added once any demo labeler has a session.
    """
    sync_role_groups()
    user_model = get_user_model()
    labelers = []
    for username in DEMO_LABELERS:
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            user.groups.set([Group.objects.get_or_create(name="annotator")[0]])
        labelers.append(get_or_create_labeler(user=user))
    if LabelingSession.objects.filter(labeler__in=labelers).exists():
        return 0
    demo = Solution.objects.filter(source="demo", is_screening=False).order_by("pk")
    quality_control = list(demo.filter(is_quality_control=True))
    shared = list(
        demo.filter(is_quality_control=False, generation__isnull=True)
        .exclude(sessions__submitted_at__isnull=False)
        .distinct()[:DEMO_SHARED_LABELS]
    )
    rng = random.Random("stepwise-demo-labels")
    now = timezone.now()
    plan = [(labelers[i % len(labelers)], s) for i, s in enumerate(shared)]
    plan += [(labeler, s) for labeler in labelers for s in quality_control]
    with transaction.atomic():
        sessions, ratings = [], []
        for i, (labeler, solution) in enumerate(plan):
            given = _noisy(solution.meta["gold_ratings"], rng)
            seconds = 20 + 15 * len(given) + rng.randrange(40)
            # Spread over the past days, oldest first, so the pages show a history.
            submitted = now - timedelta(days=3) + timedelta(minutes=15 * i)
            submitted = min(submitted, now - timedelta(minutes=1))
            sessions.append(
                LabelingSession(
                    labeler=labeler,
                    solution=solution,
                    is_quality_control=solution.is_quality_control,
                    queue="quality_control" if solution.is_quality_control else "leftover",
                    started_at=submitted - timedelta(seconds=seconds),
                    last_activity_at=submitted,
                    submitted_at=submitted,
                    total_time=seconds * 1000,
                    finish_reason="found_error" if -1 in given else "solution",
                )
            )
            ratings.append(given)
        sessions = LabelingSession.objects.bulk_create(sessions)
        recount_labels(solutions=Solution.objects.filter(pk__in={s.solution_id for s in sessions}))
        steps = StepLabel.objects.bulk_create(
            StepLabel(session=session, index=index, chosen_completion=None if r == -1 else 0)
            for session, given in zip(sessions, ratings, strict=True)
            for index, r in enumerate(given)
        )
        StepRating.objects.bulk_create(
            StepRating(
                step=step,
                completion_index=0,
                text=step.session.solution.steps[step.index],
                rating=r,
            )
            for step, r in zip(steps, (r for given in ratings for r in given), strict=True)
        )
    return len(sessions)


def demo_logins_unchanged() -> list[tuple[str, str, str]]:
    """The demo accounts that exist, are active and still have their demo password.

    The login page shows these: on an install seeded with demo data they are public anyway,
    and where the accounts do not exist (production) or their passwords were changed it shows
    nothing. The password check is slow on purpose (PBKDF2), so its answer is remembered per
    stored hash.
    """
    stored = dict(
        get_user_model()
        .objects.filter(username__in=[a[0] for a in DEMO_ACCOUNTS], is_active=True)
        .values_list("username", "password")
    )
    shown = []
    for username, password, role in DEMO_ACCOUNTS:
        encoded = stored.get(username)
        if encoded is None:
            continue
        key = (password, encoded)
        if key not in _CHECKED:
            _CHECKED[key] = check_password(password, encoded)
        if _CHECKED[key]:
            shown.append((username, password, role))
    return shown


_CHECKED: dict[tuple[str, str], bool] = {}
