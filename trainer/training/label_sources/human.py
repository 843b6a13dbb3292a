"""Human labels: the ratings labelers give in the workbench, one example per labeled solution
by the training rule (`labeling.agreement.training_label`), plus its rated alternatives."""

from trainer.training.label_sources.base import HUMAN, LabelSource, Trains, register


def examples(*, params) -> list:
    from trainer.training import dataset

    return dataset.build_examples(**dataset.data_filters(params))


SOURCE = register(
    LabelSource(
        name=HUMAN,
        title="Human ratings",
        trains=Trains(
            examples=examples,
            missing=lambda *, params: "no submitted labeling session",
            help="the labelers' ratings",
            reads_human=True,
        ),
    )
)
