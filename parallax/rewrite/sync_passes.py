"""Prepares every fetch to run as a synchronized step; sync_step.py derives each role's variant when it first runs.

Chief-only ops: the aggregations' outputs (only the chief takes them), every write of state that lives on a server,
and everything downstream of those. Every worker must still run its own contributions, the collectives, and the
writes of state every worker holds (replicas, local variables). This pass makes that possible for any graph:
- every write of server state waits for one arrival from each other worker (`parallax_sync/gate`): a worker arrives
  when the rest of its step is done, so every worker's reads of a step come before the step's writes;
- the gate and every take of an aggregation wait for the chief's readiness (`chief_ready`): the chief's step puts a
  token there once its own part has run. A chief step that fails before that (its input at its end) has then taken
  nothing the others sent, so a worker that went on to its next step (a new epoch) finds its rows and its arrival
  still there; taken by the failed step, they were lost, and both steps waited forever;
- a control edge from chief-only work into work every worker must do (the gradient ops that wait for batch-norm
  writes) is cut, and recorded, so that the chief still runs that work in the same step;
- where work every worker must do reads a chief-only value (a dense replica clipped by a global norm that includes
  server-held rows; the plan's sync cut names which, plan/sync_cut.py), the chief sends that value to every worker
  through queues on the coordinator, one per worker (`parallax_sync/broadcast/...`): the reader takes its copy
  from the queue of its worker's index. A queue, not a collective: the step already runs a part on the
  coordinator, so a copy costs one tensor transfer, where a collective costs each of the N processes about 1 ms of
  CPU (the calibration's figure for TF's), and PS mode, which has no collectives, can send it too.
"""
import dataclasses
from typing import Tuple

import tensorflow as tf

from parallax.core import graph_utils
from parallax.plan.sync_cut import decide_sync_cut

tf1 = tf.compat.v1
SYNC_SCOPE = "parallax_sync"
COPY_CAPACITY = 1000  # copies the chief may send ahead of a worker (it runs at most a step or so ahead)
SHAPE_READS = {"VariableShape"}  # reads of a variable's shape, which no write in a step changes


@dataclasses.dataclass(frozen=True)
class SyncGraph:
    aggregations: Tuple  # ps_passes.AggregationRecord records
    gated_writes: Tuple[str, ...]  # writes of server state: chief only, after every worker's arrival
    gate: str  # the op that takes one arrival per other worker
    arrivals: str  # the queue op workers arrive in
    chief_ready: str  # the queue op the chief's step puts one token in when its own part is done
    readiness: str  # the op that takes that token; the gate and the aggregations' takes wait for it
    deferred: Tuple[Tuple[str, str], ...]  # (op, chief-only control input it no longer waits for)
    broadcasts: Tuple[Tuple[str, str, str], ...]  # (chief-only tensor, the copy every worker reads, the chief's send)
    unsupported: Tuple[Tuple[str, str], ...]  # (op, why no worker but the chief can run it)
    collectives: Tuple[str, ...] = ()  # collective ops: every worker runs those its step needs
    coordinator: str = ""  # the server device of the barrier and release queues
    worker_index: str = ""  # the tensor a worker other than the chief feeds its index to, to take its copies

    @property
    def roots(self):
        return tuple(o for a in self.aggregations for o in a.outputs) + self.gated_writes + (self.gate, self.readiness)


