"""The model side that runs torch: the PRM, the training loop, packed attention, the process
group of a run on several devices, and the Hugging Face export.

This package is the only place in `trainer/` that imports torch, transformers, peft,
safetensors or accelerate (`core/tests/test_imports.py` holds it to that). The web process
never imports it: pages and the API stay light, and
`annotate/tests/test_web_stack_imports.py` checks that loading them leaves torch unimported.
So this file imports nothing; its modules are imported where a worker trains, scores or exports.
"""
