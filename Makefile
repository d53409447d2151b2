# hermes-web. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
# Every transitive version, with hashes: runtime only (make run), or runtime + test tools.
RUNTIME_LOCK := requirements/runtime.lock
TEST_LOCK := requirements/test.lock
UV_VERSION := 0.13.8
HERMES_PORT ?= 8000
export HERMES_PORT
# One data folder per port unless HERMES_DATA_DIR says otherwise: a second `make run` on
# HERMES_PORT=8001 gets var/port-8001 (its own SQLite db, broker, lock, temp files and secret
# key) instead of being refused by the first one's lock or writing into its database.
ifeq ($(HERMES_PORT),8000)
HERMES_DATA_DIR ?= $(CURDIR)/var
else
HERMES_DATA_DIR ?= $(CURDIR)/var/port-$(HERMES_PORT)
endif
export HERMES_DATA_DIR
export HERMES_WORKER_CONCURRENCY ?= 4
export HERMES_WORKER_LOGLEVEL ?= info
export DJANGO_SETTINGS_MODULE := hermes_web.settings
export PYTHONDONTWRITEBYTECODE := 1

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-14s %s\n", $$1, $$2}'

# Installs come from the lock files only (--require-hashes: a changed or unlisted package fails
# the install); the project itself is added without dependencies, as an editable install.
$(STAMP): pyproject.toml $(TEST_LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(TEST_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(STAMP) $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml $(RUNTIME_LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(RUNTIME_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(RUNTIME_STAMP)

.PHONY: install
install: $(STAMP) ## Create .venv and install the project with its test tools (from the lock)

.PHONY: install-runtime
install-runtime: $(RUNTIME_STAMP) ## Create .venv with the runtime dependencies only (from the lock)

.PHONY: lock
lock: ## Re-resolve requirements/*.lock from pyproject.toml (pinned uv, hashes for every file)
	@test -x var/uv/bin/uv || ($(PYTHON) -m venv var/uv && var/uv/bin/pip install --quiet "uv==$(UV_VERSION)")
	var/uv/bin/uv pip compile pyproject.toml --generate-hashes --python-version 3.11 \
	  --python-platform x86_64-unknown-linux-gnu --no-header -o $(RUNTIME_LOCK)
	var/uv/bin/uv pip compile pyproject.toml --extra test --generate-hashes --python-version 3.11 \
	  --python-platform x86_64-unknown-linux-gnu --no-header -o $(TEST_LOCK)

.PHONY: system-deps
system-deps: ## Install Debian packages the tests need (chromium, postgresql, redis) when missing and root
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || echo "WARNING: could not install$$missing; the tests that need them will be skipped"; \
	  else echo "WARNING: not root, cannot install$$missing; the tests that need them will be skipped"; fi; \
	fi

.PHONY: migrate
migrate: $(RUNTIME_STAMP)
	$(BIN)/python manage.py migrate --noinput -v 0

# tools/supervise.py runs the Procfile: it restarts a process that dies, takes every process
# with it when it is killed, and refuses to start beside a running copy (a lock in the data
# folder, and the port). The check runs first, before migrate touches anything.
# gunicorn (Procfile) lets request lines up to 8190 bytes (its ceiling) and header fields up to
# 64 KiB through, so that /v1 answers a long path or a large header in JSON (a 431 past 8,190
# characters, hermes_web/middleware.py); past those ceilings, or past 100 header fields,
# gunicorn itself answers with its HTML 414/431 (at most 100 x 64 KiB = 6.4 MiB of headers).
RUN_LOCK = $${HERMES_DATA_DIR:-var}/run.lock

.PHONY: run-check
run-check: $(RUNTIME_STAMP)
	@$(BIN)/python -m tools.supervise --check --lock "$(RUN_LOCK)" --port $(HERMES_PORT)

.PHONY: run
run: run-check migrate ## Start gunicorn, a Celery worker and beat on embedded defaults (SQLite + SQLite broker)
	@$(BIN)/python manage.py load_demo
	@echo ""
	@echo "  hermes-web is starting on port $(HERMES_PORT), data in $(HERMES_DATA_DIR); it says \"ready\" when it answers"
	@echo ""
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tools.supervise --procfile Procfile --lock "$(RUN_LOCK)" --port $(HERMES_PORT) \
	  --ready-url http://127.0.0.1:$(HERMES_PORT)/

# The SQLite run, the PostgreSQL runs and mypy share no database, port or file (each server
# and test database is its own, under var/ or a temporary folder; mypy writes only its cache),
# and the test runs spend much of their time waiting on subprocesses, browsers and sleeps: side
# by side the three take about as long as the SQLite run alone (mypy's first run, on a fresh
# clone, is minutes of its own). Each one's output is printed whole when it ends
# (--output-sync), and make fails if any does, once the others are done. ruff, seconds, still
# goes first. The tests run with MAKEFLAGS emptied: the `make run` they start would otherwise
# inherit -j3 and --output-sync without the jobserver (a warning, and output held back).
.PHONY: test
test: $(STAMP) system-deps ## Lint (ruff check + format check), then side by side: mypy; every test (engine, web, real workers, real Chromium); the web suite again on Postgres (+ Redis proofs)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory -j3 --output-sync=target test-sqlite test-services typecheck

.PHONY: test-sqlite
test-sqlite: $(STAMP) ## Every test on the embedded default (SQLite): engine, web, real workers, real Chromium, real agent clients
	MAKEFLAGS= $(BIN)/python -m pytest

.PHONY: test-services
test-services: $(STAMP) ## test-postgres, then check-scale
	$(MAKE) --no-print-directory test-postgres
	$(MAKE) --no-print-directory check-scale

# Only the tests that use the database: the others ran, identically, on SQLite already.
.PHONY: test-postgres
test-postgres: $(STAMP) ## The web test suite's database tests against a real PostgreSQL started on 127.0.0.1 for the run
	MAKEFLAGS= $(BIN)/python tests/run_with_services.py -- -m "not browser and not agent_clients" --database-tests-only tests/web

.PHONY: check-scale
check-scale: $(STAMP) ## Scale-out proofs on real PostgreSQL + Redis + several workers (figures printed)
	MAKEFLAGS= $(BIN)/python tests/run_with_services.py --redis -- tests/scale -s

HERMES_WORKERS ?= 2
export HERMES_WORKERS
export HERMES_WEB_PROCESSES ?= 4
# One thread per process (gunicorn's sync worker): on 2 cores, 4 x 1 served 106 req/s at p95
# 0.54 s where 4 x 4 served 68 req/s at p95 1.1 s (GIL hand-offs between threads cost more
# than they overlap). Raise it when requests wait on slow I/O rather than the CPU.
export HERMES_WEB_THREADS ?= 1
SERVICES_DIR := var/services

.PHONY: run-scaled
run-scaled: run-check ## PostgreSQL + Redis on 127.0.0.1 (data in var/services), gunicorn and HERMES_WORKERS workers per queue
	@eval "$$($(BIN)/python -m tools.localservices start --data $(SERVICES_DIR))"; \
	export DATABASE_URL CELERY_BROKER_URL; \
	export SECRET_KEY_FILE=$${SECRET_KEY_FILE:-$(CURDIR)/var/secret_key}; \
	test -f "$$SECRET_KEY_FILE" || $(BIN)/python -c "import secrets; print(secrets.token_urlsafe(50))" > "$$SECRET_KEY_FILE"; \
	trap '$(BIN)/python -m tools.localservices stop --data $(SERVICES_DIR)' EXIT; \
	$(BIN)/python manage.py migrate --noinput -v 0 && $(BIN)/python manage.py load_demo && \
	echo "" && echo "  hermes-web (scaled) at http://127.0.0.1:$(HERMES_PORT)/  on $$DATABASE_URL + $$CELERY_BROKER_URL" && echo "" && \
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tools.supervise --procfile Procfile.scaled --lock "$(RUN_LOCK)" --port $(HERMES_PORT) \
	  --ready-url http://127.0.0.1:$(HERMES_PORT)/

.PHONY: bench
bench: $(STAMP) ## Run the benchmarks and print their figures
	$(BIN)/python bench/run_all.py

.PHONY: lint
lint: $(STAMP) ## Ruff lint and format check, mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory typecheck

.PHONY: typecheck
typecheck: $(STAMP) ## mypy: strict on the engine (compaction/), normal on the web app with the django-stubs plugin
	$(BIN)/mypy --strict compaction
	$(BIN)/mypy hermes_web

.PHONY: fmt
fmt: $(STAMP) ## Format the code with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: clean
clean: ## Remove local data (database, broker, secret) and test output
	rm -rf var test-output
