"""Demo data: the shipped problems and solutions, and one account per role."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from labeling import quality
from labeling.roles import sync_role_groups
from labeling.services.importing import ImportResult, import_problems, import_solutions
from labeling.services.labelers import get_or_create_labeler

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
