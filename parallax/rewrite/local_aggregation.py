"""How the IndexedSlices gradient of a server variable reaches its server: every worker's rows, concatenated in
worker order. That is what one device's batch of N*b gives (up to the order of rows), so every op downstream (the
optimizer's own de-duplication, a global norm that squares each row, a user's scaling) sees the single-device value.

Rows travel through FIFO queues on the server, one per contributor, dequeued in contributor order by the take.
With local aggregation (LA), the workers of a host with several workers put their rows in queues on that host's
local chief (its first worker), which concatenates them and sends one message per step to the server. With TF's
collectives the queues, and the concatenation, are on the host's own parameter server instead
(Plan.rows_held_on_servers); the local chief's step still takes them.
"""
import tensorflow as tf

from parallax.plan.records import ps_device

tf1 = tf.compat.v1
ROW_QUEUE_CAPACITY = 2  # one step's rows, and the next step's while the chief still takes


def worker_device(task):
    return f"/job:worker/task:{task}"


def local_chiefs(worker_hosts):
    """{worker id: the first worker on its host}."""
    first = {}
    for w, h in enumerate(worker_hosts):
        first.setdefault(h, w)
    return {w: first[h] for w, h in enumerate(worker_hosts)}


def _row_queue(rows, name, shared_name):
    return tf1.FIFOQueue(ROW_QUEUE_CAPACITY, [r.dtype for r in rows], shared_name=shared_name, name=name)


def _concat(queues, rows, after=()):
    """Dequeue one message from each queue, in order: their rows concatenated component by component (values,
    int64 indices, and int64 keys when rows are merged), and the dequeue ops (whoever runs them takes the rows).
    The dequeues wait for `after`."""
    with tf.control_dependencies(after):
        parts = [q.dequeue() for q in queues]
    for part in parts:
        for got, like in zip(part, rows):
            got.set_shape(tf.TensorShape([None]).concatenate(like.shape[1:]))
    return [tf.concat([p[k] for p in parts], 0) for k in range(len(rows))], [p[0].op for p in parts]


def gather_rows(plan, scope, values, indices, server_device, local, keys=None):
    """Every worker's rows of one sparse gradient, concatenated on `server_device`, with their keys if given.

    Returns ({worker id: ops that worker runs to contribute}, ([values, int64 indices(, keys)], the take ops) on
    the server, where the take ops are what only the chief may run). Without `local` aggregation each worker
    enqueues straight to its own queue on the server."""
    on_host = {}
    for w, holder in enumerate(plan.holders):
        on_host.setdefault(holder, []).append(w)
    # Each worker's own rows are made on its own task: with TF's collectives every worker runs the step under one
    # step id, and the same op run by two workers on a server would send its value to another task under one
    # rendezvous key for both (one worker's rows taken for another's).
    with tf1.device(None):
        rows = (values, tf.cast(indices, tf.int64)) + (() if keys is None else (keys,))
    contributions, server_queues = {}, []
    for holder, workers in sorted(on_host.items()):
        h = plan.worker_hosts[holder]
        if local and len(workers) > 1:
            chief = holder
            with tf.name_scope(f"host_{h}"):
                with tf.device(ps_device(h) if plan.rows_held_on_servers else worker_device(chief)):
                    host_queues = [_row_queue(rows, f"rows_{w}", f"parallax_rows/{scope}/host_{h}/{w}")
                                   for w in workers]
                    puts = {w: q.enqueue(rows, name=f"put_{w}") for w, q in zip(workers, host_queues)}
                    # The host's first worker takes its mates' rows only once its own are in: a step of its that
                    # fails before (its input at its end) takes none that a mate already in its next step put.
                    host_rows = _concat(host_queues, rows, after=[puts[chief]])[0]
                with tf.device(server_device):
                    queue = _row_queue(rows, "rows", f"parallax_rows/{scope}/host_{h}")
                    push = queue.enqueue(host_rows, name="push")
            server_queues.append(queue)
            for w in workers:
                contributions[w] = (puts[w], push) if w == chief else (puts[w],)
            continue
        for w in workers:
            with tf.device(server_device):
                queue = _row_queue(rows, f"rows_{w}", f"parallax_rows/{scope}/worker_{w}")
                contributions[w] = (queue.enqueue(rows, name=f"put_{w}"),)
            server_queues.append(queue)
    with tf.device(server_device):
        return contributions, _concat(server_queues, rows)
