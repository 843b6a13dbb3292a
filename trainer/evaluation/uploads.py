"""An uploaded ProcessBench file becomes an evaluation set (the page's and the API's door)."""

import tempfile
from pathlib import Path

from trainer.evaluation import sets
from trainer.evaluation.models import EvaluationSet


def register_uploaded_processbench(*, name: str, upload, user) -> EvaluationSet:
    """Write the upload to a temporary file (the parser reads a path: JSONL or Parquet, told
    by its suffix) and register it; the file goes once its items are stored."""
    suffix = Path(upload.name or "items.jsonl").suffix or ".jsonl"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{Path(upload.name or 'items').stem}{suffix}"
        with path.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        return sets.register_processbench_set(name=name, path=path, user=user)
