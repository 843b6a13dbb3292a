"""Training sized by tokens: micro-batches cut to a token budget give the loss and weights of one
big batch; a run that cannot fit the worker's memory is refused before it starts; LoRA and
top-layer runs train only what they say and still learn; early stopping keeps the best epoch."""

import pytest
import torch
from safetensors.torch import load_file

from trainer.tests.test_train import synthetic
from trainer.training.ml.memory import MemoryRefused
from trainer.training.ml.prm import PRM
from trainer.training.ml.train import build_prm, train_prm
from trainer.training.ml.tuning import micro_batches
from trainer.training.params import InvalidParams, TrainingParams

BACKBONE = "model.safetensors"


def losses_and_weights(tmp_path, name: str, **changes):
    params = TrainingParams(epochs=1, batch_size=12, learning_rate=3e-3, seed=1, **changes)
    events: list[dict] = []
    train_prm(
        train=synthetic(36, seed=1),
        eval=synthetic(4, seed=2),
        params=params,
        base_model=None,
        out_dir=tmp_path / name,
        on_progress=events.append,
    )
    return [e["loss"] for e in events if "step" in e], load_file(tmp_path / name / BACKBONE)


@pytest.mark.slow  # trains models
def test_micro_batches_of_a_small_token_budget_train_as_one_big_batch(tmp_path):
    examples = synthetic(36, seed=1)
    prm = build_prm(params=TrainingParams(), base_model=None, examples=examples)
    lengths = [
        len(e.input_ids)
        for e in prm.encode_many([e.problem for e in examples], [e.steps for e in examples])
    ]
    small = max(lengths) * 2
    assert len(micro_batches(range(12), lengths, small)) >= 4  # really cut up

    big_losses, big = losses_and_weights(tmp_path, "big", max_tokens_per_micro_batch=2**20)
    small_losses, cut = losses_and_weights(tmp_path, "small", max_tokens_per_micro_batch=small)

    assert len(big_losses) == 3
    assert small_losses == pytest.approx(big_losses, rel=1e-4)
    for name, tensor in big.items():
        torch.testing.assert_close(cut[name], tensor, rtol=1e-3, atol=1e-5)


def test_a_run_that_cannot_fit_the_memory_is_refused_with_what_would_fit(tmp_path):
    with pytest.raises(MemoryRefused) as refused:
        train_prm(
            train=synthetic(8, seed=1),
            eval=synthetic(2, seed=2),
            params=TrainingParams(epochs=1),
            base_model=None,
            out_dir=tmp_path / "model",
            memory_limit=100 * 1024**2,
        )
    message = str(refused.value)
    assert "above the 0.1 GiB this worker may use" in message
    assert "LoRA (lora_rank 8)" in message and "PRM_TRAIN_MEMORY_GB" in message
    assert not (tmp_path / "model").exists()


def learns(prm: PRM) -> bool:
    good, bad = prm.score(
        problems=["Problem 1: find x."] * 2,
        steps=[["we add correct the numbers"], ["we add mistake the numbers"]],
    )
    return good[0] > 0.5 > bad[0]


@pytest.mark.slow  # trains models
@pytest.mark.parametrize(
    "changes, frozen",
    [
        ({"lora_rank": 8}, "layers.0.self_attn.q_proj.weight"),
        ({"train_top_layers": 1}, "layers.0.self_attn.q_proj.weight"),
    ],
)
def test_parameter_efficient_runs_train_only_their_part_and_learn(tmp_path, changes, frozen):
    train = synthetic(120, seed=1)
    params = TrainingParams(epochs=4, batch_size=8, learning_rate=1e-2, **changes)
    start = build_prm(params=params, base_model=None, examples=train)
    start.save(tmp_path / "start")
    events: list[dict] = []
    result = train_prm(
        train=train,
        eval=synthetic(12, seed=2),
        params=params,
        base_model=None,
        out_dir=tmp_path / "model",
        on_progress=events.append,
        prm=PRM.load(tmp_path / "start"),
    )
    before = load_file(tmp_path / "start" / BACKBONE)
    after = load_file(tmp_path / "model" / BACKBONE)
    assert set(after) == set(before)  # an ordinary checkpoint (LoRA merged in)
    trained = [name for name in before if not torch.equal(before[name], after[name])]
    if "train_top_layers" in changes:
        assert trained and all(name.startswith(("layers.1.", "norm.")) for name in trained)
    else:
        assert frozen in trained  # the adapters, merged, moved the weights they adapt
        assert "embed_tokens.weight" not in trained
    assert any("Training" in e.get("log", "") and "weights" in e["log"] for e in events)
    assert learns(PRM.load(result.checkpoint_dir))


def test_lora_and_top_layers_together_are_refused():
    with pytest.raises(InvalidParams, match="not both"):
        TrainingParams(lora_rank=4, train_top_layers=1)


@pytest.mark.slow  # trains models
def test_early_stopping_keeps_the_best_epoch_and_stops_when_patience_runs_out(tmp_path):
    events: list[dict] = []
    # A learning rate far too high: the validation loss gets worse after the first epochs.
    result = train_prm(
        train=synthetic(60, seed=1),
        eval=synthetic(6, seed=2),
        params=TrainingParams(
            epochs=30, batch_size=4, learning_rate=0.5, early_stopping_patience=2
        ),
        base_model=None,
        out_dir=tmp_path / "model",
        on_progress=events.append,
    )
    validation = [e["validation_loss"] for e in result.epochs]
    best = min(range(len(validation)), key=validation.__getitem__)
    assert len(result.epochs) == best + 1 + 2 < 30
    assert result.final_metrics["epoch"] == best + 1
    assert any("Early stop" in e.get("log", "") for e in events)


@pytest.mark.django_db
def test_the_run_page_and_api_show_the_runs_peak_memory(client, researcher):
    from django.urls import reverse

    from trainer.tests.test_run_page import finished

    run = finished(peak_rss_bytes=3 * 1024**3, peak_cuda_bytes=None)
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert "Peak memory" in page and "3.0\xa0GB resident" in page
    api = client.get(f"/api/training-runs/{run.pk}/").json()
    assert api["peak_rss_bytes"] == 3 * 1024**3 and api["peak_cuda_bytes"] is None
