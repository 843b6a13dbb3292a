"""The REST API of the labeling side. Thin: every operation is a service or selector call."""

import json
import tempfile
from pathlib import Path

from django.db.models import QuerySet, prefetch_related_objects
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ParseError, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import ReadOnlyModelViewSet

from core.jobs import JobOrigin
from core.nostore import no_store
from core.params import serializer_fields
from core.permissions import (
    ADMIN,
    RESEARCHER,
    IsAdmin,
    IsLabeler,
    IsResearcher,
    ReadResearcherWriteAdmin,
    has_role,
)
from core.strictjson import StrictJSONParser
from labeling import (
    agreement,
    export,
    filters,
    first_error,
    judge_display,
    quality,
    selectors,
    tokens,
)
from labeling import serializers as s
from labeling.models import ImportJob, LabelingSession, Problem, Solution
from labeling.services import corrections, import_jobs, live, workbench
from labeling.services.importing import import_problems, import_solutions
from labeling.services.labelers import get_or_create_labeler


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
        result = importer(path=Path(f.name), name="item")
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
    level = serializers.IntegerField(required=False, min_value=1, max_value=5)
    split = serializers.CharField(required=False)
    is_bad = serializers.BooleanField(required=False)
    unique_id = serializers.CharField(required=False)


class SolutionFilters(_Filters):
    problem = serializers.IntegerField(required=False, min_value=1, source="problem_id")
    generation = serializers.IntegerField(required=False, source="generation__number")
    is_correct = serializers.BooleanField(
        required=False, allow_null=True, help_text="true, false, or null for ungraded."
    )
    is_quality_control = serializers.BooleanField(required=False)
    is_screening = serializers.BooleanField(required=False)
    source = serializers.CharField(required=False)
    labeled = serializers.BooleanField(required=False, help_text="Has a submitted label.")


def _data_filter_query(name: str, *, besides: type[serializers.Serializer]) -> type:
    """The data filters (labeling/filters.py) an endpoint reads beside its own query
    parameters, as a serializer for its schema: derived from the one definition."""
    own = set(besides().fields)
    found = serializer_fields(filters.DataFilters)
    return type(name, (serializers.Serializer,), {k: v for k, v in found.items() if k not in own})


def _data_filters(request: Request) -> filters.DataFilters:
    """The data pages' filters (labeling/filters.py) in the query string; a bad one is a 400."""
    try:
        return filters.from_query(request.query_params)
    except filters.InvalidFilter as exc:
        raise ValidationError({getattr(exc, "field", None) or "filters": [str(exc)]}) from None


@extend_schema(
    parameters=[ProblemFilters, _data_filter_query("ProblemDataFilters", besides=ProblemFilters)]
)
class ProblemViewSet(ReadOnlyModelViewSet):
    """Problems: researchers read, admins create or update in bulk (idempotent on unique_id)."""

    serializer_class = s.ProblemSerializer
    permission_classes = [ReadResearcherWriteAdmin]

    def get_queryset(self) -> QuerySet[Problem]:
        queryset = Problem.objects.order_by("id")
        if self.action == "list":
            queryset = queryset.filter(**ProblemFilters().lookups(self.request.query_params))
            chosen = _data_filters(self.request)
            if chosen.active:
                queryset = queryset.filter(pk__in=filters.problems(filters=chosen).values("pk"))
        return queryset

    @extend_schema(
        request=inline_serializer("ProblemImport", {"problem": serializers.CharField()}, many=True),
        responses={201: s.BulkResultSerializer, 200: s.BulkResultSerializer},
        description="MATH-style objects (problem, answer, solution, subject, level, unique_id).",
    )
    def create(self, request: Request) -> Response:
        return _bulk_import(request, import_problems)


@extend_schema(
    parameters=[
        SolutionFilters,
        _data_filter_query("SolutionDataFilters", besides=SolutionFilters),
    ]
)
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
            done = selectors.has_submitted_label()
            queryset = queryset.filter(done) if labeled else queryset.exclude(done)
        chosen = _data_filters(self.request)
        if chosen.active:
            queryset = queryset.filter(pk__in=filters.solutions(filters=chosen).values("pk"))
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
        return _bulk_import(request, import_solutions)


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
            "step_labels__ratings"
        )
        if not has_role(self.request.user, RESEARCHER, ADMIN):
            # Someone else's session is a 404 to an annotator, not a 403: ids leak nothing.
            queryset = queryset.filter(labeler__user=self.request.user)
        return queryset.order_by("id")


class NextSessionView(APIView):
    """The caller's open session, or the next one served from the queues, with a lease."""

    permission_classes = [IsLabeler]

    @extend_schema(
        request=None,
        responses={200: s.NextSessionSerializer, 204: OpenApiResponse(description="Queue empty")},
    )
    def post(self, request: Request) -> Response:
        served = workbench.next_session(labeler=get_or_create_labeler(user=request.user))
        if served is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(s.NextSessionSerializer(served, context={"request": request}).data)


