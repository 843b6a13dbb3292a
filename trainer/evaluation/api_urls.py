from rest_framework.routers import SimpleRouter

from trainer.evaluation.api import EvaluationSetViewSet, EvaluationViewSet

router = SimpleRouter()
router.register("evaluation-sets", EvaluationSetViewSet, basename="evaluation-set")
router.register("evaluations", EvaluationViewSet, basename="evaluation")

urlpatterns = router.urls
