"""Evaluation: is a model version any good. Best-of-N and majority voting (`best_of_n.py`),
ProcessBench (`processbench.py`) and the simulated loop (`simulation/`)."""
