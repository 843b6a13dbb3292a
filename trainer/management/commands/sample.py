from django.core.management.base import CommandError

from core.job_kinds import JobCommand
from core.jobs import JobOrigin
from core.params import add_arguments, given_options
from generators import GeneratorChoice, GeneratorSpec, SamplingSettings
from trainer.sampling import services as sampling
from trainer.sampling.kind import KIND
from trainer.sampling.models import SamplingRun


def _ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise CommandError("Ids are whole numbers separated by commas.") from None


class Command(JobCommand):
    help = (
        "Run a sampling run in the foreground, recorded like one started from the web: N "
        "solutions per problem into the pool, or (--rollouts) rollout labels of solutions. "
        "--resume ID continues a failed or cancelled run."
    )
    kind, unit = KIND, "item"
    api_key_help = f"{JobCommand.api_key_help}; the operator's URLs are sent GENERATOR_API_KEY"

    def add_job_arguments(self, parser) -> None:
        parser.add_argument("--samples", type=int, default=4, help="per problem, or per step")
        parser.add_argument("--problems", help="problem ids, comma-separated")
        parser.add_argument("--split", default="")
        parser.add_argument("--subject", default="")
        parser.add_argument("--level", type=int)
        parser.add_argument("--limit", type=int, default=100, help="problems the filter takes")
        parser.add_argument("--rollouts", metavar="SOLUTION_IDS", help="roll out these solutions")
        add_arguments(parser, sampling.RolloutParams)
        add_arguments(parser, GeneratorChoice)
        add_arguments(parser, SamplingSettings)

    def summary(self, run: SamplingRun, done: dict) -> str:
        unreported = f" ({run.tokens_unreported} calls unreported)" if run.tokens_unreported else ""
        return (
            f"Sampling run {run.pk} {run.status}: {done['done']}/{done['total']} items, "
            f"{run.stored} stored, skipped {run.skipped or {}}; {run.generator_calls} generator "
            f"calls, {run.completion_tokens} completion tokens{unreported}."
        )

    def request_job(self, options: dict, *, api_key: str) -> SamplingRun:
        rollout = sampling.RolloutParams.from_dict(given_options(sampling.RolloutParams, options))
        spec = GeneratorSpec.requested(given_options(GeneratorChoice, options), api_key=api_key)
        settings = SamplingSettings.from_dict(given_options(SamplingSettings, options))
        solution_ids = _ids(options["rollouts"])
        problem_ids = None
        if solution_ids is None:
            problem_ids = _ids(options["problems"]) or sampling.problem_ids_matching(
                split=options["split"],
                subject=options["subject"],
                level=options["level"],
                limit=options["limit"],
            )
            if not problem_ids:
                raise CommandError("No problem matches the filter.")
        purpose = SamplingRun.Purpose.ROLLOUTS if solution_ids else SamplingRun.Purpose.SOLUTIONS
        return sampling.request_sampling_run(
            user=None,
            origin=JobOrigin.COMMAND,
            purpose=purpose,
            generator=spec,
            settings=settings,
            samples=options["samples"],
            problem_ids=problem_ids,
            solution_ids=solution_ids,
            then_select=None,
            search=rollout.search,
            enqueue=False,
        )
