# parallax: `make demo` and `make test` install what is missing first (see scripts/install.sh).
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST ?= -q

.PHONY: install test demo convergence bench fuzz clean

install:
	@bash scripts/install.sh

test: install
	$(PY) -m pytest $(PYTEST) tests

demo: install
	$(PY) models/lm/demo.py

# Randomized equivalence: make fuzz SEEDS=0-199 [CASES=all] [MODES=MPI,PS,HYBRID] [WORKERS=2]
SEEDS ?=
CASES ?=
MODES ?= MPI,PS,HYBRID
WORKERS ?= 2
fuzz: install
	$(PY) scripts/fuzz.py --seeds "$(SEEDS)" --cases "$(CASES)" --modes $(MODES) --workers $(WORKERS)

convergence: install
	$(PY) scripts/convergence.py

bench: install
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/transform_time.py
	$(PY) benchmarks/paper_tables.py --trace-dir benchmarks/runs/traces

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
