"""The process reward model: a causal-LM backbone and a 3-class head read at step tags.

Over 500 lines on purpose: the encoding with its step tags, the model that reads them and the
scoring that batches them must agree on one layout, kept in one file.

A solution is encoded as the problem, then every step followed by one `STEP_TAG` token. The
head reads the backbone's hidden state at each tag and predicts the step's rating (-1, 0, +1),
so one forward pass scores every step. The loss is taken only at tag positions.

Backbone: any local transformers checkpoint (`base_model`, e.g. settings.PRM_BASE_MODEL) or,
without one, a tiny Llama-shaped config with a byte-level BPE tokenizer trained on the given
corpus, so demos, tests and CPU machines work offline.
"""

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

# Solution score from step scores, chosen by PRMSettings.aggregation: defined without torch in
# core.aggregation (the training form offers its names), imported from here as well.
from core.aggregation import AGGREGATIONS as AGGREGATIONS
from core.aggregation import solution_score as solution_score
from core.prm800k import RATINGS
from generators.places import PRM_SETTINGS_FILE

STEP_TAG = "<step>"
PAD = "<pad>"
EOS = "</s>"
# Head class i stands for rating CLASSES[i]: the rating domain, -1, 0 and +1 in that order, so
# a rating r is class r + 1.
CLASSES = RATINGS
IGNORE = -100
FORMAT_VERSION = 1
# The file that marks a checkpoint as a trained PRM (the local model registry skips those).
SETTINGS_FILE = PRM_SETTINGS_FILE
HEAD_FILE = "head.safetensors"

# The built-in backbone: small enough to train in seconds on a laptop CPU.
TINY = {
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
}
TINY_VOCAB = 4096
MAX_LENGTH_CAP = 4096
# A solution longer than the context keeps its first steps, each with at least this many
# tokens of its text (or all of it, when shorter): more steps cut to nothing would be scored
# on their tags alone.
MIN_PIECE_TOKENS = 4


class CheckpointNotWritten(OSError):
    """Saving a checkpoint failed (disk full, directory not writable); nothing was left behind."""


@dataclass
class PRMSettings:
    neutral_as_positive: bool = True  # step score = p(+1) + p(0); else p(+1)
    aggregation: str = "product"  # a name of AGGREGATIONS


def configure_threads() -> None:
    """Use the cores this process may run on (or OMP_NUM_THREADS), not torch's guess."""
    wanted = os.environ.get("OMP_NUM_THREADS")
    cores = int(wanted) if wanted and wanted.isdigit() else len(os.sched_getaffinity(0))
    torch.set_num_threads(max(1, cores))


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


CPU_BFLOAT16_CHOICES = ("off", "auto", "on")  # the first is the default


def cpu_bfloat16() -> bool:
    """Whether scoring on the CPU runs in bf16 autocast, as it does on CUDA.

    `PRM_CPU_BFLOAT16` (docs/configuration.md): `off` (the default: fp32, the precision a CPU
    trains in, bit-for-bit what earlier versions gave), `auto` (bf16 where the CPU multiplies
    bf16 matrices in hardware, Intel AMX), or `on`. Off by default because bf16 moves the
    figures: with a fitted SmolLM2 head on 162 real-length items it was 2.3 times faster but
    moved step scores by up to 0.3 and the first step under 0.5 on 33 items, and the first-error
    accuracy on correct solutions from 0.083 to 0.028 (docs/benchmarks.md). Scoring only:
    training on the CPU is fp32."""
    wanted = os.environ.get("PRM_CPU_BFLOAT16", "").strip().lower() or CPU_BFLOAT16_CHOICES[0]
    if wanted not in CPU_BFLOAT16_CHOICES:
        raise ValueError(
            f"PRM_CPU_BFLOAT16 must be one of {', '.join(CPU_BFLOAT16_CHOICES)}, not {wanted!r}"
        )
    if wanted == "auto":
        # torch's own probe (oneDNN's AMX tiles); absent from a torch without it: fp32.
        return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())
    return wanted == "on"


