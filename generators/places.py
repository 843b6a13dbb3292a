"""Where a local model may lie: inside PRM_MODEL_DIR, judged by the text of its path alone.

The registry (`generators.local_models`) records only places this rule allows, and a training
run's backbone (`trainer.training.base_models`) is held to the same rule, with its own refusal.
"""

import os
from pathlib import Path

from django.conf import settings

MAX_LENGTH = 1024
# What a training run's checkpoint holds beside the backbone's files (trainer/training/ml/prm.py
# writes it): such a directory is a model version, not a local model to record.
PRM_SETTINGS_FILE = "prm.json"


def model_dir() -> Path:
    return Path(settings.PRM_MODEL_DIR)


def inside_model_dir(value: str) -> bool:
    """Whether `value` is the absolute path of a place inside PRM_MODEL_DIR (not the directory
    itself), normalised, without "..", by its text alone: nothing on the disk is asked."""
    if (
        len(value) > MAX_LENGTH
        or "\x00" in value
        or not os.path.isabs(value)
        or ".." in Path(value).parts
        or os.path.normpath(value) != value.rstrip("/")
    ):
        return False
    root = os.path.normpath(os.path.abspath(model_dir()))
    return os.path.commonpath([root, value]) == root and os.path.normpath(value) != root
