from django.urls import path

from trainer.judging import views
from trainer.judging.kind import KIND

urlpatterns = [
    *KIND.urls(),
    path("judging/<int:run_id>/export/", views.judge_export, name="judge-export"),
]
