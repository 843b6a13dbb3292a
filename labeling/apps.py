from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LabelingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "labeling"

    def ready(self) -> None:
        from labeling.roles import sync_role_groups_after_migrate

        # Sent after `migrate` and after every test flush; trainer is the last of our apps.
        post_migrate.connect(
            sync_role_groups_after_migrate,
            sender=self.apps.get_app_config("trainer"),
            dispatch_uid="labeling.sync_role_groups",
        )
