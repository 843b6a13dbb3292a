"""Scoring posted solutions with the active model version, for callers outside stepwise.

Best-of-N and RL code posts solutions (a problem and its steps) and gets the step scores and
the solution score by the active version's rule, the same numbers a scoring of the pool
stores. The version's PRM is loaded once per process and kept until another version becomes
active; one lock lets one request use it at a time (a web process serves many threads, and
one forward pass at a time bounds its memory). torch is imported on the first request only,
so a web process that never scores never pays for it.
"""

import threading
from dataclasses import dataclass

from core.errors import Unavailable
from trainer.training import checkpoints
from trainer.training.models import ModelVersion
from trainer.training.selectors import NoActiveModelVersion

MAX_SOLUTIONS = 256
MAX_STEPS = 128
MAX_TEXT_CHARS = 20_000

_lock = threading.Lock()
_loaded: dict[str, object] = {}  # {"key": (version id, checkpoint path), "prm": PRM}


class ModelNotLoadable(Unavailable):
    """The active version's checkpoint cannot be loaded on this host."""


@dataclass(frozen=True)
class ScoredSolution:
    step_scores: list[float]  # of the steps that fit the model's context
    score: float | None  # None when not even the first step fits
    truncated: bool


def _prm_of(version: ModelVersion):
    from trainer.training.ml.prm import PRM

    key = (version.pk, version.checkpoint)
    if _loaded.get("key") != key:
        _loaded.clear()
        try:
            prm = PRM.load(checkpoints.local_dir(version))
        except (OSError, ValueError) as exc:
            raise ModelNotLoadable(
                f"Model version {version.pk}'s checkpoint cannot be loaded here: {exc}"
            ) from None
        _loaded.update(key=key, prm=prm)
    return _loaded["prm"]


def score_posted(
    *, problems: list[str], steps: list[list[str]]
) -> tuple[int, list[ScoredSolution]]:
    """(the active version's id, a ScoredSolution per posted solution, in order)."""
    from trainer.training.ml.prm import solution_score

    version = ModelVersion.objects.filter(is_active=True).first()
    if version is None:
        raise NoActiveModelVersion(
            "No model version is active: train one or activate one to score with."
        )
    with _lock:
        prm = _prm_of(version)
        scored = prm.score_solutions(problems=problems, steps=steps)
    aggregation = prm.settings.aggregation
    return version.pk, [
        ScoredSolution(
            step_scores=s.step_scores,
            score=solution_score(s.step_scores, aggregation=aggregation) if s.step_scores else None,
            truncated=s.truncated,
        )
        for s in scored
    ]
