"""The TRL stepwise-supervision export page: the data filters, the parameters that choose the
examples, a preview (count and first lines) and the download (trainer/stepwise_download.py)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.nostore import no_store
from core.permissions import can_export_labels
from labeling import filters
from trainer import stepwise_download
from trainer.forms import StepwiseExportForm


@no_store
@login_required
def export_stepwise(request: HttpRequest) -> HttpResponse:
    if not can_export_labels(request.user):
        raise PermissionDenied("Only admins can export labels.")
    wanted = "download" in request.GET or "preview" in request.GET
    # Arriving from a data page (or the PRM800K export), its filters come along.
    given = {key: value for key, value in request.GET.items() if value}
    form = StepwiseExportForm(request.GET) if wanted else StepwiseExportForm(initial=given)
    context = {"form": form, "seen": filters.choices_seen(), "query": filters.carried(request.GET)}
    if not wanted:
        return render(request, "trainer/export_stepwise.html", context)
    valid = form.is_valid()
    chosen = form.data_filters() if valid else None
    params = form.params() if valid else None
    if chosen is None or params is None:
        return render(request, "trainer/export_stepwise.html", context, status=400)
    if "download" in request.GET:
        return stepwise_download.stepwise_response(data=chosen, params=params)
    context["preview"] = stepwise_download.stepwise_preview(data=chosen, params=params)
    return render(request, "trainer/export_stepwise.html", context)
