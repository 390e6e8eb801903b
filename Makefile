# openbell: `make test` and `make run` work from a fresh clone with only Python 3.11+.
# `make run` installs what the daemon runs (RUN_VENV); `make test` the development tools (VENV).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_VENV := .venv-run
CONFIG ?= openbell.toml
SOURCES := markets store agents daemon ops

.PHONY: test checks lint typecheck layers docs pytest run install browser sandbox clean

KIT := tests/kit

# Create the virtualenv and install the project with its dev extras and the test kit (the tests'
# shared builders, $(KIT)), once per pyproject change. The packages are installed by uv (from PyPI,
# into this virtualenv, the same versions pip resolves): 16-23 s on a fresh clone against pip's
# 48 s, a fifth of `make test`'s fixed cost. uv writes no bytecode unless asked, and where
# PYTHONDONTWRITEBYTECODE is set every process would compile sqlalchemy, numpy, pydantic and
# openbell from source again (a baseline replay's start-up twice as long): --compile-bytecode, as
# pip does, and the link tree below is compiled too.
$(BIN)/.installed: pyproject.toml $(KIT)/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77" wheel uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]' -e $(KIT) \
	  --config-settings editable_mode=strict --compile-bytecode
	touch $@

# The strict editable install links every source file into build/; re-link so new modules appear:
# when a package folder changed (a module added, renamed or removed) since the last install or
# link, not right after the install above made the links (that cost half a minute a run).
PACKAGE_DIRS := $(shell find $(SOURCES) $(KIT)/openbell_testkit -type d -not -name __pycache__)
$(BIN)/.linked: $(BIN)/.installed $(PACKAGE_DIRS)
	@since=$(BIN)/.installed; [ $@ -nt $$since ] && since=$@; \
	if [ -n "$$(find $(PACKAGE_DIRS) -maxdepth 0 -newer $$since)" ]; then \
	  echo "$(BIN)/python -m pip install --no-deps --no-build-isolation -e . -e $(KIT) (re-link)"; \
	  $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . -e $(KIT) \
	    --config-settings editable_mode=strict || exit 1; \
	fi; $(BIN)/python -m compileall -q -j 0 build $(KIT)/build >/dev/null || exit 1; touch $@

install: $(BIN)/.linked browser sandbox

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

# `make run` installs only what runs: openbell itself (a regular install, with its bundled data)
# and its runtime dependencies, into $(RUN_VENV); no development tools, no browser, no apt-get.
# Reinstalled when pyproject.toml or a file of the packages changed.
RUN_FILES := pyproject.toml $(shell find $(SOURCES) -type f -not -path '*/__pycache__/*')
$(RUN_VENV)/.installed: $(RUN_FILES)
	test -x $(RUN_VENV)/bin/python || $(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet .
	touch $@

# Every check: the install, then pytest beside the static checks (`checks`: lint, typecheck,
# layers, docs), which run at the lowest CPU priority (nice 19) so that they take only the time the
# tests leave idle (their live daemons wait on fake clocks and Postgres) and never slow a test down;
# their output follows pytest's. Fails when any step fails; prints its wall time at the end with each
# step's ("make test: N s (install N s, pytest N s, lint N s, ...)"), also when a step fails.
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory install; status=$$?; \
	steps="install $$(($$(date +%s) - start)) s"; \
	if [ $$status -eq 0 ]; then \
	  log=$$(mktemp); \
	  nice -n 19 $(MAKE) --no-print-directory checks >$$log 2>&1 & checks=$$!; \
	  began=$$(date +%s); \
	  $(MAKE) --no-print-directory pytest; status=$$?; \
	  steps="$$steps, pytest $$(($$(date +%s) - began)) s"; \
	  wait $$checks; checked=$$?; \
	  cat $$log; \
	  steps="$$steps, $$(sed -n 's/^make checks: //p' $$log)"; rm -f $$log; \
	  [ $$status -ne 0 ] || status=$$checked; \
	fi; \
	echo "make test: $$(($$(date +%s) - start)) s ($${steps%, })"; exit $$status

# The static checks in order, stopping at the first that fails, with each one's wall time.
checks:
	@status=0; steps=""; \
	for step in lint typecheck layers docs; do \
	  began=$$(date +%s); \
	  $(MAKE) --no-print-directory $$step; status=$$?; \
	  steps="$$steps, $$step $$(($$(date +%s) - began)) s"; \
	  [ $$status -eq 0 ] || break; \
	done; \
	echo "make checks: $${steps#, }"; exit $$status

# The docs site (mkdocs.yml), strict: a broken link, a missing page or a docstring the API
# reference cannot render fails it. The CLI reference is generated from the CLI (docs/hooks.py).
docs:
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy -p openbell.markets -p openbell.store -p openbell.agents -p openbell.daemon -p openbell.ops -p openbell_testkit

layers:
	$(BIN)/lint-imports

# pytest-xdist runs the tests in PYTEST_WORKERS processes (by default one more than the cores: the
# integration tier's live daemons wait on fake clocks and Postgres, and a third worker on two cores
# took the suite from 660 s to 541 s; `auto`: one per core; 0: in pytest's own
# process), each test file's tests in one worker (`loadfile`: a file's module fixtures are built
# once), the files handed out in collection order (the slow acceptance tier first, the unit tier's
# short files last to even out the end; xdist's default puts the files with the fewest tests, the
# long property tests among them, last). A subset: `make pytest PYTEST_ARGS='tests/unit -k rank'`.
# It prints the 40 slowest tests' times, so every run's log says where the time goes.
# pytest exits 5 when it collected nothing: a suite that runs no test is a failure here.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
pytest:
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40 $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

run: $(RUN_VENV)/.installed
	test -f $(CONFIG) || $(RUN_VENV)/bin/openbell init --config $(CONFIG)
	$(RUN_VENV)/bin/openbell run --config $(CONFIG)

clean:
	rm -rf $(VENV) $(RUN_VENV) site dist build *.egg-info $(KIT)/build $(KIT)/*.egg-info .mypy_cache .ruff_cache .pytest_cache
