from django.urls import path

from trainer.evaluation import views

urlpatterns = [
    path("evaluation-sets/", views.evaluation_set_list, name="evaluation-set-list"),
    path(
        "models/<int:model_version_id>/evaluate/",
        views.model_version_evaluate,
        name="model-evaluate",
    ),
    path("models/<int:model_version_id>/", views.model_version_detail, name="model-detail"),
    path(
        "models/<int:model_version_id>/evaluations/<int:evaluation_id>/cancel/",
        views.evaluation_cancel,
        name="evaluation-cancel",
    ),
    path(
        "models/<int:model_version_id>/evaluations/<int:evaluation_id>/again/",
        views.evaluation_again,
        name="evaluation-again",
    ),
]
