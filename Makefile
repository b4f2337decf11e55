# The README's two commands: `make demo` and `make test`. Each builds what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mobileperf sensors --seconds 1
	$(BIN)/python examples/demo.py --logdir runs/demo
	$(BIN)/tensorboard --logdir runs/demo --host 127.0.0.1 --port 6006

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/sampling.py

clean:
	rm -rf $(VENV) runs build *.egg-info
