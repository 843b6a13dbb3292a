from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("annotate.api_urls")),
    path("", include("labeling.urls")),
    path("", include("trainer.urls")),
]
