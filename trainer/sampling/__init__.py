"""Sampling: machine-made solutions and labels. Sampling runs (`services.py`: solutions into the
pool, or rollouts from each step of chosen ones), their pages, API and forms, the rollout
labels they make (`rollouts.py`) and how far they agree with human labels
(`rollout_agreement.py`)."""
