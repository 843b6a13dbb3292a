"""A model version's checkpoint in the artifact store (`core.store`): published once by the
worker that trained it, read on any host through that host's cache.

Every reader of a checkpoint (scoring, posted scoring, evaluation, warm start, the Hugging Face
export, ProcessBench, the simulation) asks `local_dir`; nothing else turns a version into files.
"""

import uuid
from pathlib import Path

from core import store
from trainer.training.models import ModelVersion


def key_for_run(run_id: int) -> str:
    # The suffix keeps a store that outlived its database (a reset demo) from refusing run 1.
    return store.check_key(f"checkpoints/run-{run_id}-{uuid.uuid4().hex[:8]}")


def publish(*, directory: Path, key: str) -> str:
    """Upload a complete checkpoint directory; its reference, for the version's record."""
    return store.publish_tree(source=Path(directory), key=key)


def local_dir(version: ModelVersion) -> Path:
    """The version's checkpoint as a directory on this host (downloaded and verified once)."""
    return store.local_tree(version.checkpoint)


def remove(reference: str) -> None:
    """Remove a checkpoint no version will point at (its run was cancelled at the end)."""
    store.delete(reference)


def describe(version: ModelVersion) -> str:
    """Where the checkpoint is, as a person reads it: its store key (or an old path)."""
    return store.describe(version.checkpoint)


def publish_legacy(*, only_ids: list[int] | None = None) -> tuple[list[ModelVersion], list[str]]:
    """Move the checkpoints of versions recorded before the store (an absolute path on the
    host that trained them) into the store, where this host has their files.

    Returns the versions published and, for each that could not be, a sentence why (its
    files are on another host: run this there). Runs where the files are; safe to run again.
    """
    published, left = [], []
    versions = ModelVersion.objects.order_by("pk")
    if only_ids is not None:
        versions = versions.filter(pk__in=only_ids)
    for version in versions:
        if store.is_reference(version.checkpoint):
            continue
        directory = Path(version.checkpoint)
        if not directory.is_dir():
            left.append(f"{version} ({version.pk}): {directory} is not on this host.")
            continue
        reference = publish(
            directory=directory,
            key=store.check_key(f"checkpoints/version-{version.pk}-{uuid.uuid4().hex[:8]}"),
        )
        # Only the row that still names the old path: two hosts running this never both win.
        if ModelVersion.objects.filter(pk=version.pk, checkpoint=version.checkpoint).update(
            checkpoint=reference
        ):
            version.checkpoint = reference
            published.append(version)
        else:
            store.delete(reference)
    return published, left
