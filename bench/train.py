"""Benchmark: PRM training throughput, our loop against TRL's PRMTrainer, in one run.

    python bench/train.py [--steps N] [--batch-size B] [--rounds R] [--threads T]

Needs the bench requirements (`pip install -r requirements-bench.txt`: trl 1.13.0, the last
release with a PRMTrainer, which lives in `trl.experimental.prm`).

Both sides train the tiny built-in PRM backbone on the same N x B synthetic labeled examples
(MATH-like text, 3-12 steps, rated like PRM800K: mostly +1, cut after the first -1), one
epoch of N optimizer steps at batch size B, on CPU in fp32, with the same schedule (AdamW,
lr 3e-4, 10% warmup, cosine, clipping at 1.0, weight decay 0.01):

- ours: `trainer.training.ml.train.train_prm`, which builds the tokenizer (byte-level BPE trained
on the
  examples) and the backbone (seeded) itself;
- TRL: `PRMTrainer` with an `AutoModelForTokenClassification` (2 labels) whose backbone is
  the same config and the same initial weights, the same tokenizer, the prompt given as
  `problem + "\\n\\n"` and the step tag as `step_separator`, so that both sides see exactly
  the same token ids. Gradient checkpointing and bf16 (PRMConfig's defaults) are off.

Timed: the training loop only, from just before the first batch to the end of the last
optimizer step (our progress events; TRL's `on_train_begin` / `on_step_end` callbacks).
Tokenizing, model building, held-out evaluation and saving are outside the timer. Tokens
are the non-padding tokens of the batches each loop processed (sum of the attention mask),
counted where each side builds its batches. After an untimed warm-up run of each, the sides
alternate for R rounds (who goes first alternates too); the medians and their ratio
(ours / TRL) are printed. Both use T torch threads (default: every core this process may
use; on a machine that is busy with other work, `--threads 1` gives steadier figures).
Exits non-zero when the two sides did not get the same tokenizer, token ids, tokens or
number of optimizer steps.
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


@dataclass
class Timing:
    seconds: float
    tokens: int
    steps: int

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


def synthetic(count: int, seed: int) -> list:
    from trainer.training.dataset import Example

    rng = random.Random(seed)

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))

    examples = []
    for k in range(count):
        steps, labels = [], []
        for _ in range(rng.randint(3, 12)):
            rating = rng.choices([1, 0, -1], weights=[0.75, 0.1, 0.15])[0]
            steps.append(sentence(8, 40))
            labels.append(rating)
            if rating == -1:
                break
        examples.append(
            Example(
                problem_id=k // 4,
                solution_id=None,
                problem=f"Problem {k // 4}: {sentence(15, 60)}",
                steps=steps,
                labels=labels,
            )
        )
    return examples


def run_ours(train: list, held_out: list, *, batch_size: int, out_dir: Path) -> Timing:
    import trainer.training.ml.train as loop
    from trainer.training.params import TrainingParams

    tokens = 0
    packed = loop._packed

    def counting(rows, attn_implementation):
        nonlocal tokens
        tokens += sum(len(r.input_ids) for r in rows)  # packed rows: no padding to leave out
        return packed(rows, attn_implementation)

    stamps: list[tuple[float, dict]] = []
    loop._packed = counting
    try:
        loop.train_prm(
            train=train,
            eval=held_out,
            params=TrainingParams(
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
            ),
            base_model=None,
            out_dir=out_dir,
            on_progress=lambda event: stamps.append((time.perf_counter(), event)),
        )
    finally:
        loop._packed = packed
    steps = [i for i, (_, event) in enumerate(stamps) if "step" in event]
    # The loop starts right after the last event emitted before the first step.
    start = stamps[steps[0] - 1][0]
    return Timing(seconds=stamps[steps[-1]][0] - start, tokens=tokens, steps=len(steps))


def _ids_and_targets(row: dict) -> tuple[list[int], list[int]]:
    from trainer.training.ml.prm import IGNORE

    return row["input_ids"], [i for i, label in enumerate(row["labels"]) if label != IGNORE]


class TRLSide:
    """PRMTrainer on the backbone and tokenizer our loop builds from the same examples."""

    def __init__(self, train: list, held_out: list) -> None:
        from datasets import Dataset
        from transformers import AutoModelForTokenClassification
        from trl.experimental.prm import PRMTrainer

        from trainer.training.ml.prm import PRM, STEP_TAG
        from trainer.training.ml.train import tokenizer_corpus

        prm = PRM.build(base_model=None, corpus=tokenizer_corpus(train + held_out), seed=SEED)
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

    def run(self, *, batch_size: int, out_dir: Path, limit: int | None = None) -> Timing:
        import copy

        import torch
        from transformers import DataCollatorForTokenClassification, TrainerCallback
        from transformers.trainer_callback import PrinterCallback
        from trl.experimental.prm import PRMConfig, PRMTrainer

        dataset = self.dataset if limit is None else self.dataset.select(range(limit))
        config = copy.deepcopy(self.config)
        config.num_labels = 2
        torch.manual_seed(SEED)
        model = self.model_class.from_config(config)
        model.model.load_state_dict(self.backbone_state)  # the same initial backbone

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
            seconds=marks["end"] - marks["start"], tokens=tokens, steps=trainer.state.global_step
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps per run")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--rounds", type=int, default=5, help="timed runs of each side, alternating (at least 1)"
    )
    parser.add_argument(
        "--threads", type=int, help="torch threads for both sides (default: every usable core)"
    )
    args = parser.parse_args()
    if min(args.steps, args.batch_size, args.rounds) < 1:
        parser.error("--steps, --batch-size and --rounds must be at least 1")
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # configure_threads() reads it

    setup_django()
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

    train = synthetic(args.steps * args.batch_size, seed=SEED)
    held_out = synthetic(HELD_OUT, seed=SEED + 1)
    trl_side = TRLSide(train, held_out)
    ours: list[Timing] = []
    theirs: list[Timing] = []
    same_tokenizer = False
    with tempfile.TemporaryDirectory(prefix="stepwise-train-bench-") as tmp:
        # Untimed: the first training in a process pays one-off costs (kernel setup, caches).
        warm = WARMUP_STEPS * args.batch_size
        run_ours(train[:warm], held_out, batch_size=args.batch_size, out_dir=Path(tmp) / "warm")
        trl_side.run(batch_size=args.batch_size, out_dir=Path(tmp) / "warm-trl", limit=warm)
        for r in range(args.rounds):
            sides = ["ours", "trl"] if r % 2 == 0 else ["trl", "ours"]
            for side in sides:
                out = Path(tmp) / f"{side}-{r}"
                if side == "ours":
                    ours.append(run_ours(train, held_out, batch_size=args.batch_size, out_dir=out))
                else:
                    theirs.append(trl_side.run(batch_size=args.batch_size, out_dir=out))
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
    print(f"\nstepwise training benchmark ({date.today()}, {sys.argv[0]})")
    print(
        f"CPU fp32, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}"
    )
    print(
        f"tiny built-in backbone, {len(train)} examples ({args.steps} steps x batch "
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
