# parallax: `make demo`, `make check` and `make test` install what is missing first (see scripts/install.sh).
# TF=2.15 (default): .venv, TF 2.15.1 with Horovod. TF=2.21: .venv-tf2.21, the newest TF, no Horovod (TF's own
# collectives), numpy 2, tf_keras. `make test` runs both; `make test-tf TF=2.21` one.
TF     ?= 2.15
, := ,
VENV   := $(if $(filter 2.15,$(TF)),.venv,.venv-tf$(TF))
PY     := $(VENV)/bin/python
PYTEST ?= -q
export TF
export TF_USE_LEGACY_KERAS := $(if $(filter 2.15,$(TF)),,1)
# The suite on TF 2.21 (no Horovod there: it does not build for TF >= 2.19): the equivalence suite but Horovod's
# sample, and the tests of what differs by TF version: the model scripts, servers, collectives, the launcher.
NEWEST_TF_TESTS := tests/model_scripts tests/runtime/test_tf_server.py tests/test_tf_collectives.py tests/test_uneven_data.py \
                   tests/test_user_saver.py tests/test_user_init.py tests/test_fed_batches.py \
                   tests/test_tape_capture.py tests/test_queue_runners.py tests/test_thread_job.py \
                   tests/test_ssh_transport_local.py tests/test_listening_sockets.py tests/runtime/test_step_check.py \
                   tests/legacy/test_legacy_config.py \
                   tests/legacy/test_parallel_run.py::test_lm_example_ends_by_sigterm_and_its_checkpoint_restores
# make test-tf runs the tests TEST_JOBS at a time (pytest-xdist; 0: one at a time), then the tests marked `alone`
# (they bound or measure wall time, or count the machine's processes), one at a time. Three keep 2 cores busy
# (99% against 87% with two: a real job's processes wait on each other's start); an idle pytest process takes
# tests queued for a busy one (worksteal), so no core idles at the end.
TEST_JOBS ?= 3
XDIST  := $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist worksteal)
# The multi-host test bed (network namespaces, root): make test runs it; SSH_SUITE=all runs every HYBRID and PS
# equivalence case over --transport ssh there (default: one of each kind).
SSH_SUITE ?= ci
BED_FIRST := tests/cluster/test_ssh_transport.py tests/cluster/test_multi_host.py
BED    := $(BED_FIRST) $(filter-out $(BED_FIRST),$(sort $(wildcard tests/cluster/test_*.py)))
export PARALLAX_SSH_SUITE := $(SSH_SUITE)
# The NMT and ResNet convergence and resume runs (about 4 minutes of CPU on 2 cores) are left to `make convergence`,
# as before the cross product came in; the LM's run in make test (docs/convergence.md).
LONG_MODEL_RUNS := tests/convergence/test_nmt.py::test_nmt_two_hybrid_workers_reach_the_single_device_bleu \
                   tests/convergence/test_resnet.py::test_resnet_two_hybrid_workers_reach_the_single_device_accuracy \
                   "tests/convergence/test_resume.py::test_a_killed_and_restarted_run_equals_an_uninterrupted_one[nmt]" \
                   "tests/convergence/test_resume.py::test_a_killed_and_restarted_run_equals_an_uninterrupted_one[resnet]"
# On TF 2.21 the thread-job/real-job cross-check runs one graph per mode (TF 2.15 runs the whole sample).
PATHS_AGREE := tests/equivalence/test_paths_agree.py::test_a_thread_job_computes_what_a_real_job_computes
NEWEST_TF_DESELECT := "$(PATHS_AGREE)[embedding_clip_adam_partitioned-MPI-4]" "$(PATHS_AGREE)[batch_norm-PS-2]" \
                      "$(PATHS_AGREE)[grad_accumulation-PS-4]" "$(PATHS_AGREE)[mixed_methods-HYBRID-4]" \
                      "$(PATHS_AGREE)[in_batch_negatives_sharded-HYBRID-2]"
