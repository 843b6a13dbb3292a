from rest_framework.routers import SimpleRouter

from trainer.sampling.api import SamplingRunViewSet

router = SimpleRouter()
router.register("sampling-runs", SamplingRunViewSet, basename="sampling-run")

urlpatterns = router.urls
