"""Admin view of the local model records."""

from django.contrib import admin

from generators.models import LocalModel


@admin.register(LocalModel)
class LocalModelAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "architecture", "parameter_count", "path", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "path"]
    # Records come from the disk (`register_models`, `convert_gguf`), and training runs store a
    # backbone by its name: nothing here is edited by hand. Deleting a record leaves the files
    # alone (in PRM_MODEL_DIR and in the artifact store).
    readonly_fields = [
        "name",
        "kind",
        "path",
        "artifact",
        "architecture",
        "parameter_count",
        "created_at",
    ]

    def has_add_permission(self, request) -> bool:
        return False
