"""The REST API of sampling runs: start, list, watch, cancel and resume them (core.job_kinds).

Refusals are domain errors (core.errors): the API's exception handler gives each its status.
"""

from rest_framework.viewsets import ReadOnlyModelViewSet

from trainer.sampling.kind import KIND


class SamplingRunViewSet(ReadOnlyModelViewSet):
    """Sampling runs: researchers and admins start them, watch, cancel and resume them."""


SamplingRunViewSet = KIND.viewset(SamplingRunViewSet)  # noqa: F811 -- the kind adds its actions
