import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")
# Models load from local directories only (trainer/training/base_models.py): with the hub offline,
# a name that slipped through could still never be downloaded. Set here, before anything
# imports transformers or huggingface_hub (which read them once, at import): every Django
# process, a worker included, imports the `annotate` package, and so this module, first.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

app = Celery("annotate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
