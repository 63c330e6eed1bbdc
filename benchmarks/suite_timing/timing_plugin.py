"""Records each test's wall and CPU seconds (this process and its reaped children) as JSON lines."""
import json, os, resource, time
import pytest

OUT = os.environ.get("TIMING_OUT", "/tmp/timings.jsonl")

def _cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0, c0 = time.time(), _cpu()
    yield
    with open(OUT, "a") as f:
        f.write(json.dumps({"id": item.nodeid, "wall": time.time() - t0, "cpu": _cpu() - c0, "start": t0,
                            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                            "alone": item.get_closest_marker("alone") is not None,
                            "tf": os.environ.get("TF", "2.15")}) + "\n")

def pytest_sessionfinish(session):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    with open(OUT, "a") as f:
        f.write(json.dumps({"session_end": time.time(), "cpu_total": _cpu(), "tf": os.environ.get("TF", "2.15"),
                            "args": session.config.invocation_params.args}) + "\n")
