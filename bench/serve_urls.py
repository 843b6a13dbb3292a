"""URLs for `bench/serve.py` only: the app's URLs plus a floor view, never in the app.

The floor is the least a labeling write can cost on this stack: the same middleware
(sessions, CSRF, authentication, CSP, axes), a logged-in user, and one INSERT.
"""

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.http import require_POST

from annotate.urls import urlpatterns as app_urlpatterns

FLOOR_TABLE = "bench_floor"


@login_required
@require_POST
def floor(request: HttpRequest) -> HttpResponse:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {FLOOR_TABLE} (user_id, value) VALUES (%s, %s)",
            [request.user.pk, request.POST.get("value", "")],
        )
    return HttpResponse(status=204)


urlpatterns = [path("bench/floor/", floor, name="bench-floor"), *app_urlpatterns]
