"""A progress bar, with its rate and time left, for a job that a command runs in the foreground.

The job reports its progress to its row, as it does for the pages; a thread reads that row
every second and moves a tqdm bar on the terminal. Off when stderr is not a terminal (a log,
CI), unless asked for.
"""

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from django.db import DatabaseError, connections
from tqdm import tqdm


@contextmanager
def job_progress_bar(
    *,
    read: Callable[[], tuple[int, int]],
    desc: str,
    unit: str,
    file: TextIO | None = None,
    enabled: bool | None = None,
    every_s: float = 1.0,
) -> Iterator[tqdm]:
    """A bar of `read()`'s (done, total) while the block runs, then its last reading."""
    bar = tqdm(
        total=None,
        desc=desc,
        unit=unit,
        file=file or sys.stderr,
        disable=None if enabled is None else not enabled,
        dynamic_ncols=True,
    )
    stop = threading.Event()

    def show() -> None:
        done, total = read()
        bar.total = total or None
        bar.n = done
        bar.refresh()

    def poll() -> None:
        try:
            while not stop.wait(every_s):
                try:
                    show()
                except DatabaseError:  # a busy database: the next tick reads again
                    continue
        finally:
            connections.close_all()  # this thread's own connection

    watcher = threading.Thread(target=poll, name="progress-bar", daemon=True)
    if not bar.disable:
        watcher.start()
    try:
        yield bar
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        if not bar.disable:
            show()
        bar.close()
