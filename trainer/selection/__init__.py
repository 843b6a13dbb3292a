"""Selection: active learning. Choosing and publishing the next generation (`services.py`),
the strategies (`strategies.py`) and how far each generation's labeling has come
(`progress.py`, the generation pages)."""
