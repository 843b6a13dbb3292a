"""Judge runs as a kind of job (core.job_kinds): their pages, API and admin come from `KIND`;
what is theirs alone is the detail page's context and the export (trainer.judging.api)."""

from core.job_kinds import JobKind
from generators import outbound
from trainer.judging import serializers as s
from trainer.judging import services as judging
from trainer.judging.forms import JudgeRunForm
from trainer.judging.models import JudgeRun

SOLUTIONS_SHOWN = 50


def _context(run: JudgeRun) -> dict:
    return {
        "judged": judging.judged_solutions(run=run, limit=SOLUTIONS_SHOWN),
        "shown": SOLUTIONS_SHOWN,
        "own_server": outbound.at_own_server(run.generator),
    }


KIND = JobKind(
    model=JudgeRun,
    name="judge",
    url_prefix="judging/",
    refusal="Judging is for researchers and admins.",
    form=JudgeRunForm,
    serializer=s.JudgeRunSerializer,
    request_serializer=s.JudgeRunRequestSerializer,
    resume_serializer=s.JudgeResumeSerializer,
    request=judging.request_judge_run,
    cancel=judging.cancel_judge_run,
    resume=judging.resume_judge_run,
    execute=judging.execute_judge_run,
    check_key=outbound.check_api_key,
    progress=judging.progress,
    stops="after its current solution",
    templates="trainer/judge",
    context=_context,
    create_description="Queue a judge run. 400 for bad ids, format or settings, 503 when the "
    "task broker is unreachable (the run is recorded as failed and can be resumed).",
)
