"""Imported labels: step labels of public datasets (ProcessBench, PRMBench, TRL files,
`trainer.sampling.imported`), +1 / -1 from step 0. Chosen alone for training: the session
filters do not apply (they come from no session or generation)."""

from trainer.training.label_sources.base import FirstErrorReader, LabelSource, Trains, register


def examples(*, params) -> list:
    from trainer.training import dataset

    return dataset.imported_examples()


def labeled_ids():
    from trainer.sampling.models import ImportedLabel

    return ImportedLabel.objects.values("solution_id")


def positions(*, solution_ids: list[int]) -> dict[int, int]:
    """The first error of each solution's newest imported label."""
    from django.db.models import Max

    from labeling.first_error import positions_of
    from trainer.sampling.models import ImportedLabel

    newest = (
        ImportedLabel.objects.filter(solution_id__in=solution_ids)
        .order_by()
        .values("solution_id")
        .annotate(newest=Max("pk"))
        .values("newest")
    )
    return positions_of(
        dict(ImportedLabel.objects.filter(pk__in=newest).values_list("solution_id", "ratings"))
    )


SOURCE = register(
    LabelSource(
        name="imported",
        title="Imported labels",
        trains=Trains(
            examples=examples,
            missing=lambda *, params: "no imported label (manage.py import_labels)",
            help="labels imported from public datasets (ProcessBench, PRMBench, TRL files)",
        ),
        first_error=FirstErrorReader(title="Imported", labeled=labeled_ids, positions=positions),
    )
)
