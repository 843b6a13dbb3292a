"""Varlen attention: a packed row gives each example exactly what it gives alone."""

import pytest
import torch
from transformers import AutoModel, LlamaConfig

from trainer.training.ml.attention import VARLEN, boundaries, register
from trainer.training.ml.prm import pack, pad


@pytest.fixture(scope="module")
def backbones():
    register()
    torch.manual_seed(0)
    # Grouped-query attention (2 key/value heads for 4 query heads), as Qwen and Llama have.
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        bos_token_id=None,
    )
    sdpa = AutoModel.from_config(config, attn_implementation="sdpa").eval()
    varlen = AutoModel.from_config(config, attn_implementation=VARLEN).eval()
    varlen.load_state_dict(sdpa.state_dict())
    return sdpa, varlen


ROWS = [[5, 9, 2], [7] * 17, list(range(10, 40)), [1]]


def test_boundaries_are_where_positions_restart():
    _, position_ids, _ = pack(ROWS, attn_implementation=VARLEN)
    assert boundaries(position_ids).tolist() == [0, 3, 20, 50, 51]


def test_a_packed_row_needs_no_mask_and_gives_each_example_its_own_states(backbones):
    sdpa, varlen = backbones
    input_ids, position_ids, mask = pack(ROWS, attn_implementation=VARLEN)
    assert mask is None
    with torch.no_grad():
        packed = varlen(input_ids=input_ids, position_ids=position_ids).last_hidden_state[0]
        start = 0
        for row in ROWS:
            alone = sdpa(input_ids=torch.tensor([row])).last_hidden_state[0]
            torch.testing.assert_close(packed[start : start + len(row)], alone)
            start += len(row)


def test_gradients_of_a_packed_row_equal_the_examples_one_by_one(backbones):
    sdpa, varlen = backbones
    input_ids, position_ids, _ = pack(ROWS, attn_implementation=VARLEN)
    varlen.zero_grad()
    varlen(input_ids=input_ids, position_ids=position_ids).last_hidden_state.sum().backward()
    sdpa.zero_grad()
    for row in ROWS:
        sdpa(input_ids=torch.tensor([row])).last_hidden_state.sum().backward()
    for (name, a), (_, b) in zip(varlen.named_parameters(), sdpa.named_parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, msg=name, atol=1e-5, rtol=1e-4)


def test_a_padded_batch_with_its_mask_is_sdpa_unchanged(backbones):
    sdpa, varlen = backbones
    input_ids, mask = pad(ROWS, 0)
    with torch.no_grad():
        expected = sdpa(input_ids=input_ids, attention_mask=mask).last_hidden_state
        got = varlen(input_ids=input_ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(got, expected)
