"""What training tells the rooms above it, which listen (`trainer.pipeline`) rather than being
called from here: training stays below scoring and selection."""

from django.dispatch import Signal

# Sent once a run's transaction has committed a new model version: run_id, model_version.
model_version_recorded = Signal()
# Sent once an activation by hand has committed: model_version_id.
model_version_activated = Signal()
