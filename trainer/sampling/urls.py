from trainer.sampling.kind import KIND

urlpatterns = KIND.urls()
