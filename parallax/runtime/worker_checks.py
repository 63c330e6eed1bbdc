"""Start-up checks that the workers of one job make together: over MPI (mpi4py) when mpirun started them and
mpi4py is installed, else over the workers' TF servers (transport ssh: no MPI; `pip install ".[tf]"`: no mpi4py)."""
import importlib.util
import json
import os
import time

from parallax.errors import GraphMismatchError, LaunchError
from parallax.process.protocol import MPI_RANK_ENV
from parallax.rewrite import fingerprint

PEERS_TIMEOUT_S = 300.0


def init_horovod(role):
    """hvd.init on MPI.COMM_WORLD, and check that mpirun started the job the spec describes."""
    from mpi4py import MPI
    import horovod.tensorflow as hvd
    hvd.init(comm=MPI.COMM_WORLD)
    if (hvd.rank(), hvd.size()) != (role.worker_id, role.num_workers):
        raise LaunchError(f"Horovod sees rank {hvd.rank()} of {hvd.size()}, but the launcher started worker "
                          f"{role.worker_id} of {role.num_workers}; start jobs with get_runner or parallax's launcher")
    return hvd


def check_same_graph(rewritten, server=None, role=None, environ=None):
    """Every worker must have built the same rewritten graph; else raise GraphMismatchError on every worker.
    `environ`: the worker's PARALLAX_* settings and MPI's (protocol.ProcessContext.environ)."""
    environ = os.environ if environ is None else environ
    if checked_over(environ, server) == "mpi":
        found = _differing_worker_over_mpi(rewritten)
    else:
        found = _differing_worker_over_tf(rewritten, server, role)
    if found is None:
        return
    other, node = found
    raise GraphMismatchError(
        f"worker {other} built a different rewritten graph than worker 0; first differing node: {node!r}. Every "
        f"worker re-runs the same script and must build the same graph: make graph construction independent of "
        f"the worker (use parallax.shard for per-worker input, not worker-dependent ops)")


def checked_over(environ, server, has_mpi4py=None):
    """"mpi" or "tf": how the workers compare their graphs. Over MPI when mpirun started them and mpi4py is there
    (make install's environments), or when no TF server could carry it (Horovod's MPI mode); else over the workers'
    TF servers."""
    if server is None:
        return "mpi"
    if has_mpi4py is None:
        has_mpi4py = importlib.util.find_spec("mpi4py") is not None
    return "mpi" if has_mpi4py and any(k in environ for k in MPI_RANK_ENV) else "tf"


def _differing_worker_over_mpi(rewritten):
    try:
        from mpi4py import MPI
    except ImportError:
        raise LaunchError("the workers of this job compare their graphs over MPI, but mpi4py is not installed: "
                          "pip install mpi4py (it needs an MPI's headers: apt-get install libopenmpi-dev)") from None
    comm = MPI.COMM_WORLD
    prints = comm.allgather(rewritten.fingerprint)
    differing = [r for r, fp in enumerate(prints) if fp != prints[0]]
    if not differing:
        return None
    other = differing[0]
    mine = list(rewritten.node_digests)
    reference = comm.bcast(mine if comm.Get_rank() == 0 else None, root=0)
    theirs = comm.bcast(mine if comm.Get_rank() == other else None, root=other)
    return other, fingerprint.first_difference(reference, theirs)


def _differing_worker_over_tf(rewritten, server, role):
    """Each worker sends its fingerprint and node digests to a queue on worker 0's server; worker 0 compares them
    and sends every worker the verdict (JSON: null, or [worker, first differing node]). Worker 0's server may not
    listen yet: through an ssh forward that is a connection accepted and closed (UnavailableError), which TF does
    not retry, so sending is retried until PEERS_TIMEOUT_S. Once worker 0 has every report, every worker's server
    is up (each starts its own before it reports)."""
    import tensorflow as tf
    tf1 = tf.compat.v1
    n = role.num_workers
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:worker/task:0"):
        # Room for a report sent twice (a retry after an error that came once it had arrived): worker 0 keeps the
        # first of each worker's.
        reports = tf1.FIFOQueue(2 * n, [tf.int32, tf.string], shapes=[[], []], shared_name="parallax_graph_check")
        verdicts = [tf1.FIFOQueue(1, [tf.string], shapes=[[]], shared_name=f"parallax_graph_verdict_{w}")
                    for w in range(n)]
        rank_in, text_in = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.string, [])
        send = reports.enqueue([rank_in, text_in])
        collect = reports.dequeue()
        verdict_in = tf1.placeholder(tf.string, [])
        answer = [q.enqueue([verdict_in]) for q in verdicts]
        receive = verdicts[role.worker_id].dequeue()
    mine = {"fingerprint": rewritten.fingerprint,
            "nodes": list(rewritten.node_digests)}
    config = tf1.ConfigProto(device_filters=["/job:worker/task:0", f"/job:worker/task:{role.worker_id}"])
    with tf1.Session(server.target, graph=graph, config=config) as session:
        _send_until_delivered(session, send, {rank_in: role.worker_id, text_in: json.dumps(mine)}, tf)
        if role.is_chief:
            by_rank = {}
            while len(by_rank) < n:
                rank, text = session.run(collect)
                by_rank.setdefault(int(rank), json.loads(text))
            verdict = _verdict(by_rank)
            for op in answer:
                session.run(op, {verdict_in: json.dumps(verdict)})
        found = json.loads(session.run(receive))
    return tuple(found) if found else None


def _send_until_delivered(session, send, feed, tf):
    deadline = time.time() + PEERS_TIMEOUT_S
    while True:
        try:
            return session.run(send, feed)
        except tf.errors.UnavailableError as e:
            if time.time() > deadline:
                raise LaunchError(f"worker 0's TF server did not answer within {PEERS_TIMEOUT_S} s: "
                                  f"{e.message.splitlines()[0] if e.message else e}") from None
            time.sleep(0.5)


def _verdict(by_rank):
    differing = [r for r in sorted(by_rank) if by_rank[r]["fingerprint"] != by_rank[0]["fingerprint"]]
    if not differing:
        return None
    other = differing[0]
    reference = [tuple(x) for x in by_rank[0]["nodes"]]
    theirs = [tuple(x) for x in by_rank[other]["nodes"]]
    return [other, fingerprint.first_difference(reference, theirs)]