def prepare_sync_steps(ctx):
    g, n = ctx.graph, ctx.plan.num_workers
    writes = graph_utils.step_writes(g)
    gated = [op for op in writes if any(v in ctx.server_variables for v in graph_utils.written_variables(op))]
    replicated = [op for op in writes if op not in gated]
    with g.as_default(), tf.name_scope(SYNC_SCOPE + "/"):
        # On the chief's own task (no device: only the chief runs it): a chief step that fails there (its input at
        # its end) cancels this wait with it. On a server, TF may run the failed step's part after its abort (the
        # RPC's cancellation and its start race), and that wait, left behind, took the chief's next token: the
        # next step waited forever.
        ready = tf1.FIFOQueue(n, [tf.int64], shapes=[[]], shared_name=f"{SYNC_SCOPE}/chief_ready", name="chief_ready")
        readiness = ready.dequeue(name="chief_readiness").op
        with tf.device(ctx.plan.coordinator):
            arrivals = tf1.FIFOQueue(n, [tf.int64], shapes=[[]], shared_name=f"{SYNC_SCOPE}/arrivals",
                                     name="arrivals")
            gate = arrivals.dequeue_many(n - 1, name="gate").op
        worker_index = tf1.placeholder_with_default(tf.constant(0, tf.int32), [], name="worker_index")
    for op in gated:
        op._add_control_inputs([gate])
    takes = {g.get_operation_by_name(name) for a in ctx.aggregations for name in a.outputs}
    for op in takes | {gate}:
        op._add_control_inputs([readiness])
    contributions = [g.get_operation_by_name(c) for a in ctx.aggregations for ops in a.contributions.values()
                     for c in ops]
    collectives = [g.get_operation_by_name(name) for name in ctx.collectives]
    roots = takes | set(gated) | {gate, readiness}
    deferred, broadcasts, unsupported = _separate(ctx, roots, set(replicated + contributions + collectives),
                                                  set(replicated), takes | {readiness}, worker_index)
    ctx.sync = SyncGraph(tuple(ctx.aggregations), tuple(op.name for op in gated), gate.name, arrivals.queue_ref.op.name,
                         ready.queue_ref.op.name, readiness.name,
                         tuple(deferred), tuple(broadcasts), tuple(unsupported), tuple(ctx.collectives),
                         ctx.plan.coordinator, worker_index.name)


def _separate(ctx, roots, everyone, own_writes, before_writes, worker_index):
    """Make every op in `everyone` runnable without chief-only values, in topological order over their ancestors:
    cut chief-only control inputs (the op still waits for the writes of every worker's own state that they waited
    for: an EMA of a replica after the replica's update); broadcast chief-only data inputs where they join other
    data. Returns (cut waits, broadcasts, what only the chief can run)."""
    separation = _Separation(ctx, roots, everyone, own_writes, before_writes, worker_index)
    for op in graph_utils.topological(separation.needed, include_control=True):
        separation.visit(op)
    return separation.deferred, separation.broadcasts, separation.unsupported


