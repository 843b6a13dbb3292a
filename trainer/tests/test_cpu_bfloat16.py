"""Scoring on the CPU in bf16 (issue 46, item 1): off by default, since it moves the figures a
page shows (docs/benchmarks.md); `PRM_CPU_BFLOAT16=auto` turns it on where the CPU multiplies
bf16 matrices in hardware (AMX), `on` everywhere. The scores stay within a bf16 rounding of
fp32's, alone or batched."""

import pytest
import torch

from trainer.training.ml import prm as prm_module
from trainer.training.ml.prm import PRM

CORPUS = ["What is $2 + 3$?", "We add $2$ and $3$ to get $5$.", "So the answer is $5$."] * 10
PROBLEMS = [f"Problem {n}: what is ${n} + 3$?" for n in range(6)]
STEPS = [
    [f"Step {k}: we add ${n}$ and $3$, then check it again." for k in range(2 + n % 4)]
    for n in range(6)
]


@pytest.fixture(scope="module")
def prm() -> PRM:
    model = PRM.build(base_model=None, corpus=CORPUS, seed=0)
    torch.manual_seed(5)
    with torch.no_grad():  # weights far from their init, so that scores spread out
        for parameter in model.module.parameters():
            parameter.normal_(std=0.2)
    return model


@pytest.mark.parametrize(
    ("value", "expected"), [("on", True), ("off", False), ("OFF", False), (" on ", True)]
)
def test_the_setting_says_whether_cpu_scoring_runs_in_bf16(monkeypatch, value, expected):
    monkeypatch.setenv("PRM_CPU_BFLOAT16", value)
    assert prm_module.cpu_bfloat16() is expected


def test_cpu_scoring_is_fp32_unless_asked_even_with_bf16_units(monkeypatch):
    monkeypatch.delenv("PRM_CPU_BFLOAT16", raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert prm_module.cpu_bfloat16() is False
    monkeypatch.setenv("PRM_CPU_BFLOAT16", "")
    assert prm_module.cpu_bfloat16() is False
    monkeypatch.setenv("PRM_CPU_BFLOAT16", "auto")
    assert prm_module.cpu_bfloat16() is True


def test_auto_follows_the_cpus_bf16_units(monkeypatch):
    monkeypatch.setenv("PRM_CPU_BFLOAT16", "auto")
    assert prm_module.cpu_bfloat16() is bool(torch.cpu._is_amx_tile_supported())
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert prm_module.cpu_bfloat16() is False


def test_a_wrong_value_is_refused_naming_the_choices(monkeypatch):
    monkeypatch.setenv("PRM_CPU_BFLOAT16", "fast")
    with pytest.raises(ValueError, match="off, auto, on"):
        prm_module.cpu_bfloat16()


def test_bf16_scores_are_fp32_scores_rounded(prm, monkeypatch):
    monkeypatch.setenv("PRM_CPU_BFLOAT16", "off")
    exact = prm.score(problems=PROBLEMS, steps=STEPS, batch_size=8)
    monkeypatch.setenv("PRM_CPU_BFLOAT16", "on")
    batched = prm.score(problems=PROBLEMS, steps=STEPS, batch_size=8)
    assert batched != exact, "bf16 autocast did not apply"
    for scores, reference in zip(batched, exact, strict=True):
        assert scores == pytest.approx(reference, abs=3e-2)
    for problem, steps, scores in zip(PROBLEMS, STEPS, batched, strict=True):
        alone = prm.score(problems=[problem], steps=[steps], batch_size=1)[0]
        assert alone == pytest.approx(scores, abs=3e-2)

    # What the figures read: where each solution's first step under 0.5 falls.
    def first_below(scores):
        return next((i for i, x in enumerate(scores) if x < 0.5), -1)

    assert [first_below(s) for s in batched] == [first_below(s) for s in exact]
