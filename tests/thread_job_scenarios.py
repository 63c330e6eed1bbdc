"""Scenarios of parallax/thread_job.py, run in one process started with the bind shim (a ServerPool needs it):
`python tests/thread_job_scenarios.py OUT.json` writes {scenario: what it observed} for test_thread_job.py."""
import json
import os
import sys
import threading
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

from parallax.process import protocol# noqa: E402
from parallax.thread_job import ServerPool, ThreadJob, ThreadJobError  # noqa: E402
from tests.models_for_tests import embedding_mlp  # noqa: E402

tf1 = tf.compat.v1
TWO_HOSTS = "127.0.0.1: 0\n127.0.0.2: 0"


def _training(mode, steps=3, before_steps=None, steps_of=None):
    """A worker's script: the embedding MLP in `mode`, `steps` steps (`steps_of(rank)` if given); returns (rank,
    global step, the group key its context gave, what parallax.shard's worker index was)."""
    def script():
        graph, h = embedding_mlp.build("Adam")
        with graph.as_default():
            shard = parallax.shard(tf.data.Dataset.range(4))
            step = tf1.train.get_global_step()
        runner = parallax.get_runner(graph, TWO_HOSTS, parallax.Config(run_option=mode, collective_backend="tf"))
        with runner:
            rank = runner.worker_id
            if before_steps:
                before_steps(rank)
            ids, labels = next(embedding_mlp.batches(1, 4, seed=rank))
            for _ in range(steps_of(rank) if steps_of else steps):
                runner.run(h["train_op"], {h["ids"]: ids, h["labels"]: labels})
            return rank, int(runner.run(step)), protocol.this_process().collective_group, shard._worker_id
    return script


def consecutive_jobs_start_fresh(pool):
    """Two HYBRID jobs on one pool: each starts at global step 0 (the servers' containers were reset), with its
    own collective group, and each worker thread is its own rank, also to parallax.shard."""
    first = ThreadJob(pool, TWO_HOSTS).run(_training("HYBRID"))
    second = ThreadJob(pool, TWO_HOSTS).run(_training("PS", steps=2))
    return {"first": first, "second": second}


def a_failed_worker_ends_the_job(pool):
    """Worker 1 raises after get_runner; worker 0 waits in its first step for worker 1's part."""
    def fail(rank):
        if rank == 1:
            raise ValueError("planted failure")
    return _failure(ThreadJob(pool, TWO_HOSTS, timeout_s=120), _training("HYBRID", before_steps=fail))


def a_stuck_worker_is_a_timeout(pool):
    """Worker 1 blocks in Python forever before its steps; worker 0 waits for it in a collective."""
    forever = threading.Event()

    def block(rank):
        if rank == 1:
            forever.wait()
    return _failure(ThreadJob(pool, TWO_HOSTS, timeout_s=8), _training("HYBRID", before_steps=block))


def workers_that_disagree_on_steps(pool):
    """Worker 1 runs one step fewer: the step ledger ends the job (PS: worker 0 waits at the step's barrier)."""
    return _failure(ThreadJob(pool, TWO_HOSTS, timeout_s=120),
                    _training("PS", steps_of=lambda rank: 3 if rank == 0 else 2))


def a_script_without_get_runner(pool):
    return _failure(ThreadJob(pool, TWO_HOSTS), lambda: None)


def horovod_is_refused(pool):
    def script():
        graph, h = embedding_mlp.build("Adam")
        parallax.get_runner(graph, TWO_HOSTS, parallax.Config(run_option="MPI", collective_backend="horovod"))
    return _failure(ThreadJob(pool, TWO_HOSTS), script)


def _failure(job, script):
    start = time.monotonic()
    try:
        job.run(script)
    except (ThreadJobError, parallax.ParallaxError) as e:
        return {"error": type(e).__name__, "message": str(e), "seconds": time.monotonic() - start,
                "pool_broken": job.pool.broken}
    return {"error": None, "seconds": time.monotonic() - start}


SCENARIOS = (consecutive_jobs_start_fresh, a_script_without_get_runner, horovod_is_refused,
             workers_that_disagree_on_steps, a_failed_worker_ends_the_job, a_stuck_worker_is_a_timeout)


def main():
    tf1.disable_eager_execution()
    results, pool = {}, ServerPool()
    for scenario in SCENARIOS:
        if pool.broken:  # a scenario that broke the pool leaves it; the next gets a new one
            results.setdefault("refused_after_broken", _failure(ThreadJob(pool, TWO_HOSTS), lambda: None))
            pool = ServerPool()
        try:
            results[scenario.__name__] = scenario(pool)
        except Exception:
            results[scenario.__name__] = {"crashed": traceback.format_exc()}
    with open(sys.argv[1], "w") as f:
        json.dump(results, f, default=lambda x: x.item() if isinstance(x, np.generic) else str(x))
    os._exit(0)  # the failure scenarios left worker threads blocked in TF (thread_job.py says why)


if __name__ == "__main__":
    main()
