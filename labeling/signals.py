"""What labeling tells the rooms above it, which listen (`trainer.pipeline`) rather than being
called from here: labeling imports no room above it."""

from django.dispatch import Signal

# Sent once new solutions are committed to the pool (an import, the API's bulk import):
# count. The active model version scores them as they arrive.
solutions_added = Signal()
