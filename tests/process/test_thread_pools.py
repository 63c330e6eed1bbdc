"""A launched worker's intra-op pool: its share of its machine's cores (parallax/process/thread_pools.py)."""
import os
import subprocess
import sys
import textwrap

import pytest

from parallax import ResourceSpec, ResourceSpecError
from parallax.process import thread_pools
from parallax.process.protocol import ENV_NUM_WORKERS, ENV_RESOURCE_SPEC, ENV_ROLE, ENV_WORKER_ID

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker(worker_id, spec_text, **extra):
    try:
        spec_workers = ResourceSpec.parse(spec_text).num_workers
    except ResourceSpecError:
        spec_workers = 1  # a spec that does not parse: the case is that pool_sizes reads it
    return {ENV_ROLE: "worker", ENV_WORKER_ID: str(worker_id), ENV_NUM_WORKERS: str(spec_workers),
            ENV_RESOURCE_SPEC: spec_text, **extra}


@pytest.mark.parametrize("cores, slots, share", [(2, 2, 1), (4, 2, 2), (8, 3, 2), (2, 4, 1), (16, 1, 16)])
def test_the_share_is_the_cores_over_the_workers_of_the_machine_at_least_one(cores, slots, share):
    spec = "localhost: " + ",".join(map(str, range(slots)))
    assert thread_pools.pool_sizes(worker(0, spec), cores) == {"TF_NUM_INTRAOP_THREADS": str(share)}


def test_hosts_of_other_machines_count_their_own_slots():
    spec = "a.invalid: 0\nb.invalid: 0,1,2,3"
    assert thread_pools.pool_sizes(worker(0, spec), 8) == {"TF_NUM_INTRAOP_THREADS": "8"}
    assert thread_pools.pool_sizes(worker(1, spec), 8) == {"TF_NUM_INTRAOP_THREADS": "2"}
    assert thread_pools.pool_sizes(worker(4, spec), 8) == {"TF_NUM_INTRAOP_THREADS": "2"}


def test_loopback_hosts_are_one_machine():
    spec = "127.0.0.1: 0,1\n127.0.0.2: 0,1\nc.invalid: 0"
    for worker_id in range(4):
        assert thread_pools.pool_sizes(worker(worker_id, spec), 8) == {"TF_NUM_INTRAOP_THREADS": "2"}
    assert thread_pools.pool_sizes(worker(4, spec), 8) == {"TF_NUM_INTRAOP_THREADS": "8"}


def test_a_value_the_user_set_is_kept():
    assert thread_pools.pool_sizes(worker(0, "localhost: 0,1", TF_NUM_INTRAOP_THREADS="3"), 2) == {}


@pytest.mark.parametrize("environ", [
    {},  # started by hand: the launcher
    {ENV_ROLE: "server", ENV_WORKER_ID: "0", ENV_NUM_WORKERS: "2", ENV_RESOURCE_SPEC: "localhost: 0,1"},
    {ENV_ROLE: "planner", ENV_RESOURCE_SPEC: "localhost: 0,1"},
    {ENV_ROLE: "worker", ENV_WORKER_ID: "0", ENV_NUM_WORKERS: "2"},  # no spec
])
def test_only_a_launched_worker_with_a_spec_is_sized(environ):
    assert thread_pools.pool_sizes(environ, 2) == {}


@pytest.mark.parametrize("environ", [
    worker(0, "localhost: 0,1", **{ENV_WORKER_ID: "x"}),  # not an integer
    worker(0, "localhost: 0,1", **{ENV_WORKER_ID: "5"}),  # beyond the job
    worker(0, "this is : not a spec"),
    {**worker(0, "localhost: 0"), ENV_NUM_WORKERS: "4", ENV_WORKER_ID: "3"},  # beyond the spec's slots
])
def test_a_bad_role_or_spec_sets_nothing_and_is_left_to_the_workers_start_to_report(environ):
    assert thread_pools.pool_sizes(environ, 2) == {}


def test_the_cores_are_this_processs_affinity():
    assert thread_pools.cores_here() == len(os.sched_getaffinity(0))


# A process that imports parallax as a launched worker would, then runs a session and counts its own threads.
_PROBE = textwrap.dedent("""
    import os
    import parallax
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    product = tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))
    with tf.Session() as session:
        session.run(product)
        print(os.environ.get("TF_NUM_INTRAOP_THREADS"), len(os.listdir("/proc/self/task")))
""")


def _probe(environ):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARALLAX_") and k != "TF_NUM_INTRAOP_THREADS"}
    env.update(environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    value, threads = out.stdout.split()
    return value, int(threads)


@pytest.mark.slow
def test_a_launched_workers_import_of_parallax_shrinks_tensorflows_pool():
    """The variable is set at the import, before TF makes its pool, and TF makes the pool that size: the worker runs
    the threads a process given the variable by hand runs, fewer than TF's default (one per core)."""
    slots = len(os.sched_getaffinity(0)) * 2  # two workers per core: a share of one thread
    spec = "localhost: " + ",".join(map(str, range(slots)))
    default_value, default_threads = _probe({})
    by_hand_value, by_hand_threads = _probe({"TF_NUM_INTRAOP_THREADS": "1"})
    sized_value, sized_threads = _probe(worker(1, spec))
    assert (default_value, by_hand_value, sized_value) == ("None", "1", "1")
    if len(os.sched_getaffinity(0)) > 1:  # on one core, TF's default pool is one thread too
        assert sized_threads == by_hand_threads < default_threads, (sized_threads, by_hand_threads,
                                                                    default_threads)
