from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate


class LabelingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "labeling"

    def ready(self) -> None:
        from core.roles import sync_role_groups_after_migrate
        from labeling.services.usernames import connect_username_identity
        from labeling.services.workbench import recount_after_delete
        from labeling.tokens import connect_token_revocation

        # A username that reads as an existing user's is refused on every path (core.usernames).
        connect_username_identity()

        # A password change, a deactivation or a change of role ends the user's API tokens.
        connect_token_revocation()

        # A deleted label gives its solution back to the queues (Solution.labels_submitted).
        post_delete.connect(
            recount_after_delete,
            sender=self.get_model("LabelingSession"),
            dispatch_uid="labeling.recount_after_delete",
        )

        # Sent after `migrate` and after every test flush; trainer is the last of our apps.
        post_migrate.connect(
            sync_role_groups_after_migrate,
            sender=self.apps.get_app_config("trainer"),
            dispatch_uid="labeling.sync_role_groups",
        )
