"""Run a job's tasks as one process, the way benchmarks/testbed.py measures a parallax-launch job: the tasks'
output lines on this process's stdout (each with its prefix), done when the waited tasks are, and every task ended
when this process is. For the peers whose tasks a user starts one by one (TF 1 parameter servers and workers,
MultiWorkerMirroredStrategy's workers). Imports no TensorFlow.

    python benchmarks/peers/tasks.py TASKS.json

TASKS.json: a list of {"argv": [...], "env": {...}, "namespace": a network namespace to run in, or null,
"prefix": put before each output line ("" for none), "waited": whether the job is done only when this task is}.
Exits 0 when every waited task exited 0; otherwise with the first failure's status. On SIGTERM or SIGINT every task
is ended (its process group, by recorded id) and the exit status is 143.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import threading


def start(task):
    argv = (["ip", "netns", "exec", task["namespace"]] if task.get("namespace") else []) + list(task["argv"])
    return subprocess.Popen(argv, env=dict(os.environ, **task.get("env", {})), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def forward(k, proc, prefix, lines):
    for line in proc.stdout:
        lines.put((k, prefix + line))
    lines.put((k, None))


def end_all(procs):
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for proc in procs:
        proc.wait()


def run(tasks):
    """Start every task; print their lines until each waited task has closed its output; end the rest. The exit
    status: the first failed task's (a task that is not waited for fails the job only by failing)."""
    lines, procs = queue.Queue(), []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for k, task in enumerate(tasks):
            procs.append(start(task))
            threading.Thread(target=forward, args=(k, procs[-1], task.get("prefix", ""), lines), daemon=True).start()
        waiting = {k for k, task in enumerate(tasks) if task.get("waited")}
        while waiting:
            k, line = lines.get()
            if line is not None:
                sys.stdout.write(line)
                sys.stdout.flush()
                continue
            waiting.discard(k)
            if procs[k].wait() != 0:
                print(f"tasks.py: task {k} ({' '.join(tasks[k]['argv'][:3])} ...) exited {procs[k].returncode}",
                      flush=True)
                return procs[k].returncode
        return 0
    except KeyboardInterrupt:
        return 143
    finally:
        end_all(procs)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit(__doc__)
    with open(args[0]) as f:
        sys.exit(run(json.load(f)))


if __name__ == "__main__":
    main()
