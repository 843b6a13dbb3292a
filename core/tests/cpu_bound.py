"""A bound on the CPU a call may take, for the linear-time sweeps (test_patterns.py,
test_readers_linear.py): regular expressions and readers check signals, so a run past the
bound stops with Slow instead of holding the suite for minutes."""

import contextlib
import signal


class Slow(Exception):
    pass


@contextlib.contextmanager
def cpu_bound(seconds: float):
    def stop(*_):
        raise Slow

    previous = signal.signal(signal.SIGVTALRM, stop)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
