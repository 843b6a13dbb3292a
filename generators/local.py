"""A generator that is a local Hugging Face checkpoint, loaded on the worker.

The spec names a LocalModel (a checkpoint directory recorded from PRM_MODEL_DIR), never a hub
id or a path: the registry decides what may be loaded, and the hub is never asked (local files
only). The worker reads the model's files from the artifact store, through its own cache
(`generators.local_models.model_files`): the host that recorded it may be another one.
The model is loaded once per process and kept: a worker draws many batches from it.

Requests are generated in batches (left padded) of GENERATOR_CONCURRENCY. A batch shares one
forward pass but not its randomness: each row draws its tokens from its own generator seeded
with the request's seed, so a request gives the same text alone or beside any others (up to
the float rounding a different batch shape brings, which moves a draw only when it falls
within about 1e-6 of a token's boundary). Sampling is done by a logits processor that keeps
only the drawn token, and generate() then runs greedily: its own sampler would draw every row
from the one global generator.
"""

import threading
from pathlib import Path

from django.conf import settings as django_settings

from core import store
from generators.base import (
    GenerationRequest,
    GeneratorSpec,
    GeneratorUnavailable,
    InvalidGenerator,
    SamplingSettings,
    Usage,
)
from generators.openai_compatible import cut_at_stop

# A checkpoint's identity (`core.store.identity`) -> (model, tokenizer), for the life of the
# process.
_LOADED: dict[str, tuple] = {}
_LOADING = threading.Lock()


def _checkpoint(name: str) -> Path:
    """The checkpoint directory of the local model `name` on this host: its files from the
    artifact store (this host's cache), or, for a record made before the store, from this
    host's PRM_MODEL_DIR."""
    from core.errors import Unavailable
    from generators.local_models import LocalModelRefused, model_files
    from generators.models import LocalModel

    record = LocalModel.objects.filter(name=name).first()
    if record is None:
        known = list(LocalModel.objects.order_by("name").values_list("name", flat=True))
        listed = ", ".join(known) if known else "none (run `manage.py register_models`)"
        raise InvalidGenerator(f"No local model is named {name}. Known local models: {listed}.")
    if record.kind == LocalModel.Kind.GGUF:
        raise InvalidGenerator(
            f"{name} is a GGUF file, which the local generator does not load: run "
            f"`manage.py convert_gguf` to make a checkpoint of it and name that model instead."
        )
    try:
        path = model_files(record)
    except LocalModelRefused as exc:
        raise InvalidGenerator(str(exc)) from None
    except Unavailable as exc:
        raise GeneratorUnavailable(str(exc)) from None
    if not (path / "config.json").is_file():
        raise GeneratorUnavailable(
            f"Local model {name} is recorded but its checkpoint is missing on this worker "
            f"(no config.json in {path})."
        )
    return path


def _load(path: Path) -> tuple:
    # By what the files are, not where this host's cache put them: a model read again from
    # another cache folder (or after its entry was evicted and fetched anew) is loaded once.
    key = store.identity(str(path))
    with _LOADING:
        if key not in _LOADED:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            cuda = torch.cuda.is_available()
            try:
                tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(
                    path,
                    local_files_only=True,
                    dtype=torch.bfloat16 if cuda else torch.float32,
                )
            except (OSError, ValueError) as exc:
                raise GeneratorUnavailable(
                    f"The checkpoint at {path} cannot be loaded: {exc}"
                ) from None
            model.to("cuda" if cuda else "cpu").eval()
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            if not getattr(tokenizer, "chat_template", None):
                raise GeneratorUnavailable(
                    f"The checkpoint at {path} has no chat template: it is not a chat model."
                )
            _LOADED[key] = (model, tokenizer)
        return _LOADED[key]


def _sampler(*, temperature: float, top_p: float, seeds: list[int], device):
    """A logits processor that draws row i's next token with its own generator (seeds[i]) and
    leaves only that token possible."""
    import torch
    from transformers import LogitsProcessor

    generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]

    class Draw(LogitsProcessor):
        def __call__(self, input_ids, scores):
            probs = torch.softmax(scores.float() / temperature, dim=-1)
            if top_p < 1:
                ordered, order = probs.sort(dim=-1, descending=True)
                # Keep the smallest set of likeliest tokens whose mass reaches top_p.
                ordered[(ordered.cumsum(dim=-1) - ordered) > top_p] = 0
                probs = torch.zeros_like(probs).scatter(-1, order, ordered)
            drawn = torch.cat(
                [
                    torch.multinomial(row, 1, generator=g)
                    for row, g in zip(probs, generators, strict=True)
                ]
            )
            chosen = torch.full_like(scores, float("-inf"))
            chosen.scatter_(-1, drawn[:, None], 0.0)
            return chosen

    return Draw()


class LocalGenerator:
    def __init__(self, spec: GeneratorSpec):
        if spec.backend != "local":
            raise InvalidGenerator("A local generator's spec has backend 'local'.")
        self.spec = spec
        self.usage = Usage()
        self._path = _checkpoint(spec.model)
        self._model, self._tokenizer = _load(self._path)

    def generate(
        self, *, requests: list[GenerationRequest], settings: SamplingSettings
    ) -> list[str]:
        texts: list[str | None] = [None] * len(requests)
        # A batch shares its token budget and stop strings.
        groups: dict[tuple, list[int]] = {}
        for i, request in enumerate(requests):
            key = (request.max_tokens or settings.max_tokens, request.stop)
            groups.setdefault(key, []).append(i)
        size = max(1, django_settings.GENERATOR_CONCURRENCY)
        for (max_tokens, stop), positions in groups.items():
            for start in range(0, len(positions), size):
                batch = positions[start : start + size]
                outputs = self._batch(
                    [requests[i] for i in batch],
                    settings=settings,
                    max_tokens=max_tokens,
                    stop=stop,
                )
                for i, text in zip(batch, outputs, strict=True):
                    texts[i] = text
        return texts

    def close(self) -> None:
        # The loaded model stays cached for the process: the next generator reuses it.
        self._model = self._tokenizer = None

    def _batch(self, requests, *, settings, max_tokens: int, stop: tuple[str, ...]) -> list[str]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        model, tokenizer = self._model, self._tokenizer
        prompts = [
            tokenizer.apply_chat_template(
                [dict(m) for m in request.messages], tokenize=False, add_generation_prompt=True
            )
            for request in requests
        ]
        # The chat template already holds the special tokens it needs.
        inputs = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            model.device
        )
        config = GenerationConfig(
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=model.generation_config.eos_token_id or tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            stop_strings=list(stop) or None,
        )
        processors = LogitsProcessorList()
        if settings.temperature > 0:
            processors.append(
                _sampler(
                    temperature=settings.temperature,
                    top_p=settings.top_p,
                    seeds=[request.seed for request in requests],
                    device=model.device,
                )
            )
        try:
            with torch.inference_mode():
                output = model.generate(
                    **inputs,
                    generation_config=config,
                    logits_processor=processors,
                    tokenizer=tokenizer,
                )
        except (RuntimeError, ValueError) as exc:
            raise GeneratorUnavailable(
                f"Local model {self.spec.model} failed to generate: {exc}"
            ) from None
        new = output[:, inputs["input_ids"].shape[1] :]
        # A finished row is padded after its end-of-text token: what is not padding was drawn
        # (the end token too, when it is not also the padding token).
        for drawn in (new != tokenizer.pad_token_id).sum(dim=1).tolist():
            self.usage.add(tokens=int(drawn))
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        return [cut_at_stop(text, stop) for text in texts]
