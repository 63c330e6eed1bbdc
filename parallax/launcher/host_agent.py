"""What the launcher runs on each host of a job: `python -m parallax.launcher.host_agent check|run|stop|cleanup`.

Remote hosts run it over ssh; the launcher's own host calls the same functions in-process. It imports no
TensorFlow, so it answers in a fraction of a second.

  check JSON|-  preflight: report this host's Python and parallax, whether the script exists, reserve ports,
                create the job directory and write the job's files (the plan) there; prints one JSON line.
                With "-", the request is one JSON line on stdin
  run NAME -- CMD...
                read the process's environment as one JSON line on stdin, start CMD in a new session, record
                its pid, and stop it (its whole process group) when stdin closes: when the launcher, or the ssh
                connection to it, goes away, nothing stays behind
  stop JOB_DIR NAME...
                stop the processes recorded as JOB_DIR/pid.NAME on this host (SIGTERM, grace, SIGKILL), but only
                those whose environment names JOB_DIR, so a reused pid is never hit; prints JSON of survivors
  cleanup JOB_DIR
                remove the job directory
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from parallax.process import ports
from parallax.launcher import stale
from parallax.launcher.processes import signal_group
from parallax.launcher.recorded_pids import GRACE_SECONDS, stop
from parallax.process import control_lines
from parallax.process.protocol import ENV_CWD, ENV_JOB_DIR


# ---- check ------------------------------------------------------------------------------------------------------
def check(request):
    """`request`: {"script": path or None, "ports": count, "job_dir": path or None, "files": {name: text}}, the
    files written into the job directory. Returns a JSON-able dict."""
    report = {"hostname": socket.gethostname(), "python": sys.executable,
              "parallax": os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "errors": []}
    script = request.get("script")
    if script and not os.path.isfile(script):
        report["errors"].append(f"the script {script} does not exist on this host")
    try:
        report["ports"] = ports.reserve_local_ports(request.get("ports", 0))
    except Exception as e:  # noqa: BLE001 - reported to the launcher as text
        report["errors"].append(str(e))
    job_dir = request.get("job_dir")
    if job_dir:
        stale.sweep_job_dirs(os.path.dirname(job_dir))  # what jobs whose launcher was killed with -9 left here
        try:
            os.makedirs(job_dir, exist_ok=True)
            for name, text in (request.get("files") or {}).items():
                if os.path.basename(name) != name or name.startswith("."):
                    raise OSError(f"refusing to write {name!r}: a plain file name only")
                with open(os.path.join(job_dir, name), "w") as f:
                    f.write(text)
        except OSError as e:
            report["errors"].append(f"cannot write the job directory {job_dir}: {e}")
    return report


# ---- run --------------------------------------------------------------------------------------------------------
def run(name, command, stdin=None):
    """Run `command` until it exits or stdin closes; return its exit status (128+N when killed by signal N)."""
    stdin = stdin or sys.stdin
    env = json.loads(stdin.readline() or "{}")
    try:
        child = subprocess.Popen(command, env=env or None, stdin=subprocess.DEVNULL, start_new_session=True,
                                 cwd=env.get(ENV_CWD) or None)  # a worker runs where the launcher was started
    except OSError as e:
        print(f"parallax: cannot start {command[0]} on {socket.gethostname()}: {e}", file=sys.stderr, flush=True)
        return 127
    job_dir = env.get(ENV_JOB_DIR)
    if job_dir and os.path.isdir(job_dir):
        with open(os.path.join(job_dir, f"pid.agent.{name}"), "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}\n")

    def stop_when_stdin_closes():
        while stdin.readline():
            pass
        _stop_group(child)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: _stop_group(child))
    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    code = child.wait()
    print(control_lines.line(control_lines.Exit(code)), file=sys.stderr, flush=True)
    return 128 - code if code < 0 else code


def _stop_group(child):
    if child.poll() is not None:
        return
    signal_group(child.pid, signal.SIGTERM)
    deadline = time.time() + GRACE_SECONDS
    while child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    signal_group(child.pid, signal.SIGKILL)


# ---- cleanup ---------------------------------------------------------------------------------------------------
def cleanup(job_dir):
    if os.path.basename(job_dir.rstrip("/")).startswith("parallax-job-"):
        shutil.rmtree(job_dir, ignore_errors=True)


def main(argv):
    if not argv:
        sys.exit(__doc__)
    verb, args = argv[0], argv[1:]
    if verb == "check":  # the request as an argument, or on stdin when it is "-" (it may carry the plan)
        print(json.dumps(check(json.loads(sys.stdin.readline() if args[0] == "-" else args[0]))), flush=True)
    elif verb == "run":
        split = args.index("--")
        sys.exit(run(args[0], args[split + 1:]))
    elif verb == "stop":
        print(json.dumps(stop(args[0], args[1:])), flush=True)
    elif verb == "cleanup":
        cleanup(args[0])
    else:
        sys.exit(f"unknown verb {verb!r}\n{__doc__}")


if __name__ == "__main__":
    main(sys.argv[1:])
