"""Scoring: a model version's step scores on the pool. Scoring chunks that any number of
workers take (`chunks.py`), scores written back in bulk (`store.py`), and posted solutions
scored for callers outside stepwise (`posted.py`, `POST /api/score/`)."""
