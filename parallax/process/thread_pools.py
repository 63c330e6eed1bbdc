"""A launched worker's share of its machine's cores, for TensorFlow's intra-op pool. Plain Python: no TensorFlow.

TF sizes each process's intra-op pool (the threads that split one op's work: a matmul, a convolution) to every core
of the machine. k workers on one machine then run k pools as large as the machine, and their threads preempt one
another in the middle of each op. Measured on 2 cores with 4 workers (the ResNet in MPI,
benchmarks/results/thread_pools.md), a pool of one thread each spends less CPU per step and makes more images a
second than TF's default.

So `import parallax`, in a process the launcher started as a worker, sets TF_NUM_INTRAOP_THREADS to the cores this
process may run on over the workers the spec puts on its machine (at least 1). TF reads the variable when it makes
the pool, at the first session or eager context, which comes after the import in any script that uses parallax. A
value the user set (in the environment, or in the session's ConfigProto, which wins over the variable) is kept. The
inter-op pool (whole ops run side by side) is left as TF makes it: with one thread there, an op that blocks its
thread waiting for another op of the same step could wait forever.
"""
import os

from parallax.errors import ParallaxError
from parallax.process.protocol import ENV_RESOURCE_SPEC, current_role
from parallax.process.resource_spec import ResourceSpec

INTRA_OP = "TF_NUM_INTRAOP_THREADS"


def cores_here():
    """The cores this process may run on (its affinity, which a container or `taskset` may narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_on_machine(spec, worker_id):
    """How many of the spec's workers share a machine with `worker_id`: its host's slots, and when that host is this
    machine (a loopback address or its own name), every other such host's too (two loopback hosts are one machine)."""
    host = spec.hosts[spec.host_of_worker(worker_id)]
    if not host.is_local:
        return host.num_slots
    return sum(h.num_slots for h in spec.hosts if h.is_local)


def pool_sizes(environ, cores):
    """The variables to set for a process with `environ` on `cores` cores: {} unless it is a launched worker whose
    spec is readable, and never one the environment already sets."""
    if environ.get(INTRA_OP):
        return {}
    try:
        role = current_role(environ)
        if role.role != "worker" or not environ.get(ENV_RESOURCE_SPEC):
            return {}
        spec = ResourceSpec.load(environ[ENV_RESOURCE_SPEC])
        sharing = workers_on_machine(spec, role.worker_id)
    except (ParallaxError, IndexError):
        return {}  # the worker's own start reports a bad role or spec, with its message
    return {INTRA_OP: str(max(1, cores // max(1, sharing)))}


def size_this_worker():
    """Called by `import parallax`: set this process's pool sizes if it is a launched worker. Returns what it set."""
    sizes = pool_sizes(os.environ, cores_here())
    os.environ.update(sizes)
    return sizes
