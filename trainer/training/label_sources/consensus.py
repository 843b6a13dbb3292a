"""Consensus labels: every human label, and past where humans rated, the steps the chosen
machine sources agree on (`trainer.training.consensus`, the one rule)."""

from trainer.training.label_sources.base import (
    LabelSource,
    Trains,
    ordered_machine_names,
    register,
)


def examples(*, params) -> list:
    from trainer.training import dataset

    return dataset.consensus_examples(
        sources=ordered_machine_names(params.consensus_sources), **dataset.data_filters(params)
    )


def missing(*, params) -> str:
    return (
        "no submitted labeling session and no step the consensus sources "
        f"({params.consensus_sources}) agree on"
    )


SOURCE = register(
    LabelSource(
        name="consensus",
        title="Consensus",
        trains=Trains(
            examples=examples,
            missing=missing,
            help="every human label, and where no human rated a step, the label the chosen "
            "machine sources agree on",
            reads_human=True,
        ),
    )
)
