from django.core.management.base import BaseCommand, CommandError

from trainer.evaluation import best_of_n as evaluate


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--n takes comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise CommandError("--n needs at least one N, each at least 1")
    return sizes


class Command(BaseCommand):
    help = (
        "Best-of-N (by each score in the file) and majority voting on a JSONL file of scored "
        "samples (problem, answer/given_answer, is_correct, prm_score, orm_score), as "
        "PRM800K's eval.py measures them: random N-subsets per problem over many trials, "
        "mean ± std of the share of problems solved."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSONL or .jsonl.gz of scored samples")
        parser.add_argument("--n", default="1,4,16,64", help="comma-separated sample counts")
        parser.add_argument("--trials", type=int, default=100)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--pool-size",
            type=int,
            help="samples each problem is drawn from, padded with empty draws "
            "(PRM800K: 1860); default the most any problem has",
        )
        parser.add_argument(
            "--methods",
            default=",".join(evaluate.DEFAULT_METHODS),
            help="comma-separated score names (prm_score or prm, orm_score or orm, ...) "
            "and/or 'majority'",
        )

    def handle(self, *args, **options):
        ns = _sizes(options["n"])
        # "prm" is short for the prm_score column.
        methods = [
            m if m == evaluate.MAJORITY or m.endswith("_score") else f"{m}_score"
            for m in (part.strip() for part in options["methods"].split(","))
            if m
        ]
        try:
            samples = evaluate.read_scored_samples(path=options["file"])
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not samples:
            raise CommandError(f"{options['file']}: no samples")
        present = {key for sample in samples for key in sample.scores}
        for method in methods:
            if method != evaluate.MAJORITY and method not in present:
                self.stderr.write(f"no sample has {method}: left out")
        try:
            estimates = evaluate.evaluate(
                samples=samples,
                ns=ns,
                methods=methods,
                trials=options["trials"],
                seed=options["seed"],
                pool_size=options["pool_size"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not estimates:
            raise CommandError(f"none of the methods {', '.join(methods)} is in the file")
        problems, ungraded = estimates[0].problems, estimates[0].ungraded
        left_out = f" ({ungraded} ungraded left out)" if ungraded else ""
        self.stdout.write(
            f"{len(samples) - ungraded} samples{left_out} of {problems} problems, "
            f"{options['trials']} trials, seed {options['seed']}; "
            "accuracy in % (mean ± std over trials)"
        )
        self.stdout.write(evaluate.format_table(estimates))