class _Separation:
    """The state of one _separate: the ops found to be the chief's, the waits on them cut, the values sent."""

    def __init__(self, ctx, roots, everyone, own_writes, before_writes, worker_index):
        self.ctx, self.roots, self.everyone, self.own_writes = ctx, roots, everyone, own_writes
        self.worker_index = worker_index
        self.after_writes = graph_utils.descendants(roots - before_writes)
        self.cut = _planned_cut(ctx)
        # A worker's contribution reaches the aggregation's outputs through its accumulator or queue, not by an edge.
        self.onward = {}
        g = ctx.graph
        for a in ctx.aggregations:
            for name in (c for ops in a.contributions.values() for c in ops):
                self.onward.setdefault(g.get_operation_by_name(name), []).extend(
                    g.get_operation_by_name(o) for o in a.outputs)
        self.chief = set()
        self.deferred, self.broadcasts, self.unsupported = [], [], []
        self.sent = {}  # chief-only tensor name -> its broadcast (one per tensor, whoever reads it)
        # What every worker needs: back from its own work, never through chief-only roots (a replicated EMA that
        # waits for the global step does not make every worker need the train op's group behind it).
        self.needed = graph_utils.closure(everyone, lambda op: [] if op in roots else
                                          [t.op for t in op.inputs] + list(op.control_inputs))
        # The chief-only writes each op waited for through ops whose waits were cut (the discriminator's train op
        # that a GAN's generator reads the discriminator after): on one device it reads their variables as written.
        self.waited, self.read_back_from = {}, {}  # and the chief-only ops computed from a read back: its variable
        self.written_behind = {}

    def visit(self, op):
        data = [(i, t) for i, t in enumerate(op.inputs) if t.op in self.chief]
        if op in self.roots or (data and not all(t.op in self.cut for _, t in data)):
            self._keep_for_chief(op, data)
        elif self._free_of_chief_waits(op):
            for i, t in data:
                op._update_input(i, self._broadcast(t))

    def _keep_for_chief(self, op, data):
        self.chief.add(op)  # the chief's own work: its control edges stay
        origin = next((self.read_back_from[t.op] for _, t in data if t.op in self.read_back_from), None)
        if origin:
            self.read_back_from[op] = origin
        if op in self.everyone:
            self.unsupported.append((op.name, _read_back_refusal(origin) if origin else
                                     _not_broadcastable(data[0][1], self.after_writes) if data else
                                     "it is work only the chief may do"))

    def _free_of_chief_waits(self, op):
        """Cut op's waits for chief-only ops; False (op is the chief's) where that would change a value it reads."""
        late = sorted((c for c in op.control_inputs if c in self.chief), key=lambda c: c.name)
        key = frozenset(late)
        if key not in self.written_behind:  # many ops wait for the same writes (a batch norm's, the train op's)
            self.written_behind[key] = _written_by(late, self.chief)
        inherited = set().union(*(self.waited.get(i, ())
                                  for i in [t.op for t in op.inputs] + list(op.control_inputs)))
        read_back = _reads_back(op, self.written_behind[key] | inherited)
        if read_back:
            # It reads a variable after a chief-only write of it (Adam's slot read back for its update, a step
            # count read after its increment): cutting the wait would change the value read, so it is the chief's.
            self.chief.add(op)
            self.read_back_from[op] = read_back
            if op in self.everyone:
                self.unsupported.append((op.name, _read_back_refusal(read_back)))
            return False
        if late:
            _cut(op, late, self.own_writes, self.chief, self.needed, self.onward)
            self.deferred += [(op.name, c.name) for c in late]
            inherited |= self.written_behind[key]
        if inherited:
            self.waited[op] = inherited
        return True

    def _broadcast(self, t):
        """The chief's value of `t` on every worker (one broadcast per tensor, whoever reads it)."""
        if t.name not in self.sent:
            g, plan = self.ctx.graph, self.ctx.plan
            with g.as_default(), tf.name_scope(f"{SYNC_SCOPE}/broadcast/{t.op.name}_{t.value_index}/"):
                self.sent[t.name], send = _send_to_every_worker(
                    t, plan.coordinator, plan.num_workers, self.worker_index,
                    _contributed_from(g, self.ctx.aggregations, t))
            self.broadcasts.append((t.name, self.sent[t.name].op.name, send.name))
        return self.sent[t.name]


def _send_to_every_worker(t, coordinator, num_workers, worker_index, after):
    """(the copy of `t` that the worker of index `worker_index` takes once the ops `after` have run, the chief's
    send of a copy to each worker). One queue per worker: a worker that runs ahead cannot take another's copy. The
    chief takes its own copy too, so that every worker's graph is the same. The index carries the wait for `after`
    to the coordinator: one tensor crosses there, not a control edge per op."""
    with tf.device(coordinator):
        queues = [tf1.FIFOQueue(COPY_CAPACITY, [t.dtype.base_dtype], shapes=[t.shape],
                                shared_name=f"{tf1.get_default_graph().get_name_scope()}/to_{w}",
                                name=f"to_{w}") for w in range(num_workers)]
        send = tf.group(*[q.enqueue(t) for q in queues], name="send")
    with tf.control_dependencies(after):
        index = tf.identity(worker_index, name="index")
    with tf.device(coordinator):
        copy = tf1.QueueBase.from_list(index, queues).dequeue(name="copy")
    copy.set_shape(t.shape)
    return copy, send


