from django.contrib import admin

from labeling.models import (
    Generation,
    Labeler,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.permissions import can_export_labels
from labeling.selectors import ExportFilters
from labeling.views import prm800k_response

admin.site.site_header = "stepwise administration"


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("__str__", "subject", "level", "answer", "is_bad")
    list_filter = ("subject", "level", "is_bad", "split")
    search_fields = ("text", "unique_id", "answer")


@admin.register(Solution)
class SolutionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "problem",
        "answer",
        "is_correct",
        "source",
        "prm_score",
        "generation",
        "is_quality_control",
        "is_screening",
    )
    list_filter = ("is_correct", "is_quality_control", "is_screening", "source", "generation")
    search_fields = ("problem__text", "problem__unique_id", "answer")
    raw_id_fields = ("problem",)
    readonly_fields = ("content_hash",)
    actions = ("mark_quality_control", "unmark_quality_control", "mark_screening")

    @admin.action(description="Mark as quality control")
    def mark_quality_control(self, request, queryset):
        queryset.update(is_quality_control=True)

    @admin.action(description="Unmark quality control")
    def unmark_quality_control(self, request, queryset):
        queryset.update(is_quality_control=False)

    @admin.action(description="Mark as screening questions")
    def mark_screening(self, request, queryset):
        queryset.update(is_screening=True)


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    list_display = ("number", "model_version", "created_at")


@admin.register(Labeler)
class LabelerAdmin(admin.ModelAdmin):
    list_display = ("uuid", "user", "is_active")
    search_fields = ("uuid", "user__username")
    readonly_fields = ("uuid",)

    @admin.display(boolean=True)
    def is_active(self, obj):
        return obj.user.is_active


class StepRatingInline(admin.TabularInline):
    model = StepRating
    extra = 0
    fields = ("completion_index", "text", "rating", "flagged")


@admin.register(StepLabel)
class StepLabelAdmin(admin.ModelAdmin):
    list_display = ("session", "index", "chosen_completion")
    raw_id_fields = ("session",)
    inlines = (StepRatingInline,)


@admin.register(LabelingSession)
class LabelingSessionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "labeler",
        "solution",
        "generation",
        "finish_reason",
        "total_time",
        "submitted_at",
    )
    list_filter = ("finish_reason", "is_quality_control", "is_screening", "generation")
    raw_id_fields = ("labeler", "solution")
    date_hierarchy = "submitted_at"
    actions = ("export_prm800k",)

    @admin.action(description="Export selected as PRM800K JSONL")
    def export_prm800k(self, request, queryset):
        if not can_export_labels(request.user):
            self.message_user(request, "Only admins can export labels.", level="error")
            return None
        return prm800k_response(ExportFilters(), within=queryset)