SUITE  := $(if $(filter 2.15,$(TF)),tests --ignore=tests/cluster $(addprefix --deselect ,$(LONG_MODEL_RUNS)),\
            $(NEWEST_TF_TESTS) tests/equivalence --ignore=tests/equivalence/test_horovod.py \
            $(addprefix --deselect ,$(NEWEST_TF_DESELECT)))
# make check: the edit-test loop, under 5 minutes on 2 cores: every test not marked slow (real multi-process jobs,
# or many seconds) outside the equivalence, convergence and test-bed suites, and one equivalence case per mode.
# The tests of one module sit in the folder of its package (tests/rules/test_batch_draws.py); the rest at the top.
UNIT_DIRS := $(addprefix tests/,core process capture analysis rules plan rewrite runtime launcher)
CHECK  := $(wildcard tests/test_*.py) $(UNIT_DIRS) tests/legacy tests/model_scripts -m "not slow and not alone" \
          "tests/equivalence/test_mpi.py::test_mpi_equivalence[linear-2]" \
          "tests/equivalence/test_ps.py::test_ps_equivalence[linear-2]" \
          "tests/equivalence/test_hybrid.py::test_hybrid_equivalence[embedding_clip_adam-2]"

.PHONY: install test test-tf test-tf-shared test-tf-alone test-cluster check demo demo-keras convergence bench fuzz drill clean pip-check matrix

install:
	@bash scripts/install.sh

# Everything CI runs: the suite on TF 2.15, the multi-host test bed, the suite on TF 2.21. Each part always runs;
# make fails if any did.
# The test bed leaves most of a core idle (docs/testing.md), so TF 2.21's install, then its shared tests at a lower
# priority (nice $(BESIDE_BED_NICE)), run beside it: the bed's own processes, whose tests bound some times, come first on
# the CPU. Their output follows the bed's, live from then on; TF 2.21's tests marked alone run after both.
BESIDE_BED_NICE ?= 10
test:
	@t0=$$(date +%s); $(MAKE) --no-print-directory test-tf TF=2.15; a=$$?; \
	  t1=$$(date +%s); log=$$(mktemp); \
	  ( ($(MAKE) --no-print-directory install TF=2.21 || \
	      echo "[test] TF 2.21's install failed (test-tf-shared tries it again)"; \
	    nice -n $(BESIDE_BED_NICE) $(MAKE) --no-print-directory test-tf-shared TF=2.21) >$$log 2>&1 ) & beside=$$!; \
	  $(MAKE) --no-print-directory test-cluster TF=2.15; b=$$?; t2=$$(date +%s); \
	  echo "[test] the test bed is done; TF 2.21's install and shared tests, which ran beside it:"; \
	  tail -n +1 --pid=$$beside -f $$log; wait $$beside; c=$$?; rm -f $$log; t3=$$(date +%s); \
	  $(MAKE) --no-print-directory test-tf-alone TF=2.21; d=$$?; t4=$$(date +%s); \
	  echo "[test] TF 2.15: exit $$a, $$(( (t1 - t0) / 60 )).$$(( (t1 - t0) % 60 * 10 / 60 )) min;" \
	    "test bed: exit $$b, $$(( (t2 - t1) / 60 )).$$(( (t2 - t1) % 60 * 10 / 60 )) min;" \
	    "TF 2.21 shared (beside the bed, then alone): exit $$c, $$(( (t3 - t1) / 60 )).$$(( (t3 - t1) % 60 * 10 / 60 )) min;" \
	    "TF 2.21 marked alone: exit $$d, $$(( (t4 - t3) / 60 )).$$(( (t4 - t3) % 60 * 10 / 60 )) min (installs included)"; \
	  test $$a = 0 && test $$b = 0 && test $$c = 0 && test $$d = 0

