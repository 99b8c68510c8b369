# liqo-dash: `make run` brings up the demo, `make test` runs the whole test suite, `make test-fast` the
# unit and page tests only (no sandbox, Redis, Celery, browser or other programs; tests/lanes.py).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

STAGE := bash scripts/stage.sh

# pytest-xdist workers per run (README, "The test suite's budget": measured on two cores).
TEST_WORKERS ?= 3
XDIST = -n $(TEST_WORKERS)
# The suite runs a second time on PostgreSQL (SQLite is the default): only the tests that touch the
# database and prove something there (tests/lanes.py: marked `database`, not `browser`, not `once`).
POSTGRES_LANE := database and not browser and not once

.PHONY: run test test-fast lint check system-deps bench bench-quick clean mutation

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# checkov (tests/test_deploy.py scans the rendered manifests) in its own venv: its pins conflict with ours.
# The venv ignores itself in git (its .gitignore holds '*').
.venv-checkov/.installed: requirements-checkov.txt
	test -x .venv-checkov/bin/python || $(PYTHON) -m venv .venv-checkov
	echo '*' > .venv-checkov/.gitignore
	.venv-checkov/bin/python -m pip install --quiet --upgrade pip
	.venv-checkov/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

run: $(VENV)/.installed
	$(PY) manage.py run_demo

system-deps:
	bash scripts/system-deps.sh

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# Each stage prints its duration (scripts/stage.sh). A whole lane's run fails when it collects more than
# 1 % fewer tests than tests/budget.toml keeps (tests/budget.py).
test: $(VENV)/.installed .venv-checkov/.installed system-deps node_modules/.installed
	$(STAGE) lint $(MAKE) --no-print-directory lint
	$(STAGE) django-checks sh -c '$(PY) manage.py check && $(PY) manage.py makemigrations --check --dry-run'
	$(STAGE) pytest-sqlite $(PY) -m pytest $(XDIST)
	$(STAGE) pytest-postgres bash scripts/with-postgres.sh $(PY) -m pytest -p no:cacheprovider -q $(XDIST) -m "$(POSTGRES_LANE)"

# The fast lane (a few minutes): pytest -m "not slow"; tests/lanes.py marks what is slow from the
# fixtures a test uses. `make test` still runs everything.
test-fast: $(VENV)/.installed .venv-checkov/.installed system-deps
	$(PY) -m pytest $(XDIST) -m "not slow"

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

# Mutation testing of liqo_rules against tests/liqo; fails below 90 % killed in any module.
mutation: $(VENV)/.installed
	$(PY) scripts/mutation.py

bench: $(VENV)/.installed
	$(PY) -m bench

# The reduced benchmark CI runs (about 5 minutes): fails only when a figure could not be measured.
bench-quick: $(VENV)/.installed
	mkdir -p var
	$(PY) -m bench --quick --no-recovery --json var/bench-quick.json
	$(PY) -m bench.check var/bench-quick.json

clean:
	rm -rf $(VENV) var staticfiles node_modules
