from django.urls import path

from trainer.sampling import views

urlpatterns = [
    path("sampling/", views.sampling_list, name="sampling-list"),
    path("sampling/table/", views.sampling_table, name="sampling-table"),
    path("sampling/<int:run_id>/", views.sampling_detail, name="sampling-detail"),
    path("sampling/<int:run_id>/progress/", views.sampling_progress, name="sampling-progress"),
    path("sampling/<int:run_id>/cancel/", views.sampling_cancel, name="sampling-cancel"),
    path("sampling/<int:run_id>/resume/", views.sampling_resume, name="sampling-resume"),
]
