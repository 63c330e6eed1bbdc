"""The in-job half of a calibration: parallax-calibrate launches the user's own script as a real job with
PARALLAX_MEASURE_STEPS="W,K". Each worker's runner then measures its training steps W+1..K (wall time, its own CPU,
and its whole machine's CPU from /proc/stat, which also counts the servers and the other workers there), prints
them on one line, and ends the worker after step K: every worker runs the same steps, so all end together and the
job ends cleanly. The cost model takes from it what one worker's step costs in a real job (its input pipeline
reading every worker's share, the rewritten graph, the runner), which timing the graph alone in one process misses.
Imports no TensorFlow.
"""
import json
import os
import socket
import sys
import time

from parallax.errors import ConfigError

ENV = "PARALLAX_MEASURE_STEPS"
MARKER = "parallax-step-measure: "


def machine_busy():
    """CPU seconds every core of this machine has been busy since boot (/proc/stat), or None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user..steal; guest time is in user already


def boot_id():
    """Hosts with the same boot id share one kernel, so their cores (network namespaces of the test bed)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return socket.gethostname()


class StepMeasure:
    def __init__(self, first, last):
        self.first, self.last = first, last
        self._start = None

    @classmethod
    def from_env(cls, environ=None):
        text = (os.environ if environ is None else environ).get(ENV)
        if not text:
            return None
        try:
            first, last = (int(x) for x in text.split(","))
        except ValueError:
            raise ConfigError(f"{ENV}={text!r}: expected 'W,K', warm-up steps then the last step") from None
        if not 0 <= first < last:
            raise ConfigError(f"{ENV}={text!r}: need 0 <= W < K")
        return cls(first, last)

    def after_step(self, step, runner):
        """Called after each training step; after the last one, reports and ends this worker."""
        if step == self.first:
            self._start = (time.perf_counter(), time.process_time(), machine_busy())
        if step != self.last or self._start is None:
            return
        wall, cpu, busy = self._start
        steps = self.last - self.first
        after = machine_busy()
        result = {"worker": runner.worker_id, "workers": runner.num_workers, "mode": runner.plan.run_option,
                  "backend": runner.plan.backend, "host": runner.plan.worker_hosts[runner.worker_id],
                  "workers_per_host": [runner.plan.worker_hosts.count(h) for h in range(runner.plan.num_hosts)],
                  "boot_id": boot_id(), "steps": steps,
                  "wall": (time.perf_counter() - wall) / steps, "cpu": (time.process_time() - cpu) / steps,
                  "machine_cpu": None if busy is None or after is None else (after - busy) / steps}
        print(MARKER + json.dumps(result), flush=True)
        runner.close()
        _finalize_mpi()
        sys.stderr.flush()
        os._exit(0)  # the script's own loop must not go on; TF's teardown could otherwise hang the process


def write_trace(log_dir, worker_id, step, run_metadata):
    """A step's timeline as Chrome-trace JSON in `log_dir`: every device the step ran on (this worker's, and the
    servers' in PS and HYBRID modes), one lane per device. Returns the path."""
    from tensorflow.python.client import timeline  # this module is read by parallax-calibrate, without TF
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, f"trace.worker{worker_id}.step{step}.json")
    with open(path, "w") as f:
        f.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
    return path


def _finalize_mpi():
    """mpirun counts a rank that exits without MPI_Finalize as failed: end Horovod, then MPI, as their exit
    hooks would (os._exit runs none)."""
    horovod = sys.modules.get("horovod.tensorflow")
    if horovod is not None and hasattr(horovod, "shutdown"):
        horovod.shutdown()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
