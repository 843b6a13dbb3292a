"""The GPU paths on a real CUDA device: varlen attention, bf16 training, scoring, an nccl process
group and the local generator. Marked `gpu` and skipped without CUDA (every CPU machine, CI);
`bench/gpu_check.py` runs them first when a GPU machine is lent (docs/benchmarks.md, GPU check).
"""

import pytest
import torch
from transformers import AutoModel, LlamaConfig

from trainer.tests.test_train import synthetic
from trainer.training.ml.attention import VARLEN, register
from trainer.training.ml.prm import PRM, pack

CUDA = torch.cuda.is_available()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not CUDA, reason="needs a CUDA device (make gpu-check on a GPU machine)"),
]

ROWS = [[5, 9, 2], [7] * 17, list(range(10, 40)), [1], list(range(100, 290))]
# What learns the synthetic steps in a few dozen bf16 optimizer steps.
FAST = {"epochs": 4, "batch_size": 16, "learning_rate": 3e-3, "warmup_ratio": 0.1}


def test_varlen_attention_on_cuda_gives_each_packed_example_its_own_states():
    register()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=256,  # head size 64, as real backbones have: the flash kernel's own case
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        bos_token_id=None,
    )
    sdpa = AutoModel.from_config(config, attn_implementation="sdpa").eval().cuda()
    varlen = AutoModel.from_config(config, attn_implementation=VARLEN).eval().cuda()
    varlen.load_state_dict(sdpa.state_dict())
    input_ids, position_ids, mask = pack(ROWS, attn_implementation=VARLEN)
    assert mask is None
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        packed = varlen(
            input_ids=input_ids.cuda(), position_ids=position_ids.cuda()
        ).last_hidden_state[0]
        start = 0
        for row in ROWS:
            alone = sdpa(input_ids=torch.tensor([row]).cuda()).last_hidden_state[0]
            torch.testing.assert_close(
                packed[start : start + len(row)].float(), alone.float(), atol=5e-2, rtol=5e-2
            )
            start += len(row)


def test_bf16_training_on_cuda_learns_and_saves(tmp_path):
    from trainer.training.ml.train import train_prm
    from trainer.training.params import TrainingParams

    events: list[dict] = []
    result = train_prm(
        train=synthetic(160, seed=1),
        eval=synthetic(40, seed=2),
        params=TrainingParams(**FAST),
        base_model=None,
        out_dir=tmp_path / "model",
        on_progress=events.append,
    )
    assert any("(bf16)" in e.get("log", "") for e in events)
    losses = [e["loss"] for e in events if "step" in e]
    assert sum(losses[-5:]) / 5 < losses[0] / 2
    assert result.final_metrics["step_auroc"] > 0.9
    prm = PRM.load(result.checkpoint_dir)
    assert prm.device.type == "cuda"
    good, bad = prm.score(
        problems=["Problem 1: find x."] * 2,
        steps=[["we add correct the numbers"], ["we add mistake the numbers"]],
    )
    assert good[0] > 0.5 > bad[0]


def test_scoring_on_cuda_equals_scoring_on_the_cpu(tmp_path):
    examples = synthetic(40, seed=3)
    built = PRM.build(
        base_model=None,
        corpus=[text for e in examples for text in (e.problem, *e.steps)],
        seed=3,
    )
    built.save(tmp_path / "model")
    problems = [e.problem for e in examples]
    steps = [e.steps for e in examples]
    on_cpu = PRM.load(tmp_path / "model", device="cpu").score(
        problems=problems, steps=steps, batch_size=8
    )
    on_cuda = PRM.load(tmp_path / "model", device="cuda").score(
        problems=problems, steps=steps, batch_size=8
    )
    assert [len(s) for s in on_cuda] == [len(s) for s in on_cpu]
    for got, expected in zip(on_cuda, on_cpu, strict=True):
        assert got == pytest.approx(expected, abs=2e-2)


def test_a_one_rank_nccl_process_group_trains_through_the_workers_launcher(tmp_path):
    from trainer.training.ml.distributed import train_in_process_group
    from trainer.training.params import TrainingParams

    events: list[dict] = []
    result = train_in_process_group(
        processes=1,
        train=synthetic(40, seed=1),
        eval=synthetic(10, seed=2),
        params=TrainingParams(epochs=1, batch_size=8),
        base_model=None,
        out_dir=tmp_path / "group",
        on_progress=events.append,
    )
    assert [e["epoch"] for e in result.epochs] == [1]
    # The rank trained on the GPU (its process group is nccl there: distributed.run_rank).
    assert any("training examples" in e.get("log", "") and "cuda" in e["log"] for e in events)
    assert any("step" in e for e in events)
    assert PRM.load(result.checkpoint_dir).device.type == "cuda"


@pytest.mark.django_db
def test_the_local_generator_samples_on_cuda_and_the_same_seeds_give_the_same_text(
    smollm2_model_dir,
):
    from generators.base import GenerationRequest, GeneratorSpec, SamplingSettings
    from generators.local import LocalGenerator

    generator = LocalGenerator(GeneratorSpec(backend="local", model=smollm2_model_dir.name))
    assert generator._model.device.type == "cuda"
    requests = [
        GenerationRequest(
            messages=({"role": "user", "content": f"What is {n} + {n}? Think step by step."},),
            seed=seed,
            max_tokens=48,
        )
        for n, seed in ((2, 11), (3, 12), (4, 13))
    ]
    settings = SamplingSettings(temperature=0.8, top_p=0.95, max_tokens=48)
    first = generator.generate(requests=requests, settings=settings)
    second = generator.generate(requests=requests, settings=settings)
    assert first == second
    assert all(text.strip() for text in first)
