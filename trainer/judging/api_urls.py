from rest_framework.routers import SimpleRouter

from trainer.judging.api import JudgeRunViewSet

router = SimpleRouter()
router.register("judge-runs", JudgeRunViewSet, basename="judge-run")

urlpatterns = router.urls
