# parallax: `make demo` and `make test` install what is missing first (see scripts/install.sh).
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST ?= -q

.PHONY: install test demo convergence bench clean

install:
	@bash scripts/install.sh

test: install
	$(PY) -m pytest $(PYTEST) tests

demo: install
	$(PY) models/lm/demo.py

convergence: install
	$(PY) scripts/convergence.py

bench: install
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/transform_time.py
	$(PY) benchmarks/paper_tables.py --trace-dir benchmarks/runs/traces

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
