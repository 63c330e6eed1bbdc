"""Any fetch set that needs an aggregated value or writes server-held state is a synchronized step. When a fetch
set first runs, its variant for this worker's role is derived from the rewritten graph and cached:

  the chief    runs the fetches as one device would, plus its own contributions to the aggregations they read;
               when the step writes server state or another worker fetches a value only the chief has, it then
               enqueues a release (with those values) for each other worker;
  worker i     runs the part of the step that needs no chief-only value: its forward and backward pass, its
               contributions, the collectives, the writes of state it holds itself; then it arrives (if the step
               writes server state: the chief's writes wait for every arrival) and waits for its release.

Every worker must run the same sequence of synchronized steps; sync_passes.py prepared the graph for this.
"""
import dataclasses
import hashlib
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

from parallax.core import graph_utils, v1_control_flow
from parallax.runtime import step_fence
from parallax.errors import UnsupportedError
from parallax.rewrite.sync_passes import SYNC_SCOPE

tf1 = tf.compat.v1
RELEASE_CAPACITY = 1000  # steps without server writes do not wait for their release; they may run ahead


@dataclasses.dataclass
class Variant:
    """What this worker passes to Session.run for one fetch set, and how the user's leaves come back."""
    leaves: List[Any]  # per user leaf: the element to run, or None (an op only the chief runs)
    targets: List[tf.Operation]
    feeds: Dict[tf.Tensor, np.ndarray]
    released: Optional[List[tf.Tensor]] = None  # values the chief sent: [token, value of leaf k, ...]
    from_chief: Dict[int, int] = dataclasses.field(default_factory=dict)  # leaf index -> index in `released`
    synchronized: bool = False
    ancestors: frozenset = frozenset()
    digest: str = ""  # the fetch set's, the same in every worker that fetches the same elements
    name: str = ""  # its first fetch, for messages
    # Ops in a v1 cond's branch that the step runs: a branch not taken is dead, and so is whatever waits for an op
    # in it, so nothing (arrival, release, fence) waits for these; the fetched cond's join does.
    branch_targets: List[tf.Operation] = dataclasses.field(default_factory=list)


def fetch_digest(key):
    return hashlib.sha256("\0".join(sorted(key)).encode()).hexdigest()[:16]


