"""Training: training runs and what they make. The run's lifecycle (`runs.py`), its
parameters (`params.py`), the examples (`dataset.py`), backbones (`base_models.py`), model
versions and promotion (`model_versions.py`), held-out metrics, charts and the stepwise export;
`ml/` is the only package that imports torch."""
