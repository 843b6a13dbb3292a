from django.urls import path

from labeling import views

urlpatterns = [
    path("", views.home, name="home"),
    path("problems/", views.problem_list, name="problem-list"),
    path("labels/export/", views.export_labels, name="export-labels"),
]
