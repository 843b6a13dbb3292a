"""Varlen attention for packed rows: several examples in one row, each attending to itself only.

`trainer.training.ml.prm.pack` lays a micro-batch out as one padding-free row whose position ids
restart at every example. flash-attention reads the examples' boundaries from those restarts, but
it is a separate package that must be built against the machine's CUDA; sdpa needs a block-diagonal
mask of the whole row, which is O(row²) memory and takes sdpa off its fused causal kernels, so a
row of 16 examples does 16 times the attention work it needs.

`VARLEN` (registered with transformers as an attention implementation) does what flash-attention
does with torch alone: on CUDA, `torch.nn.attention.varlen.varlen_attn` (torch's own
flash-attention varlen kernel) over the cumulative example lengths; elsewhere, and for dtypes
that kernel does not take, each example's own causal sdpa. Batches with a padding mask (scoring
left-padded rows) go to plain sdpa with that mask.
"""

import torch
import torch.nn.functional as F

VARLEN = "stepwise_varlen"


def boundaries(position_ids: torch.Tensor) -> torch.Tensor:
    """Cumulative lengths (int32, starting at 0) of the examples of a flattened packed batch:
    an example starts wherever the position does not follow the previous one."""
    flat = position_ids.reshape(-1)
    starts = torch.ones_like(flat, dtype=torch.bool)
    starts[1:] = flat[1:] != flat[:-1] + 1
    index = torch.nonzero(starts).reshape(-1)
    end = torch.tensor([flat.numel()], device=flat.device)
    return torch.cat([index, end]).to(torch.int32)


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    position_ids: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: (batch, heads, tokens, dim) in, (batch, tokens,
    heads, dim) out."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, heads, tokens, dim = query.shape
    cu = None if position_ids is None else boundaries(position_ids.expand(batch, tokens))
    if attention_mask is not None or cu is None or len(cu) == batch + 1:
        # A padding mask, or one sequence per row: sdpa's own (fused, causal) kernels.
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    q = query.transpose(1, 2).reshape(batch * tokens, heads, dim)
    k = key.transpose(1, 2).reshape(batch * tokens, key.shape[1], dim)
    v = value.transpose(1, 2).reshape(batch * tokens, value.shape[1], dim)
    gqa = key.shape[1] != heads
    lengths = (cu[1:] - cu[:-1]).tolist()
    if q.is_cuda and q.dtype in (torch.bfloat16, torch.float16) and dropout == 0.0:
        from torch.nn.attention.varlen import varlen_attn

        out = varlen_attn(
            q,
            k,
            v,
            cu,
            cu,
            max(lengths),
            max(lengths),
            scale=scaling,
            window_size=(-1, 0),
            enable_gqa=gqa,
        )
    else:
        # split, not slices: its backward is one concatenation, not a zeroed copy per example.
        out = torch.cat(
            [
                F.scaled_dot_product_attention(
                    q_.transpose(0, 1)[None],
                    k_.transpose(0, 1)[None],
                    v_.transpose(0, 1)[None],
                    dropout_p=dropout,
                    is_causal=True,
                    scale=scaling,
                    enable_gqa=gqa,
                )[0].transpose(0, 1)
                for q_, k_, v_ in zip(
                    q.split(lengths), k.split(lengths), v.split(lengths), strict=True
                )
            ]
        )
    return out.reshape(batch, tokens, heads, dim), None


def varlen_mask(*args, attention_mask: torch.Tensor | None = None, **kwargs):
    """No mask for a padding-free batch (the position ids say where examples start); the sdpa
    mask when the batch has padding."""
    if attention_mask is None or bool(attention_mask.all()):
        return None
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


def register() -> str:
    """Make VARLEN an attention implementation transformers models can be built with."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(VARLEN, varlen_attention_forward)
    AttentionMaskInterface.register(VARLEN, varlen_mask)
    return VARLEN
