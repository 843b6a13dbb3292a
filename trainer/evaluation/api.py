"""The REST API of evaluation sets (list them, register one: a ProcessBench file in one step,
or problems held out from training) and of evaluations (watch, cancel, evaluate again)."""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from core.permissions import IsResearcher
from core.strictjson import StrictJSONParser
from trainer import pipeline
from trainer.evaluation import serializers as s
from trainer.evaluation import sets, uploads
from trainer.evaluation.models import Evaluation, EvaluationSet


class EvaluationSetViewSet(ReadOnlyModelViewSet):
    """Evaluation sets: every model version a run records is evaluated on each."""

    serializer_class = s.EvaluationSetSerializer
    permission_classes = [IsResearcher]
    # The strict reader, as everywhere else: DRF's own JSONParser takes NaN and any array.
    parser_classes = [MultiPartParser, FormParser, StrictJSONParser]

    def get_queryset(self) -> QuerySet[EvaluationSet]:
        return sets.evaluation_sets()

    @extend_schema(
        request=s.EvaluationSetRequestSerializer, responses={201: s.EvaluationSetSerializer}
    )
    def create(self, request: Request) -> Response:
        body = s.EvaluationSetRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data.get("file"):
            found = uploads.register_uploaded_processbench(
                name=data["name"], upload=data["file"], user=request.user
            )
        else:
            found = sets.register_held_out_set(
                name=data["name"], problem_ids=data["problems"], user=request.user
            )
        if data["decides_promotion"]:
            found = sets.choose_for_promotion(evaluation_set_id=found.pk)
        return Response(s.EvaluationSetSerializer(found).data, status=status.HTTP_201_CREATED)


class EvaluationViewSet(ReadOnlyModelViewSet):
    """Evaluations of model versions on the sets: watch one, cancel it, evaluate it again."""

    serializer_class = s.EvaluationSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet[Evaluation]:
        return Evaluation.objects.select_related("evaluation_set").order_by("-id")

    @extend_schema(request=None, responses=s.EvaluationSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """409 when it has finished; a running one stops after the batch it is scoring."""
        evaluation = sets.cancel_evaluation(evaluation_id=self.get_object().pk)
        return Response(s.EvaluationSerializer(evaluation).data)

    @extend_schema(request=None, responses=s.EvaluationSerializer)
    @action(detail=True, methods=["post"], url_path="evaluate-again")
    def evaluate_again(self, request: Request, pk: str) -> Response:
        """409 unless it failed or was cancelled; 503 when the task broker is unreachable."""
        evaluation = pipeline.evaluate_again(evaluation_id=self.get_object().pk)
        return Response(s.EvaluationSerializer(evaluation).data)
