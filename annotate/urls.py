from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import include, path, reverse
from django.utils.http import url_has_allowed_host_and_scheme


def admin_login(request, extra_context=None):
    """The admin's own login form is never shown: a signed-in user who is not staff (an
    annotator at /admin/) gets the site's 403 page, anyone else signs in on the site's login
    page and comes back."""
    target = request.GET.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("admin:index")
    if request.user.is_authenticated and not request.user.is_staff:
        raise PermissionDenied("The admin is for staff; your account is not.")
    if request.user.is_authenticated:
        return redirect(target)
    return redirect_to_login(target)


# Set before admin.site.urls below builds the admin's URL patterns from it.
admin.site.login = admin_login

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
