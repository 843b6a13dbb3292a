# stepwise: `make run` serves the app with demo data; `make test` runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000

.PHONY: run test setup migrate lint bench bench-export bench-serve bench-score bench-train clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed

migrate: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0

run: migrate
	$(BIN)/python manage.py seed_demo
	@echo
	@echo "stepwise is starting at http://127.0.0.1:$(PORT)/  (Ctrl-C stops web, worker and beat)"
	@echo
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start --port $(PORT)

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: bench-export bench-serve bench-score bench-train

bench-export: migrate
	$(BIN)/python bench/export.py

# Needs DATABASE_URL=postgres://…: it creates and drops its own database on that server.
bench-serve: setup
	$(BIN)/python bench/serve.py $(BENCH_SERVE_ARGS)

bench-score: setup
	$(BIN)/python bench/score.py

bench-train: setup
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	$(BIN)/python bench/train.py $(BENCH_TRAIN_ARGS)

clean:
	rm -rf var/ $(VENV)
