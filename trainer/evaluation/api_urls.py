from rest_framework.routers import SimpleRouter

from trainer.evaluation.api import EvaluationSetViewSet

router = SimpleRouter()
router.register("evaluation-sets", EvaluationSetViewSet, basename="evaluation-set")

urlpatterns = router.urls
