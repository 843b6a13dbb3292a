from django.apps import AppConfig


class GeneratorsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "generators"
