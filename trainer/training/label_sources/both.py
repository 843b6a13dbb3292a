"""Human and rollout labels together: each solution gives one example of each, the rollout
ones weighted by `rollout_weight`."""

from trainer.training.label_sources import human, rollout
from trainer.training.label_sources.base import LabelSource, Trains, register


def examples(*, params) -> list:
    return human.examples(params=params) + rollout.examples(
        params=params, weight=params.rollout_weight
    )


SOURCE = register(
    LabelSource(
        name="both",
        title="Human ratings and rollout labels",
        trains=Trains(
            examples=examples,
            missing=lambda *, params: "neither a submitted labeling session nor a rollout label",
            help="both of those, each solution giving one example of each",
            reads_human=True,
            soft=True,
        ),
    )
)
