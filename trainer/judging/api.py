"""The REST API of judge runs: start, list, watch, cancel, resume, and export their labels.

Refusals are domain errors (core.errors): the API's exception handler gives each its status.
"""

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from core.jobs import JobOrigin
from core.permissions import IsResearcher
from trainer.judging import serializers as s
from trainer.judging import services as judging
from trainer.judging.models import JudgeRun


class JudgeRunViewSet(ReadOnlyModelViewSet):
    """Judge runs: researchers and admins start them, watch, cancel and resume them, and
    export their labels (JSONL, apart from the PRM800K export)."""

    serializer_class = s.JudgeRunSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet[JudgeRun]:
        return JudgeRun.objects.select_related("requested_by")

    @extend_schema(
        request=s.JudgeRunRequestSerializer,
        responses={201: s.JudgeRunSerializer},
        description="Queue a judge run. 400 for bad ids, format or settings, 503 when the task "
        "broker is unreachable (the run is recorded as failed and can be resumed).",
    )
    def create(self, request: Request) -> Response:
        body = s.JudgeRunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = judging.request_judge_run(
            user=request.user, origin=JobOrigin.API, **body.validated_data
        )
        return Response(s.JudgeRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.JudgeRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        run = judging.cancel_judge_run(run_id=self.get_object().pk)
        return Response(s.JudgeRunSerializer(run).data)

    @extend_schema(request=s.JudgeResumeSerializer, responses=s.JudgeRunSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        run = self.get_object()
        body = s.JudgeResumeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = judging.resume_judge_run(run_id=run.pk, api_key=body.validated_data["api_key"])
        return Response(s.JudgeRunSerializer(run).data)

    @extend_schema(
        responses={200: OpenApiResponse(description="JSONL: one line per solution judged.")}
    )
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str) -> StreamingHttpResponse:
        return export_response(self.get_object())


def export_response(run: JudgeRun) -> StreamingHttpResponse:
    """The run's judge labels as a JSONL download (the API's and the page's)."""
    response = StreamingHttpResponse(
        judging.export_lines(run=run), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="judge-run-{run.pk}.jsonl"'
    return response