class SyncSteps:
    def __init__(self, graph, sync_graph, worker_id, num_workers, fence_op=None):
        self._g, self._sync = graph, sync_graph
        self._fence_op = fence_op  # the backend's step fence (step_fence.py), or None
        self._w, self._n = worker_id, num_workers
        op = graph.get_operation_by_name
        # A worker's copy of a chief-only value comes from the chief's send through a queue, not by an edge: the
        # graph walks that decide who runs what follow it as one.
        self._send_of = {op(copy): op(send) for _, copy, send in sync_graph.broadcasts}
        self._copy_of = {send: copy for copy, send in self._send_of.items()}
        self._worker_index = graph.get_tensor_by_name(sync_graph.worker_index)
        self._deferred = {}
        for name, control in sync_graph.deferred:
            self._deferred.setdefault(op(name), []).append(op(control))
        self._aggregations = [({op(o) for o in a.outputs}, [op(c) for c in a.contributions.get(worker_id, ())])
                              for a in sync_graph.aggregations]
        self._gated = {op(w) for w in sync_graph.gated_writes}
        self._unsupported = dict(sync_graph.unsupported)
        self._collectives = {op(c) for c in sync_graph.collectives}
        self.chief_only = self._chief_only({op(r) for r in sync_graph.roots})
        self._readiness = op(sync_graph.readiness)
        # through the chief's sends too; only the chief's variants read it
        self._after_readiness = graph_utils.closure([self._readiness], lambda o: graph_utils.consumers(o) + (
            [self._copy_of[o]] if o in self._copy_of else [])) if worker_id == 0 else frozenset()
        self._in_loops = v1_control_flow.v1_loop_ops(graph)
        # A v1 cond's branch not taken is dead, and so is anything that waits for an op in it: a step may run
        # such ops (a replica's update under a loss scale's finiteness check), but its arrival and its release
        # never wait for them; they wait for the cond's join through the fetches.
        self._in_branches = v1_control_flow.v1_cond_ops(graph) - self._in_loops
        self._cache = {}

    def variant(self, key, leaves):
        """The cached variant of a fetch set: `leaves` are the mapped fetch leaves (tensors, ops, variables)."""
        if key not in self._cache:
            variant = self._derive(leaves, fetch_digest(key))
            variant.digest, variant.name = fetch_digest(key), key[0] if key else "?"
            self._buffers_read_after_step(variant)
            if self._fence_op and step_fence.needs_fence(variant, self._collectives):
                with self._building():
                    variant = step_fence.fence(variant, self._fence_op)
            self._cache[key] = variant
        return self._cache[key]

    # ---- derivation ---------------------------------------------------------------------------------------------
    def _derive(self, leaves, digest):
        ops = [_op_of(x) for x in leaves]
        ancestors = self._logical_ancestors([o for o in ops if o is not None])
        while True:
            # The step runs this worker's contributions to what it fetches, and so what they need: a write that
            # only the forward pass waits for (a power iteration's vector) is reached through them alone.
            contributions = [op for outputs, mine in self._aggregations if outputs & ancestors for op in mine]
            grown = ancestors | self._logical_ancestors(contributions)
            if grown == ancestors:
                break
            ancestors = grown
        chief_needed = ancestors & self.chief_only
        if not chief_needed and not contributions:
            collective = bool(ancestors & self._collectives)  # synchronized by its collectives
            return Variant(list(leaves), [], {}, synchronized=collective, ancestors=frozenset(ancestors))
        writes = bool(ancestors & self._gated)
        side_effects = [op for op in ancestors if _must_run(op, self._in_loops, self._collectives)]
        if self._w == 0:
            return self._chief_variant(leaves, ops, ancestors, contributions, side_effects, writes, digest)
        return self._worker_variant(leaves, ops, ancestors, contributions, side_effects, writes, digest)

    def _chief_variant(self, leaves, ops, ancestors, contributions, side_effects, writes, digest):
        targets, in_branches = self._split(contributions + side_effects)
        sent = self._values_for_others(leaves, ops)
        if self._readiness in ancestors:
            # What the others sent (arrivals, rows) is taken only once the chief's own part has run: a step that
            # fails before (the chief's input at its end) then takes nothing, and a worker that went on to its next
            # step is not left waiting for a release that the chief's next step, short of its rows, never sends.
            own = [op for op in targets + ops if op is not None and op not in self._after_readiness
                   and op not in self._in_branches and op not in self._in_loops]
            with self._building(), tf.control_dependencies(own):
                queue = self._g.get_operation_by_name(self._sync.chief_ready).outputs[0]
                targets.append(_enqueue(queue, tf.constant(0, tf.int64), f"{SYNC_SCOPE}/{digest}/ready"))
        if writes or sent:
            with self._building(), tf.control_dependencies(targets + [o for o in ops if o is not None]):
                release = tf.group(*[q.enqueue([tf.constant(0, tf.int64)] + [leaves[i] for i in sent])
                                     for q in self._release_queues(digest, [leaves[i] for i in sent])],
                                   name=f"{SYNC_SCOPE}/{digest}/release")
            targets.append(release)
        return Variant(list(leaves), targets, {}, synchronized=True, ancestors=frozenset(ancestors),
                       branch_targets=in_branches)

    def _worker_variant(self, leaves, ops, ancestors, contributions, side_effects, writes, digest):
        for op in side_effects:
            if op in self.chief_only and graph_utils.is_writer(op) and op not in self._gated:
                raise self._refusal(op)  # a write of this worker's own state that it cannot compute
        mine = [op for op in side_effects if op not in self.chief_only]
        run_leaves = [x if op is not None and op not in self.chief_only else None for x, op in zip(leaves, ops)]
        seeds = mine + contributions + [_op_of(x) for x in run_leaves if x is not None]
        feeds = self._check_runnable(seeds)
        targets, in_branches = self._split(mine + contributions)
        sent = self._values_for_others(leaves, ops)
        variant = Variant(run_leaves, targets, feeds, synchronized=True, ancestors=frozenset(ancestors),
                          branch_targets=in_branches)
        with self._building():
            waited = targets + [o for o in (_op_of(x) for x in run_leaves if x is not None)]
            if writes:
                with tf.control_dependencies(waited):
                    arrivals = self._g.get_operation_by_name(self._sync.arrivals).outputs[0]
                    arrive = _enqueue(arrivals, tf.constant(self._w, tf.int64), f"{SYNC_SCOPE}/{digest}/arrive")
                waited = [arrive]
                variant.targets.append(arrive)
            if writes or sent:
                queue = self._release_queues(digest, [leaves[i] for i in sent])[self._w - 1]
                with tf.control_dependencies(waited):
                    released = queue.dequeue(name=f"{SYNC_SCOPE}/{digest}/wait_{self._w}")
                variant.released = released if isinstance(released, list) else [released]
                variant.from_chief = {i: k + 1 for k, i in enumerate(sent)}
        return variant

    def _buffers_read_after_step(self, variant):
        """A fetched ref variable (or a ref tensor, or a ref variable's snapshot) is its buffer on one device, which
        the step's in-place writes change before the run returns: one device fetches its value after the step's
        writes (`sess.run([train_op, global_step])` gives the incremented step). From another task the value is
        copied when sent, which may be before them: such a leaf is fetched as a read, on the variable's device, that
        waits for the rest of this worker's step and for its release (after the chief's writes)."""
        aliased = {i: ref for i, ref in enumerate(_aliased_ref(x) for x in variant.leaves)
                   if ref is not None and ref.op not in self._in_loops and ref.op not in self._in_branches}
        waits = [op for i, op in enumerate(_op_of(x) for x in variant.leaves) if op is not None and i not in aliased]
        waits += variant.targets + ([variant.released[0].op] if variant.released else [])
        if not aliased or not waits:
            return
        with self._building(), tf.control_dependencies(waits):
            for i, ref in aliased.items():
                with self._g.colocate_with(ref.op):
                    variant.leaves[i] = tf.identity(ref, name=f"{SYNC_SCOPE}/{variant.digest}/after_step_{i}")

    def _split(self, ops):
        """(ops a step may wait for, ops inside a v1 cond's branch), each sorted by name."""
        ops = sorted(set(ops), key=lambda o: o.name)
        return [o for o in ops if o not in self._in_branches], [o for o in ops if o in self._in_branches]

    def _values_for_others(self, leaves, ops):
        """Leaves that are tensors only the chief computes: it sends their values with the release."""
        return [i for i, (x, op) in enumerate(zip(leaves, ops))
                if op in self.chief_only and isinstance(x, tf.Tensor)]

    def _release_queues(self, digest, values):
        with tf.device(self._sync.coordinator):
            return [tf1.FIFOQueue(RELEASE_CAPACITY, [tf.int64] + [v.dtype for v in values],
                                  shared_name=f"{SYNC_SCOPE}/{digest}/release_{i}",
                                  name=f"{SYNC_SCOPE}/{digest}/release_{i}") for i in range(1, self._n)]

    def _check_runnable(self, seeds):
        """The feeds of this worker's step (its index, when it takes copies of chief-only values); refuses a step
        that needs other chief-only work."""
        feeds = {}
        seen, stack = set(), list(seeds)
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            if op in self.chief_only or op.name in self._unsupported:
                raise self._refusal(op)
            if op in self._send_of:
                feeds[self._worker_index] = np.int32(self._w)
            stack.extend([t.op for t in op.inputs] + list(op.control_inputs))
        return feeds

    def _refusal(self, op):
        why = self._unsupported.get(op.name, "it depends on values only the chief computes")
        return UnsupportedError(f"worker {self._w} cannot run its part of this step: {op.name} ({op.type}) must run "
                                f"in every worker, but {why}")

    # ---- graph walks ------------------------------------------------------------------------------------------
    def _chief_only(self, roots):
        """Everything downstream of the roots (a copy of a chief-only value is every worker's: it is no consumer)."""
        return graph_utils.closure(roots, graph_utils.consumers)

    def _logical_ancestors(self, ops):
        """Ancestors, also through the control edges sync_passes cut (the chief still runs what they reached) and
        from a copy to the chief's send (the chief sends what the others take; they contribute what it needs)."""
        return graph_utils.closure(ops, lambda op: [t.op for t in op.inputs] + list(op.control_inputs)
                                   + self._deferred.get(op, []) + ([self._send_of[op]] if op in self._send_of else []))

    def _building(self):
        return graph_utils.ops_added_after_run(self._g)


