# crl: every target installs what it needs into .venv itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: venv test test-slow lint bench bench-peers verify clean data

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo "make venv: installing crl and its dependencies into $(VENV) (torch pinned by constraints.txt; a few minutes on a fresh machine)..."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[dev]'
	-@$(MAKE) --no-print-directory data
	touch $(STAMP)
	@echo "make venv: done ($(VENV))"

# The real data sets ship as Debian packages (Fashion-MNIST images, WordNet glosses, two English Bibles and the
# SWORD bindings that read them, the GCIDE dictionary); install them where apt-get works (root), skip quietly
# elsewhere. Then export the KJV <-> WEB verse table once through SWORD (system python3, crl.data.text.bible) into
# $CRL_CACHE_DIR or ~/.cache/crl.
DEBIAN_DATA := dataset-fashion-mnist wordnet-base sword-text-kjv sword-text-web python3-sword dict-gcide unicode-data fonts-wqy-zenhei
data:
	@missing=""; for p in $(DEBIAN_DATA); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq $$missing >/dev/null) || \
		echo "note: could not install$$missing (apt-get install$$missing)"; \
	fi
	@bible="$${CRL_CACHE_DIR:-$$HOME/.cache/crl}/bible.json"; \
	if [ ! -f "$$bible" ] && /usr/bin/python3 -c "import Sword" 2>/dev/null; then \
		mkdir -p "$$(dirname "$$bible")" && /usr/bin/python3 src/crl/data/text/_sword_export.py "$$bible" || \
		echo "note: the KJV/WEB export failed (needs sword-text-kjv sword-text-web python3-sword)"; \
	fi

# make test leaves out the tests marked slow (pyproject.toml's markers); make test-slow runs only those; CI runs both.
test: venv
	$(PY) -m pytest -q -m "not slow"

test-slow: venv
	$(PY) -m pytest -q -m slow

lint: venv
	$(VENV)/bin/ruff format --check src tests benchmarks studies
	$(VENV)/bin/ruff check src tests benchmarks studies
	$(VENV)/bin/mypy

# Standard's budget is 20 minutes on 2 cores with both in use: `make verify WORKERS=N` on another machine.
WORKERS ?= 2
verify: venv
	$(PY) -m crl verify --fidelity standard --workers $(WORKERS) --out runs/verify

bench: venv
	$(PY) benchmarks/objectives.py

# The losses users would otherwise pick, in a venv of their own: .venv-peers sees .venv's packages (torch pinned by
# constraints.txt, sentence-transformers) through a .pth file and adds open_clip_torch (without its dependencies:
# it requires torchvision, which never enters crl's venv; benchmarks/peers.py loads only its loss.py) and
# info-nce-pytorch. Nothing is installed into .venv.
PEERS := .venv-peers
PEER_PACKAGES := open_clip_torch==3.3.0 info-nce-pytorch==0.1.4
bench-peers: venv
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -c "import site, sys; open(site.getsitepackages()[0] + '/crl_venv.pth', 'w').write(sys.argv[1] + '\n' + sys.argv[2] + '\n')" \
		"$$($(PY) -c 'import site; print(site.getsitepackages()[0])')" "$(CURDIR)/src"
	$(PEERS)/bin/python -m pip install --quiet --no-deps $(PEER_PACKAGES)
	$(PEERS)/bin/python benchmarks/peers.py

clean:
	rm -rf $(VENV) $(PEERS) .pytest_cache .mypy_cache .ruff_cache
