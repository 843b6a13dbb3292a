"""Judge labels: an LLM judge's step ratings (`trainer.judging`), the newest judge run's of a
solution. A step is bad when it rated it -1 (a 0 is not bad); a first_error run rates the steps
up to its first -1 and leaves the rest unlabeled."""

from trainer.training.label_sources.base import (
    FirstErrorReader,
    LabelSource,
    MachineReader,
    positions_of_steps,
    register,
)


def labeled():
    from django.db.models import Q

    return Q(judge_labels__isnull=False)


def read(*, solution_ids: list[int]) -> dict:
    from trainer.judging.selectors import newest_judge_labels

    return {
        pk: (next(iter(by_index.values())).run_id, by_index)
        for pk, by_index in newest_judge_labels(solution_ids=list(solution_ids)).items()
        if by_index
    }


def labeled_ids():
    from trainer.judging.models import JudgeLabel

    return JudgeLabel.objects.values("solution_id")


SOURCE = register(
    LabelSource(
        name="judge",
        title="Judge labels",
        machine=MachineReader(
            labeled=labeled,
            read=read,
            bad=lambda label: label.rating == -1,
            help="the newest judge run rated the step -1",
        ),
        first_error=FirstErrorReader(
            title="Judge",
            labeled=labeled_ids,
            positions=positions_of_steps(read, lambda label: label.rating),
        ),
    )
)
