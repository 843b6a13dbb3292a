"""The model side's tables. Each is defined in its room's models module (training, sampling,
scoring) and imported here, where Django reads the trainer app's models; their app label and
tables are the trainer app's as before."""

from trainer.evaluation.models import Evaluation, EvaluationSet
from trainer.judging.models import JudgeLabel, JudgeRun, JudgeRunItem
from trainer.sampling.models import ImportedLabel, RolloutLabel, SamplingRun, SamplingRunItem
from trainer.scoring.models import ScoringChunk
from trainer.training.models import ModelVersion, TrainingRun

__all__ = [
    "Evaluation",
    "EvaluationSet",
    "ImportedLabel",
    "JudgeLabel",
    "JudgeRun",
    "JudgeRunItem",
    "ModelVersion",
    "RolloutLabel",
    "SamplingRun",
    "SamplingRunItem",
    "ScoringChunk",
    "TrainingRun",
]
