from django.urls import include, path

from labeling import answer_review_views, data_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("problems/", data_views.problem_list, name="problem-list"),
    path("solutions/", data_views.solution_list, name="solution-list"),
    path("labels/", data_views.label_list, name="label-list"),
    path("labels/export/", data_views.export_labels, name="export-labels"),
    path("label/", views.label_next, name="label-next"),
    path("label/<int:session_id>/", views.label_session, name="label-session"),
    path("label/<int:session_id>/rate/", views.rate, name="label-rate"),
    path("label/<int:session_id>/submit/", views.submit, name="label-submit"),
    path("label/<int:session_id>/skip/", views.skip, name="label-skip"),
    path("label/<int:session_id>/renew/", views.renew, name="label-renew"),
    path("labels/mine/", views.my_labels, name="my-labels"),
    path("labels/mine/<int:session_id>/", views.my_label, name="my-label"),
    path("labels/mine/<int:session_id>/correct/", views.correct_label, name="my-label-correct"),
    path(
        "labels/mine/<int:session_id>/cancel-correction/",
        views.cancel_correction,
        name="my-label-cancel-correction",
    ),
    path(
        "label/<int:session_id>/human-completion/",
        views.human_completion,
        name="label-human-completion",
    ),
    path("label/preview/", views.math_preview, name="math-preview"),
    path("quality/", views.quality_dashboard, name="quality"),
    path(
        "quality/labelers/<uuid:labeler_uuid>/active/", views.labeler_active, name="labeler-active"
    ),
    path("quality/disagreements/", views.labeler_disagreements, name="labeler-disagreement-list"),
    path("quality/solutions/<int:solution_id>/adjudicate/", views.adjudicate, name="adjudicate"),
    path("answers/review/", answer_review_views.answer_review_page, name="answer-review"),
    path(
        "answers/review/<int:solution_id>/decide/",
        answer_review_views.answer_review_decide,
        name="answer-review-decide",
    ),
    path("reports/", views.problem_reports, name="problem-reports"),
    path(
        "reports/problems/<int:problem_id>/confirm/",
        views.problem_report_confirm,
        name="problem-report-confirm",
    ),
    path(
        "reports/problems/<int:problem_id>/dismiss/",
        views.problem_report_dismiss,
        name="problem-report-dismiss",
    ),
    path("guidelines/", views.guidelines, name="guidelines"),
    path("settings/tokens/", views.api_token_page, name="api-token-page"),
    path("", include("labeling.live_urls")),
]
