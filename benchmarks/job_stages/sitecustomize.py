"""Loaded by every Python process that has this directory on its PYTHONPATH (benchmarks/job_cost.py sets it for the
processes of the jobs it measures): records when each stage of an equivalence job starts and ends in this process,
with this process's CPU then, as JSON lines in $JOB_STAGES_DIR/<pid>.jsonl. Nothing else changes.

Stages: the interpreter's start (from the kernel's record of the process's start), the import of TensorFlow, and
calls of the functions in STAGES, patched as their modules load.
"""
import importlib.abc
import json
import os
import sys
import threading
import time

OUT = os.environ.get("JOB_STAGES_DIR")
# module -> [(attribute path, stage name)]
STAGES = {
    "tests.equivalence.run_case": [("run_single", "reference run"), ("train_worker", "worker script")],
    "parallax.analysis.graph_analysis": [("analyze", "analysis")],
    "parallax.plan.planning": [("plan_job", "planning")],
    "parallax.launcher.job": [("launch", "launch and wait for the job")],
    "parallax.runtime.cluster": [("start_worker_server", "server start")],
    "parallax.rewrite.pipeline": [("rewrite", "rewrite")],
    "parallax.runtime.worker_checks": [("check_same_graph", "graph check")],
    "parallax.runtime.runner": [("Runner.__init__", "session and initial values"), ("Runner.run", "steps"),
                        ("Runner.close", "close")],
    "parallax.thread_job": [("ThreadJob._plan", "planning (planner role)"), ("ServerPool.reset", "reset servers"),
                            ("ServerPool.__init__", "start server pool")],
    "tests.equivalence.case_host": [("_run", "case")],
}
_lock = threading.Lock()


def _record(**fields):
    line = json.dumps(dict(fields, pid=os.getpid(), thread=threading.current_thread().name,
                           argv=" ".join(sys.argv[:3])[-120:]))
    with _lock, open(os.path.join(OUT, f"{os.getpid()}.jsonl"), "a") as f:
        f.write(line + "\n")


def _timed(fn, stage):
    def wrapper(*args, **kwargs):
        start, cpu = time.time(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(stage=stage, start=start, end=time.time(), cpu=time.process_time() - cpu)
    wrapper.__wrapped__ = fn
    return wrapper


def _patch(module):
    for path, stage in STAGES.get(module.__name__, ()):
        owner, _, name = path.rpartition(".")
        target = getattr(module, owner) if owner else module
        setattr(target, name, _timed(getattr(target, name), stage))
    if module.__name__ == "tests.equivalence.run_case":  # the builders it hands out build the graph
        builder = module.case_builder
        module.case_builder = lambda name: _timed(builder(name), "graph build")


class _Patcher(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in STAGES and name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            start, cpu = time.time(), time.process_time()
            run(module)
            if name == "tensorflow":
                _record(stage="import tensorflow", start=start, end=time.time(), cpu=time.process_time() - cpu)
            else:
                _patch(module)
        spec.loader.exec_module = exec_module
        return spec


def _process_start():
    """When the kernel started this process (its exec: the fork before it is the parent's)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


if OUT:
    import importlib.util
    _record(stage="python start", start=_process_start(), end=time.time(), cpu=time.process_time())
    sys.meta_path.insert(0, _Patcher())
    import atexit
    atexit.register(lambda: _record(stage="exit", start=time.time(), end=time.time(), cpu=time.process_time()))
