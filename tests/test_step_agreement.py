"""Workers that do not run the same sequence of synchronized steps end the job within seconds, with the step and
the workers named, in every mode: never a hang (real processes, two loopback hosts)."""
import os
import time

import pytest

from tests.launched import run_script

pytestmark = pytest.mark.slow  # real jobs; their wall-time bound (LIMIT) is 15x their time, shared cores included

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "diverging_workers.py")
LIMIT = 120  # start-up included; the check itself answers as soon as both workers reported the step


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
@pytest.mark.parametrize("behaviour, expected", [
    # whichever worker reports first is named first
    ("other_fetch", ["at synchronized step 2, ", "/worker/0 runs Ftrl", "/worker/1 runs GradientDescent"]),
    ("stop_early", ["127.0.0.2/worker/1 stopped after 2 synchronized steps while 127.0.0.1/worker/0 waits in step 3"]),
])
def test_diverging_workers_end_the_job_naming_step_and_workers(mode, behaviour, expected):
    start = time.time()
    proc = run_script([SCRIPT, behaviour, mode], timeout=LIMIT + 60)
    took = time.time() - start
    print(f"{mode} {behaviour}: exit {proc.returncode} after {took:.1f} s")
    assert proc.returncode != 0
    assert "job failed:" in proc.stderr and "every worker must run the same" in proc.stderr, proc.stderr[-3000:]
    for part in expected:
        assert part in proc.stderr, proc.stderr[-3000:]
    assert took < LIMIT
