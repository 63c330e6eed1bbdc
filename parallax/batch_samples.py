"""Values of the graph's own tensors on random batches and on parts of them, so that how a value of the whole batch
relates to its parts' (a sum, a mean, neither) is found by running what the user wrote, not from op types
(data_counts.py's counts, loss_law.py's losses).

The tensors' data ancestors are copied into a throw-away graph (control edges only among them), every per-worker input
(placeholders, iterators, queues: rows are examples) becomes a placeholder fed random examples, and the variables
they read get their initial values. Each trial feeds a batch of 2 * HALF examples and, for every input alike,
each of PARTS: the whole batch, its reversal, its halves, and its first example and the rest.
"""
import numpy as np
import tensorflow as tf

from parallax import graph_utils
from parallax.batch_shapes import PIN, copy_nodes, per_worker_inputs

tf1 = tf.compat.v1
HALF = 4
TRIALS = 3
MAX_BYTES = 256 << 20  # of variables to initialize again in the throw-away session
TOO_LARGE = "of more than 256 MB, too large"
_CPU_ONLY = tf1.ConfigProto(device_count={"GPU": 0})
_BOUNDED = tf1.RunOptions(timeout_in_ms=60_000)
# The whole batch, its reversal, and two splits of it: its halves, and its first example and the rest. A count is
# the sum of any two parts'; a longest example's length seldom is for both splits.
PARTS = (lambda v: v, lambda v: v[::-1], lambda v: v[:HALF], lambda v: v[HALF:], lambda v: v[:1], lambda v: v[1:])
WHOLE_AND_SPLITS = (PARTS[0], PARTS[2], PARTS[3], PARTS[4], PARTS[5])


def sampled(graph, tensors, parts=PARTS, trials=TRIALS):
    """{tensor name: [its values (float64 arrays) on each of `parts`, per trial]}; {} when that cannot be run; None
    when the variables it needs hold more than MAX_BYTES."""
    variables = {v.op.name: v for v in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES) +
                 graph.get_collection(tf1.GraphKeys.LOCAL_VARIABLES)}
    needed = graph_utils.ancestors([t.op for t in tensors], False)
    read = [variables[op.name] for op in needed if op.name in variables]
    if sum((v.shape.num_elements() or MAX_BYTES) * v.dtype.base_dtype.size for v in read) > MAX_BYTES:
        return None
    initializers = [v.initializer for v in read]
    try:
        # A constant in a v1 while loop's body is in the loop's frame through a control edge from its pivot.
        subgraph = copy_nodes(graph.as_graph_def(), {op.name for op in graph_utils.ancestors(
            [t.op for t in tensors] + initializers, False)}, control=True)
        _seed_unseeded(subgraph)
        names = {n.name for n in subgraph.node}
        inputs = [t for t in per_worker_inputs(graph) if t.op.name in names]
        # On the CPU, and each run bounded: a blocking op of the user's (a queue outside the inputs) ends the check.
        with tf.Graph().as_default() as run, tf1.Session(graph=run, config=_CPU_ONLY) as session:
            feeds = {t.name: tf1.placeholder(t.dtype, [None] + t.shape.as_list()[1:]) for t in inputs}
            tf1.import_graph_def(subgraph, input_map=feeds, name="")
            session.run([run.get_operation_by_name(op.name) for op in initializers], options=_BOUNDED)
            fetches = [run.get_tensor_by_name(t.name) for t in tensors]
            samples = {t.name: [] for t in tensors}
            for trial in range(trials):
                rng = np.random.RandomState(trial)
                batch = {feeds[t.name]: _random(rng, t) for t in inputs}
                values = [session.run(fetches, {p: part(v) for p, v in batch.items()}, options=_BOUNDED)
                          for part in parts]
                for i, t in enumerate(tensors):
                    samples[t.name].append(tuple(np.asarray(v[i], np.float64) for v in values))
            return samples
    except Exception:  # noqa: BLE001  a check that cannot run the user's graph so is skipped, never the job
        return {}


def _seed_unseeded(graph_def):
    """Give every op left to a random seed (an initializer's draw in a graph without a seed) a fixed one, so that
    what is found is the same in every run."""
    for i, node in enumerate(graph_def.node):
        if "seed" in node.attr and "seed2" in node.attr and not node.attr["seed"].i and not node.attr["seed2"].i:
            node.attr["seed"].i, node.attr["seed2"].i = 1, i + 1


def _random(rng, t):
    return random_values(rng, t.dtype, [2 * HALF] + [PIN if d is None else d for d in t.shape.as_list()[1:]])


def random_values(rng, dtype, shape):
    """Random examples of `dtype`: small ints (valid ids of any table), words, booleans, or normal floats."""
    if dtype == tf.bool:
        return rng.rand(*shape) < 0.5
    if dtype == tf.string:  # words: a hash bucket's or a vocabulary's keys
        return rng.randint(0, 3, size=shape).astype(str).astype(object)
    if dtype.is_integer:
        return rng.randint(0, 3, size=shape).astype(dtype.as_numpy_dtype)
    return rng.randn(*shape).astype(dtype.as_numpy_dtype)
