"""Label sources: where the step labels come from that a training run reads, that a consensus
weighs and that the quality page compares. One module per source, each declaring one
`LabelSource` (`base`); the registry here is the one list of them, and everything that offers
or reads sources derives from it:

- a training run's `label_source` choices (`TrainingParams`: the form, the API, `train_prm`),
  the examples a run builds (`trainer.training.dataset.labeled_examples`), the run's "no data"
  message, the step labels it counts per source, whether the human labels it read are frozen
  (`trainer.pipeline.freeze_trained_labels`) and whether the TRL export writes soft labels;
- the machine sources a consensus may ask (`consensus_sources`, `trainer.training.consensus`),
  on the training data and on the solution page alike;
- the first-error figures between sources on the quality page (`labeling.first_error`, which
  reads this registry through the one hook `trainer.apps` gives it) and the machine sources of
  the `disagreement` selection strategy.

Why the modules import their readers inside their functions: `TrainingParams` reads the
choices here, and the training loop's processes import it with no Django configured.

A new source is one module that declares its `LabelSource` and calls `register` (a built-in
one is also imported below, which fixes its place in the lists);
`trainer/tests/test_label_source_registry.py` registers a toy source in the test and finds it
in the form, the API, the command, the dataset, the run's page and the quality figures.
"""

# Each module registers its source on import; this order is the lists' order.
# isort: off
from trainer.training.label_sources import human, rollout, both, imported, judge, prm  # noqa: F401
from trainer.training.label_sources import consensus  # noqa: F401

# isort: on
from trainer.training.label_sources.base import (
    HUMAN,
    FirstErrorReader,
    LabelSource,
    MachineReader,
    Trains,
    all_sources,
    consensus_choices,
    disagreement_sources,
    first_error_sources,
    machine_names,
    ordered_machine_names,
    register,
    source,
    training_choices,
    unregister,
)

__all__ = [
    "HUMAN",
    "FirstErrorReader",
    "LabelSource",
    "MachineReader",
    "Trains",
    "all_sources",
    "consensus_choices",
    "disagreement_sources",
    "first_error_sources",
    "machine_names",
    "ordered_machine_names",
    "register",
    "source",
    "training_choices",
    "unregister",
]
