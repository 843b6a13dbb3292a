"""What sampling tells the rooms above it, which listen (`trainer.pipeline`) rather than being
called from here."""

from django.dispatch import Signal

# Sent once a sampling run's success has committed: run_id. A run with `then_select` chains
# the next generation's selection.
sampling_run_succeeded = Signal()
