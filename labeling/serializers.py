"""API representations. Labelers appear only by their UUID, never by username."""

from drf_spectacular.utils import extend_schema_field
from knox.models import AuthToken
from rest_framework import serializers

from core import deprecation, prm800k, rules
from core.idlists import id_list_field
from core.params import describe
from core.permissions import can_view_quality
from generators import PROPOSAL_SETTINGS, GeneratorSpec, SamplingSettings
from labeling import selectors
from labeling.models import (
    FinishReason,
    ImportJob,
    JudgeDisplay,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)


class BlindToLabelers:
    """Fields for those who review labels only (researchers and admins, as on the quality
    page), and only when the view passes its request in the context: a serializer without a
    request shows a labeler's view. Labelers see what PRM800K's labelers saw: the problem, its
    answer, the steps and their own ratings.

    Quality control is blind: what tells quality-control and screening solutions from the
    others (the queue that served it, the marks, the generation, -1 for screening) is such a
    field, as is anything that gives a label away (the reference solution, the problem's
    split or "bad" mark). Nested serializers share the root's context, so a problem inside a
    served session is trimmed as the session is."""

    review_fields: tuple[str, ...] = ("queue", "is_quality_control", "is_screening", "generation")

    def to_representation(self, instance) -> dict:
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not can_view_quality(request.user):
            for name in self.review_fields:
                data.pop(name, None)
        return data


# A labeler sees the problem and its final answer, never the worked solution that would rate
# the steps for them, nor what sorts problems for the researchers.
PROBLEM_REVIEW_FIELDS = ("unique_id", "solution", "subject", "level", "split", "is_bad")


class ProblemSerializer(BlindToLabelers, serializers.ModelSerializer):
    review_fields = PROBLEM_REVIEW_FIELDS

    class Meta:
        model = Problem
        fields = ["id", "unique_id", "text", "answer", "solution", "subject", "level", "split"]
        fields += ["is_bad", "created_at"]
        # Not required: BlindToLabelers leaves them out for labelers, and the schema says so.
        extra_kwargs = {name: {"required": False} for name in PROBLEM_REVIEW_FIELDS}


class SolutionSerializer(serializers.ModelSerializer):
    generation = serializers.IntegerField(source="generation.number", allow_null=True)
    prm_model_version = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = Solution
        fields = [
            "id",
            "problem",
            "steps",
            "answer",
            "is_correct",
            "source",
            "source_score",
            "prm_score",
            "prm_step_scores",
            "prm_model_version",
            "generation",
            "is_quality_control",
            "is_screening",
            "priority",
            "alternatives",
            "created_at",
        ]


class SolutionRoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(
        choices=["quality_control", "screening", "none"],
        help_text="Serve as quality control to every labeler, as a screening question, or neither.",
    )


class BulkResultSerializer(serializers.Serializer):
    lines = serializers.IntegerField()
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()


class StepRatingSerializer(serializers.ModelSerializer):
    class Meta:
        model = StepRating
        fields = ["completion_index", "text", "rating", "flagged"]


class StepLabelSerializer(serializers.ModelSerializer):
    ratings = StepRatingSerializer(many=True, read_only=True)

    class Meta:
        model = StepLabel
        fields = ["index", "chosen_completion", "human_completion", "ratings"]


class SessionSerializer(BlindToLabelers, serializers.ModelSerializer):
    labeler = serializers.UUIDField(source="labeler.uuid", read_only=True)
    # Not required: BlindToLabelers leaves it out for annotators, and the schema must say so.
    generation = serializers.IntegerField(
        source="generation.number",
        allow_null=True,
        required=False,
        help_text="Researchers and admins only.",
    )
    step_labels = StepLabelSerializer(many=True, read_only=True)

    class Meta:
        model = LabelingSession
        fields = [
            "id",
            "labeler",
            "solution",
            "generation",
            "is_quality_control",
            "is_screening",
            "queue",
            "started_at",
            "lease_expires_at",
            "submitted_at",
            "abandoned_at",
            "total_time",
            "finish_reason",
            "finish_reason_text",
            # A correction by the labeler (labeling.services.corrections): reopened now, saved.
            "reopened_at",
            "edited_at",
            "step_labels",
        ]


class JudgeShownSerializer(serializers.Serializer):
    """A judge's label of a step, as the generation's judge display shows it."""

    rating = serializers.IntegerField()
    reason = serializers.CharField(allow_blank=True)


