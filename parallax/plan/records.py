"""The plan: the whole decision about a job, as plain records. Made once from an analysis, a spec and a config; the
rewrite passes read it and decide nothing themselves. Imports no TensorFlow, so plans can be built, printed,
serialized (plan_json.py) and tested without starting anything.

Methods (per variable):
  LOCAL  one worker: nothing to aggregate, the variable is updated in place
  AR     replicated in every worker; its gradients reach every worker through collectives
  AG     the same, named for a sparse variable: its IndexedSlices gradients are all-gathered
  PS     stored on parameter server(s), one per part; gradients aggregated there by the synchronous protocol
How each gradient is aggregated (`Aggregation`) follows from the method and the gradient's kind: a replicated
variable's dense gradients are all-reduced and its IndexedSlices gradients all-gathered (densifying them would
change a sparse optimizer's update); a server variable's dense gradients go through an accumulator and its
IndexedSlices gradients through per-worker row queues.
"""
import dataclasses
import enum
import functools
import typing
from typing import Any, NamedTuple, Optional, Tuple

from parallax.core.listed import Listed
from parallax.core.text_table import format_table


class Method(str, enum.Enum):
    LOCAL = "LOCAL"
    AR = "AR"
    AG = "AG"
    PS = "PS"

    def __str__(self):
        return self.value

    @property
    def replicated(self):
        return self in (Method.AR, Method.AG)


class Aggregation(str, enum.Enum):
    NONE = "none"  # LOCAL
    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    ACCUMULATOR = "accumulator"  # dense, on the part's server
    ROW_QUEUES = "row_queues"  # IndexedSlices, every worker's rows concatenated on the part's server

    def __str__(self):
        return self.value


def ps_device(task):
    return f"/job:ps/task:{task}"


WORKER_DEVICE = ""  # the device of whatever worker runs the op: each holds its own copy


@dataclasses.dataclass(frozen=True)
class GradientPlan:
    scope: str  # names the aggregation: the part's name for its first gradient, "<part>/g<k>" for the k-th
    values: str
    indices: Optional[str]  # None for a dense gradient
    aggregation: Aggregation
    merge_rows: bool = False  # rows that one device holds once are merged across workers (row_keys.py)


@dataclasses.dataclass(frozen=True)
class PartPlan:
    """One variable op (a shard of a partitioned variable, or a whole one): where it lives and what touches it."""
    name: str
    device: str  # ps_device(task), or WORKER_DEVICE for a copy in every worker
    ps_task: Optional[int]
    slots: Tuple[str, ...]  # slot variable ops: they live with the part
    update_ops: Tuple[str, ...]  # they run where the part lives
    gradients: Tuple[GradientPlan, ...]


@dataclasses.dataclass(frozen=True)
class VariablePlan:
    name: str
    kind: str  # "dense" | "sparse"
    method: Method
    bytes: Optional[int]
    average: bool  # aggregated gradients are divided by the number of workers
    parts: Tuple[PartPlan, ...] = ()
    local_aggregation: bool = False  # row queues go through each host's holder worker first
    shape: Tuple[Optional[int], ...] = ()
    dtype: str = ""

    @property
    def ps_tasks(self):
        return tuple(p.ps_task for p in self.parts) if self.method == Method.PS else ()

    @property
    def gradients(self):
        return tuple(g for p in self.parts for g in p.gradients)


@dataclasses.dataclass(frozen=True)
class StatePlan:
    """A non-trainable variable that training updates, and where it lives: a server task, or None (every worker)."""
    name: str
    kind: str
    ps_task: Optional[int]
    # its update reads worker data (e.g. batch-norm statistics): every worker's value averaged, then written; not
    # where the value reads server state back after the chief's write of it (_place_state)
    aggregate: bool
    written_by: Tuple[str, ...] = ()
    colocated_with: Optional[str] = None  # the variable TF colocates it with, which it leaves for another server

    @property
    def device(self):
        return WORKER_DEVICE if self.ps_task is None else ps_device(self.ps_task)


# The rules' records in the plan (rules/rule.py): what each rule found, typed, one record per entry.
class BatchDraw(NamedTuple):
    op: str  # a random draw whose shape follows the batch (batch_draws.py)
    axis: int  # its batch axis


class CombinedStatistic(NamedTuple):
    tensor: str  # a statistic of the batch (batch_statistics.py)
    law: str  # how the workers' values combine: mean, max, min, sum, ...
    readers: Tuple[str, ...]  # the ops that read the combined value


