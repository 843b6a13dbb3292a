"""Admin view of the local model records."""

from django.contrib import admin

from generators.models import LocalModel


@admin.register(LocalModel)
class LocalModelAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "architecture", "parameter_count", "path", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "path"]
    # Records come from the disk (`register_models`, `convert_gguf`); only the name is a
    # label of the researcher's choosing. Deleting a record leaves the files alone.
    readonly_fields = ["kind", "path", "architecture", "parameter_count", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False
