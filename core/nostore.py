"""`Cache-Control: no-store` on every answer that carries a secret or an export.

A token shown once, a labels export, the page that names who is behind each labeler UUID:
none of it may be kept by a browser's cache or a proxy between, where the next user of the
machine or the proxy's operator would find it. One mechanism: a view marked with `no_store`
(a function, or a view class: Django's and DRF's `as_view()` carry the class), and any
download (`Content-Disposition: attachment`), wherever it is served from, the admin's
actions included.
"""

from collections.abc import Callable
from typing import TypeVar

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

V = TypeVar("V")


def no_store(view: V) -> V:
    """Mark a view function or view class whose answers must not be stored."""
    view.no_store = True
    return view


def _marked(view_func: Callable) -> bool:
    candidates = (
        view_func,
        getattr(view_func, "view_class", None),
        getattr(view_func, "cls", None),
    )
    return any(getattr(candidate, "no_store", False) for candidate in candidates)


def is_download(response: HttpResponse) -> bool:
    return response.get("Content-Disposition", "").strip().lower().startswith("attachment")


class NoStoreMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, "_stepwise_no_store", False) or is_download(response):
            patch_cache_control(response, no_store=True, private=True, max_age=0)
        return response

    def process_view(self, request: HttpRequest, view_func: Callable, view_args, view_kwargs):
        if _marked(view_func):
            request._stepwise_no_store = True
        return None
