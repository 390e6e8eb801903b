# openbell: `make test` and `make run` work from a fresh clone with only Python 3.11+.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= openbell.toml
SOURCES := markets store agents daemon ops

.PHONY: test lint typecheck layers pytest run install browser sandbox clean

KIT := tests/kit

# Create the virtualenv and install the project with its dev extras and the test kit (the tests'
# shared builders, $(KIT)), once per pyproject change.
$(BIN)/.installed: pyproject.toml $(KIT)/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e $(KIT) --config-settings editable_mode=strict
	touch $@

# The strict editable install links every source file into build/; re-link so new modules appear.
install: $(BIN)/.installed browser sandbox
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . -e $(KIT) --config-settings editable_mode=strict

# The browser tests (tests/browser) drive Debian's Chromium through Playwright: install it when it
# is missing (as root, quietly). Where it cannot be installed (not root, no apt, no network), say
# so and go on: those tests skip when /usr/bin/chromium is absent.
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; }; }; } || \
	  echo "make: $(CHROMIUM) could not be installed; the browser tests will be skipped" >&2

# Strategy code and launched agent commands run in bubblewrap jails (agents/jail/): install it when
# it is missing, as Chromium. Where it cannot be installed, say so: the sandbox tests then skip,
# and openbell refuses those agents unless [sandbox] allow_unsandboxed = true.
BWRAP := /usr/bin/bwrap
sandbox:
	@test -x $(BWRAP) || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1; }; }; } || \
	  echo "make: $(BWRAP) could not be installed; the sandbox tests will be skipped" >&2

# Every check, in order; prints its wall time at the end ("make test: N s"), also when a step fails.
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory install lint typecheck layers pytest; status=$$?; \
	echo "make test: $$(($$(date +%s) - start)) s"; exit $$status

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy -p openbell.markets -p openbell.store -p openbell.agents -p openbell.daemon -p openbell.ops -p openbell_testkit

layers:
	$(BIN)/lint-imports

# pytest exits 5 when it collected nothing: a suite that runs no test is a failure here.
pytest:
	$(BIN)/pytest -q $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

run: install
	test -f $(CONFIG) || $(BIN)/openbell init --config $(CONFIG)
	$(BIN)/openbell run --config $(CONFIG)

clean:
	rm -rf $(VENV) build *.egg-info $(KIT)/build $(KIT)/*.egg-info .mypy_cache .ruff_cache .pytest_cache
