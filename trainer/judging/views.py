"""The judge run's page of its own: the labels download. Its other pages come from its kind
(trainer.judging.kind)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from trainer.judging.api import export_response
from trainer.judging.kind import KIND


@login_required
def judge_export(request: HttpRequest, run_id: int) -> HttpResponse:
    KIND.allowed(request)
    return export_response(KIND.get(run_id))
