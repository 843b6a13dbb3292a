"""The answer-review API (/api/answer-reviews/): the queue, a decision, the hand-judged pairs
as JSONL. Researchers and admins only. Thin: `selectors.answer_review_queue`,
`answer_review.decide_answer`, `selectors.answer_review_pairs`."""

import json

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.permissions import IsResearcher
from labeling import selectors
from labeling.models import AnswerReview
from labeling.services import answer_review

QUEUE_LIMIT_MAX = 100
ID_MAX = 2**63 - 1  # a row id the database can hold: a larger one is a 400, not a 500


class QueueQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=QUEUE_LIMIT_MAX, default=20)
    skipped = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX),
        required=False,
        default=list,
        max_length=selectors.ANSWER_REVIEW_SKIPPED_MAX,
        help_text="Solution ids to leave out (skipped in this visit); repeat the parameter.",
    )


class QueueItemSerializer(serializers.Serializer):
    solution = serializers.IntegerField(source="pk")
    problem = serializers.IntegerField(source="problem_id")
    problem_unique_id = serializers.CharField(source="problem.unique_id", allow_null=True)
    problem_text = serializers.CharField(source="problem.text")
    ground_truth = serializers.CharField(source="problem.answer")
    answer = serializers.CharField()
    created_at = serializers.DateTimeField()


class QueueSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Answers waiting, skipped ones included.")
    results = QueueItemSerializer(many=True)


class DecisionSerializer(serializers.Serializer):
    solution = serializers.IntegerField(min_value=1, max_value=ID_MAX)
    verdict = serializers.ChoiceField(choices=AnswerReview.Verdict.choices)


class AnswerReviewSerializer(serializers.ModelSerializer):
    decided_by = serializers.SerializerMethodField()

    class Meta:
        model = AnswerReview
        fields = ["id", "solution", "verdict", "decided_by", "decided_at", "answer", "ground_truth"]

    def get_decided_by(self, review: AnswerReview) -> str:
        return str(review.decided_by.labeler.uuid)


class AnswerReviewQueueView(APIView):
    """The next answers waiting for a person, oldest first (at most `limit`)."""

    permission_classes = [IsResearcher]

    @extend_schema(parameters=[QueueQuerySerializer], responses=QueueSerializer)
    def get(self, request: Request) -> Response:
        query = QueueQuerySerializer(
            data={
                "limit": request.query_params.get("limit", 20),
                "skipped": request.query_params.getlist("skipped"),
            }
        )
        query.is_valid(raise_exception=True)
        limit, skipped = query.validated_data["limit"], query.validated_data["skipped"]
        results = list(selectors.answer_review_queue(skipped=skipped)[:limit])
        body = {"count": selectors.answer_review_queue().count(), "results": results}
        return Response(QueueSerializer(body).data)


class AnswerReviewView(APIView):
    """Decide a waiting answer: equal (the solution becomes correct) or not_equal (wrong)."""

    permission_classes = [IsResearcher]

    @extend_schema(request=DecisionSerializer, responses={201: AnswerReviewSerializer})
    def post(self, request: Request) -> Response:
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        review = answer_review.decide_answer(
            solution_id=body.validated_data["solution"],
            user=request.user,
            verdict=body.validated_data["verdict"],
        )
        return Response(AnswerReviewSerializer(review).data, status=status.HTTP_201_CREATED)


class AnswerReviewExportView(APIView):
    """Every hand-judged answer pair as JSONL, streamed; deciders appear as labeler UUIDs."""

    permission_classes = [IsResearcher]

    @extend_schema(responses={(200, "application/jsonl"): OpenApiTypes.STR})
    def get(self, request: Request) -> StreamingHttpResponse:
        lines = (
            json.dumps(pair, ensure_ascii=False) + "\n" for pair in selectors.answer_review_pairs()
        )
        response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = f'attachment; filename="answer-reviews-{stamp}.jsonl"'
        return response
