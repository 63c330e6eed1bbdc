"""Start-up checks that the workers of one job make together (over MPI, with mpi4py)."""
from parallax.errors import GraphMismatchError, LaunchError
from parallax.rewrite import fingerprint


def init_horovod(role):
    """hvd.init on MPI.COMM_WORLD, and check that mpirun started the job the spec describes."""
    from mpi4py import MPI
    import horovod.tensorflow as hvd
    hvd.init(comm=MPI.COMM_WORLD)
    if (hvd.rank(), hvd.size()) != (role.worker_id, role.num_workers):
        raise LaunchError(f"Horovod sees rank {hvd.rank()} of {hvd.size()}, but the launcher started worker "
                          f"{role.worker_id} of {role.num_workers}; start jobs with get_runner or parallax's launcher")
    return hvd


def check_same_graph(rewritten):
    """Every worker must have built the same rewritten graph; else raise GraphMismatchError on every worker."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    prints = comm.allgather(rewritten.fingerprint)
    differing = [r for r, fp in enumerate(prints) if fp != prints[0]]
    if not differing:
        return
    other = differing[0]
    mine = fingerprint.node_digests(rewritten.graph.as_graph_def())
    reference = comm.bcast(mine if comm.Get_rank() == 0 else None, root=0)
    theirs = comm.bcast(mine if comm.Get_rank() == other else None, root=other)
    node = fingerprint.first_difference(reference, theirs)
    raise GraphMismatchError(
        f"worker {other} built a different rewritten graph than worker 0; first differing node: {node!r}. Every "
        f"worker re-runs the same script and must build the same graph: make graph construction independent of "
        f"the worker (use parallax.shard for per-worker input, not worker-dependent ops)")
