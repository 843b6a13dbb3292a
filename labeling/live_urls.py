"""Pages of phase-1 live labeling (labeling.services.live)."""

from django.urls import path

from labeling import views

urlpatterns = [
    path("live/new/", views.live_generation_new, name="live-generation-new"),
    path("label/<int:session_id>/live/steps/", views.live_steps, name="live-steps"),
    path("label/<int:session_id>/live/rate/", views.live_rate, name="live-rate"),
    path("label/<int:session_id>/live/choose/", views.live_choose, name="live-choose"),
    path("label/<int:session_id>/live/write/", views.live_write, name="live-write"),
    path("label/<int:session_id>/live/retry/", views.live_retry, name="live-retry"),
    path("label/<int:session_id>/live/stop/", views.live_stop, name="live-stop"),
    path("label/<int:session_id>/live/finish/", views.live_finish, name="live-finish"),
]
