from django.urls import path

from trainer.evaluation import views

urlpatterns = [
    path("evaluation-sets/", views.evaluation_set_list, name="evaluation-set-list"),
    path(
        "model-versions/<int:model_version_id>/evaluate/",
        views.model_version_evaluate,
        name="model-version-evaluate",
    ),
    path(
        "model-versions/<int:model_version_id>/",
        views.model_version_detail,
        name="model-version-detail",
    ),
    path(
        "model-versions/<int:model_version_id>/evaluations/<int:evaluation_id>/cancel/",
        views.evaluation_cancel,
        name="evaluation-cancel",
    ),
    path(
        "model-versions/<int:model_version_id>/evaluations/<int:evaluation_id>/again/",
        views.evaluation_again,
        name="evaluation-again",
    ),
]