class PRMModule(nn.Module):
    """Backbone + head as one module, so a trainer (or accelerate) can wrap it whole."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, len(CLASSES))

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        soft: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
        head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(loss, logits) at the selected positions, row-major.

        `labels` has the shape of `input_ids`, IGNORE everywhere but at step tags; when given,
        the positions are where labels are set and the loss is their mean cross-entropy.
        Without labels, `positions` (a boolean mask) says where to read the head.

        `soft` and `weights` (float, the shape of `input_ids`; only read at labeled positions)
        make it `soft_loss`: a position whose `soft` value s is in [0, 1] is trained toward
        the distribution p(-1) = 1 - s, p(0) = 0, p(+1) = s instead of its label, and each
        position's cross-entropy counts `weights` times. Without them the loss is exactly the
        hard one.

        `head` reads the hidden states at the selected positions instead of `self.head`
        (`PRM.member_step_scores`: the head under dropout masks).
        """
        if labels is not None:
            positions = labels != IGNORE
        hidden = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
        ).last_hidden_state
        # Only the tag positions go through the head: the rest of the sequence is context.
        logits = (head or self.head)(hidden[positions]).float()
        if labels is None:
            loss = None
        elif soft is None and weights is None:
            loss = F.cross_entropy(logits, labels[positions])
        else:
            loss = soft_loss(
                logits,
                labels[positions],
                soft=None if soft is None else soft[positions],
                weights=None if weights is None else weights[positions],
            )
        return loss, logits


NOT_SOFT = -1.0  # a `soft` value of a position trained on its hard label


