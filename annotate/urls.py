from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.urls import include, path

# Password reset mails a link: without a mail server its form would take an address and
# send nothing, so its pages are not routed at all.
PASSWORD_RESET = {
    "password_reset",
    "password_reset_done",
    "password_reset_confirm",
    "password_reset_complete",
}
accounts = [
    pattern
    for pattern in auth_urls.urlpatterns
    if settings.EMAIL_HOST or pattern.name not in PASSWORD_RESET
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include(accounts)),
    path("api/", include("annotate.api_urls")),
    path("", include("labeling.urls")),
    path("", include("trainer.urls")),
]
