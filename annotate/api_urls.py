"""Everything under /api/: the labeling side, the trainer side, tokens and the schema."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from annotate.apidocs import SchemaDocsView, SchemaView
from labeling import answer_review_api
from labeling import api as labeling_api
from trainer import api as trainer_api

router = DefaultRouter()
router.register("problems", labeling_api.ProblemViewSet, basename="problem")
router.register("solutions", labeling_api.SolutionViewSet, basename="solution")
router.register("sessions", labeling_api.SessionViewSet, basename="session")
router.register("imports", labeling_api.ImportJobViewSet, basename="import")
router.register("training-runs", trainer_api.TrainingRunViewSet, basename="training-run")
router.register("model-versions", trainer_api.ModelVersionViewSet, basename="model-version")
router.register("generations", trainer_api.GenerationViewSet, basename="generation")

urlpatterns = [
    # Both need a login unless API_SCHEMA_PUBLIC (annotate/apidocs.py).
    path("schema/", SchemaView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's script as a file, so the CSP needs no inline script.
    path("docs/", SchemaDocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("solutions/<int:pk>/role/", labeling_api.SolutionRoleView.as_view(), name="solution-role"),
    path("sessions/next/", labeling_api.NextSessionView.as_view(), name="api-next-session"),
    path("sessions/<int:pk>/rate/", labeling_api.RateView.as_view(), name="api-rate"),
    path("sessions/<int:pk>/submit/", labeling_api.SubmitView.as_view(), name="api-submit"),
    path("sessions/<int:pk>/correct/", labeling_api.CorrectView.as_view(), name="api-correct"),
    path(
        "sessions/<int:pk>/cancel-correction/",
        labeling_api.CorrectView.as_view(cancel=True),
        name="api-cancel-correction",
    ),
    path(
        "sessions/<int:pk>/human-completion/",
        labeling_api.HumanCompletionView.as_view(),
        name="api-human-completion",
    ),
    path("labels/export/", labeling_api.ExportView.as_view(), name="api-export"),
    path(
        "quality/first-error/",
        labeling_api.FirstErrorAgreementView.as_view(),
        name="api-first-error-agreement",
    ),
    path(
        "quality/judge/",
        labeling_api.JudgeAgreementView.as_view(),
        name="api-judge-agreement",
    ),
    path(
        "answer-reviews/queue/",
        answer_review_api.AnswerReviewQueueView.as_view(),
        name="api-answer-review-queue",
    ),
    path(
        "answer-reviews/export/",
        answer_review_api.AnswerReviewExportView.as_view(),
        name="api-answer-review-export",
    ),
    path(
        "answer-reviews/", answer_review_api.AnswerReviewView.as_view(), name="api-answer-reviews"
    ),
    path("score/", trainer_api.ScoreView.as_view(), name="api-score"),
    path("tokens/", labeling_api.TokenListView.as_view(), name="api-tokens"),
    path(
        "tokens/<str:token_key>/", labeling_api.TokenDetailView.as_view(), name="api-token-detail"
    ),
    path("", include("trainer.sampling.api_urls")),
    path("", include("trainer.judging.api_urls")),
    path("", include("trainer.evaluation.api_urls")),
    path("", include("labeling.live_api_urls")),
    path("", include(router.urls)),
]
