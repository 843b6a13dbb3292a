"""Every helper process the app starts ends when its parent ends.

A Celery worker killed by the OOM killer (SIGKILL) runs no cleanup: the grading process it
forked, the grading pool's workers, a distributed training run's torchrun and ranks would run
on forever, holding their pipes, their memory and a GPU. The kernel's PR_SET_PDEATHSIG is tied
to the thread that forked, not the process (a child started from a web or Celery thread would
die with that thread), so it is not used. Instead:

- a forked child (a process pool worker, a server process) calls `die_with_parent(parent)`
  first: a daemon thread watches `os.getppid()` and ends the process once it changes, which it
  does the moment the parent dies (the child is re-parented to init or a subreaper);
- a command (`subprocess.Popen`) is started through `guarded_command`: this module runs as
  its launcher, the leader of the command's session, and stops the whole session (SIGTERM,
  then SIGKILL) once its own parent is gone.

`core/tests/test_processes.py` sweeps the tree so that no process is started another way.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

# How often a child looks for its parent: the longest an orphan lives.
WATCH_SECONDS = 0.5
# How long a launcher's command has to stop after SIGTERM before it is killed.
STOP_GRACE_SECONDS = 10.0


def die_with_parent(parent: int) -> None:
    """End this process when process `parent` (its parent's pid, read before the fork) ends.

    For a `ProcessPoolExecutor(initializer=die_with_parent, initargs=(os.getpid(),))` and a
    child of `os.fork()`. If the parent is already gone, this process ends now.
    """
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="die-with-parent", daemon=True).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    os._exit(1)  # no cleanup: nothing of the parent is left to clean up for


def guarded_command(command: list[str]) -> list[str]:
    """`command` run by a launcher that stops it, and every process of its session, when the
    process calling this ends. Start the result with `start_new_session=True`."""
    return [sys.executable, "-m", "core.processes", str(os.getpid()), "--", *command]


def _launch(parent: int, command: list[str]) -> int:
    """The launcher: run `command` in this session, pass SIGTERM on, and stop the session once
    `parent` is gone; the command's exit code."""
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, lambda *_: _stop_session(child))
    while child.poll() is None:
        if os.getppid() != parent:
            _stop_session(child)
            break
        time.sleep(WATCH_SECONDS)
    return child.wait()


def _stop_session(child: subprocess.Popen) -> None:
    # The launcher leads the session; every process the command started is in it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgrp(), signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=STOP_GRACE_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgrp(), signal.SIGKILL)  # the launcher too: its work is over


if __name__ == "__main__":
    parent, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        sys.exit("usage: python -m core.processes PARENT_PID -- COMMAND...")
    sys.exit(_launch(int(parent), command))