def soft_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    soft: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Weighted mean cross-entropy of (N, 3) logits against per-row target distributions.

    A row's target is one-hot at its class `labels[i]`, or, where `soft[i]` is in [0, 1]
    (a rollout label's soft estimate), p(-1) = 1 - soft, p(0) = 0, p(+1) = soft. The mean is
    sum(w * ce) / sum(w), so an example of weight 2 counts as two of weight 1.
    """
    log_probs = logits.float().log_softmax(-1)
    target = F.one_hot(labels.clamp(min=0), len(CLASSES)).to(log_probs.dtype)
    if soft is not None:
        soft = soft.to(log_probs.dtype)
        is_soft = soft >= 0
        up = CLASSES.index(1)
        down = CLASSES.index(-1)
        distribution = torch.zeros_like(target)
        distribution[:, up] = soft.clamp(0, 1)
        distribution[:, down] = 1 - soft.clamp(0, 1)
        target = torch.where(is_soft[:, None], distribution, target)
    losses = -(target * log_probs).sum(-1)
    if weights is None:
        return losses.mean()
    weights = weights.to(log_probs.dtype)
    return (losses * weights).sum() / weights.sum().clamp(min=1e-12)


@dataclass
class Encoded:
    input_ids: list[int]
    labels: list[int]  # IGNORE except at step tags, where it is the class index
    steps: int = 0  # steps encoded, each with its tag: the first ones, when some did not fit
    truncated: bool = False  # text was cut or steps were left out to fit max_length


@dataclass
class Scored:
    step_scores: list[float]  # one per step encoded: fewer than the steps when truncated
    truncated: bool


class PRM:
    """Backbone, head, tokenizer and settings; knows how to encode, score and save itself."""

    def __init__(
        self,
        *,
        module: PRMModule,
        tokenizer,
        settings: PRMSettings,
        max_length: int,
        base_model: str | None,
        device: str | None = None,
    ) -> None:
        self.module = module
        self.tokenizer = tokenizer
        self.settings = settings
        self.max_length = max_length
        self.base_model = base_model
        self.step_tag_id = _step_tag_id(tokenizer)
        self.pad_id = tokenizer.pad_token_id
        bos = tokenizer.bos_token_id
        # Pretrained backbones saw BOS first in every document; the tiny one has none.
        self.prefix = [bos] if bos is not None and base_model else []
        self.device = torch.device(device or default_device())
        self.module.to(self.device)
        self.module.eval()

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        base_model: str | None,
        corpus: Iterable[str],
        settings: PRMSettings | None = None,
        seed: int = 0,
    ) -> "PRM":
        from transformers import AutoModel, AutoTokenizer, LlamaConfig

        settings = settings or PRMSettings()
        torch.manual_seed(seed)
        if base_model:
            tokenizer = AutoTokenizer.from_pretrained(base_model)
            tokenizer.add_special_tokens({"additional_special_tokens": [STEP_TAG]})
            if tokenizer.pad_token is None:
                tokenizer.add_special_tokens({"pad_token": PAD})
            backbone = AutoModel.from_pretrained(
                base_model, config=_plain_config(base_model), dtype=torch.float32
            )
            if backbone.get_input_embeddings().num_embeddings < len(tokenizer):
                backbone.resize_token_embeddings(len(tokenizer))
        else:
            tokenizer = train_tokenizer(corpus)
            config = LlamaConfig(
                vocab_size=len(tokenizer),
                pad_token_id=tokenizer.pad_token_id,
                bos_token_id=None,
                eos_token_id=tokenizer.eos_token_id,
                tie_word_embeddings=False,
                **TINY,
            )
            backbone = AutoModel.from_config(config)
        hidden_size = backbone.config.hidden_size
        module = PRMModule(backbone, hidden_size)
        nn.init.normal_(module.head.weight, std=0.02)
        nn.init.zeros_(module.head.bias)
        positions = getattr(backbone.config, "max_position_embeddings", None) or MAX_LENGTH_CAP
        return cls(
            module=module,
            tokenizer=tokenizer,
            settings=settings,
            max_length=min(positions, MAX_LENGTH_CAP),
            base_model=base_model,
        )

    @classmethod
    def load(cls, path: str | Path, *, device: str | None = None) -> "PRM":
        from transformers import AutoModel, AutoTokenizer

        path = Path(path)
        meta = json.loads((path / SETTINGS_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{path} is not a PRM checkpoint of format {FORMAT_VERSION}.")
        known = {f.name for f in fields(PRMSettings)}
        settings = PRMSettings(**{k: v for k, v in meta["settings"].items() if k in known})
        tokenizer = AutoTokenizer.from_pretrained(path)
        backbone = AutoModel.from_pretrained(path, dtype=torch.float32)
        module = PRMModule(backbone, backbone.config.hidden_size)
        module.head.load_state_dict(load_file(path / HEAD_FILE))
        return cls(
            module=module,
            tokenizer=tokenizer,
            settings=settings,
            max_length=meta["max_length"],
            base_model=meta.get("base_model"),
            device=device,
        )

    def save(self, path: str | Path) -> None:
        """Write the checkpoint directory atomically: complete under `path`, or not at all."""
        path = Path(path)
        if path.exists():
            raise FileExistsError(f"{path} already exists; a checkpoint is never overwritten.")
        # Same parent, so the final rename stays on one filesystem and is atomic.
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
        except OSError as exc:
            raise CheckpointNotWritten(_not_written(path, exc)) from exc
        try:
            self.module.backbone.save_pretrained(tmp)
            head = {
                k: v.detach().cpu().contiguous() for k, v in self.module.head.state_dict().items()
            }
            save_file(head, tmp / HEAD_FILE)
            self.tokenizer.save_pretrained(tmp)
            meta = {
                "format": FORMAT_VERSION,
                "step_tag": STEP_TAG,
                "classes": list(CLASSES),
                "settings": asdict(self.settings),
                "max_length": self.max_length,
                "base_model": self.base_model,
            }
            (tmp / SETTINGS_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
            tmp.rename(path)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            # safetensors reports a failed write (disk full) as its own error, not an OSError.
            if isinstance(exc, OSError | SafetensorError):
                raise CheckpointNotWritten(_not_written(path, exc)) from exc
            raise

    # --- encoding -------------------------------------------------------------------------

    def encode(self, problem: str, steps: Sequence[str], labels: Sequence[int] | None = None):
        """Token ids of problem + (step, tag)*; with labels, the class at each tag."""
        return self.encode_many([problem], [steps], None if labels is None else [labels])[0]

    def encode_many(
        self,
        problems: Sequence[str],
        steps: Sequence[Sequence[str]],
        labels: Sequence[Sequence[int]] | None = None,
    ) -> list[Encoded]:
        """`encode` of many solutions, with one tokenizer call for all their texts (the
        tokenizer's batch path is several times faster than a call per step)."""
        texts = []
        for problem, solution_steps in zip(problems, steps, strict=True):
            texts.append(f"{problem}\n\n")
            texts.extend(solution_steps)
        ids = iter(self._ids(texts))
        encoded = []
        for i, solution_steps in enumerate(steps):
            pieces = [next(ids) for _ in range(len(solution_steps) + 1)]
            encoded.append(self._assemble(pieces, None if labels is None else labels[i]))
        return encoded

    def _assemble(self, pieces: list[list[int]], labels: Sequence[int] | None) -> Encoded:
        """Problem and steps in max_length tokens: every piece cut to one length cap, and,
        when even that leaves a step too little text, only the first steps (`truncated`)."""
        room = self.max_length - len(self.prefix)
        steps = _steps_that_fit(pieces, room)
        kept = pieces[: steps + 1]
        cap = _fit(kept, room - steps)
        input_ids = list(self.prefix) + kept[0][:cap]
        target = [IGNORE] * len(input_ids)
        for i, piece in enumerate(kept[1:]):
            input_ids += piece[:cap] + [self.step_tag_id]
            target += [IGNORE] * len(piece[:cap])
            target.append(labels[i] + 1 if labels is not None else IGNORE)
        truncated = steps < len(pieces) - 1 or any(len(p) > cap for p in kept)
        return Encoded(input_ids=input_ids, labels=target, steps=steps, truncated=truncated)

    def _ids(self, texts: list[str]) -> list[list[int]]:
        # A literal tag inside problem or step text must not become a step boundary.
        out = []
        # Slices: a tokenizer call holds every text's encoding (offsets, masks) at once.
        for start in range(0, len(texts), 4096):
            cleaned = [text.replace(STEP_TAG, "< step>") for text in texts[start : start + 4096]]
            batch = self.tokenizer(cleaned, add_special_tokens=False)["input_ids"]
            out += [[i for i in ids if i != self.step_tag_id] for ids in batch]
        return out

    # --- inference ------------------------------------------------------------------------

    def autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        if cpu_bfloat16():
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def class_probabilities(
        self, *, problems: list[str], steps: list[list[str]], batch_size: int = 16
    ) -> list[torch.Tensor]:
        """Per solution, a (steps, 3) tensor of p(-1), p(0), p(+1), in the input order.

        A solution longer than max_length gets rows for the steps that fit only (`encode`).
        """
        return self._probabilities(self.encode_many(problems, steps), batch_size=batch_size)

    def _probabilities(
        self,
        encodings: list[Encoded],
        *,
        batch_size: int,
        head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> list[torch.Tensor]:
        encoded = [e.input_ids for e in encodings]
        # Similar lengths in one batch waste little compute on padding.
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out: list[torch.Tensor | None] = [None] * len(encoded)
        self.module.eval()
        budget = None if self.device.type == "cuda" else CPU_SCORE_TOKENS
        with torch.inference_mode(), self.autocast():
            for chunk in _score_chunks(order, [len(e) for e in encoded], batch_size, budget):
                input_ids, _ = pad([encoded[i] for i in chunk], self.pad_id)
                input_ids = input_ids.to(self.device)
                # No attention mask: padding is on the right and attention is causal, so no
                # real token can see a pad, and pads are never read. Without a mask, sdpa
                # takes its fused causal kernel instead of materialising a padded mask.
                _, logits = self.module(
                    input_ids, positions=input_ids == self.step_tag_id, head=head
                )
                probs = logits.softmax(-1).cpu()
                # Positions come out row-major: each row's tags, in step order.
                offset = 0
                for i in chunk:
                    n = encodings[i].steps
                    out[i] = probs[..., offset : offset + n, :]
                    offset += n
        return out  # type: ignore[return-value]

    def step_scores_from(self, probs: torch.Tensor) -> list[float]:
        return [float(x) for x in self._ok(probs)]

    def _ok(self, probs: torch.Tensor) -> torch.Tensor:
        ok = probs[..., CLASSES.index(1)]
        if self.settings.neutral_as_positive:
            ok = ok + probs[..., CLASSES.index(0)]
        return ok

    def score(
        self, *, problems: list[str], steps: list[list[str]], batch_size: int = 16
    ) -> list[list[float]]:
        """p(step ok) for every step of every solution, in the input order (for a solution
        longer than max_length, of the steps that fit)."""
        scored = self.score_solutions(problems=problems, steps=steps, batch_size=batch_size)
        return [s.step_scores for s in scored]

    def score_solutions(
        self, *, problems: list[str], steps: list[list[str]], batch_size: int = 16
    ) -> list[Scored]:
        """`score`, with whether each solution had to be cut to fit max_length."""
        encodings = self.encode_many(problems, steps)
        probs = self._probabilities(encodings, batch_size=batch_size)
        return [
            Scored(step_scores=self.step_scores_from(p), truncated=e.truncated)
            for p, e in zip(probs, encodings, strict=True)
        ]

    def member_step_scores(
        self,
        *,
        problems: list[str],
        steps: list[list[str]],
        members: int,
        dropout: float,
        seed: int,
        batch_size: int = 16,
    ) -> list[list[list[float]]]:
        """Per solution, per member, p(step ok) of the steps that fit: the head reads the hidden
        states at the tags through each member's dropout mask (`member_masks`), i.e. dropout at
        the head's input (`trainer.selection.ensemble`). One backbone pass per batch serves
        every member; only the head runs once per member."""
        masks = member_masks(
            hidden_size=self.module.head.in_features, members=members, dropout=dropout, seed=seed
        ).to(self.device)

        def head(hidden: torch.Tensor) -> torch.Tensor:
            return self.module.head(hidden[None] * masks[:, None, :])

        encodings = self.encode_many(problems, steps)
        probs = self._probabilities(encodings, batch_size=batch_size, head=head)
        return [self._ok(p).tolist() for p in probs]


def member_masks(*, hidden_size: int, members: int, dropout: float, seed: int) -> torch.Tensor:
    """(members, hidden_size) dropout masks: 0 where dropped, 1 / (1 - dropout) where kept.
    Drawn on the CPU from `seed`, so the same seed gives the same members on any device."""
    if members < 2 or not 0.0 <= dropout < 1.0:
        raise ValueError(
            f"An ensemble needs members >= 2 and 0 <= dropout < 1, not {members}, {dropout}."
        )
    generator = torch.Generator().manual_seed(seed)
    kept = torch.rand((members, hidden_size), generator=generator) >= dropout
    return kept.float() / (1.0 - dropout)


# --- helpers ------------------------------------------------------------------------------


def _plain_config(base_model: str):
    """The checkpoint's config without a GGUF `quantization_config`.

    A checkpoint converted from a GGUF file (`generators.local_models.convert_gguf`) holds plain
    dequantised weights but may keep the GGUF file's quantization config; loaded with it, the
    model counts as GGUF-quantised and transformers refuses to save it, so a run would train
    and then fail at the save.
    """
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base_model)
    quantization = getattr(config, "quantization_config", None)
    method = (
        quantization.get("quant_method")
        if isinstance(quantization, dict)
        else getattr(quantization, "quant_method", None)
    )
    if str(method).lower().endswith("gguf"):
        del config.quantization_config
    return config


def train_tokenizer(corpus: Iterable[str], *, vocab_size: int = TINY_VOCAB):
    """A byte-level BPE tokenizer trained on the given texts, with the PRM's special tokens."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        (text for text in corpus if text),
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[PAD, EOS, STEP_TAG],
        show_progress=False,
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, pad_token=PAD, eos_token=EOS
    )
    tokenizer.add_special_tokens({"additional_special_tokens": [STEP_TAG]})
    return tokenizer


def _step_tag_id(tokenizer) -> int:
    ids = tokenizer.encode(STEP_TAG, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"The step tag {STEP_TAG!r} must be one token; it is {ids}.")
    inside = tokenizer.encode(f"x = 1{STEP_TAG}Then", add_special_tokens=False)
    if inside.count(ids[0]) != 1:
        raise ValueError(f"The step tag {STEP_TAG!r} does not stay one token inside text.")
    return ids[0]


def _steps_that_fit(pieces: list[list[int]], room: int) -> int:
    """How many of the steps (pieces[1:]) fit in `room` tokens, each with its tag and at least
    MIN_PIECE_TOKENS of text (or all of it, when shorter), the problem likewise: all of them,
    or the most of the first ones. Fewer steps leave more room, so the first count that does
    not fit is found by bisection."""

    def fits(steps: int) -> bool:
        kept = pieces[: steps + 1]
        if room - steps < 0:
            return False
        floor = min(MIN_PIECE_TOKENS, max(len(p) for p in kept))
        return _fit(kept, room - steps) >= floor

    total = len(pieces) - 1
    if fits(total):
        return total
    # Each step takes one token at least (its tag), so at most `room` of them fit.
    low, high = 0, min(total, room)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _fit(pieces: list[list[int]], budget: int) -> int:
    """The largest per-piece length cap under which all pieces fit in `budget` tokens."""
    longest = max((len(p) for p in pieces), default=0)
    if sum(len(p) for p in pieces) <= budget:
        return longest
    low, high = 0, longest
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(len(p), mid) for p in pieces) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def pad(rows: list[list[int]], pad_id: int, *, fill: int | None = None):
    """Right-padded (ids, attention mask) tensors; `fill` overrides the pad value."""
    width = max(len(r) for r in rows)
    value = pad_id if fill is None else fill
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return ids, mask


def pack(rows: list[list[int]], *, attn_implementation: str | None, dtype=torch.float32):
    """Several sequences as one row, without padding and without attention across them.

    Returns (input_ids, position_ids, attention_mask) of batch size 1. Position ids restart at 0
    for every sequence. flash-attention and `trainer.training.ml.attention.VARLEN` derive their
    varlen boundaries from those restarts, so they get no mask; for the other kernels the mask is a
    block-diagonal causal 4D mask (boolean for sdpa, additive in `dtype` for eager), which
    transformers uses as is.
    """
    from trainer.training.ml.attention import VARLEN

    input_ids = torch.tensor([[t for row in rows for t in row]], dtype=torch.long)
    position_ids = torch.cat([torch.arange(len(row)) for row in rows]).unsqueeze(0)
    if attn_implementation and (
        attn_implementation.startswith("flash") or attn_implementation == VARLEN
    ):
        return input_ids, position_ids, None
    sequence = torch.cat([torch.full((len(row),), i) for i, row in enumerate(rows)])
    same = sequence[:, None] == sequence[None, :]
    causal = torch.ones(len(sequence), len(sequence), dtype=torch.bool).tril()
    allowed = (same & causal)[None, None]
    if attn_implementation == "eager":
        mask = torch.zeros(allowed.shape, dtype=dtype)
        return input_ids, position_ids, mask.masked_fill(~allowed, torch.finfo(dtype).min)
    return input_ids, position_ids, allowed


def _not_written(path: Path, exc: Exception) -> str:
    # errno and strerror without the temporary path str(exc) would name.
    errno = getattr(exc, "errno", None)
    cause = f"[Errno {errno}] {exc.strerror}" if errno else str(exc)
    return f"Could not write the checkpoint {path}: {cause}. Nothing was kept."


# On the CPU a forward pass is fastest at about one long solution: a padded batch of sixteen
# 1,000-2,000-token solutions took 2.6 times as long per solution as each alone (SmolLM2,
# bench/evaluate.py, docs/benchmarks.md), the activations of a big batch spilling out of the
# caches. So on the CPU a batch also stops at this many tokens (padding included); short
# solutions still share one. On CUDA only `batch_size` bounds it.
CPU_SCORE_TOKENS = 2048


def _score_chunks(
    order: list[int], lengths: list[int], batch_size: int, budget: int | None
) -> Iterator[list[int]]:
    """`order` (sorted by length, shortest first) cut into batches of at most `batch_size`
    items and, with a `budget`, at most `budget` tokens once padded to the longest."""
    chunk: list[int] = []
    for i in order:
        full = len(chunk) >= batch_size or (
            budget is not None and chunk and (len(chunk) + 1) * lengths[i] > budget
        )
        if full:
            yield chunk
            chunk = []
        chunk.append(i)
    if chunk:
        yield chunk
