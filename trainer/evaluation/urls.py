from django.urls import path

from trainer.evaluation import views

urlpatterns = [
    path("evaluation-sets/", views.evaluation_set_list, name="evaluation-set-list"),
    path("models/<int:model_version_id>/", views.model_version_detail, name="model-detail"),
]