def _must_run(op, in_loops, collectives):
    """Ops a step runs for their effect: writes of variables (ref-variable writes such as ApplyFtrl or Assign are
    not marked stateful), other stateful ops except pure reads and the ops that create a resource, collectives.
    Ops inside a v1 while loop or cond run with their loop or branch: they are never targets of their own."""
    if op in in_loops or op._get_control_flow_context() is not None:
        return False
    if op.outputs and all(t.dtype == tf.resource for t in op.outputs):
        return False  # creates a resource (a variable, queue, stack): nothing to do each step
    if op in collectives or graph_utils.is_writer(op):
        return True
    return op.op_def.is_stateful and op.type not in graph_utils.PURE_READS and len(op.inputs) > 0


def _aliased_ref(x):
    """The ref tensor whose buffer a fetched leaf is on one device (a ref variable, a ref tensor, a ref variable's
    snapshot), or None."""
    if isinstance(x, tf.Variable):
        x = x.op.outputs[0]  # a resource variable's is its handle: no buffer to alias
    if isinstance(x, tf.Tensor):
        if x.dtype._is_ref_dtype:
            return x
        if graph_utils.snapshot_source(x.op) is not None:
            return x.op.inputs[0]
    return None


def _op_of(x):
    op = getattr(x, "op", x)
    return op if isinstance(op, tf.Operation) else None


def _enqueue(queue_handle, value, name):
    from tensorflow.python.ops import gen_data_flow_ops
    return gen_data_flow_ops.queue_enqueue_v2(queue_handle, [value], name=name)


def collective_variant(graph, key, leaves, collectives, num_workers, fence_op):
    """The Variant of a fetch set without servers (its fetches as they are): a step is synchronized by its
    collectives, as every worker must run the same ones, and fenced when its backend needs it."""
    ancestors = graph_utils.ancestors([op for op in (getattr(x, "op", x) for x in leaves)
                                       if isinstance(op, tf.Operation)])
    collective = bool(collectives & ancestors)
    variant = Variant(list(leaves), [], {}, synchronized=collective and num_workers > 1,
                      ancestors=frozenset(ancestors), digest=fetch_digest(key), name=key[0] if key else "?")
    if fence_op and step_fence.needs_fence(variant, collectives):
        with graph_utils.ops_added_after_run(graph):
            variant = step_fence.fence(variant, fence_op)
    return variant
