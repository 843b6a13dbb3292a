"""Issue 41, item 12: every helper process the app starts ends when its parent ends.

A sweep of the tree (no process is started except through `core.processes`), and the real
thing: a parent killed with SIGKILL, as the OOM killer does, and its children gone soon after.
"""

import ast
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from core.processes import WATCH_SECONDS

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_PARTS = {".venv", "node_modules", "tests", "migrations", "bench", "var"}
OWNER = ROOT / "core" / "processes.py"
SUBPROCESS_CALLS = {"Popen", "run", "call", "check_call", "check_output"}


def _app_files() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED_PARTS & set(path.relative_to(ROOT).parts)
        and path.name != "conftest.py"
        and path != OWNER  # the launcher itself starts the command it guards
    ]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _calls(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) == name for n in ast.walk(node))


def _unguarded(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of each process started without `core.processes` in `tree`."""
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    found = []
    for function in [tree, *functions.values()]:
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            if (
                name in SUBPROCESS_CALLS
                and _name(getattr(node.func, "value", None)) == "subprocess"
            ):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Call) and _name(first.func) == "guarded_command"):
                    found.append((node.lineno, f"subprocess.{name} without guarded_command"))
            elif (
                name == "ProcessPoolExecutor"
                or name == "Pool"
                and isinstance(node.func, ast.Attribute)
            ):
                initializer = next((k.value for k in node.keywords if k.arg == "initializer"), None)
                target = functions.get(_name(initializer)) if initializer is not None else None
                if _name(initializer) != "die_with_parent" and not (
                    target and _calls(target, "die_with_parent")
                ):
                    found.append((node.lineno, f"{name} whose initializer is not die_with_parent"))
            elif (
                name == "fork" and function is not tree and not _calls(function, "die_with_parent")
            ):
                found.append(
                    (node.lineno, "os.fork in a function that never calls die_with_parent")
                )
            elif name == "Process" and not _calls(function, "die_with_parent"):
                found.append((node.lineno, "a multiprocessing Process"))
    return sorted(set(found))


def test_every_process_the_app_starts_goes_through_core_processes():
    files = _app_files()
    assert len(files) > 100
    unguarded = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in files
        for line, what in _unguarded(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert unguarded == []


def test_the_sweep_finds_each_way_of_starting_a_process():
    # The sweep itself bites: each unguarded start below is found.
    source = textwrap.dedent(
        """
        import os, subprocess
        from concurrent.futures import ProcessPoolExecutor
        def serve():
            pid = os.fork()
        def train():
            subprocess.Popen(["torchrun"], start_new_session=True)
        def grade():
            ProcessPoolExecutor(2)
        def quiet():
            pass
        def pool():
            ProcessPoolExecutor(2, initializer=quiet)
        """
    )
    found = [what for _, what in _unguarded(ast.parse(source))]
    assert len(found) == 4


def _orphans_end(code: str, tmp_path: Path) -> None:
    """Run `code` in a parent process that prints the pids of the children it started, kill
    the parent with SIGKILL, and wait for every child to end."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "annotate.settings"}
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = parent.stdout.readline()
        children = [int(pid) for pid in line.split()]
        assert children, f"the parent started no child: {line!r}"
        assert all(psutil.pid_exists(pid) for pid in children)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10 * WATCH_SECONDS + 5
    alive = children
    while alive and time.monotonic() < deadline:
        alive = [
            pid
            for pid in alive
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]
        time.sleep(0.1)
    assert alive == [], "children outlived their killed parent"


def test_the_grading_process_ends_with_a_killed_parent(tmp_path):
    _orphans_end(
        """
        import django, os, psutil, time
        django.setup()
        from labeling.grading import grade
        grade("x^2 + 2x + 1", "(x+1)^2")  # starts the grading process
        children = psutil.Process().children(recursive=True)
        print(" ".join(str(c.pid) for c in children), flush=True)
        time.sleep(120)
        """,
        tmp_path,
    )


def test_the_grading_pool_workers_end_with_a_killed_importer(tmp_path):
    _orphans_end(
        """
        import django, psutil, time
        django.setup()
        from labeling.grading import GradingPool
        pool = GradingPool(processes=2)
        pool.grade([(str(n), str(n)) for n in range(GradingPool.MIN_PAIRS)])
        children = psutil.Process().children(recursive=True)
        print(" ".join(str(c.pid) for c in children), flush=True)
        time.sleep(120)
        """,
        tmp_path,
    )


def test_a_guarded_command_and_its_session_end_with_a_killed_parent(tmp_path):
    # As a distributed training run starts torchrun: the launcher, the command and what the
    # command started (here a shell's sleeping child) all end.
    _orphans_end(
        """
        import psutil, subprocess, time
        from core.processes import guarded_command
        subprocess.Popen(
            guarded_command(["sh", "-c", "sleep 120 & sleep 120"]), start_new_session=True
        )
        time.sleep(1.5)
        children = psutil.Process().children(recursive=True)
        print(" ".join(str(c.pid) for c in children), flush=True)
        time.sleep(120)
        """,
        tmp_path,
    )


@pytest.mark.parametrize("code", [0, 3])
def test_a_guarded_command_gives_its_exit_code(code):
    from core.processes import guarded_command

    finished = subprocess.run(
        guarded_command([sys.executable, "-c", f"raise SystemExit({code})"]),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        timeout=30,
    )
    assert finished.returncode == code
