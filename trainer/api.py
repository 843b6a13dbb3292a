"""The REST API of the model side: training runs, model versions, generations.

Refusals are domain errors (core.errors): the API's exception handler gives each its status.
"""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import ReadOnlyModelViewSet

from core.jobs import JobOrigin
from core.permissions import IsResearcher
from labeling.models import Generation
from labeling.services import overlap
from trainer import pipeline
from trainer import serializers as s
from trainer.models import ModelVersion, TrainingRun
from trainer.scoring import posted as scoring_service
from trainer.training import model_versions, runs, selectors


class TrainingRunViewSet(ReadOnlyModelViewSet):
    """Training runs: researchers and admins start, watch and cancel them."""

    serializer_class = s.TrainingRunSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet[TrainingRun]:
        return selectors.training_runs()

    @extend_schema(request=s.TrainingRunRequestSerializer, responses={201: s.TrainingRunSerializer})
    def create(self, request: Request) -> Response:
        body = s.TrainingRunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = runs.request_training_run(
            user=request.user, params=body.validated_data["params"], origin=JobOrigin.API
        )
        return Response(s.TrainingRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.TrainingRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        run = self.get_object()
        run = runs.cancel_training_run(run_id=run.pk)
        return Response(s.TrainingRunSerializer(run).data)


class ModelVersionViewSet(ReadOnlyModelViewSet):
    """Trained PRM checkpoints; activating one makes it the model that scores and selects."""

    serializer_class = s.ModelVersionSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet[ModelVersion]:
        return selectors.model_versions()

    @extend_schema(
        request=None,
        responses=s.ModelVersionSerializer,
        description="409 when the version is worse than the active one (the message says by "
        "how much), unless `confirm=true` (query or body).",
    )
    @action(detail=True, methods=["post"])
    def activate(self, request: Request, pk: str) -> Response:
        version = self.get_object()
        asked = request.query_params.get("confirm", request.data.get("confirm", ""))
        version = model_versions.activate_model_version(
            model_version_id=version.pk, confirm=str(asked).lower() in ("true", "1", "yes")
        )
        return Response(s.ModelVersionSerializer(version).data)

    @extend_schema(
        request=None,
        responses={202: s.ModelVersionSerializer},
        description="Evaluate the version on every registered evaluation set it has no "
        "evaluation on yet (a set registered after it was trained); a worker runs them.",
    )
    @action(detail=True, methods=["post"])
    def evaluate(self, request: Request, pk: str) -> Response:
        version = self.get_object()
        pipeline.queue_evaluations(model_version_id=version.pk)
        return Response(s.ModelVersionSerializer(version).data, status=status.HTTP_202_ACCEPTED)


class GenerationViewSet(ReadOnlyModelViewSet):
    """Rounds of selection; the labeling queue serves the newest first."""

    serializer_class = s.GenerationSerializer
    permission_classes = [IsResearcher]
    queryset = Generation.objects.order_by("number")

    @extend_schema(
        request=s.GenerationRequestSerializer,
        responses={202: s.GenerationQueuedSerializer},
        description="Publish the next generation now: a GPU worker scores the unlabeled pool "
        "with the active model version and selects it. 409 when no model version is active, "
        "503 when the task broker is unreachable.",
    )
    def create(self, request: Request) -> Response:
        body = s.GenerationRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        queued = pipeline.request_generation(params=body.validated_data)
        data = {
            "task_id": queued.task_id,
            "model_version": queued.model_version.pk,
            "params": queued.params,
        }
        return Response(s.GenerationQueuedSerializer(data).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=s.OverlapSerializer,
        responses={200: s.OverlapResultSerializer},
        description="Give `share` of the generation's solutions (quality control and screening "
        "aside) to `labelers` labelers each; the share's solutions stay the same as it grows.",
    )
    @action(detail=True, methods=["post"])
    def overlap(self, request: Request, pk: str) -> Response:
        body = s.OverlapSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        overlapping = overlap.set_overlap(generation=self.get_object(), **body.validated_data)
        data = {**body.validated_data, "overlapping": overlapping}
        return Response(s.OverlapResultSerializer(data).data)


class ScoreView(APIView):
    """Score posted solutions with the active model version (best-of-N, RL)."""

    permission_classes = [IsResearcher]

    @extend_schema(request=s.ScoreRequestSerializer, responses=s.ScoreResponseSerializer)
    def post(self, request: Request) -> Response:
        posted = s.ScoreRequestSerializer(data=request.data)
        posted.is_valid(raise_exception=True)
        solutions = posted.validated_data["solutions"]
        version, scored = scoring_service.score_posted(
            problems=[x["problem"] for x in solutions], steps=[x["steps"] for x in solutions]
        )
        return Response(
            s.ScoreResponseSerializer({"model_version": version, "solutions": scored}).data
        )
