"""The workers of a job with transport "ssh", started without mpirun (MPI's own connections between hosts cannot
go through ssh forwards): `python -m parallax.launcher.spawn` reads the workers (one JSON line on stdin), starts
each one, here or over ssh through the host agent, and stands in for mpirun towards the supervisor: every line a
worker writes comes out tagged as `mpirun --tag-output` tags it, and a worker that fails is reported in mpirun's
words ("process rank R with PID P ... exited on signal S" / "Exit code: C"), after which the others are stopped.
It exits 0 when every worker did. Imports no TensorFlow.
"""
import json
import os
import signal
import subprocess
import sys
import threading

from parallax.launcher.processes import terminate_when_parent_dies
from parallax.process import control_lines

_out_lock = threading.Lock()


def _emit(text):
    with _out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _pump(pipe, rank, stream):
    for raw in iter(pipe.readline, b""):
        _emit(f"[1,{rank}]<{stream}>:{raw.decode(errors='replace').rstrip(chr(10))}")


def start(worker):
    """Start one worker: {"rank", "host", "argv", "env" (None: inherit), "stdin" (text or None)}."""
    popen = subprocess.Popen(worker["argv"], env=worker.get("env"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.PIPE if worker.get("stdin") else subprocess.DEVNULL,
                             preexec_fn=terminate_when_parent_dies(os.getpid()))
    if worker.get("stdin"):
        popen.stdin.write(worker["stdin"].encode())  # the host agent's environment; the pipe stays open
        popen.stdin.flush()
    readers = [threading.Thread(target=_pump, args=(pipe, worker["rank"], stream), daemon=True)
               for pipe, stream in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))]
    for reader in readers:
        reader.start()
    return popen, readers


def describe_end(worker, pid, code):
    """mpirun's words for a rank that failed (rank_output.failed_rank reads them); the host agent reports a
    signal N as 128+N."""
    where = f"process rank {worker['rank']} with PID {pid} on node {worker['host']}"
    signum = _signal_of(worker, code)
    if signum:
        return f"parallax-spawn: {where} exited on signal {signum}"
    return f"parallax-spawn: {where} exited with a non-zero status.\nExit code: {code}"


def run(workers):
    started = [(w, *start(w)) for w in workers]
    pending, failed = list(started), False
    while pending:
        ended = [(item, item[1].poll()) for item in pending]
        ended = [(item, code) for item, code in ended if code is not None]
        for item, code in ended:
            pending.remove(item)
            worker = item[0]
            if not worker.get("stdin"):  # a remote worker's host agent writes this line itself
                _emit(f"[1,{worker['rank']}]<stderr>:{control_lines.line(control_lines.Exit(code))}")
        # Of the workers seen ended in one poll, one killed by a signal is the cause: its peers' collectives broke
        # because of it, and they may have ended within the same poll.
        for (worker, popen, readers), code in sorted(ended, key=lambda e: _signal_of(e[0][0], e[1]) is None):
            for reader in readers:
                reader.join(timeout=2)
            if code != 0 and not failed:
                failed = True
                _emit(describe_end(worker, popen.pid, code))
                for _, other, _ in pending:  # as mpirun does: one failed rank ends the job
                    other.send_signal(signal.SIGTERM)
        if pending:
            threading.Event().wait(0.1)
    return 1 if failed else 0


def _signal_of(worker, code):
    return -code if code < 0 else code - 128 if worker.get("stdin") and 128 < code < 160 else None


def main():
    request = json.loads(sys.stdin.readline())
    return run(request["workers"])


if __name__ == "__main__":
    sys.exit(main())
