# One command runs the dashboard, one runs the tests; both build the virtual environment themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
SIM_PORT ?= 8100
UV_VERSION := 0.13.8
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: install run test lint chaos soak bench mutation clean

$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.synced: $(BIN)/uv pyproject.toml uv.lock
	$(BIN)/uv sync --frozen --quiet
	touch $@

install: $(VENV)/.synced ## Create .venv and install the locked dependencies

# `make run PORT=9000 SIM_PORT=8300`: the links in e-mails and the simulator's address follow the ports (unless
# SITE_URL or LIUM_BASE_URL is set).
RUN_ENV = WEB_PORT=$(PORT) SIM_PORT=$(SIM_PORT) SITE_URL="$${SITE_URL:-http://127.0.0.1:$(PORT)}" \
	LIUM_BASE_URL="$${LIUM_BASE_URL:-http://127.0.0.1:$(SIM_PORT)/api}"
run: install ## Run simulator, the rent, tracking and housekeeping workers (beat with housekeeping) and web on the embedded default
	mkdir -p .run
	$(RUN_ENV) $(BIN)/python manage.py migrate --noinput
	$(RUN_ENV) $(BIN)/python manage.py seed_demo
	@echo ""
	@echo "  Dashboard: http://127.0.0.1:$(PORT)/   (simulator on $${LIUM_BASE_URL:-http://127.0.0.1:$(SIM_PORT)/api})"
	@echo "  Logins (password: $${DEMO_PASSWORD:-demo}): alice (Acme Research, its admin), bob (Globex), sam (support), olga (operator), admin"
	@echo "  Ctrl-C stops everything."
	@echo ""
	$(RUN_ENV) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho -f Procfile start

test: install ## Run the whole test suite (again on PostgreSQL + Redis when they are reachable)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/test.sh

chaos: install ## Chaos run: faults, SIGKILLed workers, then compare the database with the simulator's ledger (CHAOS_ARGS="--profile adversarial": a lying upstream and an operator; "--profile shared-account": 4 customers on one Lium account, pod names shared)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python scripts/chaos.py $(CHAOS_ARGS)

# The soak (not in CI): the chaos run at 10,000 rentals on PostgreSQL (a scratch database on SOAK_DATABASE_URL's
# server) and a private Redis, 4 worker processes of 16 threads SIGKILLed (about every 20 s) and restarted; customers
# release each ready cluster 20 s later, so the account holds a bounded number at once. About 28 minutes here.
SOAK_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres
SOAK_ARGS ?=
soak: install ## Soak: chaos with 10,000 rentals on PostgreSQL + Redis, workers killed and restarted (SOAK_ARGS="--rentals 500" to try it)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python scripts/chaos.py --broker redis --database-url "$(SOAK_DATABASE_URL)" \
		--rentals 10000 --submit-rate 6 --workers 4 --concurrency 16 --kill-every 20 --min-kills 60 \
		--release-after 20 --timeout 2700 $(SOAK_ARGS)

bench: install ## Benchmarks: latency, poll cost, page cost, search, engine throughput, memory
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/run.py $(BENCH_ARGS)

# Not in CI (.ci/run): it runs the tests that reach each mutant, one mutant at a time (minutes per module).
mutation: install ## Mutation testing of the decision modules (MODULES="rentals/states.py" for some); last line: JSON per module
	$(BIN)/python scripts/mutation.py $(MODULES)

lint: install ## Ruff, mypy, import cycles, module and function sizes
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/python scripts/check_import_cycles.py
	$(BIN)/python scripts/check_sizes.py

clean:
	rm -rf .run
