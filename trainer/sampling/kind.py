"""Sampling runs as a kind of job (core.job_kinds): their pages, API and admin come from
`KIND`; what is theirs alone is the detail page's context."""

from core.job_kinds import JobKind
from generators import outbound
from trainer.sampling import serializers as s
from trainer.sampling import services as sampling
from trainer.sampling.forms import SamplingRunForm
from trainer.sampling.models import SamplingRun
from trainer.sampling.selectors import search_agreement

SOLUTIONS_SHOWN = 50


def _context(run: SamplingRun) -> dict:
    solutions = run.solutions.select_related("problem").order_by("pk")
    return {
        "solutions": solutions[:SOLUTIONS_SHOWN],
        "solution_count": solutions.count(),
        "rollout_label_count": run.rollout_labels.count(),
        "implied_label_count": run.rollout_labels.filter(implied_by__isnull=False).count(),
        "search_agreement": search_agreement(run=run),
        "own_server": outbound.at_own_server(run.generator),
    }


KIND = JobKind(
    model=SamplingRun,
    name="sampling",
    url_prefix="sampling/",
    refusal="Sampling is for researchers and admins.",
    form=SamplingRunForm,
    serializer=s.SamplingRunSerializer,
    request_serializer=s.SamplingRunRequestSerializer,
    resume_serializer=s.SamplingResumeSerializer,
    request=sampling.request_sampling_run,
    cancel=sampling.cancel_sampling_run,
    resume=sampling.resume_sampling_run,
    execute=sampling.execute_sampling_run,
    check_key=outbound.check_api_key,
    progress=sampling.progress,
    stops="after its current item",
    templates="trainer/sampling",
    context=_context,
    create_description="Queue a sampling run. 400 for bad ids or settings, 503 when the task "
    "broker is unreachable (the run is recorded as failed and can be resumed).",
)
