"""One device's run of a job's first steps (Config.check_steps, step_check.py): the user's own graph, imported again
with its per-worker inputs opened to any number of examples, started from the job's state and run on the
concatenation of the workers' actual batches, worker 0's first. What it holds then is what one device with the
global batch holds: the answer a parallax job must give.

The inputs are replaced, not the graph: a fed input is fed the concatenated batch; an input the graph reads itself
(an iterator's get_next, a queue's dequeue) reads it from a queue of this replay, one queue per epoch, closed where
the job's input ended. A step whose input ends thus runs as one device runs it: what does not read the batch may
have run when the end stops it, as TF runs it.
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops, gen_state_ops

from parallax.core import graph_utils
from parallax.analysis.row_keys import reads_input

tf1 = tf.compat.v1


class ReplayError(Exception):
    """The graph cannot be run on the global batch (a batch size fixed in the graph, e.g. a reshape to [b, ...])."""


BLOCKS, INTERLEAVED = "blocks", "interleaved"  # as plan.batch_layout (batch_draws.py)


def positions(sizes, layout):
    """Where each worker's examples sit in one device's batch (`sizes`: each worker's count): worker 0's block
    first ("blocks": fed rows, a dataset sharded over batches), or example e of worker i after the e-th examples of
    workers before it ("interleaved": a dataset sharded element-wise, worker i's examples are i, i+N, ...)."""
    if layout == BLOCKS:
        starts = np.cumsum([0] + list(sizes[:-1]))
        return [np.arange(size, dtype=np.int64) + start for size, start in zip(sizes, starts)]
    where = {key: p for p, key in enumerate(sorted((e, i) for i, size in enumerate(sizes) for e in range(size)))}
    return [np.array([where[(e, i)] for e in range(size)], dtype=np.int64) for i, size in enumerate(sizes)]


def batch_of(values, role, layout=BLOCKS):
    """One device's batch from the workers' parts of one input tensor, in worker order. `role`: "batch" (rows are
    examples: placed as `layout` says, other dimensions padded with zeros to the longest) or "same" (not per
    example: worker 0's)."""
    values = [np.asarray(v) for v in values]
    if role == "same" or len(values) == 1:
        return values[0]
    widest = np.max([v.shape for v in values], axis=0)
    padded = [np.pad(v, [(0, 0)] + [(0, int(w) - s) for w, s in zip(widest[1:], v.shape[1:])]) for v in values]
    joined = np.empty((sum(len(v) for v in padded),) + tuple(int(w) for w in widest[1:]), dtype=values[0].dtype)
    for part, where in zip(padded, positions([len(v) for v in padded], layout)):
        joined[where] = part
    return joined


def sparse_batch_of(indices, values, dense_shapes, layout=BLOCKS):
    """One device's (indices, values, dense_shape) of a SparseTensor from the workers' parts: each entry's example
    renumbered to its place in the global batch, entries in row-major order, the dense shape the sum of the
    examples and the largest of the other dimensions."""
    dense_shapes = [np.asarray(d) for d in dense_shapes]
    where = positions([int(d[0]) for d in dense_shapes], layout)
    parts = []
    for part, place in zip(indices, where):
        part = np.array(part, copy=True)
        if part.size:
            part[:, 0] = place[part[:, 0]]
        parts.append(part)
    joined, joined_values = np.concatenate(parts, axis=0), np.concatenate([np.asarray(v) for v in values], axis=0)
    order = np.lexsort(joined.T[::-1]) if joined.size else np.arange(len(joined))
    shape = np.concatenate([[sum(int(d[0]) for d in dense_shapes)], np.max([d[1:] for d in dense_shapes], axis=0)])
    return joined[order], joined_values[order], shape.astype(dense_shapes[0].dtype)


class Replay:
    """The user's graph on one device. `source`: the user's tf.Graph; `variables`: {variable op name: (kind
    "ref"|"resource", dtype)} to set and compare; `fed`: names of the fed per-worker inputs; `read`: names of the
    per-worker input tensors the graph reads itself; `initializers`: op names that initialize what is not set
    (tables, variables not compared); `epochs`: how many queues of read inputs the replay needs."""

    def __init__(self, source, variables, fed, read, initializers, epochs=1):
        graph_def = source.as_graph_def()
        tensor = source.get_tensor_by_name
        self.graph = tf.Graph()
        with self.graph.as_default():
            self._fed = {name: tf1.placeholder(tensor(name).dtype, _open_shape(tensor(name)),
                                               name=f"parallax_replay/fed_{k}") for k, name in enumerate(fed)}
            self._epoch = tf1.placeholder(tf.int32, [], name="parallax_replay/epoch")
            self._sources = [_Source(op, names, epochs, self._epoch, tensor) for op, names in _by_op(read).items()]
            input_map = dict(self._fed)
            for source in self._sources:
                input_map.update(source.outputs)
            self._own = set(self.graph.get_operations())  # what stands in for the inputs
            try:
                tf1.import_graph_def(_without_devices(graph_def), input_map=input_map, name="")
            except ValueError as e:
                raise ReplayError(f"the graph does not take a batch of another size ({e})") from None
            self._set, self._values = {}, {}
            for name, (kind, dtype) in variables.items():
                self._set[name] = self._setter(name, kind, dtype)
                self._values[name] = self.graph.get_tensor_by_name(f"{name}:0") if kind == "ref" else \
                    gen_resource_variable_ops.read_variable_op(self.graph.get_tensor_by_name(f"{name}:0"), dtype)
            self._initializers = [self.graph.get_operation_by_name(n) for n in initializers]
        self._checked_fetches = set()
        config = tf1.ConfigProto(allow_soft_placement=True)
        self.session = tf1.Session(graph=self.graph, config=config)

    def _setter(self, name, kind, dtype):
        value = tf1.placeholder(dtype, name=f"parallax_replay/value_{len(self._set)}")
        target = self.graph.get_tensor_by_name(f"{name}:0")
        op = gen_state_ops.assign(target, value, validate_shape=False) if kind == "ref" else \
            gen_resource_variable_ops.assign_variable_op(target, value)
        return value, op

    def start(self, state):
        """Initialize, then set every variable to the job's starting `state` {name: value}."""
        if self._initializers:
            self.session.run(self._initializers)
        feeds = {self._set[name][0]: value for name, value in state.items() if name in self._set}
        self.session.run([self._set[name][1] for name in state if name in self._set], feed_dict=feeds)

    def step(self, fetches, fed, read, extra_feeds, epoch, ended):
        """One step: run `fetches` (names) with the fed inputs' global batches `fed` {name: value}, the read inputs'
        `read` {name: value} (none when `ended`: the input ends in this step) and the other feeds. Returns whether
        the step ran to its end (False: its input ended, as in the job)."""
        for source in self._sources:
            if ended:
                self.session.run(source.close[epoch])
            elif all(n in read for n in source.names):
                self.session.run(source.enqueue[epoch], dict(zip(source.values, [read[n] for n in source.names])))
        feeds = {self._fed[name]: value for name, value in fed.items() if name in self._fed}
        feeds.update({self.graph.get_tensor_by_name(name): value for name, value in extra_feeds.items()})
        if self._sources:
            feeds[self._epoch] = epoch
        targets = [self.graph.as_graph_element(n, allow_tensor=True, allow_operation=True) for n in fetches
                   if graph_utils.holds(self.graph, n)]
        self._check_reads_nothing_itself(targets)
        try:
            self.session.run(targets, feed_dict=feeds)
        except tf.errors.OutOfRangeError:
            if not ended:
                raise
            return False
        except tf.errors.InvalidArgumentError as e:
            raise ReplayError(f"the graph does not run on the global batch: {_first_cause(e.message)}; the batch size "
                              f"is written into the graph (an input shaped [b, ...], a dataset batched with "
                              f"drop_remainder=True, a reshape to b): give the inputs a first dimension of None to "
                              f"check it") from None
        return True

    def _check_reads_nothing_itself(self, targets):
        """The replay must take every per-worker input from the job's records: an input op it would run itself
        (an iterator whose outputs were not recorded) reads the graph's own pipeline, not one device's batch."""
        key = tuple(sorted(getattr(t, "name", str(t)) for t in targets))
        if key in self._checked_fetches:
            return
        ops = graph_utils.ancestors([getattr(t, "op", t) for t in targets])
        own = sorted(op.name for op in ops if reads_input(op) and not op.type.startswith("Placeholder") and
                     op not in self._own and not graph_utils.carries_step_state(op))
        if own:
            raise ReplayError(f"the step reads {', '.join(own[:3])} where the check could not record what each "
                              f"worker read (inside a loop or a cond)")
        self._checked_fetches.add(key)

    def values(self):
        return self.session.run(self._values)

    def close(self):
        self.session.close()


class _Source:
    """What stands in for one op the graph reads its input from (an iterator's get_next): a queue per epoch, of
    the values its outputs `names` had in each step; closed where the job's input ended."""

    def __init__(self, op_name, names, epochs, epoch, tensor):
        self.names = names
        dtypes = [tensor(n).dtype for n in names]
        scope = f"parallax_replay/{op_name}"
        queues = [tf1.FIFOQueue(2, dtypes, name=f"{scope}/epoch_{e}") for e in range(epochs)]
        self.values = [tf1.placeholder(d, name=f"{scope}/value_{k}") for k, d in enumerate(dtypes)]
        self.enqueue = [q.enqueue(self.values) for q in queues]
        self.close = [q.close() for q in queues]
        dequeued = tf1.QueueBase.from_list(epoch, queues).dequeue()
        dequeued = [dequeued] if isinstance(dequeued, tf.Tensor) else list(dequeued)
        for name, t in zip(names, dequeued):
            t.set_shape(_open_shape(tensor(name)))
        self.outputs = dict(zip(names, dequeued))


def _by_op(names):
    grouped = {}
    for name in names:
        grouped.setdefault(name.rsplit(":", 1)[0], []).append(name)
    return grouped


def _first_cause(message):
    """What failed, from a TF error: its node and its reason (TF 2.15 opens with "Graph execution error:" and a
    stack; the node and the reason follow)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    node = next((k for k, line in enumerate(lines) if line.startswith("Node:")), None)
    if node is not None and node + 1 < len(lines):
        return f"{lines[node + 1][:240]} ({lines[node][5:].strip()})"
    return (lines or [""])[-1][:300]


def _open_shape(tensor):
    """The tensor's static shape with its first dimension open: any number of examples."""
    shape = tensor.shape
    if shape.rank is None or shape.rank == 0:
        return shape
    return tf.TensorShape([None] + shape.as_list()[1:])


def _without_devices(graph_def):
    stripped = type(graph_def)()
    stripped.CopyFrom(graph_def)
    for node in stripped.node:
        node.device = ""
    return stripped