def _session_answer(session: LabelingSession, labeler) -> LabelingSession:
    """`session` as the session serializers read it: its labeler (the caller's, already
    loaded) and its step labels with their ratings in two queries, not one per rated step."""
    session.labeler = labeler
    prefetch_related_objects([session], "step_labels__ratings")
    return session


class RateView(APIView):
    """Rate (or re-rate) one step of the caller's session, or one alternative of its -1 step;
    repeating it changes nothing."""

    permission_classes = [IsLabeler]

    @extend_schema(request=s.RateSerializer, responses=s.SessionStateSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = s.RateSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        labeler = get_or_create_labeler(user=request.user)
        session = workbench.rate_step(
            session_id=pk,
            labeler=labeler,
            step_index=body.validated_data["step_index"],
            rating=body.validated_data["rating"],
            flagged=body.validated_data["flagged"],
            completion_index=body.validated_data["completion_index"],
        )
        session = _session_answer(session, labeler)
        return Response(s.SessionStateSerializer(session, context={"request": request}).data)


class SubmitView(APIView):
    """Finish the caller's session: found_error, solution, bad_problem or give_up."""

    permission_classes = [IsLabeler]

    @extend_schema(request=s.SubmitSerializer, responses=s.SessionSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = s.SubmitSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        labeler = get_or_create_labeler(user=request.user)
        session = workbench.submit_session(
            session_id=pk,
            labeler=labeler,
            finish_reason=body.validated_data["finish_reason"],
            finish_reason_text=body.validated_data["finish_reason_text"],
        )
        session = _session_answer(session, labeler)
        return Response(s.SessionSerializer(session, context={"request": request}).data)


class CorrectView(APIView):
    """Reopen the caller's submitted label to correct it (then rate/ and submit/ as for any
    session; it stays counted as submitted), or with cancel-correction/ put it back as it was
    submitted. Refused, with the reason, once the label is used
    (`labeling.services.corrections.refusal`)."""

    permission_classes = [IsLabeler]
    cancel = False

    @extend_schema(request=None, responses=s.SessionSerializer)
    def post(self, request: Request, pk: int) -> Response:
        labeler = get_or_create_labeler(user=request.user)
        change = corrections.cancel_correction if self.cancel else corrections.reopen_label
        session = _session_answer(change(session_id=pk, labeler=labeler), labeler)
        return Response(s.SessionSerializer(session, context={"request": request}).data)


@no_store
class ExportView(APIView):
    """Every submitted label as PRM800K JSONL, streamed; labelers appear as UUIDs."""

    permission_classes = [IsResearcher]

    @extend_schema(
        parameters=[
            s.ExportQuerySerializer,
            _data_filter_query("ExportDataFilters", besides=s.ExportQuerySerializer),
        ],
        responses={(200, "application/jsonl"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = s.ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        chosen = _data_filters(request)
        within = filters.labels(filters=chosen) if chosen.active else None
        return export.prm800k_response(
            filters=export.ExportFilters(**query.validated_data), within=within
        )


class FirstErrorAgreementView(APIView):
    """Agreement on the first-error position between labelers and between label sources, as
    the quality page shows it (docs/labeling.md, "Agreement on the first error")."""

    permission_classes = [IsResearcher]

    @extend_schema(responses=s.FirstErrorReportSerializer)
    def get(self, request: Request) -> Response:
        report = first_error.report(agreement.overlapping_labels())
        return Response(s.FirstErrorReportSerializer(report).data)


class JudgeAgreementView(APIView):
    """Agreement of labelers with the judge, per judge display, as the quality page shows it
    (docs/labeling.md, "What the labeler sees of the judge")."""

    permission_classes = [IsResearcher]

    @extend_schema(responses=s.JudgeAgreementSerializer(many=True))
    def get(self, request: Request) -> Response:
        figures = judge_display.agreement_by_display()
        return Response(s.JudgeAgreementSerializer(figures, many=True).data)


class ImportJobViewSet(ReadOnlyModelViewSet):
    """Upload a problems / solutions / PRM800K file; a worker imports it all or nothing."""

    serializer_class = s.ImportJobSerializer
    permission_classes = [IsAdmin]
    parser_classes = [MultiPartParser, StrictJSONParser]
    queryset = ImportJob.objects.select_related("requested_by").order_by("-id")

    @extend_schema(
        request={"multipart/form-data": s.ImportUploadSerializer},
        responses={202: s.ImportJobSerializer},
    )
    def create(self, request: Request) -> Response:
        body = s.ImportUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        job = import_jobs.create_import_job(
            user=request.user,
            kind=body.validated_data["kind"],
            upload=upload,
            file_name=upload.name,
            origin=JobOrigin.API,
        )
        return Response(s.ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=None,
        responses=s.ImportJobSerializer,
        description="A queued import is cancelled at once; a running one stops before its rows "
        "are committed, so nothing of it is imported. 409 once it has finished.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        job = import_jobs.cancel_import_job(job_id=self.get_object().pk)
        return Response(s.ImportJobSerializer(job).data)


@no_store
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
            user=request.user,
            expires_in_days=body.validated_data.get("expires_in_days"),
            created_with=request.auth,
        )
        return Response(s.NewTokenSerializer(new).data, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, token_key: str) -> Response:
        if not tokens.revoke_api_token(user=request.user, token_key=token_key):
            raise NotFound("No such token of yours.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class HumanCompletionView(APIView):
    """Write (or replace, or with empty text remove) the caller's own correct step in place of
    the -1 step, once it and its alternatives are rated (PRM800K phase 1's human_completion)."""

    permission_classes = [IsLabeler]

    @extend_schema(request=s.HumanCompletionSerializer, responses=s.SessionStateSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = s.HumanCompletionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        labeler = get_or_create_labeler(user=request.user)
        session = workbench.write_human_completion(
            session_id=pk,
            labeler=labeler,
            step_index=body.validated_data["step_index"],
            text=body.validated_data["text"],
        )
        session = _session_answer(session, labeler)
        return Response(s.SessionStateSerializer(session, context={"request": request}).data)


# --- phase-1 live labeling (labeling.services.live) ----------------------------------------------


class LiveGenerationView(APIView):
    """Open a live (phase-1) generation: problems, generator, sampling settings, proposals."""

    permission_classes = [IsResearcher]

    @extend_schema(request=s.LiveGenerationCreateSerializer, responses=s.LiveGenerationSerializer)
    def post(self, request: Request) -> Response:
        body = s.LiveGenerationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        generation = live.create_live_generation(
            user=request.user,
            problem_ids=data["problems"],
            generator=data["generator"],
            settings=data["settings"],
            proposals=data["proposals"],
        )
        return Response(s.LiveGenerationSerializer(generation).data, status=status.HTTP_201_CREATED)


def _live_session(request: Request, pk: int) -> LabelingSession:
    session = LabelingSession.objects.filter(
        pk=pk, labeler=get_or_create_labeler(user=request.user), queue="live"
    ).first()
    if session is None:
        raise NotFound(f"You have no live session {pk}.")
    return session


class LiveSessionView(APIView):
    """The caller's live session: the trajectory so far and the current step's proposals
    (poll until its status is "ready"; "failed" says why, and `retry/` asks again)."""

    permission_classes = [IsLabeler]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        return Response(live.live_state(session=_live_session(request, pk)))


class LiveActionView(APIView):
    """rate/, choose/, write/, retry/, stop/ (stop waiting for proposals) or finish/ on the
    caller's live session; each repeat
    of the same request stores nothing twice."""

    permission_classes = [IsLabeler]

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, pk: int, action: str) -> Response:
        labeler = get_or_create_labeler(user=request.user)
        _live_session(request, pk)
        serializer = {
            "rate": s.LiveRateSerializer,
            "choose": s.LiveChooseSerializer,
            "write": s.LiveWriteSerializer,
            "retry": s.LiveStepSerializer,
            "stop": s.LiveStepSerializer,
            "finish": s.LiveFinishSerializer,
        }.get(action)
        if serializer is None:
            raise NotFound(f"No live action {action!r}.")
        body = serializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        d = body.validated_data
        if action == "rate":
            session = live.rate_proposal(
                session_id=pk,
                labeler=labeler,
                step_index=d["step_index"],
                completion_index=d["completion_index"],
                rating=d["rating"],
                flagged=d["flagged"],
            )
        elif action == "choose":
            session = live.choose_proposal(
                session_id=pk,
                labeler=labeler,
                step_index=d["step_index"],
                completion_index=d["completion_index"],
            )
        elif action == "write":
            session = live.write_step(
                session_id=pk, labeler=labeler, step_index=d["step_index"], text=d["text"]
            )
        elif action == "retry":
            session = live.retry_proposals(
                session_id=pk, labeler=labeler, step_index=d["step_index"]
            )
        elif action == "stop":
            session = live.stop_waiting(session_id=pk, labeler=labeler, step_index=d["step_index"])
        else:
            session = live.finish_live(
                session_id=pk,
                labeler=labeler,
                finish_reason=d["finish_reason"],
                finish_reason_text=d["finish_reason_text"],
            )
        session.refresh_from_db()
        return Response(live.live_state(session=session))
