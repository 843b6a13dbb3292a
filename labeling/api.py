"""The REST API of the labeling side. Thin: every operation is a service or selector call."""

import json
import tempfile
from pathlib import Path

from django.db.models import Exists, OuterRef, QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ParseError, PermissionDenied, ValidationError
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import ReadOnlyModelViewSet

from labeling import imports, quality, selectors, services, tokens
from labeling import serializers as s
from labeling.models import ImportJob, LabelingSession, Problem, Solution
from labeling.permissions import (
    ADMIN,
    RESEARCHER,
    IsAdmin,
    IsLabeler,
    IsResearcher,
    ReadResearcherWriteAdmin,
    has_role,
)


def _bulk_import(request: Request, importer) -> Response:
    """Run an importer on a JSON array body: same validation, grading and all-or-nothing."""
    items = request.data
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list) or not items:
        raise ParseError("Send a JSON object or a non-empty JSON array of objects.")
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
        f.flush()
        try:
            result = importer(path=Path(f.name), name="item")
        except services.ImportFailed as exc:
            raise ValidationError({"detail": str(exc)}) from None
    return Response(
        s.BulkResultSerializer(result).data,
        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
    )


class _Filters(serializers.Serializer):
    """Query-string filters, validated so a bad value is a 400, not a 500."""

    def lookups(self, params) -> dict:
        # A plain dict, not the QueryDict: DRF reads a missing boolean in form data as false.
        self.initial_data = {key: values[-1] for key, values in params.lists()}
        if not self.is_valid():
            raise ValidationError(self.errors)
        # validated_data is keyed by each field's source, which is an ORM lookup here.
        return dict(self.validated_data)


class ProblemFilters(_Filters):
    subject = serializers.CharField(required=False)
    level = serializers.IntegerField(required=False, min_value=1, max_value=10)
    split = serializers.CharField(required=False)
    is_bad = serializers.BooleanField(required=False)
    unique_id = serializers.CharField(required=False)


class SolutionFilters(_Filters):
    problem = serializers.IntegerField(required=False, min_value=1, source="problem_id")
    generation = serializers.IntegerField(required=False, source="generation__number")
    is_correct = serializers.BooleanField(required=False)
    is_quality_control = serializers.BooleanField(required=False)
    is_screening = serializers.BooleanField(required=False)
    source = serializers.CharField(required=False)
    labeled = serializers.BooleanField(required=False, help_text="Has a submitted label.")


@extend_schema(parameters=[ProblemFilters])
class ProblemViewSet(ReadOnlyModelViewSet):
    """Problems: researchers read, admins create or update in bulk (idempotent on unique_id)."""

    serializer_class = s.ProblemSerializer
    permission_classes = [ReadResearcherWriteAdmin]

    def get_queryset(self) -> QuerySet[Problem]:
        queryset = Problem.objects.order_by("id")
        if self.action == "list":
            queryset = queryset.filter(**ProblemFilters().lookups(self.request.query_params))
        return queryset

    @extend_schema(
        request=inline_serializer("ProblemImport", {"problem": serializers.CharField()}, many=True),
        responses={201: s.BulkResultSerializer, 200: s.BulkResultSerializer},
        description="MATH-style objects (problem, answer, solution, subject, level, unique_id).",
    )
    def create(self, request: Request) -> Response:
        return _bulk_import(request, services.import_problems)


@extend_schema(parameters=[SolutionFilters])
class SolutionViewSet(ReadOnlyModelViewSet):
    """Candidate solutions: researchers read, admins import (graded) and mark QC/screening."""

    serializer_class = s.SolutionSerializer
    permission_classes = [ReadResearcherWriteAdmin]

    def get_queryset(self) -> QuerySet[Solution]:
        queryset = Solution.objects.select_related("generation").order_by("id")
        if self.action != "list":
            return queryset
        lookups = SolutionFilters().lookups(self.request.query_params)
        labeled = lookups.pop("labeled", None)
        queryset = queryset.filter(**lookups)
        if labeled is not None:
            done = LabelingSession.objects.filter(
                solution=OuterRef("pk"), submitted_at__isnull=False
            )
            queryset = queryset.filter(Exists(done)) if labeled else queryset.exclude(Exists(done))
        return queryset

    @extend_schema(
        request=inline_serializer(
            "SolutionImport",
            {"unique_id": serializers.CharField(), "steps": serializers.ListField()},
            many=True,
        ),
        responses={201: s.BulkResultSerializer, 200: s.BulkResultSerializer},
        description="Objects with unique_id (or problem text), steps, answer, source, score.",
    )
    def create(self, request: Request) -> Response:
        return _bulk_import(request, services.import_solutions)


