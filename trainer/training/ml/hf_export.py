"""A model version as a standard Hugging Face checkpoint that transformers alone loads.

The PRM is a backbone (`AutoModel`) and a linear 3-class head read at the step tag. That is
exactly `AutoModelForTokenClassification` with three labels: the backbone under its base-model
prefix, the head as `score`, read at every token (callers keep the step-tag positions). The
export copies both into that class, saves it with the tokenizer (the step tag a special token)
and writes a model card stating the input format and the scoring rule, so best-of-N and RL code
elsewhere needs transformers and torch only.
"""

import json
import shutil
import tempfile
import uuid
from pathlib import Path

from core.errors import Conflict, NotFound
from trainer.training import checkpoints
from trainer.training.ml.prm import CLASSES, PRM, STEP_TAG
from trainer.training.models import ModelVersion

LABELS = {i: f"{rating:+d}" if rating else "0" for i, rating in enumerate(CLASSES)}

CARD = """---
library_name: transformers
pipeline_tag: token-classification
tags:
- process-reward-model
- stepwise
---
# {name}: a process reward model

Trained by stepwise (training run {run}) on step-level labels of math solutions. It rates each
step of a solution -1 (bad), 0 (okay) or +1 (good), the PRM800K labels.

## Input

The tokens of the problem followed by a blank line (`problem + "\\n\\n"`), then each step's
tokens followed by the step tag `{tag}` (token id {tag_id}, a special token of the tokenizer),
each piece tokenized on its own without special tokens{bos}. The logits at the tag after
step i rate step i: labels {labels}.

## Scoring rule

- Step score: {step_rule}.
- Solution score: the {aggregation} of its step scores.

```python
import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

tok = AutoTokenizer.from_pretrained(PATH)
model = AutoModelForTokenClassification.from_pretrained(PATH).eval()
tag = tok.convert_tokens_to_ids("{tag}")
ids = {prefix}tok(problem + "\\n\\n", add_special_tokens=False).input_ids
for step in steps:
    ids += tok(step, add_special_tokens=False).input_ids + [tag]
with torch.no_grad():
    probs = model(torch.tensor([ids])).logits[0].softmax(-1)[torch.tensor(ids) == tag]
step_scores = {score_expr}
```

Held-out metrics at training: {metrics}.
"""


class ExportRefused(Conflict):
    """The model version cannot be exported (its checkpoint is gone, or the output exists)."""


def export_model_version(*, model_version_id: int, out: Path) -> Path:
    """Write model version `model_version_id` to the new directory `out`, atomically."""
    version = ModelVersion.objects.filter(pk=model_version_id).first()
    if version is None:
        raise NotFound(f"There is no model version {model_version_id}.")
    checkpoint = checkpoints.local_dir(version)  # from the store, on whichever host this runs
    out = Path(out)
    if out.exists():
        raise ExportRefused(f"{out} already exists; an export never overwrites.")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        _write(prm=PRM.load(checkpoint, device="cpu"), version=version, path=tmp)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def publish_export(*, model_version_id: int, out: Path) -> str:
    """Export into `out` (as `export_model_version`), then put the export in the store, where a
    serving host fetches it; its reference."""
    from core import store

    path = export_model_version(model_version_id=model_version_id, out=out)
    key = store.check_key(f"exports/model-version-{model_version_id}-{uuid.uuid4().hex[:8]}")
    return store.publish_tree(source=path, key=key, seed_cache=False)


def _write(*, prm: PRM, version: ModelVersion, path: Path) -> None:
    from transformers import AutoModelForTokenClassification

    config = prm.module.backbone.config
    config.num_labels = len(CLASSES)
    config.id2label = LABELS
    config.label2id = {label: i for i, label in LABELS.items()}
    config.classifier_dropout = 0.0
    config.prm_step_tag = STEP_TAG
    config.prm_neutral_as_positive = prm.settings.neutral_as_positive
    config.prm_aggregation = prm.settings.aggregation
    model = AutoModelForTokenClassification.from_config(config)
    getattr(model, model.base_model_prefix).load_state_dict(prm.module.backbone.state_dict())
    model.score.load_state_dict(prm.module.head.state_dict())
    model.save_pretrained(path)
    prm.tokenizer.save_pretrained(path)
    ok = CLASSES.index(1)
    neutral = CLASSES.index(0)
    if prm.settings.neutral_as_positive:
        step_rule, score_expr = "p(+1) + p(0)", f"(probs[:, {ok}] + probs[:, {neutral}]).tolist()"
    else:
        step_rule, score_expr = "p(+1)", f"probs[:, {ok}].tolist()"
    bos = prm.prefix[0] if prm.prefix else None
    card = CARD.format(
        name=version.name or f"model version {version.pk}",
        run=version.training_run_id or "none (imported)",
        tag=STEP_TAG,
        tag_id=prm.step_tag_id,
        bos=f", after the BOS token (id {bos})" if bos is not None else "",
        prefix=f"[{bos}] + " if bos is not None else "",
        labels=", ".join(f"{i} = {label}" for i, label in LABELS.items()),
        step_rule=step_rule,
        aggregation=prm.settings.aggregation,
        score_expr=score_expr,
        metrics=json.dumps(version.metrics, sort_keys=True) if version.metrics else "none",
    )
    (path / "README.md").write_text(card, encoding="utf-8")
