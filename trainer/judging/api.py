"""The REST API of judge runs: start, list, watch, cancel, resume (core.job_kinds), and export
their labels.

Refusals are domain errors (core.errors): the API's exception handler gives each its status.
"""

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.viewsets import ReadOnlyModelViewSet

from trainer.judging import services as judging
from trainer.judging.kind import KIND
from trainer.judging.models import JudgeRun


class JudgeRunViewSet(ReadOnlyModelViewSet):
    """Judge runs: researchers and admins start them, watch, cancel and resume them, and
    export their labels (JSONL, apart from the PRM800K export)."""

    @extend_schema(
        responses={200: OpenApiResponse(description="JSONL: one line per solution judged.")}
    )
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str) -> StreamingHttpResponse:
        return export_response(self.get_object())


JudgeRunViewSet = KIND.viewset(JudgeRunViewSet)  # noqa: F811 -- the kind adds its actions


def export_response(run: JudgeRun) -> StreamingHttpResponse:
    """The run's judge labels as a JSONL download (the API's and the page's)."""
    response = StreamingHttpResponse(
        judging.export_lines(run=run), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="judge-run-{run.pk}.jsonl"'
    return response
