"""Queueing a Celery task by its name, from any room.

The project's Celery app is configured in `annotate/celery.py` (the wiring), which every
Django process imports first; code below it reaches that app as Celery's current app, so no
room imports the project package.
"""

import importlib
import logging

from celery import current_app
from kombu.exceptions import OperationalError as BrokerError

from core.errors import Unavailable

logger = logging.getLogger(__name__)


class BrokerUnavailable(Unavailable):
    """The work was not handed to a worker: the task broker is unreachable."""


def send_task(name: str, args: tuple = (), *, task_id: str | None = None, what: str) -> None:
    """Queue the task registered as `name`, or BrokerUnavailable saying what (`what`) could
    not be queued."""
    try:
        queue_task(name, args, task_id=task_id)
    except (BrokerError, OSError) as exc:
        logger.warning("Could not queue %s: %s", what, exc)
        raise BrokerUnavailable(
            f"Could not queue {what}: the task broker is unreachable ({exc})."
        ) from None


def queue_task(
    name: str,
    args: tuple = (),
    *,
    task_id: str | None = None,
    secret_kwargs: dict[str, str] | None = None,
) -> None:
    """Queue the task registered as `name` without the caller importing the module that
    defines it.

    Services queue follow-up work this way, so a tasks module (which imports the services) is
    never imported back by them. A web process has not imported the task modules yet; the
    first task queued imports its module, safely from several threads at once. Going through
    the task, not `send_task`, keeps eager mode (tests, `manage.py simulate`) running it in
    place. Raises kombu's OperationalError or an OSError when the broker cannot be reached.
    """
    task = _registered(name)
    # Secret keyword arguments travel in the message only; where a message's arguments are
    # printed (the worker's log, `celery inspect`, monitors) its kwargsrepr shows "***".
    secret = (
        {"kwargs": secret_kwargs, "kwargsrepr": repr(dict.fromkeys(secret_kwargs, "***"))}
        if secret_kwargs
        else {}
    )
    task.apply_async(args, task_id=task_id, **secret)


def _registered(name: str):
    tasks = current_app.tasks  # finalizes the app once, under Celery's own lock
    module = name.rpartition(".")[0]
    if name not in tasks and module:
        # Imported by its module's name, not by Celery's autodiscovery: that returns at once,
        # importing nothing, to a second thread while a first is still importing (a global
        # flag meant against recursion), and the second thread then found no such task
        # (NotRegistered: two activations at once, one answered 500 after it had committed).
        # Python's import lock makes the second thread wait for the first's import instead.
        importlib.import_module(module)
    if name not in tasks:
        current_app.loader.import_default_modules()  # a task named apart from its module
    return tasks[name]
