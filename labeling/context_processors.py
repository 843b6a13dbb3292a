from labeling.permissions import can_export_labels


def roles(request):
    """What the navigation may offer the current user."""
    return {"can_export": can_export_labels(request.user)}
