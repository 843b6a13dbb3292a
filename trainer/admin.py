"""Admin views of runs and model versions: records to read, with the actions the UI offers."""

from django.contrib import admin, messages

from core import job_views
from trainer.evaluation import sets as evaluation_sets
from trainer.judging.kind import KIND as JUDGING
from trainer.models import (
    Evaluation,
    JudgeLabel,
    ModelVersion,
    RolloutLabel,
    ScoringChunk,
    TrainingRun,
)
from trainer.sampling.kind import KIND as SAMPLING
from trainer.scoring.progress import scoring_chunks
from trainer.training import model_versions, runs


@admin.register(TrainingRun)
class TrainingRunAdmin(job_views.JobAdmin):
    list_display = ["id", "status", "requested_by", "dataset_size", "epoch", "created_at"]
    # A run is a record of what happened; only trainer.training.runs changes it.
    cancel_job = staticmethod(runs.cancel_training_run)


class ScoringChunkInline(admin.TabularInline):
    model = ScoringChunk
    fields = ["first_solution_id", "last_solution_id", "status", "solutions", "scored"]
    fields += ["attempts", "worker_hostname", "started_at", "heartbeat_at", "finished_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "is_active", "training_run", "scoring", "created_at"]
    list_display += ["promoted_at"]
    list_filter = ["is_active"]
    actions = ["activate"]
    inlines = [ScoringChunkInline]

    def get_readonly_fields(self, request, obj=None):
        # A checkpoint made elsewhere can be registered; a recorded one is not rewritten, and
        # activation goes through the activate action (which rescores).
        fixed = ["training_run", "is_active", "promoted_at"]
        return fixed if obj is None else [*fixed, "checkpoint", "metrics", "scoring"]

    @admin.display(description="Scoring")
    def scoring(self, version: ModelVersion) -> str:
        progress = scoring_chunks(model_version=version)
        if not progress.chunks:
            return "–"
        return (
            f"scored {progress.scored} of {progress.solutions} solutions, "
            f"{progress.done} of {progress.chunks} chunks"
        )

    @admin.action(description="Activate (and rescore every solution)")
    def activate(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one model version.", messages.ERROR)
            return
        version = model_versions.activate_model_version(model_version_id=queryset.get().pk)
        self.message_user(request, f"{version} is now active.")


@admin.register(ScoringChunk)
class ScoringChunkAdmin(admin.ModelAdmin):
    list_display = ["id", "model_version", "first_solution_id", "last_solution_id", "status"]
    list_display += ["solutions", "scored", "attempts", "worker_hostname", "finished_at"]
    list_filter = ["status", "model_version"]
    # A record of the scoring; only trainer.scoring.chunks changes it.
    readonly_fields = [field.name for field in ScoringChunk._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


# Records of what happened; only their services change them (start one at /sampling/ or
# /judging/).
SAMPLING.register_admin(
    list_display=["id", "purpose", "status", "samples", "stored", "requested_by", "created_at"],
    list_filter=["status", "purpose"],
)
JUDGING.register_admin(
    list_display=["id", "format", "status", "stored", "unreadable", "requested_by", "created_at"],
    list_filter=["status", "format"],
)


@admin.register(RolloutLabel)
class RolloutLabelAdmin(admin.ModelAdmin):
    list_display = ["id", "solution", "index", "rollouts", "reached", "sampling_run", "created_at"]
    list_filter = ["sampling_run"]
    raw_id_fields = ["solution", "sampling_run"]
    readonly_fields = [field.name for field in RolloutLabel._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(JudgeLabel)
class JudgeLabelAdmin(admin.ModelAdmin):
    list_display = ["id", "solution", "index", "rating", "run", "created_at"]
    list_filter = ["run", "rating"]
    raw_id_fields = ["solution", "run"]
    readonly_fields = [field.name for field in JudgeLabel._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Evaluation)
class EvaluationAdmin(job_views.JobAdmin):
    list_display = ["id", "model_version", "evaluation_set", "status", "done", "total"]
    list_filter = ["status", "evaluation_set"]
    # Queued after each recorded version (trainer.pipeline); evaluated again from its page.
    cancel_job = staticmethod(
        lambda *, run_id: evaluation_sets.cancel_evaluation(evaluation_id=run_id)
    )
