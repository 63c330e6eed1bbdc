# parallax: `make demo` and `make test` install what is missing first (see scripts/install.sh).
# TF=2.15 (default): .venv, TF 2.15.1 with Horovod, the whole suite. TF=2.21: .venv-tf2.21, the newest TF, no
# Horovod (TF's own collectives), numpy 2, tf_keras; `make test TF=2.21` runs NEWEST_TF_TESTS.
TF     ?= 2.15
, := ,
VENV   := $(if $(filter 2.15,$(TF)),.venv,.venv-tf$(TF))
PY     := $(VENV)/bin/python
PYTEST ?= -q
export TF
export TF_USE_LEGACY_KERAS := $(if $(filter 2.15,$(TF)),,1)
# The random graphs run in every mode once over CI's two environments: MPI and PS here (Horovod), HYBRID on TF 2.21
# (TF's collectives), which runs collectives and servers together; each user graph once: every third in HYBRID there,
# the others in one of MPI and PS here (test_user_graphs.py's _modes), for CI's 90 minutes. The whole
# cross product: make fuzz CASES=all [MODES=...], or PARALLAX_GRAPH_MODES=MPI,PS,HYBRID make test.
PARALLAX_GRAPH_MODES ?= $(if $(filter 2.15,$(TF)),MPI$(,)PS,HYBRID)
export PARALLAX_GRAPH_MODES
NEWEST_TF_TESTS := tests/model_scripts tests/test_tf_server.py tests/test_tf_collectives.py tests/test_uneven_data.py \
                   tests/test_user_saver.py tests/test_user_init.py tests/test_fed_batches.py \
                   tests/test_tape_capture.py tests/test_queue_runners.py \
                   tests/test_ssh_transport_local.py tests/test_listening_sockets.py \
                   tests/legacy/test_legacy_config.py \
                   tests/legacy/test_parallel_run.py::test_lm_example_ends_by_sigterm_and_its_checkpoint_restores
# Left to the default environment: test_tf_backend.py (it names the tf backend, which "auto" already is here),
# test_auto.py (AUTO's plans, on tf there), the fixed PS cases (no collectives; every user graph runs with servers
# here, in HYBRID) and the ablation (local aggregation on tf over 2 hosts: test_tf_backend.py's HYBRID case there,
# and the user graphs' 4-worker HYBRID cases here). PS's own semantics (sync replicas, async) still run here.
NEWEST_TF_EQUIVALENCE := --ignore=tests/equivalence/test_tf_backend.py --ignore=tests/equivalence/test_auto.py \
                         --deselect tests/equivalence/test_ps.py::test_ps_equivalence \
                         --deselect tests/equivalence/test_hybrid.py::test_every_cumulative_optimization_is_equivalent
# make test runs the tests TEST_JOBS at a time (pytest-xdist; 0: one at a time): one job alone keeps about 1.4 of 2
# cores busy (22.7 s of CPU in 16.7 s). Then the tests marked `alone` (they bound or measure wall time, or count the
# machine's processes), one at a time.
TEST_JOBS ?= 2
# The multi-host test bed (network namespaces, root) is optional for users: `make test-cluster`, which CI also runs.
# SSH_SUITE=all runs every HYBRID and PS equivalence case over --transport ssh there (ci: one of each kind).
SSH_SUITE ?= ci
export PARALLAX_SSH_SUITE := $(SSH_SUITE)
# The NMT and ResNet convergence and resume runs (about 6 minutes of the two-at-a-time phase) are left to
# `make convergence`, for CI's 90 minutes; the LM's stay (docs/convergence.md).
LONG_MODEL_RUNS := tests/convergence/test_nmt.py::test_nmt_two_hybrid_workers_reach_the_single_device_bleu \
                   tests/convergence/test_resnet.py::test_resnet_two_hybrid_workers_reach_the_single_device_accuracy \
                   "tests/convergence/test_resume.py::test_a_killed_and_restarted_run_equals_an_uninterrupted_one[nmt]" \
                   "tests/convergence/test_resume.py::test_a_killed_and_restarted_run_equals_an_uninterrupted_one[resnet]"
SUITE  := $(if $(filter 2.15,$(TF)),tests --ignore=tests/cluster $(addprefix --deselect ,$(LONG_MODEL_RUNS)),\
            $(NEWEST_TF_TESTS) \
            tests/equivalence $(NEWEST_TF_EQUIVALENCE))

.PHONY: install test test-cluster demo convergence bench fuzz drill clean

install:
	@bash scripts/install.sh

# Both runs always run; make fails if either did.
test: install
	@$(PY) -m pytest $(PYTEST) -n $(TEST_JOBS) -m "not alone" $(SUITE); shared=$$?; \
	  $(PY) -m pytest $(PYTEST) -m alone $(SUITE); alone=$$?; \
	  echo "[test] $(TEST_JOBS) at a time: exit $$shared; marked alone, one at a time: exit $$alone"; \
	  test $$shared = 0 && test $$alone = 0

test-cluster: install
	$(PY) -m pytest $(PYTEST) tests/cluster

# How each way of stalling or dying ends, in every mode, on localhost and the test bed (docs/launching.md).
drill: install
	$(PY) scripts/failure_drill.py

demo: install
	$(PY) models/lm/demo.py

# Randomized equivalence: make fuzz SEEDS=0-199 [CASES=all] [MODES=MPI,PS,HYBRID] [WORKERS=2] [BACKEND=tf]
SEEDS ?=
CASES ?=
MODES ?= MPI,PS,HYBRID
WORKERS ?= 2
BACKEND ?= auto
fuzz: install
	$(PY) scripts/fuzz.py --seeds "$(SEEDS)" --cases "$(CASES)" --modes $(MODES) --workers $(WORKERS) \
	  --backend $(BACKEND)

convergence: install
	$(PY) -m pytest $(PYTEST) -n $(TEST_JOBS) $(LONG_MODEL_RUNS)
	$(PY) scripts/convergence.py

bench: install
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/transform_time.py
	$(PY) benchmarks/paper_tables.py --trace-dir benchmarks/runs/traces
	$(PY) benchmarks/backends.py
	$(PY) benchmarks/transport.py
	$(PY) benchmarks/regression.py --before 3a28c59 --models LM,ResNet --modes MPI,HYBRID --backend tf --out fusion.md
	$(PY) benchmarks/predictions.py
	$(PY) benchmarks/paper_scale.py
	$(PY) benchmarks/plan_space.py
	$(PY) benchmarks/cpu_floor.py
	$(PY) benchmarks/mixed_plans.py
	$(PY) benchmarks/cpu_by_role.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
