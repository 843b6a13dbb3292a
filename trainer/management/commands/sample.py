import os
import socket

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from core.jobs import JobOrigin
from core.params import add_arguments, given_options
from core.progress_bar import job_progress_bar
from generators import GeneratorChoice, GeneratorSpec, SamplingSettings
from trainer.models import SamplingRun
from trainer.sampling import services as sampling


def _ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise CommandError("Ids are whole numbers separated by commas.") from None


class Command(BaseCommand):
    help = (
        "Run a sampling run in the foreground, recorded like one started from the web: N "
        "solutions per problem into the pool, or (--rollouts) rollout labels of solutions. "
        "--resume ID continues a failed or cancelled run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--samples", type=int, default=4, help="per problem, or per step")
        parser.add_argument("--problems", help="problem ids, comma-separated")
        parser.add_argument("--split", default="")
        parser.add_argument("--subject", default="")
        parser.add_argument("--level", type=int)
        parser.add_argument("--limit", type=int, default=100, help="problems the filter takes")
        parser.add_argument("--rollouts", metavar="SOLUTION_IDS", help="roll out these solutions")
        add_arguments(parser, sampling.RolloutParams)
        add_arguments(parser, GeneratorChoice)
        parser.add_argument(
            "--api-key-env",
            metavar="VARIABLE",
            help="the environment variable holding the --base-url server's own key (a key "
            "on the command line would show in ps and the shell's history); the operator's "
            "URLs are sent GENERATOR_API_KEY",
        )
        add_arguments(parser, SamplingSettings)
        parser.add_argument("--resume", type=int, metavar="RUN_ID")

    def handle(self, *args, **options):
        api_key = self._api_key(options)
        try:
            if options["resume"]:
                run = sampling.resume_sampling_run(run_id=options["resume"], enqueue=False)
            else:
                run = self._request(options, api_key=api_key)
            self.stdout.write(f"Sampling run {run.pk}: {run.items.count()} items.")
            with job_progress_bar(read=_items_done(run.pk), desc=f"run {run.pk}", unit="item"):
                run = sampling.execute_sampling_run(
                    run_id=run.pk, worker_hostname=socket.gethostname(), api_key=api_key
                )
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        done = sampling.progress(run)
        self.stdout.write(
            f"Sampling run {run.pk} {run.status}: {done['done']}/{done['total']} items, "
            f"{run.stored} stored, skipped {run.skipped or {}}; {run.generator_calls} generator "
            f"calls, {run.completion_tokens} completion tokens"
            f"{f' ({run.tokens_unreported} calls unreported)' if run.tokens_unreported else ''}."
        )
        if run.error:
            raise CommandError(run.error)

    @staticmethod
    def _api_key(options) -> str:
        name = options["api_key_env"]
        if not name:
            return ""
        if not os.environ.get(name):
            raise CommandError(f"--api-key-env {name}: that environment variable is not set.")
        return os.environ[name]

    def _request(self, options, *, api_key: str) -> SamplingRun:
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


def _items_done(run_id: int):
    def read() -> tuple[int, int]:
        done = sampling.progress(SamplingRun.objects.get(pk=run_id))
        return done["done"], done["total"]

    return read
