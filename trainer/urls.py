from django.urls import path

from trainer import views

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/table/", views.run_table, name="run-table"),
    path("runs/<int:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/progress/", views.run_progress, name="run-progress"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("models/", views.model_list, name="model-list"),
    path("models/<int:model_version_id>/promote/", views.model_promote, name="model-promote"),
]
