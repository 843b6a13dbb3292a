from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from labeling import selectors
from labeling.forms import ExportForm
from labeling.models import LabelingSession
from labeling.permissions import can_export_labels


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/home.html", selectors.overview())


@login_required
def problem_list(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/problem_list.html", {"problems": selectors.problem_list()})


def prm800k_response(
    filters: selectors.ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> StreamingHttpResponse:
    """A streamed JSONL download: rows are written as they are read, never held in memory."""
    records = selectors.iter_prm800k_records(filters=filters, within=within)
    lines = (selectors.json_line(record) for record in records)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="prm800k-{stamp}.jsonl"'
    return response


@login_required
def export_labels(request: HttpRequest) -> HttpResponse:
    if not can_export_labels(request.user):
        raise PermissionDenied("Only admins can export labels.")
    if "download" not in request.GET:
        return render(request, "labeling/export.html", {"form": ExportForm()})
    form = ExportForm(request.GET)
    if not form.is_valid():
        return render(request, "labeling/export.html", {"form": form}, status=400)
    return prm800k_response(form.filters())
