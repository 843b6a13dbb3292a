"""Benchmark: peak memory and tokens/s of one optimizer step, the defaults against the old settings.

    python bench/train_memory.py [--base-model PATH] [--length TOKENS] [--examples N]
                                 [--only defaults|old]

One optimizer step of N examples of about TOKENS tokens each (synthetic words, four steps a
solution) through `trainer.training.ml.train.train_prm`, each setting in its own process so that
its peak resident memory (`ru_maxrss`) is its own:

- defaults: `TrainingParams()` (token-budget micro-batches, gradient checkpointing);
- old: the settings before issue 29: every example of the step in one micro-batch, no
  gradient checkpointing (on a 24 GB machine SmolLM2 with 16 examples of 2,000 tokens this
  was killed at 22.7 GB, so keep N x TOKENS small enough for it).

Tokens/s counts the examples' tokens over the optimizer step (model building, the estimate and
the held-out evaluation are outside the timer).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SETTINGS = {
    "defaults": {},
    "old": {"max_tokens_per_micro_batch": 2**20, "gradient_checkpointing": False},
}


def examples(count: int, length: int, tokenizer_words: int) -> list:
    from trainer.training.dataset import Example

    words = max(4, (length // 4) // tokenizer_words)
    step = " ".join(f"word{n % 97}" for n in range(words))
    return [
        Example(
            problem_id=k,
            solution_id=None,
            problem=f"Problem {k}.",
            steps=[f"{step} {i}" for i in range(4)],
            labels=[1, 1, 0, -1] if k % 2 else [1, 1, 1, 1],
        )
        for k in range(count)
    ]


def one(setting: str, *, base_model: str | None, length: int, count: int) -> dict:
    from trainer.training.ml.train import build_prm, train_prm
    from trainer.training.params import TrainingParams

    params = TrainingParams(epochs=1, batch_size=count, **SETTINGS[setting])
    train = examples(count, length, tokenizer_words=2 if base_model is None else 1)
    held_out = examples(1, 64, 1)
    prm = build_prm(params=params, base_model=base_model, examples=[*train, *held_out])
    tokens = sum(
        len(e.input_ids)
        for e in prm.encode_many([e.problem for e in train], [e.steps for e in train])
    )
    stamps: list[tuple[float, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        result = train_prm(
            train=train,
            eval=held_out,
            params=params,
            base_model=base_model,
            out_dir=Path(tmp) / "model",
            on_progress=lambda event: stamps.append((time.perf_counter(), event)),
            prm=prm,
        )
    steps = [i for i, (_, event) in enumerate(stamps) if "step" in event]
    seconds = stamps[steps[-1]][0] - stamps[steps[0] - 1][0]
    return {
        "setting": setting,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "peak_rss_gib": result.peak_memory["peak_rss_bytes"] / 1024**3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-model", help="a checkpoint directory (default: the tiny model)")
    parser.add_argument("--length", type=int, default=2000, help="tokens per example")
    parser.add_argument("--examples", type=int, default=16, help="examples in the step")
    parser.add_argument("--only", choices=sorted(SETTINGS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from bench.train import setup_django

        setup_django()
        print(
            json.dumps(
                one(args.only, base_model=args.base_model, length=args.length, count=args.examples)
            )
        )
        return 0
    print(f"{args.base_model or 'tiny model'}: one step of {args.examples} x ~{args.length} tokens")
    for setting in [args.only] if args.only else list(SETTINGS):
        command = [
            sys.executable,
            __file__,
            "--child",
            "--only",
            setting,
            "--length",
            str(args.length),
            "--examples",
            str(args.examples),
        ]
        if args.base_model:
            command += ["--base-model", args.base_model]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{setting:9} failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{setting:9} peak RSS {row['peak_rss_gib']:.2f} GiB, "
            f"{row['tokens_per_s']:.0f} tokens/s ({row['tokens']} tokens)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
