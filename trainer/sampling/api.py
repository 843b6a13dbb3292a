"""The REST API of sampling runs: start, list, watch, cancel and resume them.

Refusals are domain errors (core.errors): the API's exception handler gives each its status.
"""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from core.jobs import JobOrigin
from core.permissions import IsResearcher
from trainer.sampling import serializers as s
from trainer.sampling import services as sampling
from trainer.sampling.models import SamplingRun


class SamplingRunViewSet(ReadOnlyModelViewSet):
    """Sampling runs: researchers and admins start them, watch, cancel and resume them."""

    serializer_class = s.SamplingRunSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet[SamplingRun]:
        return SamplingRun.objects.select_related("requested_by")

    @extend_schema(
        request=s.SamplingRunRequestSerializer,
        responses={201: s.SamplingRunSerializer},
        description="Queue a sampling run. 400 for bad ids or settings, 503 when the task "
        "broker is unreachable (the run is recorded as failed and can be resumed).",
    )
    def create(self, request: Request) -> Response:
        body = s.SamplingRunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = sampling.request_sampling_run(
            user=request.user, origin=JobOrigin.API, **body.validated_data
        )
        return Response(s.SamplingRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.SamplingRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        run = sampling.cancel_sampling_run(run_id=self.get_object().pk)
        return Response(s.SamplingRunSerializer(run).data)

    @extend_schema(request=s.SamplingResumeSerializer, responses=s.SamplingRunSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        run = self.get_object()
        body = s.SamplingResumeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = sampling.resume_sampling_run(run_id=run.pk, api_key=body.validated_data["api_key"])
        return Response(s.SamplingRunSerializer(run).data)
