"""TensorFlow's own collective ops (CollectiveReduceV2, CollectiveGatherV2) between the workers' TF servers.

Every worker builds the same rewritten graph, so numbering the collectives in the order the passes create them
gives every worker the same instance keys without talking. A collective instance fixes its shape when it first
runs, and every member must give the same shape, so:
- a tensor of static shape keeps one instance key for the whole job;
- any other (an IndexedSlices gradient's rows, whose count changes from step to step and from worker to worker)
  is padded to the longest worker's rows, and its collective takes a new instance key each step, from a local
  counter that every worker advances in the same order (every worker runs the same sequence of steps).
Broadcast is a gather of the root's row: every member's graph stays the same (a send on worker 0 and a receive
elsewhere would make the graphs differ), at the cost of N copies, which only initial values and scalars pay.
"""
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.ops import collective_ops

tf1 = tf.compat.v1
GROUP_KEY = 1  # a job's group, unless it runs on servers that outlive it (thread_job.py gives each job its own)
GROUP_LEADER = "/job:worker/replica:0/task:0"
DYNAMIC_BASE = 1 << 20  # static keys count up from 1, per-step keys from here
FENCE_BASE = 1 << 30  # step fences' keys (step_fence.py), from here to 2^31 - 1
MAX_DYNAMIC = 1 << 10  # collectives with per-step keys in one graph
STEPS_BEFORE_REUSE = (FENCE_BASE - DYNAMIC_BASE) // MAX_DYNAMIC  # then keys wrap (about a million steps)


# the dtypes CollectiveGatherV2 takes
_GATHERED = {d: d for d in (tf.float16, tf.float32, tf.float64, tf.int32, tf.int64)}


