from django.urls import include, path

from trainer import export_views, views

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/table/", views.run_table, name="run-table"),
    path("runs/<int:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/progress/", views.run_progress, name="run-progress"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("models/", views.model_list, name="model-list"),
    path("models/<int:model_version_id>/activate/", views.model_activate, name="model-activate"),
    path("models/<int:model_version_id>/scoring/", views.model_scoring, name="model-scoring"),
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
]
