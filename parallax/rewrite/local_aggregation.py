"""Local aggregation (LA) of sparse gradients: the workers of one host apply their gradients to an accumulator on
that host's local chief (its first worker), which takes their sum and pushes it to the server once per step.
Server traffic for the variable shrinks by the number of workers per host. A sum of sums is the sum, so the result
is unchanged (up to summation order)."""
import tensorflow as tf

tf1 = tf.compat.v1


def worker_device(task):
    return f"/job:worker/task:{task}"


def local_chiefs(worker_hosts):
    """{worker id: the first worker on its host}."""
    first = {}
    for w, h in enumerate(worker_hosts):
        first.setdefault(h, w)
    return {w: first[h] for w, h in enumerate(worker_hosts)}


def sparse_contributions(plan, name, slices, shape, server_acc, server_device, local, never_stale):
    """How each worker contributes `slices` (its raw IndexedSlices) to `server_acc`.

    Returns ({worker id: ops that worker runs}, how many contributions the server accumulator waits for).
    Without `local` aggregation every worker applies directly; with it, hosts with several workers go through
    their local chief, and the server waits for one contribution per host."""
    n = plan.num_workers
    chiefs = local_chiefs(plan.worker_hosts)
    on_host = {}
    for w, h in enumerate(plan.worker_hosts):
        on_host.setdefault(h, []).append(w)
    direct = None
    contributions = {}
    for h, workers in sorted(on_host.items()):
        if not local or len(workers) == 1:
            if direct is None:
                with tf.device(server_device):
                    direct = server_acc.apply_indexed_slices_grad(slices, local_step=never_stale, name="apply")
            contributions.update({w: (direct,) for w in workers})
            continue
        chief = chiefs[workers[0]]
        with tf.name_scope(f"host_{h}"):
            with tf.device(worker_device(chief)):
                acc = tf1.SparseConditionalAccumulator(slices.values.dtype, shape=shape, reduction_type="SUM",
                                                       shared_name=f"parallax_acc/{name}/host_{h}",
                                                       name="accumulator")
                apply = acc.apply_indexed_slices_grad(slices, local_step=never_stale, name="apply")
                with tf.control_dependencies([apply]):
                    host_sum = acc.take_indexed_slices_grad(len(workers), name="take")
            with tf.device(server_device):
                push = server_acc.apply_indexed_slices_grad(host_sum, local_step=never_stale, name="push")
        for w in workers:
            contributions[w] = (apply, push) if w == chief else (apply,)
    required = len(on_host) if local else n
    return contributions, required
