"""A warm process that runs equivalence cases one after another, each parallax run a thread job on one server pool
(parallax/thread_job.py): TensorFlow is imported once, and the servers are started once, for every case it runs.

    python tests/equivalence/case_host.py RESPONSE_FD [--eager]

Each line on stdin is a JSON list of run_case.py's arguments; for each, one JSON line goes to file descriptor
RESPONSE_FD: {"ok": true, "leaving": false} or {"ok": false, "error": ..., "output": ..., "leaving": ...} (the case's
prints go to stdout, which the harness keeps in a log). After a failure that leaves the pool broken it answers
(leaving: true) and exits: TF's collectives stay
aborted on servers that saw one fail, and the harness starts a new host. It exits when stdin closes.
"""
import faulthandler
import json
import os
import signal
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import tensorflow as tf  # noqa: E402

from tests.equivalence import run_case  # noqa: E402  (imports parallax, which installs gradient capture)

tf1 = tf.compat.v1
# A case's thread job takes 1 to 7 s (20 s at most under load): a job still running after 60 s is stuck, and its
# threads' stacks are dumped to this host's log, which the harness shows. The harness waits longer (harness.TIMEOUT)
# and kills this host if a case outlasts that.
JOB_TIMEOUT_S = 60


def main():
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <host pid>`: where each thread is
    respond = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    if "--eager" not in sys.argv:  # as run_case.main does, for every case but those that keep eager execution on
        tf1.disable_eager_execution()
    from parallax.thread_job import ServerPool
    pool = ServerPool()
    for line in sys.stdin:
        answer = dict(_run(json.loads(line), pool), leaving=bool(pool.broken))
        respond.write(json.dumps(answer) + "\n")
        if pool.broken:
            break
    sys.stdout.flush()
    sys.stderr.flush()
    # Not Python's exit: a broken job's workers may still be blocked in TF, and TF's servers cannot be shut down.
    os._exit(0)


def _run(argv, pool):
    from parallax.thread_job import ThreadJobError
    args = run_case.parser().parse_args(argv)
    tf1.enable_control_flow_v2()  # a case that writes a TF 1 script turns v2 control flow off for this process
    try:
        run_case.run_in_threads(args, pool, JOB_TIMEOUT_S)
    except ThreadJobError as e:
        if pool.broken:  # a worker is still blocked: where each thread is, for the report
            print(f"--- every thread of the case host, {JOB_TIMEOUT_S} s into the job ---", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "output": e.worker_output}
    except BaseException:  # noqa: B902 (a case's SystemExit or KeyboardInterrupt is its failure, not the host's)
        return {"ok": False, "error": traceback.format_exc(), "output": ""}
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return {"ok": True}


if __name__ == "__main__":
    main()