class ItemSerializer(serializers.Serializer):
    """One thing to rate: a step (completion 0) or one of its alternative completions."""

    index = serializers.IntegerField(help_text="Step index, from 0.")
    completion = serializers.IntegerField(
        help_text="0: the solution's own step; 1..n: the step's alternatives (completion_index)."
    )
    key = serializers.CharField()
    text = serializers.CharField()
    rating = serializers.IntegerField(allow_null=True)
    flagged = serializers.BooleanField(allow_null=True)


class StepItemSerializer(ItemSerializer):
    alternatives = ItemSerializer(
        many=True, help_text="Alternatives of the first -1 step shown so far, to rate in order."
    )
    judge = JudgeShownSerializer(
        allow_null=True,
        help_text="The judge's label shown beside the step (judge_display revealed: once "
        "rated; confirm: a suggestion, which the labeler still rates themselves); null "
        "otherwise.",
    )


class NextItemSerializer(serializers.Serializer):
    """One item of the solution and what the labeler may do with it now."""

    key = serializers.CharField(help_text='"s3" for step 3 (from 0), "s3c1" for its alternative 1.')
    step = serializers.IntegerField()
    completion = serializers.IntegerField(help_text="0: the step itself; 1..n: its alternatives.")
    open = serializers.BooleanField(help_text="Whether it may be rated now.")
    reason = serializers.CharField(allow_null=True, help_text="Why it may not be rated now.")
    back = serializers.CharField(allow_null=True, help_text="The item before it on the page.")
    then = serializers.DictField(
        child=serializers.CharField(allow_null=True),
        help_text="Per rating, the item to rate after this one is rated so (for an item not "
        "reached yet, once it is reached); null: nothing is left to rate.",
    )
    alternatives_open = serializers.BooleanField(
        required=False,
        help_text="Steps only: whether its alternatives may be rated (it is the first -1).",
    )


class NextActionsSerializer(serializers.Serializer):
    """What the labeler may do next: the workbench page acts on exactly this."""

    ratings = serializers.ListField(
        child=serializers.IntegerField(), help_text="The ratings an open item may take."
    )
    next = serializers.CharField(allow_null=True, help_text="The item to rate next, if any.")
    active = serializers.CharField(
        allow_null=True,
        help_text="The item a rating key rates now: next, else the last shown; null after a -1 "
        "that ended the label (a key typed ahead must not overwrite it).",
    )
    last = serializers.CharField(
        allow_null=True, help_text="The last item shown: where Backspace goes when none is active."
    )
    active_reason = serializers.CharField(
        allow_null=True, help_text="Why no item is active, when none is."
    )
    outcome = serializers.ChoiceField(
        choices=[rules.FOUND_ERROR, rules.SOLUTION],
        allow_null=True,
        help_text="The finish reason that can be submitted now, if any.",
    )
    submit_refusal = serializers.CharField(
        allow_null=True, help_text="Why the label cannot be submitted yet."
    )
    items = NextItemSerializer(many=True, help_text="Every item of the solution, in page order.")


class WorkbenchStateSerializer(serializers.Serializer):
    items = StepItemSerializer(many=True, help_text="The steps shown so far.")
    current = ItemSerializer(allow_null=True, help_text="The item to rate next; null if none.")
    outcome = serializers.ChoiceField(
        choices=["found_error", "solution"],
        allow_null=True,
        help_text="The finish reason that can be submitted now, if any.",
    )
    error_step = serializers.IntegerField(allow_null=True, help_text="The first -1 step.")
    total_steps = serializers.IntegerField()
    alternatives_offered = serializers.IntegerField(
        help_text="How many alternatives the error step offers (0 without one)."
    )
    human_completion = serializers.CharField(
        allow_null=True, help_text="The step the labeler wrote in place of the error step."
    )
    can_write_human_completion = serializers.BooleanField(
        help_text="Whether a step can be written now (the error step and its alternatives rated)."
    )
    judge_display = serializers.ChoiceField(
        choices=JudgeDisplay.choices,
        help_text="What the labeler sees of the judge: hidden (nothing), revealed (after "
        "rating) or confirm (a suggestion before rating).",
    )
    next_actions = NextActionsSerializer(
        help_text="What the labeler may do next, by the workbench's rules (core.rules)."
    )


class SessionStateSerializer(SessionSerializer):
    """A session with what its labeler sees of it: the same rules as the workbench page."""

    state = serializers.SerializerMethodField()

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "state"]

    @extend_schema_field(WorkbenchStateSerializer)
    def get_state(self, session: LabelingSession) -> dict:
        return WorkbenchStateSerializer(selectors.session_state(session=session)).data


