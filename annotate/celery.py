import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")
# Models load from local directories only (trainer/base_models.py): with the hub offline,
# a name that slipped through could still never be downloaded. Set here, before anything
# imports transformers or huggingface_hub (which read them once, at import): every Django
# process, a worker included, imports the `annotate` package, and so this module, first.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

app = Celery("annotate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def queue_task(name: str, args: tuple = (), *, task_id: str | None = None) -> None:
    """Queue the task registered as `name` without importing the module that defines it.

    Services queue follow-up work this way, so a tasks module (which imports the services) is
    never imported back by them. A web process has not imported the task modules yet; the
    loader imports them as a worker does. Going through the task, not `app.send_task`, keeps
    eager mode (tests, `manage.py simulate`) running it in place. Raises kombu's
    OperationalError or an OSError when the broker cannot be reached.
    """
    if name not in app.tasks:
        app.loader.import_default_modules()
    app.tasks[name].apply_async(args, task_id=task_id)
