import sys

from django.core.management.base import CommandError

from core.errors import DomainError
from core.job_kinds import JobCommand
from core.jobs import JobOrigin
from core.params import add_arguments, given_options
from generators import GeneratorChoice, GeneratorSpec, SamplingSettings
from trainer.judging import services as judging
from trainer.judging.kind import KIND
from trainer.judging.models import JudgeRun
from trainer.judging.services import JudgeParams


def _ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise CommandError("Ids are whole numbers separated by commas.") from None


class Command(JobCommand):
    help = (
        "Run a judge run in the foreground, recorded like one started from the web: a "
        "generator acting as a judge rates each step of the --solutions. --resume ID continues "
        "a failed or cancelled run; --export ID writes a run's judge labels as JSONL."
    )
    kind, unit = KIND, "solution"

    def add_job_arguments(self, parser) -> None:
        parser.add_argument("--solutions", metavar="IDS", help="solution ids, comma-separated")
        add_arguments(parser, JudgeParams)
        add_arguments(parser, GeneratorChoice)
        add_arguments(parser, SamplingSettings)
        parser.add_argument(
            "--export", type=int, metavar="RUN_ID", help="write this run's labels as JSONL"
        )
        parser.add_argument("--out", help="the JSONL file for --export (default: stdout)")

    def handle(self, *args, **options):
        if options["export"]:
            return self._export(options["export"], options["out"])
        return super().handle(*args, **options)

    def summary(self, run: JudgeRun, done: dict) -> str:
        return (
            f"Judge run {run.pk} {run.status}: {done['done']}/{done['total']} solutions, "
            f"{run.stored} labels stored, {run.unreadable} replies unreadable."
        )

    def _export(self, run_id: int, out: str | None) -> None:
        try:
            run = judging.get_judge_run(run_id=run_id)
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        if out:
            with open(out, "w", encoding="utf-8") as file:
                lines = sum(1 for line in judging.export_lines(run=run) if file.write(line))
            self.stderr.write(f"Wrote {lines} solutions of judge run {run_id} to {out}.")
        else:
            for line in judging.export_lines(run=run):
                sys.stdout.write(line)

    def request_job(self, options: dict, *, api_key: str) -> JudgeRun:
        if not options["solutions"]:
            raise CommandError("Name the solutions to judge: --solutions 1,2,3.")
        spec = GeneratorSpec.requested(given_options(GeneratorChoice, options), api_key=api_key)
        settings = SamplingSettings.from_dict(
            given_options(SamplingSettings, options), defaults=judging.JUDGE_SETTINGS
        )
        return judging.request_judge_run(
            user=None,
            origin=JobOrigin.COMMAND,
            generator=spec,
            settings=settings,
            params=JudgeParams.from_dict(given_options(JudgeParams, options)),
            solution_ids=_ids(options["solutions"]),
            enqueue=False,
        )
