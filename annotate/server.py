"""The web server: `python -m annotate.server --port 8000` serves `annotate.wsgi` with waitress.

The one definition of how the app is served: the Procfile (`make run`), the production setup
in docs/operations.md and `bench/serve.py` all start this module.

Why waitress and not gunicorn: gunicorn's sync workers (and the threads of its gthread
workers) read a request's headers and write its response on a blocking socket, so a client
that sends a header line every few seconds, or reads a download slowly, holds a worker for as
long as it likes; two of them held both of the workers `make run` had, and the worker timeout
that frees a worker also cut a long export short under a 200. waitress reads and writes every
socket in one I/O loop: a request reaches an application thread only once its headers and
body have all arrived, and a response is written into a buffer that the loop sends at the
client's pace (spilling to a temporary file past 1 MB; the thread waits only once 16 MB are
unsent). Slow clients cost a connection, not a thread, and nothing kills a thread mid-response,
so a download ends with its last line or, if the export itself fails, with a broken chunked
body that every HTTP client reports as an error. It serves Django's plain WSGI app, so
database connections stay per thread and persistent (gunicorn's ASGI worker would also free
the workers, but Django runs each ASGI request's sync code in a thread of its own, so
connections could not persist, and the export would need an async twin).

One process runs Python on one core at a time, and a rating costs the server about 12 ms of
CPU: with 32 labelers typing, one process was busy half the time and requests queued behind
each other (rating p99 several times the database's own). So the server forks one process per
core (WEB_PROCESSES, at most MAX_DEFAULT_PROCESSES unless set), all accepting on one listening
socket that the parent opened, like gunicorn's pre-fork model: the app is loaded and its
objects frozen before the fork, so the children share that memory. The parent only watches: a
child that dies is started again, and SIGTERM or SIGINT stops them all. On SQLite (the
embedded default) one process is the default, since every write takes the one file's lock
anyway.
"""

import argparse
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import time

from core.processes import die_with_parent

# Concurrent requests of one process (WEB_THREADS); each thread keeps its own database
# connection.
THREADS = 8
# Open connections, slow ones included, before new ones wait in the listen backlog. poll()
# rather than select(), which stops at 1,024 file descriptors.
CONNECTION_LIMIT = 1000
# A connection that sends or reads nothing for this long is closed.
CHANNEL_TIMEOUT_S = 120
# Processes when WEB_PROCESSES is unset: one per core up to this many, so that the default's
# database connections (threads x processes, each persistent) stay well under PostgreSQL's
# default max_connections of 100 beside the workers.
MAX_DEFAULT_PROCESSES = 4
# A child that dies within this many seconds of its start counts as failing to start; after
# three such deaths in a row the server gives up instead of forking in a loop.
START_GRACE_S = 5
LISTEN_BACKLOG = 1024

access_log = logging.getLogger("stepwise.access")


def with_access_log(application):
    """Log each request (client, method, path, status, time to the response's start)."""

    def logged(environ, start_response):
        started = time.monotonic()

        def start(status, headers, exc_info=None):
            path = environ.get("PATH_INFO", "")
            if environ.get("QUERY_STRING"):
                path += "?" + environ["QUERY_STRING"]
            access_log.info(
                '%s "%s %s" %s %.0f ms',
                environ.get("REMOTE_ADDR", "-"),
                environ.get("REQUEST_METHOD", "-"),
                path,
                status.split(" ", 1)[0],
                (time.monotonic() - started) * 1000,
            )
            return start_response(status, headers, exc_info)

        return application(environ, start)

    return logged


def default_processes() -> int:
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_PROCESSES))


def serve(*, host: str, port: int, threads: int = THREADS, processes: int | None = None) -> None:
    from django.db import connections

    from annotate.wsgi import application

    if processes is None:
        processes = default_processes()
    if processes < 1:
        raise SystemExit(f"--processes must be at least 1, not {processes}")
    # The loaded app (Django, DRF, every module and template) is tens of thousands of objects
    # that live as long as the process: frozen, the garbage collector's full passes skip them.
    # Such a pass stopped every thread for about 58 ms under load (the rating p99's tail);
    # frozen, 9 ms. Frozen before the fork, the children also keep sharing their pages.
    gc.collect()
    gc.freeze()
    # waitress warns on every request that waits for a thread ("Task queue depth is N"):
    # thousands of lines a minute under load, which the access log's times already show.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    listener = socket.create_server((host, port), backlog=LISTEN_BACKLOG)
    if processes == 1:
        _serve_socket(application, listener, threads=threads)
        return
    # A connection opened while loading must not be shared by the children.
    connections.close_all()
    Supervisor(lambda: _serve_socket(application, listener, threads=threads), processes).run()


def _serve_socket(application, listener: socket.socket, *, threads: int) -> None:
    from waitress import serve as waitress_serve

    waitress_serve(
        with_access_log(application),
        sockets=[listener],
        threads=threads,
        connection_limit=CONNECTION_LIMIT,
        asyncore_use_poll=True,
        channel_timeout=CHANNEL_TIMEOUT_S,
        # X-Forwarded-Proto reaches Django as sent, as it did under gunicorn: Django trusts
        # it only with HTTPS=true (SECURE_PROXY_SSL_HEADER), behind a proxy that sets it.
        clear_untrusted_proxy_headers=False,
        ident="stepwise",
    )


class Supervisor:
    """Keeps `processes` forked children running `child`; SIGTERM or SIGINT stops them all."""

    def __init__(self, child, processes: int) -> None:
        self.child = child
        self.processes = processes
        self.children: dict[int, float] = {}  # pid -> start time
        self.stopping = False
        self.failed_starts = 0

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        for _ in range(self.processes):
            self._fork()
        while self.children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            started = self.children.pop(pid, None)
            if started is None or self.stopping:
                continue
            self.failed_starts = (
                self.failed_starts + 1 if time.monotonic() - started < START_GRACE_S else 0
            )
            print(
                f"server process {pid} ended ({_describe(status)}); "
                + ("giving up" if self.failed_starts >= 3 else "starting another"),
                file=sys.stderr,
                flush=True,
            )
            if self.failed_starts >= 3:
                self._stop()
                raise SystemExit(1)
            self._fork()

    def _fork(self) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)  # a killed parent leaves no process serving alone
            # The child stops as a process does by default; the parent's handlers are its own.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                self.child()
            finally:
                os._exit(1)
        self.children[pid] = time.monotonic()

    def _stop(self, *_signal) -> None:
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument(
        "--threads", type=int, default=int(os.environ.get("WEB_THREADS", str(THREADS)))
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=int(os.environ["WEB_PROCESSES"]) if os.environ.get("WEB_PROCESSES") else None,
        help="server processes (default: one per core, at most "
        f"{MAX_DEFAULT_PROCESSES}; one on SQLite)",
    )
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, threads=args.threads, processes=args.processes)


if __name__ == "__main__":
    main()
