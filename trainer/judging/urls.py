from django.urls import path

from trainer.judging import views

urlpatterns = [
    path("judging/", views.judge_list, name="judge-list"),
    path("judging/table/", views.judge_table, name="judge-table"),
    path("judging/<int:run_id>/", views.judge_detail, name="judge-detail"),
    path("judging/<int:run_id>/progress/", views.judge_progress, name="judge-progress"),
    path("judging/<int:run_id>/cancel/", views.judge_cancel, name="judge-cancel"),
    path("judging/<int:run_id>/resume/", views.judge_resume, name="judge-resume"),
    path("judging/<int:run_id>/export/", views.judge_export, name="judge-export"),
]