class SolutionRoleView(APIView):
    """Serve a solution as quality control, as a screening question, or neither (admins)."""

    permission_classes = [IsAdmin]

    @extend_schema(request=s.SolutionRoleSerializer, responses=s.SolutionSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = s.SolutionRoleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        role = None if body.validated_data["role"] == "none" else body.validated_data["role"]
        solutions = Solution.objects.filter(pk=pk)
        if not quality.mark_solutions(solutions=solutions, role=role):
            raise NotFound(f"No solution {pk}.")
        return Response(s.SolutionSerializer(solutions.get()).data)


class SessionViewSet(ReadOnlyModelViewSet):
    """Labeling sessions with their step ratings. Annotators see only their own."""

    serializer_class = s.SessionSerializer
    permission_classes = [IsLabeler]
    queryset = LabelingSession.objects.none()  # for the schema; get_queryset decides

    def get_queryset(self) -> QuerySet[LabelingSession]:
        queryset = LabelingSession.objects.select_related("labeler", "generation").prefetch_related(
            "steps__ratings"
        )
        if not has_role(self.request.user, RESEARCHER, ADMIN):
            # Someone else's session is a 404 to an annotator, not a 403: ids leak nothing.
            queryset = queryset.filter(labeler__user=self.request.user)
        return queryset.order_by("id")


def _labeling_call(operation, **kwargs):
    try:
        return operation(**kwargs)
    except services.NotYourSession as exc:
        raise PermissionDenied(str(exc)) from None
    except services.LabelingRefused as exc:
        raise ValidationError({"detail": str(exc)}) from None


class NextTaskView(APIView):
    """The caller's open session, or a newly assigned solution with a lease."""

    permission_classes = [IsLabeler]

    @extend_schema(
        request=None,
        responses={200: s.AssignmentSerializer, 204: OpenApiResponse(description="Queue empty")},
    )
    def post(self, request: Request) -> Response:
        labeler = services.get_or_create_labeler(user=request.user)
        assignment = _labeling_call(services.next_assignment, labeler=labeler)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(s.AssignmentSerializer(assignment).data)


class RateView(APIView):
    """Rate (or re-rate) one step of the caller's session; repeating it changes nothing."""

    permission_classes = [IsLabeler]

    @extend_schema(request=s.RateSerializer, responses=s.SessionSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = s.RateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = _labeling_call(
            services.rate_step,
            session_id=pk,
            labeler=services.get_or_create_labeler(user=request.user),
            step_index=body.validated_data["step"],
            rating=body.validated_data["rating"],
            flagged=body.validated_data["flagged"],
        )
        return Response(s.SessionSerializer(session).data)


class SubmitView(APIView):
    """Finish the caller's session: found_error, solution, bad_problem or give_up."""

    permission_classes = [IsLabeler]

    @extend_schema(request=s.SubmitSerializer, responses=s.SessionSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = s.SubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = _labeling_call(
            services.submit_session,
            session_id=pk,
            labeler=services.get_or_create_labeler(user=request.user),
            finish_reason=body.validated_data["finish_reason"],
            reason_text=body.validated_data["reason"],
        )
        return Response(s.SessionSerializer(session).data)


class ExportView(APIView):
    """Every submitted label as PRM800K JSONL, streamed; labelers appear as UUIDs."""

    permission_classes = [IsResearcher]

    @extend_schema(
        parameters=[s.ExportQuerySerializer],
        responses={(200, "application/jsonl"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = s.ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        filters = selectors.ExportFilters(**query.validated_data)
        records = selectors.iter_prm800k_records(filters=filters)
        lines = (selectors.json_line(record) for record in records)
        response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="prm800k.jsonl"'
        return response


class ImportJobViewSet(ReadOnlyModelViewSet):
    """Upload a problems / solutions / PRM800K file; a worker imports it all or nothing."""

    serializer_class = s.ImportJobSerializer
    permission_classes = [IsAdmin]
    parser_classes = [MultiPartParser, JSONParser]
    queryset = ImportJob.objects.order_by("-id")

    @extend_schema(
        request={"multipart/form-data": s.ImportUploadSerializer},
        responses={202: s.ImportJobSerializer},
    )
    def create(self, request: Request) -> Response:
        body = s.ImportUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        try:
            job = imports.create_import_job(
                user=request.user,
                kind=body.validated_data["kind"],
                upload=upload,
                file_name=upload.name,
            )
        except imports.UploadRefused as exc:
            return Response({"detail": str(exc)}, status=exc.status)
        return Response(s.ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class TokenListView(APIView):
    """The caller's own API tokens; a new token's secret is returned once."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=s.TokenSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(s.TokenSerializer(tokens.api_tokens(user=request.user), many=True).data)

    @extend_schema(request=s.TokenCreateSerializer, responses={201: s.NewTokenSerializer})
    def post(self, request: Request) -> Response:
        body = s.TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        new = tokens.create_api_token(
            user=request.user, expires_in_days=body.validated_data.get("expires_in_days")
        )
        return Response(s.NewTokenSerializer(new).data, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, token_key: str) -> Response:
        if not tokens.revoke_api_token(user=request.user, token_key=token_key):
            raise NotFound("No such token of yours.")
        return Response(status=status.HTTP_204_NO_CONTENT)