class FusedBatchNorm(NamedTuple):
    op: str
    gradients: Tuple[str, ...]  # its gradient ops


class PaddedInput(NamedTuple):
    tensor: str
    axes: Tuple[int, ...]  # the axes its dataset pads
    value: Any  # the padding value


class LossSeed(NamedTuple):
    op: str  # a default seed of tf.gradients (loss_seeds.py)
    law: str  # "mean" | "sum"


class MeanTermEdge(NamedTuple):
    op: str  # a gradient op of a summed loss's mean term (loss_terms.py)
    input_index: int  # the input scaled by 1/N



class PlanNote(NamedTuple):
    """A warning: something of the user's graph no rewrite changes, where the job is not one device's or may not be.
    The launcher prints each at start, and explain with the plan."""
    kind: str  # what was found: UNSHARDED_INPUTS, REPEATED_SHARDS, READS_NO_INPUT (rules/input_sharding.py),
    #            UNCHECKED_LOSS (rules/loss_law.py)
    text: str  # what it means, and what to change


class PairedRows(NamedTuple):
    kind: str  # gathered | own | padded | summed (paired_rows.py)
    tensor: str
    readers: Tuple[str, ...]


class GuardedDraw(NamedTuple):
    draw: str  # an unsplittable draw in a cond's branch (draw_guards.py)
    run_by: str  # the op whose run decides it
    predicate: str  # the cond's predicate
    kind: str  # "if" | "case"
    branches: Tuple[int, ...]  # the branches that draw
    branch_count: int


class BatchlessWrite(NamedTuple):
    write: str  # a write of the step that reads no input that can end (batchless_writes.py)
    inputs: Tuple[str, ...]  # the inputs it waits for


class CountedInput(NamedTuple):
    op: str  # an input of the user's graph whose examples a step counts (example_counts.py)
    tensor: str  # the tensor the count is read from: its first dimension, or a sparse input's dense shape's first
    dense_shape: bool  # whether `tensor` is a sparse input's dense shape


class FusionGroup(NamedTuple):
    aggregation: Aggregation  # ALLREDUCE (one buffer of dense gradients) or ALLGATHER (one of packed rows)
    gradients: Tuple[str, ...]  # the scopes (GradientPlan.scope) of the gradients one collective carries


class SyncBroadcast(NamedTuple):
    """A chief-only value that work every worker must do reads (plan/sync_cut.py): one of the two is set."""
    tensor: str  # a tensor of the user's graph
    aggregate: str  # the scope of a server aggregation (a gradient's, or an averaged state write's name): its value


class Placement(NamedTuple):
    pass_name: str  # the placement pass (placement.py)
    ops: Tuple[Tuple[str, str], ...]  # (op, device)


