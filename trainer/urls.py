from django.urls import include, path

from core.deprecation import moved
from trainer import export_views, views

urlpatterns = [
    path("training-runs/", views.training_run_list, name="training-run-list"),
    path("training-runs/table/", views.training_run_table, name="training-run-table"),
    path("training-runs/<int:run_id>/", views.training_run_detail, name="training-run-detail"),
    path(
        "training-runs/<int:run_id>/progress/",
        views.training_run_progress,
        name="training-run-progress",
    ),
    path(
        "training-runs/<int:run_id>/cancel/", views.training_run_cancel, name="training-run-cancel"
    ),
    path("model-versions/", views.model_version_list, name="model-version-list"),
    path(
        "model-versions/<int:model_version_id>/activate/",
        views.model_version_activate,
        name="model-version-activate",
    ),
    path(
        "model-versions/<int:model_version_id>/scoring/",
        views.model_version_scoring,
        name="model-version-scoring",
    ),
    path("inspect/disagreements/", views.disagreement_list, name="disagreement-list"),
    path("inspect/solutions/<int:solution_id>/", views.solution_inspect, name="solution-inspect"),
    path("generations/", views.generation_list, name="generation-list"),
    path("generations/table/", views.generation_table, name="generation-table"),
    path("generations/<int:generation_id>/", views.generation_detail, name="generation-detail"),
    path(
        "generations/<int:generation_id>/overlap/",
        views.generation_overlap,
        name="generation-overlap",
    ),
    path("labels/export/trl/", export_views.export_stepwise, name="export-stepwise"),
    path("", include("trainer.sampling.urls")),
    path("", include("trainer.judging.urls")),
    path("", include("trainer.evaluation.urls")),
    # The addresses these pages had before sampling and judge runs existed beside training runs.
    *moved("runs/", "training-runs/"),
    *moved("models/", "model-versions/"),
]
