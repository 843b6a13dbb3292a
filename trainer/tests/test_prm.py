"""The PRM module: step tags, where the loss is read, packing, scoring, save and load."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from trainer.training.ml.prm import (
    IGNORE,
    PRM,
    STEP_TAG,
    PRMSettings,
    pack,
    pad,
    solution_score,
)

CORPUS = [
    "What is $2 + 3$?",
    "We add $2$ and $3$ to get $5$.",
    "So the answer is $5$.\n\n# Answer\n\n5",
    "Multiply both sides by $2$, so $x = 14$.",
    "Subtract $7$ from both sides.",
] * 10
PROBLEMS = ["What is $2 + 3$?", "Solve $x / 2 = 7$.", "What is $2 + 3$? Show your work."]
STEPS = [
    ["We add $2$ and $3$ to get $5$.", "So the answer is $5$.\n\n# Answer\n\n5"],
    ["Multiply both sides by $2$, so $x = 14$."],
    ["Subtract $7$ from both sides.", "We add $2$ and $3$.", "So $5$.", "# Answer\n\n5"],
]


@pytest.fixture(scope="module")
def prm() -> PRM:
    return PRM.build(base_model=None, corpus=CORPUS, seed=0)


def test_step_tag_is_one_registered_special_token(prm):
    ids = prm.tokenizer.encode(STEP_TAG, add_special_tokens=False)
    assert ids == [prm.step_tag_id]
    assert STEP_TAG in prm.tokenizer.all_special_tokens
    # A step whose text happens to contain the tag must not create a second step boundary.
    encoded = prm.encode("p", [f"a {STEP_TAG} b"])
    assert encoded.input_ids.count(prm.step_tag_id) == 1


def test_labels_are_set_only_at_step_tags(prm):
    encoded = prm.encode(PROBLEMS[2], STEPS[2], [1, 0, 1, -1])
    tags = [i for i, t in enumerate(encoded.input_ids) if t == prm.step_tag_id]
    labelled = [i for i, label in enumerate(encoded.labels) if label != IGNORE]
    assert tags == labelled
    assert [encoded.labels[i] for i in tags] == [2, 1, 2, 0]  # class = rating + 1
    assert encoded.input_ids[-1] == prm.step_tag_id


def test_encoding_many_solutions_at_once_gives_each_its_own_encoding(prm):
    # Scoring and training tokenize a whole chunk in one call; a text must not leak into
    # its neighbour, and a step without text still gets its tag.
    steps = [*STEPS, ["", "x < step> y"]]
    problems = [*PROBLEMS, "Empty first step."]

    def ids(text: str) -> list[int]:
        return prm.tokenizer.encode(text, add_special_tokens=False)

    expected = []
    for problem, solution_steps in zip(problems, steps, strict=True):
        input_ids = list(prm.prefix) + ids(f"{problem}\n\n")
        for step in solution_steps:
            input_ids += ids(step) + [prm.step_tag_id]
        expected.append(input_ids)
    assert [e.input_ids for e in prm.encode_many(problems, steps)] == expected


def test_loss_is_cross_entropy_at_tags_only(prm):
    encoded = prm.encode(PROBLEMS[0], STEPS[0], [1, -1])
    input_ids = torch.tensor([encoded.input_ids])
    labels = torch.tensor([encoded.labels])
    with torch.no_grad():
        loss, logits = prm.module(input_ids, labels=labels)
        hidden = prm.module.backbone(input_ids=input_ids).last_hidden_state[0]
        every_position = prm.module.head(hidden)
    tags = labels[0] != IGNORE
    expected = F.cross_entropy(every_position[tags], labels[0][tags])
    assert logits.shape == (2, 3)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    # Changing what the non-tag positions would predict cannot change the loss: they are
    # not read. Changing a tag's label does.
    other = labels.clone()
    other[0, torch.nonzero(tags)[0]] = 0
    with torch.no_grad():
        changed, _ = prm.module(input_ids, labels=other)
    assert changed.item() != pytest.approx(loss.item())


def test_one_forward_pass_scores_every_step_the_same_batched_or_alone(prm):
    batched = prm.score(problems=PROBLEMS, steps=STEPS, batch_size=8)
    assert [len(s) for s in batched] == [len(s) for s in STEPS]
    for problem, steps, scores in zip(PROBLEMS, STEPS, batched, strict=True):
        alone = prm.score(problems=[problem], steps=[steps], batch_size=1)[0]
        assert alone == pytest.approx(scores, abs=1e-5)
        assert all(0.0 <= s <= 1.0 for s in scores)


def test_right_padding_without_a_mask_changes_no_logit_loss_or_gradient(prm):
    # Training and scoring feed right-padded rows without an attention mask (causal
    # attention keeps pads unseen); each row must come out as it would alone. Weights far
    # from their near-zero init, so that any position mixed up shows.
    module = copy.deepcopy(prm.module)
    torch.manual_seed(3)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(std=0.3)
    encoded = prm.encode_many(PROBLEMS * 2, [s[::-1] for s in STEPS] + STEPS, [[1, 0, -1, 1]] * 6)
    input_ids, _ = pad([e.input_ids for e in encoded], prm.pad_id)  # rows of different lengths
    labels, _ = pad([e.labels for e in encoded], prm.pad_id, fill=IGNORE)
    alone = [(torch.tensor([e.input_ids]), torch.tensor([e.labels])) for e in encoded]

    module.eval()
    with torch.inference_mode():
        _, padded = module(input_ids, positions=input_ids == prm.step_tag_id)
        separate = torch.cat([module(ids, positions=ids == prm.step_tag_id)[1] for ids, _ in alone])
    assert padded.shape == separate.shape == (int((labels != IGNORE).sum()), 3)
    assert torch.allclose(padded, separate, atol=1e-5)
    assert separate.std() > 0.1  # the logits differ enough between tags for the check to bite

    module.train()
    loss, _ = module(input_ids, labels=labels)
    padded_grads = torch.autograd.grad(loss, list(module.parameters()))
    logits = torch.cat([module(ids, positions=row != IGNORE)[1] for ids, row in alone])
    separate_loss = F.cross_entropy(logits, labels[labels != IGNORE])
    separate_grads = torch.autograd.grad(separate_loss, list(module.parameters()))
    assert loss.item() == pytest.approx(separate_loss.item(), abs=1e-5)
    for padded_grad, separate_grad in zip(padded_grads, separate_grads, strict=True):
        assert torch.allclose(padded_grad, separate_grad, atol=1e-5)


def test_neutral_as_positive_only_when_set(prm):
    probs = torch.tensor([[0.2, 0.5, 0.3]])  # p(-1), p(0), p(+1)
    assert prm.step_scores_from(probs) == pytest.approx([0.8])
    strict = PRM(
        module=prm.module,
        tokenizer=prm.tokenizer,
        settings=PRMSettings(neutral_as_positive=False),
        max_length=prm.max_length,
        base_model=None,
    )
    assert strict.step_scores_from(probs) == pytest.approx([0.3])


def test_long_solutions_are_cut_to_fit_but_keep_every_step_tag(prm):
    short = PRM(
        module=prm.module,
        tokenizer=prm.tokenizer,
        settings=prm.settings,
        max_length=40,
        base_model=None,
    )
    steps = ["We add $2$ and $3$ to get $5$ and then we add more numbers." * 3] * 6
    encoded = short.encode("What is $2 + 3$? " * 10, steps, [1] * 6)
    assert len(encoded.input_ids) <= 40
    assert encoded.input_ids.count(prm.step_tag_id) == 6
    assert len(short.score(problems=["p"], steps=[steps])[0]) == 6


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_forward_equals_separate_forwards(prm, attn):
    backbone = prm.module.backbone
    backbone.set_attn_implementation(attn)
    try:
        rows = [prm.encode(p, s, [1] * len(s)) for p, s in zip(PROBLEMS, STEPS, strict=True)]
        input_ids, position_ids, mask = pack([r.input_ids for r in rows], attn_implementation=attn)
        labels = torch.tensor([[t for r in rows for t in r.labels]])
        with torch.no_grad():
            packed_hidden = backbone(
                input_ids=input_ids, position_ids=position_ids, attention_mask=mask
            ).last_hidden_state[0]
            separate_hidden = torch.cat(
                [backbone(input_ids=torch.tensor([r.input_ids])).last_hidden_state[0] for r in rows]
            )
            packed_loss, packed_logits = prm.module(
                input_ids, position_ids=position_ids, attention_mask=mask, labels=labels
            )
        assert position_ids[0].tolist().count(0) == len(rows)
        torch.testing.assert_close(packed_hidden, separate_hidden, atol=1e-5, rtol=1e-4)
        separate_scores = prm.score(problems=PROBLEMS, steps=STEPS)
        packed_probs = packed_logits.softmax(-1)
        packed_scores = (packed_probs[:, 1] + packed_probs[:, 2]).tolist()
        assert packed_scores == pytest.approx([s for row in separate_scores for s in row], abs=1e-5)
        assert math.isfinite(packed_loss.item())
    finally:
        backbone.set_attn_implementation("sdpa")


def test_save_then_load_gives_identical_scores(prm, tmp_path):
    prm = PRM(
        module=prm.module,
        tokenizer=prm.tokenizer,
        settings=PRMSettings(neutral_as_positive=True, aggregation="min"),
        max_length=prm.max_length,
        base_model=None,
    )
    prm.save(tmp_path / "model")
    loaded = PRM.load(tmp_path / "model", device="cpu")
    assert loaded.settings == PRMSettings(neutral_as_positive=True, aggregation="min")
    assert loaded.step_tag_id == prm.step_tag_id
    assert loaded.score(problems=PROBLEMS, steps=STEPS) == prm.score(problems=PROBLEMS, steps=STEPS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert (tmp_path / "model" / "model.safetensors").exists()


def test_save_never_overwrites_a_checkpoint(prm, tmp_path):
    (tmp_path / "model").mkdir()
    with pytest.raises(FileExistsError):
        prm.save(tmp_path / "model")


def test_save_into_an_unwritable_place_raises_and_leaves_nothing(prm, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    with pytest.raises(OSError):
        prm.save(blocker / "model")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-directory"]


def test_save_failing_midway_leaves_no_partial_directory(prm, tmp_path, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(prm.tokenizer, "save_pretrained", disk_full)
    with pytest.raises(OSError):
        prm.save(tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


def test_solution_score_aggregations():
    scores = [0.9, 0.5, 0.8]
    assert solution_score(scores) == pytest.approx(0.36)
    assert solution_score(scores, aggregation="product") == pytest.approx(0.36)
    assert solution_score(scores, aggregation="min") == 0.5
    assert solution_score(scores, aggregation="last") == 0.8
    with pytest.raises(ValueError, match="Unknown aggregation"):
        solution_score(scores, aggregation="mean")
    with pytest.raises(ValueError):
        solution_score([], aggregation="min")