@dataclasses.dataclass(frozen=True)
class Plan:
    run_option: str
    num_workers: int
    num_hosts: int
    variables: Tuple[VariablePlan, ...]
    sync: bool = True
    state: Tuple[StatePlan, ...] = ()
    place_post_aggregation_ops: bool = False  # OPAU: only meaningful with servers, and in sync mode
    worker_hosts: Tuple[int, ...] = ()  # the spec host (index) of each worker
    place_boundary_ops: bool = False  # OPSW: only meaningful with servers
    holders: Tuple[int, ...] = ()  # per worker: the worker that holds its host's local aggregation (its first)
    # Whether a host's local aggregation keeps its rows on the host's parameter server (task h on host h) instead
    # of on its holder's task (collectives.rows_held_on_servers: with TF's collectives no worker's step may run an
    # op on another worker's task). The holder's step still takes them.
    rows_held_on_servers: bool = False
    backend: str = "horovod"  # the collective library, when collectives are used
    # Decided op placements: (pass name, ((op, device), ...)), device WORKER_DEVICE for "whichever worker runs it".
    placements: Tuple[Placement, ...] = ()
    partitions: Optional[int] = None  # AUTO: the shards of the variables get_partitioner splits (None: as built)
    # Random draws whose shape follows the batch (batch_draws.py): (op, batch axis) each worker draws for the whole
    # batch and keeps its share of, how the examples are shared ("blocks" or "interleaved"), and those it cannot.
    batch_draws: Tuple[BatchDraw, ...] = ()
    batch_layout: str = "blocks"
    unsplittable_draws: Tuple[str, ...] = ()
    # Statistics of the batch the gradients are computed from (batch_statistics.py): (tensor, how the workers'
    # values combine into what each reads, the ops that read it), and those that cannot be combined ("tensor (why)").
    batch_statistics: Tuple[CombinedStatistic, ...] = ()
    uncombinable_statistics: Tuple[Listed, ...] = ()
    # Fused batch normalizations in training mode and their gradient ops, computed on the whole batch's statistics
    # (fused_batch_norm.py).
    fused_batch_norms: Tuple[FusedBatchNorm, ...] = ()
    # Why the variables' `average` is what it is, when the loss decided it (loss_law.py); "" when Config set it.
    averaging: str = ""
    # Inputs their dataset pads to the batch's longest example (padded_inputs.py): (tensor, its padded axes, the
    # padding value), padded further to the longest over every worker.
    padded_inputs: Tuple[PaddedInput, ...] = ()
    # The losses' default seeds (loss_seeds.py), (seed op, "mean" | "sum"): a mean's starts at 1/N, and every
    # variable's gradients are summed. A summed loss's mean terms' (a penalty's) gradient inputs (loss_terms.py),
    # scaled by 1/N.
    loss_seeds: Tuple[LossSeed, ...] = ()
    mean_term_edges: Tuple[MeanTermEdge, ...] = ()
    # Values that pair the batch's examples (paired_rows.py): (GATHERED|OWN|PADDED|SUMMED, tensor, its readers),
    # what each reader reads of the tensor instead, so that every worker computes one device's pairs.
    paired_rows: Tuple[PairedRows, ...] = ()
    # Those of unsplittable_draws that only some branches of a cond run (draw_guards.py): (draw, the op whose run
    # decides it, the cond's predicate, "if" | "case", the branches that draw, how many it has); warned when run.
    guarded_draws: Tuple[GuardedDraw, ...] = ()
    # Writes of the training step that read no input that can end (sparse Adam's slot decays), with the inputs each
    # is made to wait for (batchless_writes.py): a step whose input ends writes nothing, in every mode (warned).
    batchless_writes: Tuple[BatchlessWrite, ...] = ()
    # The inputs each synchronized step reports its count of examples of (example_counts.py): the launcher tells
    # from them when the workers' batches differ.
    counted_inputs: Tuple[CountedInput, ...] = ()
    # The replicated gradients that share one collective (analysis/fusion.py): a gradient no group names has its
    # own collective.
    fusion_groups: Tuple[FusionGroup, ...] = ()
    # With servers in sync mode: the chief-only values the chief sends every worker (plan/sync_cut.py). None: not
    # decided (a plan made without planning.plan_job), and the rewrite decides it the same way.
    sync_broadcasts: Optional[Tuple[SyncBroadcast, ...]] = None
    # Warnings that no pass reads: an input nothing shards, a repeat after a shard over examples no multiple of N, a
    # step that reads no input (rules/input_sharding.py).
    notes: Tuple[PlanNote, ...] = ()

    def __post_init__(self):
        # Entries given as plain tuples (by a rule's finder, a test) become their fields' typed records.
        for name, record in _record_fields().items():
            entries = getattr(self, name)
            if record is Listed:  # a sentence given whole is kept whole, never parsed into its fields
                if not all(isinstance(e, Listed) for e in entries):
                    object.__setattr__(self, name, tuple(e if isinstance(e, Listed) else Listed(e) for e in entries))
            elif not all(type(e) is record for e in entries):
                object.__setattr__(self, name, tuple(record(*e) for e in entries))

    @property
    def methods(self):
        return frozenset(v.method for v in self.variables)

    @property
    def aggregations(self):
        return frozenset(g.aggregation for v in self.variables for g in v.gradients)

    @property
    def uses_servers(self):
        return Method.PS in self.methods or any(s.ps_task is not None for s in self.state)

    @property
    def server_tasks(self):
        """The parameter-server tasks that hold something."""
        tasks = {t for v in self.variables for t in v.ps_tasks} | {s.ps_task for s in self.state}
        return tuple(sorted(t for t in tasks if t is not None))

    @property
    def coordinator(self):
        """The server device that holds a synchronous step's barrier queues (the first server task)."""
        return ps_device(self.server_tasks[0]) if self.server_tasks else None

    @property
    def uses_collectives(self):
        """Replicated variables' gradients, or statistics of the batch, go through collectives."""
        return any(m.replicated for m in self.methods) or self.gathers_in_step

    @property
    def gathers_in_step(self):
        """Values of the batch (statistics, a fused batch norm's moments, padded lengths, paired rows) are gathered
        from every worker inside the step, one collective after another as the graph reads them."""
        return bool(self.batch_statistics or self.fused_batch_norms or self.padded_inputs or self.paired_rows)

    @property
    def uses_worker_servers(self):
        """Every worker runs a TF server: for parameter servers, or for TF's collectives (backend "tf")."""
        return self.uses_servers or (self.uses_collectives and self.backend == "tf")

    @property
    def uses_local_aggregation(self):
        return any(v.local_aggregation for v in self.variables)

    @property
    def parts(self):
        return tuple(p for v in self.variables for p in v.parts)

    def variable(self, name):
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def update_ops(self):
        """Every variable part's update ops: the training step's writes of the variables."""
        return tuple(n for p in self.parts for n in p.update_ops)

    def noted(self, kind):
        """The text of the plan's note of `kind`, or None."""
        return next((n.text for n in self.notes if n.kind == kind), None)

    def placed(self, pass_name):
        return dict(self.placements).get(pass_name, ())

    def __str__(self):
        rows = [("variable", "kind", "bytes", "method", "average", "ps task(s)", "local agg")]
        for v in self.variables:
            rows.append((v.name, v.kind, str(v.bytes), str(v.method), str(v.average),
                         ",".join(map(str, v.ps_tasks)) or "-", str(v.local_aggregation)))
        head = f"plan: run_option={self.run_option} workers={self.num_workers} hosts={self.num_hosts} sync={self.sync}"
        if self.uses_collectives:
            head += f" collectives={self.backend}"
        out = head + "\n" + format_table(rows)
        out = out + "\n" + self.state_summary() if self.state else out
        return "\n".join([out] + self.batch_summaries())

    def state_summary(self):
        """One line: where each piece of updated state lives."""
        return "state: " + ", ".join(f"{s.name}->" + ("every worker" if s.ps_task is None else f"ps{s.ps_task}")
                                     + (" (averaged)" if s.aggregate else "") for s in self.state)

    def fusion_summaries(self):
        """Lines: each collective that carries replicated gradients, and the gradients it carries."""
        what = {Aggregation.ALLREDUCE: "one allreduce of", Aggregation.ALLGATHER: "one allgather of the rows of"}
        return [f"{what[group.aggregation]} " + ", ".join(group.gradients) for group in self.fusion_groups]

    def sync_summaries(self):
        """Lines: the chief-only values the chief sends every worker in a synchronized step (none: no line)."""
        sent = [b.tensor or f"the aggregate of {b.aggregate}" for b in self.sync_broadcasts or ()]
        return ["sent by the chief to every worker in each step (work every worker does reads them; only the chief "
                "takes the servers' aggregates): " + ", ".join(sent)] * bool(sent)

    def batch_summaries(self):
        """Lines: the random draws that follow the batch, split as one device draws them or not; the statistics of
        the batch the workers combine, and those they cannot (none when the plan has none of either)."""
        draws = [f"{name} (batch axis {axis}, {self.batch_layout})" for name, axis in self.batch_draws]
        guarded = {g[0] for g in self.guarded_draws}
        draws += [f"{name} (cannot be split: differs from one device's{' in a step that runs it' * (name in guarded)})"
                  for name in self.unsplittable_draws]
        statistics = [f"{name} ({law} over workers)" for name, law, _ in self.batch_statistics]
        statistics += [f"{name} (fused batch norm, its mean and variance over workers)"
                       for name, _ in self.fused_batch_norms]
        statistics += [f"{entry}: each worker's own" for entry in self.uncombinable_statistics]
        gathered = sorted(name for kind, name, _ in self.paired_rows if kind == "gathered")
        statistics += [f"{name} (every worker's rows, for the values that pair the batch's examples)"
                       for name in gathered]
        padded = [f"{name} (axes {', '.join(map(str, axes))}, with {value!r})"
                  for name, axes, value in self.padded_inputs]
        return ["inputs padded to the longest over workers: " + ", ".join(padded)] * bool(padded) + \
            ["draws for the whole batch: " + ", ".join(draws)] * bool(draws) + \
            ["statistics of the batch: " + ", ".join(statistics)] * bool(statistics)


@functools.lru_cache(maxsize=None)
def _record_fields():
    """{Plan field: its record type}, for the fields that hold a tuple of typed records."""
    fields = {}
    for name, kind in typing.get_type_hints(Plan).items():
        record = typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else None
        if isinstance(record, type) and hasattr(record, "_fields"):
            fields[name] = record
    return fields
