"""API of phase-1 live labeling (labeling.services.live)."""

from django.urls import path

from labeling import api

urlpatterns = [
    path("live/generations/", api.LiveGenerationView.as_view(), name="api-live-generations"),
    path("live/sessions/<int:pk>/", api.LiveSessionView.as_view(), name="api-live-session"),
    path(
        "live/sessions/<int:pk>/<str:action>/",
        api.LiveActionView.as_view(),
        name="api-live-session-action",
    ),
]
