import functools

from core.permissions import can_export_labels, can_view_quality


def roles(request):
    """What the navigation may offer the current user."""
    return {
        "can_export": can_export_labels(request.user),
        # Templates call a callable only where it is used: htmx partials skip the query.
        "can_view_quality": functools.partial(can_view_quality, request.user),
    }
