"""The progress bar of a job run in the foreground (issue 30, point 12: `manage.py sample` said
nothing for 22 minutes)."""

import io
import time

from core.progress_bar import job_progress_bar


class Job:
    """Stands in for a job's row: its progress moves while the command's block runs."""

    def __init__(self, total: int) -> None:
        self.done, self.total = 0, total

    def read(self) -> tuple[int, int]:
        return self.done, self.total


def test_a_terminal_sees_the_items_done_the_rate_and_the_time_left():
    job, out = Job(total=4), io.StringIO()
    with job_progress_bar(
        read=job.read, desc="run 7", unit="item", file=out, enabled=True, every_s=0.05
    ):
        for _ in range(3):
            time.sleep(0.15)
            job.done += 1
    shown = out.getvalue()
    assert "run 7" in shown and "3/4" in shown
    # tqdm's remaining time and rate: "<00:00" and "item/s" or "s/item".
    assert "<" in shown and "item" in shown


def test_no_bar_where_stderr_is_not_a_terminal():
    job, out = Job(total=4), io.StringIO()
    with job_progress_bar(read=job.read, desc="run 7", unit="item", file=out):
        job.done = 4
    assert out.getvalue() == ""
