"""Judging: an LLM rates the steps of solutions. Judge runs (`services.py`), the prompts and
the tolerant reading of replies (`prompts.py`), the judge labels they make, their pages, API,
form and export. A label source of its own, never mixed into human step ratings."""
