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

from parallax import graph_utils

tf1 = tf.compat.v1


class ReplayError(Exception):
    """The graph cannot be run on the global batch (a batch size fixed in the graph, e.g. a reshape to [b, ...])."""


def batch_of(values, role):
    """One device's batch from the workers' parts of one input tensor, in worker order. `role`: "batch" (rows are
    examples: concatenated, other dimensions padded with zeros to the longest), "indices" / "dense_shape" (a
    SparseTensor's: entries renumbered past the earlier workers' examples), or "same" (not per example: worker 0's)."""
    values = [np.asarray(v) for v in values]
    if role == "same" or len(values) == 1:
        return values[0]
    if role == "dense_shape":
        return np.concatenate([[sum(int(v[0]) for v in values)], np.max([v[1:] for v in values], axis=0)]).astype(
            values[0].dtype)
    if role == "indices":
        raise ValueError("indices are renumbered with their dense shapes: use sparse_batch_of")
    widest = np.max([v.shape for v in values], axis=0)
    padded = [np.pad(v, [(0, 0)] + [(0, int(w) - s) for w, s in zip(widest[1:], v.shape[1:])]) for v in values]
    return np.concatenate(padded, axis=0)


def sparse_batch_of(indices, dense_shapes):
    """One device's indices of a SparseTensor: each worker's entries, their example renumbered past the earlier
    workers' examples (dense_shape[0] of each)."""
    offset, parts = 0, []
    for part, shape in zip(indices, dense_shapes):
        part = np.array(part, copy=True)
        if part.size:
            part[:, 0] += offset
        parts.append(part)
        offset += int(np.asarray(shape)[0])
    return np.concatenate(parts, axis=0)


class Replay:
    """The user's graph on one device. `source`: the user's tf.Graph; `variables`: {variable op name: (kind
    "ref"|"resource", dtype)} to set and compare; `fed`: names of the fed per-worker inputs; `read`: names of the
    per-worker input tensors the graph reads itself; `initializers`: op names that initialize what is not set
    (tables, variables not compared); `epochs`: how many queues of read inputs the replay needs."""

    def __init__(self, source, variables, fed, read, initializers, epochs=1):
        graph_def = source.as_graph_def()
        tensor = source.get_tensor_by_name
        self.graph = tf.Graph()
        self._variables = variables
        with self.graph.as_default():
            self._fed = {name: tf1.placeholder(tensor(name).dtype, _open_shape(tensor(name)),
                                               name=f"parallax_replay/fed_{k}") for k, name in enumerate(fed)}
            self._read = list(read)
            self._epoch = tf1.placeholder(tf.int32, [], name="parallax_replay/epoch")
            dtypes = [tensor(name).dtype for name in self._read]
            self._queues = [tf1.FIFOQueue(2, dtypes, name=f"parallax_replay/epoch_{e}") for e in range(epochs)] \
                if self._read else []
            self._values_in = [tf1.placeholder(d, name=f"parallax_replay/read_{k}") for k, d in enumerate(dtypes)]
            self._enqueue = [q.enqueue(self._values_in) for q in self._queues]
            self._close = [q.close() for q in self._queues]
            dequeued = tf1.QueueBase.from_list(self._epoch, self._queues).dequeue() if self._read else []
            dequeued = [dequeued] if isinstance(dequeued, tf.Tensor) else list(dequeued)
            for name, t in zip(self._read, dequeued):
                t.set_shape(_open_shape(tensor(name)))
            input_map = dict(self._fed)
            input_map.update(zip(self._read, dequeued))
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
        if self._queues:
            if ended:
                self.session.run(self._close[epoch])
            else:
                self.session.run(self._enqueue[epoch], dict(zip(self._values_in, [read[n] for n in self._read])))
        feeds = {self._fed[name]: value for name, value in fed.items() if name in self._fed}
        feeds.update({self.graph.get_tensor_by_name(name): value for name, value in extra_feeds.items()})
        if self._queues:
            feeds[self._epoch] = epoch
        targets = [self.graph.as_graph_element(n, allow_tensor=True, allow_operation=True) for n in fetches
                   if graph_utils.holds(self.graph, n)]
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

    def values(self):
        return self.session.run(self._values)

    def close(self):
        self.session.close()


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
