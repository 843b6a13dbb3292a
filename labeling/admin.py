from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import admin as auth_admin
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import get_user_model

from core.errors import Invalid
from core.permissions import can_export_labels
from labeling import filters, mathtext, quality
from labeling.export import ExportFilters, prm800k_response
from labeling.models import (
    Generation,
    Guideline,
    Labeler,
    LabelingSession,
    Problem,
    ProblemReport,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.services import usernames
from labeling.services.labelers import get_or_create_labeler

admin.site.site_header = "stepwise administration"


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("__str__", "subject", "level", "answer", "is_bad")
    list_filter = ("subject", "level", "is_bad", "split")
    search_fields = ("text", "unique_id", "answer")


@admin.register(ProblemReport)
class ProblemReportAdmin(admin.ModelAdmin):
    """Read here; reviews are made on the reports page, where confirm guards quality control."""

    list_display = ("id", "problem", "labeler", "status", "created_at", "reviewed_at")
    list_filter = ("status",)
    search_fields = ("problem__text", "problem__unique_id", "reason")
    readonly_fields = (
        "problem",
        "labeler",
        "session",
        "reason",
        "created_at",
        "status",
        "reviewed_by",
        "reviewed_at",
    )

    def has_add_permission(self, request):
        return False


class SourceFilter(admin.SimpleListFilter):
    """The models that wrote solutions, from the data filters' cached list: Django's own filter
    reads every solution for its distinct values on each look (55 ms at 100,000)."""

    title = "source model"
    parameter_name = "source"

    def lookups(self, request, model_admin):
        return [(source, source) for source in filters.choices_seen()["source"]]

    def queryset(self, request, queryset):
        return queryset.filter(source=self.value()) if self.value() else queryset


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
        "has_gold",
    )
    list_filter = (
        "is_correct",
        "is_quality_control",
        "is_screening",
        SourceFilter,
        "generation",
        "selection_reason",
    )
    # The problem and generation of every row shown in the list's one query, not one each.
    list_select_related = ("problem", "generation")
    # What the search box reads: the problem as shown, its unique id, the answer
    # (`get_search_results`); listed so that the admin draws the box.
    search_fields = ("problem__shown_text", "problem__unique_id", "answer")
    search_help_text = "Words in the problem as shown, its unique id or the answer."
    # The total beside a search's count is a second count of every solution.
    show_full_result_count = False
    raw_id_fields = ("problem",)
    readonly_fields = ("content_hash",)
    actions = ("mark_quality_control", "mark_screening", "unmark", "use_my_ratings_as_gold")

    def get_search_results(self, request, queryset, search_term):
        if len(search_term) > settings.SEARCH_MAX_CHARS:
            raise Invalid(f"A search is at most {settings.SEARCH_MAX_CHARS} characters.")
        if not search_term.strip():
            return queryset, False
        return filters.search_solutions(queryset, words=search_term), False

    @admin.display(boolean=True, description="gold")
    def has_gold(self, obj):
        return obj.gold_ratings is not None

    @admin.action(description="Mark as quality control", permissions=["change"])
    def mark_quality_control(self, request, queryset):
        count = quality.mark_solutions(solutions=queryset, role=quality.QUALITY_CONTROL)
        self._remind_gold(request, queryset, count, "quality control")

    @admin.action(description="Mark as screening", permissions=["change"])
    def mark_screening(self, request, queryset):
        count = quality.mark_solutions(solutions=queryset, role=quality.SCREENING)
        self._remind_gold(request, queryset, count, "screening")

    @admin.action(
        description="Unmark (neither quality control nor screening)", permissions=["change"]
    )
    def unmark(self, request, queryset):
        count = quality.mark_solutions(solutions=queryset, role=None)
        self.message_user(request, f"{count} solutions are no longer QC or screening.")

    @admin.action(description="Use my submitted ratings as gold", permissions=["change"])
    def use_my_ratings_as_gold(self, request, queryset):
        result = quality.use_ratings_as_gold(
            solutions=queryset, labeler=get_or_create_labeler(user=request.user)
        )
        if result.updated:
            self.message_user(request, f"Gold set on {len(result.updated)} solutions.")
        for solution_id, why in result.skipped.items():
            self.message_user(
                request, f"Solution {solution_id}: no gold set, {why}.", level=messages.WARNING
            )

    def _remind_gold(self, request, queryset, count, role):
        self.message_user(request, f"{count} solutions marked as {role}.")
        missing = queryset.filter(gold_ratings__isnull=True).count()
        if missing:
            self.message_user(
                request,
                f"{missing} of them have no gold ratings yet: agreement is only measured "
                "where gold exists.",
                level=messages.WARNING,
            )


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
        return prm800k_response(filters=ExportFilters(), within=queryset)


class GuidelineForm(forms.ModelForm):
    """Refuses a body Markdown would render slowly (too long, or too dense with markup); the
    page would show it as plain text (labeling/mathtext.py, render_markdown)."""

    class Meta:
        model = Guideline
        fields = ["title", "body"]
        help_texts = {
            "body": (
                "Markdown; $…$ and $$…$$ are rendered as math. At most "
                f"{mathtext.MARKDOWN_MAX_CHARS:,} characters."
            )
        }

    def clean_body(self) -> str:
        body = self.cleaned_data["body"]
        if reason := mathtext.markdown_refusal(body):
            raise forms.ValidationError(f"This guideline cannot be shown as Markdown: {reason}.")
        return body


@admin.register(Guideline)
class GuidelineAdmin(admin.ModelAdmin):
    form = GuidelineForm
    list_display = ("title", "updated_at")
    search_fields = ("title", "body")


class _RefuseLookalikeUsername:
    """Both user forms: a username that reads as another user's is a form error."""

    def clean_username(self):
        parent = getattr(super(), "clean_username", None)
        username = parent() if parent is not None else self.cleaned_data.get("username")
        if not username:
            return username
        existing = usernames.lookalike_of(username=username, user_pk=self.instance.pk)
        if existing is not None:
            raise forms.ValidationError(
                usernames.refusal_message(username=username, existing=existing)
            )
        return username


class UserCreationForm(_RefuseLookalikeUsername, auth_forms.AdminUserCreationForm):
    pass


class UserChangeForm(_RefuseLookalikeUsername, auth_forms.UserChangeForm):
    pass


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class UserAdmin(auth_admin.UserAdmin):
    form = UserChangeForm
    add_form = UserCreationForm