# The suite on one TensorFlow (TF=2.15 or 2.21): TEST_JOBS at a time, then those marked alone, one at a time.
test-tf: install
	@$(MAKE) --no-print-directory test-tf-shared; shared=$$?; \
	  $(MAKE) --no-print-directory test-tf-alone; alone=$$?; \
	  echo "[test-tf] TF $(TF), $(TEST_JOBS) at a time: exit $$shared; marked alone, one at a time: exit $$alone"; \
	  test $$shared = 0 && test $$alone = 0

test-tf-shared: install
	@$(PY) -m pytest $(PYTEST) $(XDIST) -m "not alone" $(SUITE)

test-tf-alone: install
	@$(PY) -m pytest $(PYTEST) -m alone $(SUITE)

# The equivalence jobs over ssh first: they bound no time (make test runs TF 2.21's install and shared tests beside the
# bed).
test-cluster: install
	$(PY) -m pytest $(PYTEST) $(BED)

check: install
	$(PY) -m pytest $(PYTEST) $(XDIST) $(CHECK)

# How each way of stalling or dying ends, in every mode, on localhost and the test bed (docs/launching.md).
drill: install
	$(PY) scripts/failure_drill.py

demo: install
	$(PY) models/lm/demo.py

# The same with the LM as a Keras model trained by its own Model.fit (get_runner(model), docs/api.md).
demo-keras: install
	$(PY) models/lm/demo.py --keras

# pip install ".[tf]" into a fresh Python 3.13 virtualenv as an unprivileged user, then the LM demo on it must
# equal one device (scripts/pip_check.sh; PYTHON_VERSION=3.12 for another; downloads TF, not part of CI).
pip-check:
	@bash scripts/pip_check.sh

# TF 2.15-2.21 x Python 3.10/3.12/3.13, each a fresh virtualenv and a smoke suite; writes docs/compatibility.md
# (scripts/matrix.py; downloads about 15 TensorFlows, not part of CI). MATRIX_TF=2.20,2.21 MATRIX_PY=3.12 for fewer.
MATRIX_TF ?= 2.15,2.16,2.17,2.18,2.19,2.20,2.21
MATRIX_PY ?= 3.10,3.12,3.13
matrix:
	python3 scripts/matrix.py --tf $(MATRIX_TF) --python $(MATRIX_PY)

# More random graphs than the suite's seeds: make fuzz SEEDS=0-199 [CASES=all] [MODES=MPI,PS,HYBRID] [WORKERS=2]
# [BACKEND=horovod: real processes]
SEEDS ?=
CASES ?=
MODES ?= MPI,PS,HYBRID
WORKERS ?= 2
BACKEND ?= tf
fuzz: install
	$(PY) scripts/fuzz.py --seeds "$(SEEDS)" --cases "$(CASES)" --modes $(MODES) --workers $(WORKERS) \
	  --backend $(BACKEND)

convergence: install
	$(PY) -m pytest $(PYTEST) $(XDIST) tests/convergence
	$(PY) scripts/convergence.py

bench: install
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/transform_time.py
	$(PY) benchmarks/paper_tables.py --trace-dir benchmarks/runs/traces
	$(PY) benchmarks/backends.py
	$(PY) benchmarks/backends.py --only ResNet --second-rate '' --out backends.ResNet.md
	$(PY) benchmarks/transport.py
	$(PY) benchmarks/regression.py --before 3a28c59 --models LM,ResNet --modes MPI,HYBRID --backend tf --out fusion.md
	$(PY) benchmarks/predictions.py
	$(PY) benchmarks/paper_scale.py
	$(PY) benchmarks/plan_space.py
	$(PY) benchmarks/cpu_floor.py
	$(PY) benchmarks/mixed_plans.py
	$(PY) benchmarks/cpu_by_role.py
	$(PY) benchmarks/keras_vs_v1.py
	$(PY) benchmarks/keras_vs_v1.py --model ResNet --modes MPI,HYBRID --repeats 2
	$(PY) benchmarks/versus_peers.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