def _contributed_from(g, aggregations, t):
    """The ops on a worker's own device, the same in every worker, that its contributions to the aggregations `t`
    is computed from read (its gradients). A worker's copy of `t` is taken only after them: a step that fails
    before (its input at its end) takes no copy, since TF may still start a failed step's part on the coordinator
    after the step's abort, and a take left behind there takes the next step's copy."""
    before = {op.name for op in graph_utils.ancestors([t.op])}
    read = set()
    for a in aggregations:
        if not before & set(a.outputs):
            continue
        common = None  # what every worker's contribution reads: not a worker's own ops
        for names in a.contributions.values():
            starts = {g.get_operation_by_name(n) for n in names}  # they run on a task: a server, a host's queues
            walked = graph_utils.closure(starts, lambda op: [i.op for i in op.inputs]
                                         if op in starts or _on_a_task(op) else [])
            local = {op for op in walked if op not in starts and not _on_a_task(op)}
            common = local if common is None else common & local
        read |= common or set()
    return sorted(read, key=lambda op: op.name)


def _on_a_task(op):
    return "/job:" in op.device


def _reads_back(op, written):
    """The variable `op` takes by reference that `written` holds (the variables chief-only ops it waits for write,
    directly or through cut waits); None when there is none."""
    if not written or op.type in SHAPE_READS:
        return None
    read = set(graph_utils.read_variables(op)) - set(graph_utils.written_variables(op))
    return next((v for v in sorted(read) if v in written), None)


def _read_back_refusal(variable):
    return (f"it is computed from {variable} as this step writes it (it waits for that write, as a second "
            f"optimizer's gradients may wait for the first's update), and only the chief writes {variable}, after "
            f"every worker's step; hold it on every worker instead (run_option='MPI', or 'HYBRID' for a dense "
            f"variable), or compute it before the write")


def _written_by(late, chief):
    """The variables that the chief-only ops `late` and the chief-only ops they wait for write."""
    return {w for c in graph_utils.ancestors(late) if c in chief for w in graph_utils.written_variables(c)}


def _cut(op, late, own_writes, chief, needed, onward):
    """`op`, which every worker runs, stops waiting for the chief-only ops `late`; it still waits for the writes of
    every worker's own state that they waited for (an EMA of a replica after the replica's update), and what only
    the chief runs after `op` still waits for `late` (an EMA of a server variable after the server update)."""
    keep = [c for c in op.control_inputs if c not in late]
    keep += sorted({w for c in late for w in graph_utils.ancestors([c]) if w in own_writes and w not in chief
                    and w not in keep and _same_frame(w, op)}, key=lambda w: w.name)
    op._remove_all_control_inputs()
    op._add_control_inputs(keep)
    # The chief-only ops that waited for `late` through `op`, also through further work every worker does (an EMA
    # of a server variable behind the train op's group, behind the optimizer's group that waited for the update),
    # and through a contribution to its aggregation (a server update behind a forward op that waited for a write).
    reached = graph_utils.closure([op], lambda o: graph_utils.consumers(o) + onward.get(o, [])
                                  if o is op or o in needed else [])
    for consumer in sorted(reached - needed, key=lambda o: o.name):
        consumer._add_control_inputs([c for c in late if c not in consumer.control_inputs
                                      and _same_frame(c, consumer)])


def _planned_cut(ctx):
    """The chief-only ops whose outputs the plan's sync cut sends to every worker; a plan made without planning
    (sync_broadcasts None) has it decided here, the same way."""
    broadcasts = ctx.plan.sync_broadcasts
    if broadcasts is None:
        broadcasts = decide_sync_cut(ctx.source_graph, ctx.plan)
    g = ctx.graph
    return {(ctx.aggregated[b.aggregate] if b.aggregate else g.get_tensor_by_name(b.tensor)).op for b in broadcasts}


def _not_broadcastable(t, after_writes):
    if t is None or len(t.op.outputs) != 1:
        return f"{t.op.name if t is not None else 'it'} has no single output to broadcast"
    if not t.shape.is_fully_defined():
        return (f"it reads {t.name} of shape {t.shape}, which only the chief computes; the chief can broadcast it to "
                f"the other workers only when its shape is static")
    if t.op in after_writes:
        return (f"it reads {t.name}, which the chief computes only after the step's writes of server state, and those "
                f"wait for every worker's step to end")
    return None


def _same_frame(a, b):
    """Control edges may not cross the frames of v1 while loops."""
    return a._get_control_flow_context() is b._get_control_flow_context()