class NextSessionSerializer(BlindToLabelers, serializers.Serializer):
    session = SessionStateSerializer()
    queue = serializers.CharField(
        required=False,
        help_text="Researchers and admins only: screening, quality_control, generation, "
        "leftover or resumed.",
    )
    problem = ProblemSerializer(source="session.solution.problem")
    steps = serializers.ListField(child=serializers.CharField(), source="session.solution.steps")
    alternatives = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        source="session.solution.alternatives",
        help_text="Alternative completions offered per step index, rated after a -1 there.",
    )


class RenamedFieldsSerializer(serializers.Serializer):
    """A request whose fields were renamed: each old name in ALIASES (new -> old) is still
    taken, deprecated, since clients exist; naming both with different values is a 400. The
    fields in REQUIRED must come under one of their names."""

    ALIASES: dict[str, str] = {}
    REQUIRED: tuple[str, ...] = ()

    def validate(self, data: dict) -> dict:
        data = super().validate(data)
        for name, old in self.ALIASES.items():
            if old not in data:
                continue
            value = data.pop(old)
            if "request" in self.context:
                deprecation.mark(self.context["request"], [old])
            # The new name as sent, not as its default filled it in.
            if name in self.initial_data and data.get(name) != value:
                raise serializers.ValidationError({old: f"Says otherwise than {name}."})
            data[name] = value
        missing = [name for name in self.REQUIRED if name not in data]
        if missing:
            raise serializers.ValidationError(dict.fromkeys(missing, "This field is required."))
        return data


class ItemRequestSerializer(RenamedFieldsSerializer):
    """A request that names a step (`step_index`) and, where asked, one of its completions
    (`completion_index`): the names the page posts (`step` and `completion` before)."""

    ALIASES = {"step_index": "step", "completion_index": "completion"}
    REQUIRED = ("step_index",)

    step_index = serializers.IntegerField(
        min_value=0, required=False, help_text="The step's index, from 0."
    )
    step = serializers.IntegerField(
        min_value=0, required=False, help_text="Deprecated: the same as step_index."
    )


class CompletionRequestSerializer(ItemRequestSerializer):
    REQUIRED = ("step_index", "completion_index")

    completion_index = serializers.IntegerField(
        min_value=0, required=False, help_text="0 is the step itself; 1..n its alternatives."
    )
    completion = serializers.IntegerField(
        min_value=0, required=False, help_text="Deprecated: the same as completion_index."
    )


class RateSerializer(ItemRequestSerializer):
    rating = serializers.ChoiceField(choices=prm800k.RATINGS)
    flagged = serializers.BooleanField(default=False, help_text="The labeler is unsure.")
    completion_index = serializers.IntegerField(
        min_value=0,
        default=0,
        help_text="0 rates the step itself; 1..n its alternatives, after the step is rated -1.",
    )


class SubmitSerializer(RenamedFieldsSerializer):
    ALIASES = {"finish_reason_text": "reason"}

    finish_reason = serializers.ChoiceField(choices=FinishReason.choices)
    finish_reason_text = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Required to give up or report."
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, help_text="Deprecated: the same as finish_reason_text."
    )


class ExportQuerySerializer(serializers.Serializer):
    generation = serializers.IntegerField(required=False)
    since = serializers.DateTimeField(required=False)
    labeler = serializers.UUIDField(required=False)
    include_quality_control = serializers.BooleanField(required=False, default=True)


class ImportJobSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "kind",
            "status",
            "requested_by",
            "origin",
            "file_name",
            "size",
            "created_at",
        ]
        fields += ["started_at", "finished_at", "heartbeat_at", "cancel_requested", "result"]
        fields += ["error"]
        read_only_fields = fields


class ImportUploadSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ImportJob.Kind.choices)
    file = serializers.FileField()


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuthToken
        fields = ["token_key", "created", "expiry"]


class TokenCreateSerializer(serializers.Serializer):
    expires_in_days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=3650, help_text="Empty: no expiry."
    )


class NewTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Shown once; only its hash is stored.")
    token_key = serializers.CharField()
    expiry = serializers.DateTimeField(allow_null=True)


class HumanCompletionSerializer(ItemRequestSerializer):
    text = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The correct step, written by the labeler; empty removes it.",
    )


