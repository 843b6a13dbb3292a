import os
import socket
import sys

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from core.jobs import JobOrigin
from core.params import add_arguments, given_options
from core.progress_bar import job_progress_bar
from generators import GeneratorChoice, GeneratorSpec, SamplingSettings
from trainer.judging import services as judging
from trainer.judging.models import JudgeRun
from trainer.judging.services import JudgeParams


def _ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise CommandError("Ids are whole numbers separated by commas.") from None


class Command(BaseCommand):
    help = (
        "Run a judge run in the foreground, recorded like one started from the web: a "
        "generator acting as a judge rates each step of the --solutions. --resume ID continues "
        "a failed or cancelled run; --export ID writes a run's judge labels as JSONL."
    )

    def add_arguments(self, parser):
        parser.add_argument("--solutions", metavar="IDS", help="solution ids, comma-separated")
        add_arguments(parser, JudgeParams)
        add_arguments(parser, GeneratorChoice)
        parser.add_argument(
            "--api-key-env",
            metavar="VARIABLE",
            help="the environment variable holding the --base-url server's own key (a key "
            "on the command line would show in ps and the shell's history)",
        )
        add_arguments(parser, SamplingSettings)
        parser.add_argument("--resume", type=int, metavar="RUN_ID")
        parser.add_argument(
            "--export", type=int, metavar="RUN_ID", help="write this run's labels as JSONL"
        )
        parser.add_argument("--out", help="the JSONL file for --export (default: stdout)")

    def handle(self, *args, **options):
        if options["export"]:
            return self._export(options["export"], options["out"])
        api_key = self._api_key(options)
        try:
            if options["resume"]:
                run = judging.resume_judge_run(
                    run_id=options["resume"], enqueue=False, api_key=api_key
                )
            else:
                run = self._request(options, api_key=api_key)
            self.stdout.write(f"Judge run {run.pk}: {run.items.count()} solutions.")
            with job_progress_bar(read=_done(run.pk), desc=f"run {run.pk}", unit="solution"):
                run = judging.execute_judge_run(
                    run_id=run.pk, worker_hostname=socket.gethostname(), api_key=api_key
                )
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        done = judging.progress(run)
        self.stdout.write(
            f"Judge run {run.pk} {run.status}: {done['done']}/{done['total']} solutions, "
            f"{run.stored} labels stored, {run.unreadable} replies unreadable."
        )
        if run.error:
            raise CommandError(run.error)

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

    @staticmethod
    def _api_key(options) -> str:
        name = options["api_key_env"]
        if not name:
            return ""
        if not os.environ.get(name):
            raise CommandError(f"--api-key-env {name}: that environment variable is not set.")
        return os.environ[name]

    def _request(self, options, *, api_key: str) -> JudgeRun:
        if not options["solutions"]:
            raise CommandError("Name the solutions to judge: --solutions 1,2,3.")
        spec = GeneratorSpec.requested(given_options(GeneratorChoice, options), api_key=api_key)
        settings = SamplingSettings.from_dict(
            given_options(SamplingSettings, options), defaults=judging.JUDGE_SETTINGS
        )
        params = JudgeParams.from_dict(given_options(JudgeParams, options))
        return judging.request_judge_run(
            user=None,
            origin=JobOrigin.COMMAND,
            generator=spec,
            settings=settings,
            params=params,
            solution_ids=_ids(options["solutions"]),
            enqueue=False,
        )


def _done(run_id: int):
    def read() -> tuple[int, int]:
        done = judging.progress(JudgeRun.objects.get(pk=run_id))
        return done["done"], done["total"]

    return read
