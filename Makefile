# The README's two commands: `make demo` and `make test`. Each builds what it needs:
# the virtual environment, the dashboard bundle (npm), and for tests Debian's Chromium.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FRONTEND := tensorboard_plugin/frontend
BUNDLE := tensorboard_plugin/tf_mobileperf_tensorboard/static/index.js
PORT ?= 6006
# apt-get waits up to 10 minutes for another apt (a freshly booted Ubuntu runs unattended upgrades) instead of
# failing with "Could not get lock /var/lib/dpkg/lock-frontend".
APT := apt-get -o DPkg::Lock::Timeout=600

.PHONY: demo test test-fast lint bench browser clean docs-images wheel

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The sampler's C tick loop is built by pip with the system C compiler (gcc is on every JetPack image);
# without one the install still works and the sampler runs its Python loop.
$(STAMP): $(BIN)/python setup.py setup.cfg pyproject.toml tf_mobileperf/sampling/_tick.c tf_mobileperf/sampling/_tick_abi.h
	@command -v cc >/dev/null || ($(APT) update -q && $(APT) install -y -q gcc libc6-dev)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

$(FRONTEND)/node_modules/.package-lock.json: $(FRONTEND)/package.json $(FRONTEND)/package-lock.json
	@command -v npm >/dev/null || ($(APT) update -q && $(APT) install -y -q nodejs npm)
	cd $(FRONTEND) && npm ci --no-audit --no-fund

# The bundle is committed (pip installs from git or a wheel need no node); it is
# rebuilt here when a source is newer, and tests/test_packaging.py checks it is current.
$(BUNDLE): $(FRONTEND)/node_modules/.package-lock.json $(wildcard $(FRONTEND)/src/*.js) tf_mobileperf/analysis/model_colours.json
	cd $(FRONTEND) && npm run build

# A wheel and an sdist under dist/, both carrying the bundle.
wheel: $(STAMP) $(BUNDLE)
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -w dist .
	$(BIN)/python -c "from setuptools import build_meta; build_meta.build_sdist('dist')"

# Debian's Chromium and ChromeDriver for the browser test (root on these machines).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		($(APT) update -q && $(APT) install -y -q chromium chromium-driver)

demo: $(STAMP) $(BUNDLE)
	$(BIN)/mobileperf sensors --seconds 1
	rm -rf runs/demo  # a fresh demo run (a logdir holds one measurement)
	$(BIN)/python examples/demo.py --logdir runs/demo
	@echo "MobilePerf dashboard: http://127.0.0.1:$(PORT)/#mobileperf  (Ctrl-C to stop)"
	$(BIN)/tensorboard --logdir runs/demo --host 127.0.0.1 --port $(PORT)

# Style and types before the tests: ruff (lint, and the format it would write), mypy over the package and the
# plugin (pyproject.toml says what each checks), ESLint over the dashboard's sources.
lint: $(STAMP) $(FRONTEND)/node_modules/.package-lock.json
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	cd $(FRONTEND) && npm run --silent lint

# Tests run in parallel (pytest-xdist), each test file on one worker, so that its module fixtures are built once;
# the longest files first (tests/file_durations.json). `make test` runs every test (what CI runs); `make test-fast`
# leaves out the slow and the browser tests. PYTEST_ARGS adds pytest options (benchmarks/test_times.py: a report).
# One worker per core: more workers than cores made the suite slower here, and kept the VM busy enough for its
# host to hold it back a scheduling period at a time (docs/measuring.md): a hole in every sampler's record.
TEST_WORKERS ?= $(shell nproc)
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile
test: $(STAMP) $(BUNDLE) browser lint
	$(PYTEST) --durations=15 $(PYTEST_ARGS)

test-fast: $(STAMP) $(BUNDLE)
	$(PYTEST) -m "not slow and not browser"

# Every benchmark, one after another (about 30 minutes here; soak.py alone is 10).
# CodeCarbon is installed only here: overhead.py measures it beside ours.
# The README's pictures: the browser and plot tests save screenshots (the tab with three runs of three devices
# overlaid; every figure of `mobileperf plot` of a recorded sweep; an empty panel of a CPU-only sweep),
# docs/images.py makes them small.
docs-images: $(STAMP) $(BUNDLE) browser
	$(BIN)/python -m pytest -q tests/test_dashboard_timeview.py tests/test_plot.py -k "three_devices or recorded_sweep or cpu_only_sweep"
	$(BIN)/python docs/images.py

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	cd benchmarks && for b in sampling overhead join accuracy dashboard soak predict; do ../$(BIN)/python $$b.py || exit 1; done

clean:
	rm -rf $(VENV) runs build dist *.egg-info $(FRONTEND)/node_modules
