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
connections could not persist, and the export would need an async twin); one process uses
one core, so at scale run more replicas behind the proxy (docs/operations.md).
"""

import argparse
import gc
import logging
import os
import time

# Concurrent requests of one process (WEB_THREADS); each thread keeps its own database
# connection.
THREADS = 8
# Open connections, slow ones included, before new ones wait in the listen backlog. poll()
# rather than select(), which stops at 1,024 file descriptors.
CONNECTION_LIMIT = 1000
# A connection that sends or reads nothing for this long is closed.
CHANNEL_TIMEOUT_S = 120

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


def serve(*, host: str, port: int, threads: int = THREADS) -> None:
    from waitress import serve as waitress_serve

    from annotate.wsgi import application

    # The loaded app (Django, DRF, every module and template) is tens of thousands of objects
    # that live as long as the process: frozen, the garbage collector's full passes skip them.
    # Such a pass stopped every thread for about 58 ms under load (the rating p99's tail);
    # frozen, 9 ms.
    gc.collect()
    gc.freeze()
    # waitress warns on every request that waits for a thread ("Task queue depth is N"):
    # thousands of lines a minute under load, which the access log's times already show.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    waitress_serve(
        with_access_log(application),
        host=host,
        port=port,
        threads=threads,
        connection_limit=CONNECTION_LIMIT,
        asyncore_use_poll=True,
        channel_timeout=CHANNEL_TIMEOUT_S,
        # X-Forwarded-Proto reaches Django as sent, as it did under gunicorn: Django trusts
        # it only with HTTPS=true (SECURE_PROXY_SSL_HEADER), behind a proxy that sets it.
        clear_untrusted_proxy_headers=False,
        ident="stepwise",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument(
        "--threads", type=int, default=int(os.environ.get("WEB_THREADS", str(THREADS)))
    )
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, threads=args.threads)


if __name__ == "__main__":
    main()
