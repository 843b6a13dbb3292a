"""The researchers' data pages: problems, solutions and labels, each narrowed by the data
filters (labeling/filters.py) in its URL and paginated, and the PRM800K export of what the
filters keep, with its count and first lines before the download."""

from functools import partial

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.nostore import no_store
from core.permissions import can_export_labels, require_researcher
from labeling import filters
from labeling.filters import FilterForm
from labeling.forms import ExportForm
from labeling.services import filtered_export

ROWS_PER_PAGE = 50


_require_researcher = partial(
    require_researcher, refusal="Annotators see problems only while labeling them."
)


def _listing(request: HttpRequest, *, template: str, rows_of, order: tuple[str, ...]):
    """The page of rows the filters in the query keep, or the form's refusals (400)."""
    _require_researcher(request)
    form = FilterForm(request.GET)
    chosen = form.data_filters() if form.is_valid() else None
    context = {"form": form, "seen": filters.choices_seen()}
    if chosen is None:
        return render(request, template, {**context, "page": None}, status=400)
    rows = rows_of(chosen).order_by(*order)
    page = Paginator(rows, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    context.update(
        page=page,
        filters=chosen,
        query=filters.to_query(chosen),
        total=page.paginator.count,
    )
    return render(request, template, context)


@login_required
def problem_list(request: HttpRequest) -> HttpResponse:
    return _listing(
        request,
        template="labeling/problem_list.html",
        rows_of=lambda chosen: filters.problems(filters=chosen),
        order=("subject", "level", "id"),
    )


@login_required
def solution_list(request: HttpRequest) -> HttpResponse:
    return _listing(
        request,
        template="labeling/solution_list.html",
        rows_of=lambda chosen: filters.solutions(filters=chosen).select_related(
            "problem", "generation"
        ),
        order=("-id",),
    )


@login_required
def label_list(request: HttpRequest) -> HttpResponse:
    return _listing(
        request,
        template="labeling/label_list.html",
        rows_of=lambda chosen: filters.labels(filters=chosen).select_related(
            "labeler", "generation", "solution__problem"
        ),
        order=("-submitted_at", "-id"),
    )


def _given(request: HttpRequest) -> dict:
    return {key: value for key, value in request.GET.items() if value}


@no_store
@login_required
def export_labels(request: HttpRequest) -> HttpResponse:
    if not can_export_labels(request.user):
        raise PermissionDenied("Only admins can export labels.")
    wanted = "download" in request.GET or "preview" in request.GET
    # Arriving from a data page, its filters come along.
    form = ExportForm(request.GET) if wanted else ExportForm(initial=_given(request))
    context = {"form": form, "seen": filters.choices_seen(), "query": filters.carried(request.GET)}
    if not wanted:
        return render(request, "labeling/export.html", context)
    chosen = form.data_filters() if form.is_valid() else None
    if chosen is None:
        return render(request, "labeling/export.html", context, status=400)
    if "download" in request.GET:
        return filtered_export.prm800k_download(data=chosen, options=form.filters())
    context["preview"] = filtered_export.prm800k_preview(data=chosen, options=form.filters())
    return render(request, "labeling/export.html", context)