class TFCollectives:
    name = "tf"

    def __init__(self, num_workers, group=GROUP_KEY):
        self.num_workers, self.group = num_workers, group
        self._static, self._dynamic = 0, 0
        self._created = []

    def allreduce_sum(self, tensor, name):
        total = collective_ops.all_reduce_v2(tensor, self.num_workers, self.group, self._key(tensor, name),
                                             merge_op="Add", final_op="Id", communication_hint="auto", name=name)
        self._created.append(total.op.name)
        return total

    def allgather(self, tensor, name):
        """Every worker's `tensor` (any first dimension), concatenated in worker order."""
        if tensor.shape.is_fully_defined():
            return self._gather(tensor, self._next_static(), name)
        with tf.name_scope(name):
            rows = tf.shape(tensor, out_type=tf.int32)[:1]
            counts = self._gather(rows, self._next_static(), "counts")
            longest = tf.maximum(tf.reduce_max(counts), 1)  # TF 2.15's gather of an empty tensor crashes
            padding = [[0, longest - rows[0]]] + [[0, 0]] * (tensor.shape.rank - 1)
            gathered = self._gather(tf.pad(tensor, padding), self._per_step_key("rows"), "padded")
            real = tf.reshape(tf.sequence_mask(counts, longest), [-1])
            return tf.boolean_mask(gathered, real, name="rows")

    def allgather_group(self, tensors, name):
        """[every worker's `t`, concatenated in worker order, for t in `tensors`] in two collectives whatever their
        number (one gather of the row counts, one of the padded rows), not two each: every tensor (one dtype, row
        shapes known) is flattened into one buffer per worker, and each worker's buffer is cut back by the counts,
        one slice per worker and tensor (per-element labels to partition by cost the LM a third of its step)."""
        if len(tensors) == 1:
            return [self.allgather(tensors[0], name)]
        n, widths = self.num_workers, [t.shape[1:].num_elements() for t in tensors]
        with tf.name_scope(name):
            own = tf.stack([tf.shape(t, out_type=tf.int32)[0] for t in tensors])
            counts = tf.reshape(self._gather(own, self._next_static(), "counts"), [n, len(tensors)])
            elements = counts * tf.constant(widths, tf.int32)  # [worker, tensor]
            offsets = tf.math.cumsum(elements, axis=1, exclusive=True)
            flat = tf.concat([tf.reshape(t, [-1]) for t in tensors], axis=0)
            longest = tf.maximum(tf.reduce_max(tf.reduce_sum(elements, axis=1)), 1)  # TF 2.15: none empty
            padded = tf.pad(flat, [[0, longest - tf.size(flat, out_type=tf.int32)]])
            every = tf.reshape(self._gather(padded, self._per_step_key("rows"), "padded"), [n, longest])
            out = []
            for k, t in enumerate(tensors):
                pieces = [tf.slice(every, [w, offsets[w, k]], [1, elements[w, k]]) for w in range(n)]
                out.append(tf.reshape(tf.concat(pieces, axis=1), tf.concat([[-1], tf.shape(t)[1:]], 0),
                                      name=f"rows_{k}"))
            return out

    def broadcast(self, tensor, name):
        """Worker 0's `tensor`, in every worker (the others give a tensor of the same shape). Any dtype: the
        gather takes only floats and 32/64-bit integers, so others (a tf.cond's bool predicate) travel cast."""
        with tf.name_scope(name):
            carrier = _GATHERED.get(tensor.dtype.base_dtype) or (tf.float32 if tensor.dtype.is_floating else tf.int32)
            sent = tensor if carrier == tensor.dtype.base_dtype else tf.cast(tensor, carrier)
            first = self._gather(tf.expand_dims(sent, 0), self._key(tensor, "gather"), "gather")[0]
            if carrier != tensor.dtype.base_dtype:
                first = tf.cast(first, tensor.dtype.base_dtype)
            return tf.identity(first, name="value")

    def created(self):
        """The names of the collective ops made since the last call (every worker must run them together)."""
        names, self._created = self._created, []
        return names

    # ---- keys -----------------------------------------------------------------------------------------------------
    def _gather(self, tensor, key, name):
        gathered = collective_ops.all_gather_v2(tensor, self.num_workers, self.group, key, communication_hint="auto",
                                                name=name)
        self._created.append(gathered.op.name)
        return gathered

    def _key(self, tensor, name):
        return self._next_static() if tensor.shape.is_fully_defined() else self._per_step_key(name)

    def _next_static(self):
        self._static += 1
        return self._static

    def _per_step_key(self, name):
        """DYNAMIC_BASE + j + MAX_DYNAMIC * (steps this collective ran before), from a local counter."""
        j = self._dynamic
        if j >= MAX_DYNAMIC:
            raise ValueError(f"more than {MAX_DYNAMIC} collectives of changing shape in one graph")
        self._dynamic += 1
        counter = tf1.Variable(0, dtype=tf.int32, trainable=False, collections=[tf1.GraphKeys.LOCAL_VARIABLES],
                              name=f"{name}_runs", use_resource=True)
        runs = tf.math.floormod(counter.assign_add(1) - 1, STEPS_BEFORE_REUSE)
        return DYNAMIC_BASE + j + MAX_DYNAMIC * runs


def step_fence(num_workers, digest, name, group=GROUP_KEY):
    """A collective of a scalar that every worker runs at the end of the step of the fetch set `digest` (its key
    comes from the digest, so workers agree whatever order they first ran their fetch sets in). A gather, not an
    allreduce: either ends in a worker only once every worker has given its value, and TF's ring gather does it in
    N-1 transfers a worker, where its ring allreduce takes 2(N-1)."""
    key = FENCE_BASE + int(digest, 16) % ((1 << 31) - 1 - FENCE_BASE)
    return collective_ops.all_gather_v2(tf.constant([0], tf.int32), num_workers, group, key,
                                        communication_hint="auto", name=name).op


def server_config():
    """The ConfigProto every worker's server and session need: without a group leader, TF's collectives in a v1
    Session wait forever for their group to form."""
    config = tf1.ConfigProto()
    config.experimental.collective_group_leader = GROUP_LEADER
    # The step fence (runtime/step_fence.py) waits for every op of the worker's step through control edges, and
    # Grappler's dependency optimizer prunes those it finds implied through another path: a fence that waited for
    # the release queue, itself after a server's update, no longer waited for the update's own message to the
    # worker, and another worker's step ended and cleaned the step id up on the server before that message left
    # (Aborted: Cleanup at the update's _Send; 6 of 176 calibration jobs in PS with TF's collectives, 0 of 180 since).
    config.graph_options.rewrite_options.dependency_optimization = rewriter_config_pb2.RewriterConfig.OFF
    return config
