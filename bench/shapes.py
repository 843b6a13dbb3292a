"""Backbone shapes the GPU benchmarks build with random weights (no download, nothing to load).

The figures are those of the public configs of the models named, so tokens/s and memory are
what those backbones would give; the weights are random, which changes nothing about speed.
`tiny` is the CPU smoke-test shape (the built-in PRM backbone's size).
"""

SHAPES = {
    "tiny": {
        "family": "llama",
        "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": 4096,
    },
    # Qwen2.5-0.5B
    "qwen-0.5b": {
        "family": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
    # Llama-3.2-1B
    "llama-1b": {
        "family": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
    },
    # Qwen2.5-1.5B
    "qwen-1.5b": {
        "family": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
}


def backbone_config(shape: str, *, vocab_size: int | None = None, attn_implementation: str):
    """A transformers config of `shape`; `vocab_size` overrides the shape's (a tokenizer's)."""
    from transformers import LlamaConfig, Qwen2Config

    spec = dict(SHAPES[shape])
    family = spec.pop("family")
    if vocab_size is not None:
        spec["vocab_size"] = vocab_size
    config_class = Qwen2Config if family == "qwen2" else LlamaConfig
    config = config_class(
        **spec, max_position_embeddings=4096, tie_word_embeddings=False, bos_token_id=None
    )
    config._attn_implementation = attn_implementation
    return config


def matmul_parameters(model) -> int:
    """Parameters that take part in matrix products per token: all but the embeddings."""
    embeddings = model.get_input_embeddings().weight.numel()
    return sum(p.numel() for p in model.parameters()) - embeddings


def training_flops(*, parameters: int, layers: int, hidden: int, lengths: list[int]) -> float:
    """Model FLOPs of one training step (forward + backward) over sequences of `lengths`.

    6 per matrix parameter per token (PaLM, appendix B), plus attention's score and value
    products, 12 * layers * hidden * s per token of a sequence of length s, counted over the
    causal half that is computed (hence 6). Padding is not work the model needed: only real
    tokens count, so a padded batch shows its waste as lower utilisation.
    """
    tokens = sum(lengths)
    attention = 6 * layers * hidden * sum(s * s for s in lengths)
    return 6 * parameters * tokens + attention


# Dense bf16 peak of the device, TFLOP/s, by name (vendor figures, without sparsity).
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def peak_tflops(device_name: str) -> float | None:
    for name, tflops in PEAK_TFLOPS.items():
        if name in device_name:
            return tflops
    return None
