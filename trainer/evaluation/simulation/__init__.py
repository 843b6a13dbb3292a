"""Simulation: a synthetic domain whose step correctness is known exactly, and simulated
labelers that run the whole loop (label, retrain, select) without humans.

- `domain`: problems (digit arithmetic modulo 10) and a simulated generator whose solutions
  vary in route and fail through systematic misconceptions; every step's rating is known.
- `calibrate`: is the domain learnable? Held-out step AUROC of the tiny PRM against training
  time and label count.
- `labelers`: simulated labelers that label through `labeling.services.workbench`, with noise.
- `pool`: the candidate pool, imported through the product's importers, and the database
  the simulation owns.
- `evaluation`: the generated test set, the ORM baseline, step metrics and best-of-N curves.
- `loop`: generations of label -> retrain -> score -> select, with per-generation metrics
  (`python manage.py simulate`).
- `label_sources`: Math-Shepherd rollout labels from the exact generator against simulated
  human labels, bought with the same budget (`python manage.py simulate --label-sources`).
- `triage`: strategies, label sources and shown suggestions at equal human budget
  (`python manage.py simulate --triage`).
- `recipe`: the one place the simulation's training and selection parameters are written (the
  product's `TrainingParams` and `SelectionParams` with its overrides), and what every mode's
  parameter set shares.
"""