# --- phase-1 live labeling ----------------------------------------------------------------------


class LiveGenerationCreateSerializer(serializers.Serializer):
    """Valid data holds the generator's spec and the sampling settings, checked."""

    problems = id_list_field(min_length=1)
    generator = serializers.DictField(
        required=False,
        help_text="backend, model, base_url; left out: the configured generator "
        "(GENERATOR_MODEL, GENERATOR_BASE_URL). base_url is one of the operator's "
        "(GENERATOR_BASE_URL, GENERATOR_ALLOWED_BASE_URLS) or a server of your own at a public "
        "address that needs no key.",
    )
    settings = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"Sampling settings ({describe(SamplingSettings)}); left out, each takes "
        f"live labeling's default ({PROPOSAL_SETTINGS.to_dict()}).",
    )
    proposals = serializers.IntegerField(min_value=1, max_value=8)

    def validate(self, data: dict) -> dict:
        # The outbound rule (generators.outbound), checked before anything is made: an
        # InvalidGenerator is a domain error, which the API answers with 400 and its sentence.
        data["generator"] = GeneratorSpec.requested(data.get("generator"))
        data["settings"] = SamplingSettings.from_dict(
            data.get("settings"), defaults=PROPOSAL_SETTINGS
        )
        return data


class LiveGenerationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    number = serializers.IntegerField()
    mode = serializers.CharField()
    live = serializers.DictField(source="params.live")


class LiveRateSerializer(CompletionRequestSerializer):
    rating = serializers.ChoiceField(choices=prm800k.RATINGS)
    flagged = serializers.BooleanField(default=False)


class LiveChooseSerializer(CompletionRequestSerializer):
    pass


class LiveWriteSerializer(ItemRequestSerializer):
    text = serializers.CharField(max_length=5000)


class LiveStepSerializer(ItemRequestSerializer):
    pass


class LiveFinishSerializer(RenamedFieldsSerializer):
    ALIASES = {"finish_reason_text": "reason"}

    finish_reason = serializers.ChoiceField(choices=["found_error", "give_up", "bad_problem"])
    finish_reason_text = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=5000
    )
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=5000,
        help_text="Deprecated: the same as finish_reason_text.",
    )


class FirstErrorAgreementSerializer(serializers.Serializer):
    """Agreement on the first-error position (`labeling.first_error`)."""

    solutions = serializers.IntegerField(help_text="Solutions with two or more positions.")
    pairs = serializers.IntegerField()
    exact = serializers.IntegerField(help_text="Pairs at the same position.")
    within_one = serializers.IntegerField(help_text="Pairs at most one step apart.")
    exact_rate = serializers.FloatField(allow_null=True)
    within_one_rate = serializers.FloatField(allow_null=True)
    alpha_interval = serializers.FloatField(allow_null=True)
    alpha_ordinal = serializers.FloatField(allow_null=True)


class SourcePairSerializer(serializers.Serializer):
    first = serializers.CharField(source="first.name", help_text="A label source: human, ….")
    second = serializers.CharField(source="second.name")
    figures = FirstErrorAgreementSerializer()


class FirstErrorReportSerializer(serializers.Serializer):
    no_error_position = serializers.SerializerMethodField(
        help_text="What position a label with no error counts as: steps, the solution's "
        "number of steps (one past its last step)."
    )
    between_labelers = FirstErrorAgreementSerializer()
    between_sources = SourcePairSerializer(many=True)

    def get_no_error_position(self, report) -> str:
        return "steps"


class JudgeAgreementSerializer(serializers.Serializer):
    """Human ratings against the judge's under one judge display (`labeling.judge_display`)."""

    display = serializers.ChoiceField(choices=JudgeDisplay.choices)
    ratings = serializers.IntegerField(help_text="Submitted human ratings made under it.")
    steps = serializers.IntegerField(
        help_text="Of them, those compared: with the judge rating shown (revealed, confirm) or "
        "the newest judge label of the step (hidden)."
    )
    agreed = serializers.IntegerField(help_text="Compared steps the human rated as the judge.")
    agreement = serializers.FloatField(allow_null=True, help_text="agreed / steps.")
    alpha = serializers.FloatField(
        allow_null=True, help_text="Krippendorff's alpha (nominal), human vs judge."
    )
    changed = serializers.IntegerField(
        allow_null=True, help_text="Confirm only: suggestions the labeler rated otherwise."
    )
    changed_share = serializers.FloatField(allow_null=True, help_text="changed / steps.")
