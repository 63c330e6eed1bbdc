"""Collective backends: the ops that aggregate replicated variables' gradients and broadcast values between
workers. The rewrite asks the plan's backend for ops (`ops_for(plan)`) and knows nothing of either library.

- `horovod`: Horovod's MPI collectives (workers are MPI ranks; Horovod negotiates the order of collectives).
- `tf`: TensorFlow's own collective ops between the workers' TF servers (no Horovod build; any TF version).

`resolve(choice, dense_only)` turns Config.collective_backend into one of them. "auto" takes Horovod when it is
importable and built for this TensorFlow with MPI *and* every collective of the plan is a gradient's dense
allreduce (nothing gathered inside the step: no statistic of the batch, no fused batch norm's moments), else `tf`.
Measured side by side (benchmarks/results/backends.md): `tf` ran the LM and NMT (sparse rows allgathered, or
servers) at 1.12-1.60x Horovod's throughput with 24-82% less CPU per step; Horovod ran a ResNet of only dense
allreduces, which its tensor fusion batches, at 1.26-1.95x `tf`'s; and once the ResNet gathered its batch norms'
moments (14 gathers a step, each waiting for the one before), `tf` ran it at 1.6x Horovod's.
"""
import re

from parallax.config import COLLECTIVE_BACKENDS as CHOICES
from parallax.errors import ConfigError

HOROVOD, TF = "horovod", "tf"
NAMES = (HOROVOD, TF)
HOROVOD_INSTALL = ("HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 pip install --no-build-isolation horovod==0.28.1 "
                   "(after apt-get install libopenmpi-dev; Horovod builds for TensorFlow <= 2.17), or `make install`")


def horovod_problem():
    """None when Horovod's TensorFlow ops load here with MPI, else what is wrong."""
    try:
        from horovod.tensorflow import mpi_ops
    except Exception as e:  # ImportError, or the library failing to load against this TF (NotFoundError)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"horovod.tensorflow cannot be imported ({type(e).__name__}: {first})"
    if not mpi_ops.mpi_built():
        return "Horovod was built without MPI"
    return None


def resolve(choice, dense_only=False):
    """The backend a job with collectives uses for Config.collective_backend = `choice`; `dense_only`: every
    collective of the plan is a dense allreduce (no allgathered rows, no servers)."""
    if choice not in CHOICES:
        raise ConfigError(f"Config.collective_backend={choice!r} is not allowed; use one of "
                          f"{', '.join(repr(c) for c in CHOICES)}")
    if choice == TF or not (choice == HOROVOD or dense_only):
        return TF
    problem = horovod_problem()
    if choice == HOROVOD and problem:
        raise ConfigError(f"Config.collective_backend='horovod', but {problem}. Install it: {HOROVOD_INSTALL}; "
                          f"or use collective_backend='tf' (TensorFlow's own collectives)")
    return TF if problem else HOROVOD


def ops_for(plan, group=1):
    """The collective-op factory for a rewrite of `plan`: a fresh one per rewrite (the tf backend numbers its
    collectives in the order the passes create them, the same in every worker; `group` is their group key)."""
    if plan.backend == HOROVOD:
        from parallax.collectives.horovod_ops import HorovodCollectives
        return HorovodCollectives(plan.num_workers)
    if plan.backend == TF:
        from parallax.collectives.tf_ops import TFCollectives
        return TFCollectives(plan.num_workers, group)
    raise ConfigError(f"the plan's collective backend {plan.backend!r} is not one of {', '.join(NAMES)}")


def step_fence_for(plan, group=1):
    """The step fence of `plan`'s backend (step_fence.py), or None when its steps need none. TF's collectives run
    every worker's step under one step id (the group leader hands out a sequence, so that the workers' collectives
    meet), and when one worker's step ends TF cleans that step id up on every task it touched: also on a server or
    another worker where a slower worker's part of the same step still runs, which then fails with
    `Aborted: Cleanup <step id>`. Horovod's steps keep their own ids."""
    if plan.backend != TF or plan.num_workers < 2:
        return None
    from parallax.collectives.tf_ops import step_fence
    return lambda digest, name: step_fence(plan.num_workers, digest, name, group)


def rows_held_on_servers(backend):
    """Whether local aggregation keeps a host's rows on the host's parameter server rather than on its first
    worker's task. With TF's collectives: when a worker's step ends, TF cleans the shared step id up on every task
    the step touched, and on another worker's task that aborts that worker's own step, which no fence can prevent,
    as a step hands its fetched values to its client after its last op (step_fence_for says why). On a server the
    fence covers every worker's part of the step, as it covers a parameter server's updates."""
    return backend == TF


def collective_named(message, names):
    """The first op of `names` (collective op names) that a TF error message names in its `{{node ...}}` tags, or
    None."""
    for node in re.findall(r"\{\{node ([^}]+)\}\}", message or ""):
        if node in names:
            return node
    return None
