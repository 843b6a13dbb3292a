"""No record holds a host's path: files that cross processes go through the artifact store.

A path written into a row by one host names nothing on another (issue 39: checkpoints, import
uploads and local models each did). Two sweeps keep the class closed for code written later:
every model field of every app, and every module that reads the per-host folders.
"""

import ast
from pathlib import Path

from django.apps import apps
from django.db import models

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("core", "generators", "labeling", "trainer", "annotate")

# Fields that hold a path on purpose, and why it is not used to read files on another host.
KNOWN_PATHS = {
    # Where the operator put the model on the host that recorded it, shown to people; the files
    # are read through `artifact` (a store reference).
    ("generators", "LocalModel", "path"),
}
PATHLIKE = ("path", "dir", "directory", "folder", "file_path", "filename")


def test_no_model_field_records_a_path_or_a_file_on_a_host_disk():
    offenders = []
    for model in apps.get_models():
        if model._meta.app_label not in {"generators", "labeling", "trainer", "core"}:
            continue
        for field in model._meta.get_fields():
            where = (model._meta.app_label, model.__name__, field.name)
            if isinstance(field, models.FileField | models.FilePathField):
                offenders.append(f"{where}: a {type(field).__name__} saves to one host's disk")
            elif (
                isinstance(field, models.CharField | models.TextField)
                and (
                    field.name in PATHLIKE or field.name.endswith(tuple(f"_{p}" for p in PATHLIKE))
                )
                and where not in KNOWN_PATHS
            ):
                offenders.append(f"{where}: a path in a record; store a core.store reference")
    assert not offenders, "\n".join(offenders)


# The per-host folders: only the settings and the store's own module turn them into paths.
PER_HOST = {"VAR_DIR", "STORE_CACHE_DIR", "STORE_SCRATCH_DIR"}
MAY_READ_PER_HOST = {"annotate/settings.py", "core/store.py"}


def modules():
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/tests/" in relative or "/migrations/" in relative:
                continue
            yield relative, path


def test_only_the_store_builds_paths_from_the_per_host_folders():
    offenders = []
    for relative, path in modules():
        if relative in MAY_READ_PER_HOST:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=relative)):
            if isinstance(node, ast.Attribute) and node.attr in PER_HOST:
                offenders.append(f"{relative}:{node.lineno} reads settings.{node.attr}")
    assert not offenders, (
        "Files another process reads go through core.store (publish, local_tree); a host's own "
        "scratch is core.store.scratch_dir():\n" + "\n".join(offenders)
    )


def test_the_sweep_bites(tmp_path):
    # The rule above, on a module written the old way: it is found.
    source = "from django.conf import settings\nPATH = settings.VAR_DIR / 'imports'\n"
    found = [
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in PER_HOST
    ]
    assert found == ["VAR_DIR"]
