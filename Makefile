# crl: every target installs what it needs into .venv itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: venv test lint bench verify clean data

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo "make venv: installing crl and its dependencies into $(VENV) (torch pinned by constraints.txt; a few minutes on a fresh machine)..."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[dev]'
	-@$(MAKE) --no-print-directory data
	touch $(STAMP)
	@echo "make venv: done ($(VENV))"

# Fashion-MNIST ships as a Debian package; install it where apt-get works (root), skip quietly elsewhere.
data:
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) || \
		echo "note: could not install dataset-fashion-mnist (apt-get install dataset-fashion-mnist)"; \
	fi

test: venv
	$(PY) -m pytest -q

lint: venv
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

verify: venv
	$(PY) -m crl verify --fidelity standard --out runs/verify

bench: venv
	$(PY) benchmarks/objectives.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
