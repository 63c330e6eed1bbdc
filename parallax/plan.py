"""The plan: one plain, printable decision per variable. Made from an analysis, a spec and a config; the rewrite
obeys it. Imports no TensorFlow, so plans can be built and tested without starting anything.

Methods:
  LOCAL  one worker: nothing to aggregate, the variable is updated in place
  AR     replicated in every worker, dense gradients all-reduced (Horovod)
  AG     replicated in every worker, sparse gradients all-gathered (Horovod)
  PS     stored on parameter server `ps_task`, gradients aggregated there by the synchronous protocol
"""
import dataclasses
from typing import Optional, Tuple

from parallax.text_table import format_table


@dataclasses.dataclass(frozen=True)
class VariablePlan:
    name: str
    kind: str  # "dense" | "sparse"
    method: str  # "LOCAL" | "AR" | "AG" | "PS"
    bytes: Optional[int]
    average: bool
    ps_tasks: Tuple[int, ...] = ()  # one per part (shard); empty unless method == "PS"
    local_aggregation: bool = False


@dataclasses.dataclass(frozen=True)
class StatePlan:
    """Where a non-trainable variable that training updates lives: a server task, or None (in every worker)."""
    name: str
    kind: str
    ps_task: Optional[int]
    aggregate: bool  # its update reads worker data (e.g. batch-norm statistics): averaged over workers first


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

    @property
    def uses_servers(self):
        return any(v.method == "PS" for v in self.variables)

    @property
    def uses_collectives(self):
        return any(v.method in ("AR", "AG") for v in self.variables)

    def variable(self, name):
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    def __str__(self):
        rows = [("variable", "kind", "bytes", "method", "average", "ps task(s)", "local agg")]
        for v in self.variables:
            rows.append((v.name, v.kind, str(v.bytes), v.method, str(v.average),
                         ",".join(map(str, v.ps_tasks)) or "-", str(v.local_aggregation)))
        head = f"plan: run_option={self.run_option} workers={self.num_workers} hosts={self.num_hosts} sync={self.sync}"
        out = head + "\n" + format_table(rows)
        return out + "\n" + self.state_summary() if self.state else out

    def state_summary(self):
        """One line: where each piece of updated state lives."""
        return "state: " + ", ".join(f"{s.name}->" + ("every worker" if s.ps_task is None else f"ps{s.ps_task}")
                                     + (" (averaged)" if s.aggregate else "") for s in self.state)


def make_plan(analysis, spec, config):
    """Decide a method per trained variable. Deterministic: every worker computes the same plan."""
    n = spec.num_workers
    decisions = []
    for v in sorted(analysis.trained_variables, key=lambda r: r.name):
        average = config.average_sparse if v.kind == "sparse" else config.average_dense
        decisions.append(VariablePlan(v.name, v.kind, _method(v.kind, config.run_option, n), v.bytes, average))
    worker_hosts = tuple(spec.host_of_worker(w) for w in range(n))
    shared_host = len(set(worker_hosts)) < n  # local aggregation needs a host with several workers
    decisions, load = _assign_servers(decisions, {v.name: len(v.parts) for v in analysis.variables}, spec.num_hosts,
                                      config.local_aggregation and shared_host and config.sync)
    state = _place_state(analysis, decisions, load, n)
    with_servers = any(d.method == "PS" for d in decisions)
    return Plan(config.run_option, n, spec.num_hosts, tuple(decisions), config.sync, state,
                place_post_aggregation_ops=config.place_post_aggregation_ops and with_servers and config.sync,
                worker_hosts=worker_hosts, place_boundary_ops=config.place_boundary_ops and with_servers)


def _method(kind, run_option, num_workers):
    if num_workers == 1:
        return "LOCAL"
    if run_option == "MPI":
        return "AG" if kind == "sparse" else "AR"
    if run_option == "PS":
        return "PS"
    return "PS" if kind == "sparse" else "AR"  # HYBRID


def _assign_servers(decisions, num_parts, num_servers, local_aggregation):
    """Greedy balance by bytes, largest first; the shards of one variable go to different servers."""
    load = [0] * max(num_servers, 1)
    out = {}
    ps = [d for d in decisions if d.method == "PS"]
    for d in sorted(ps, key=lambda d: (-(d.bytes or 0), d.name)):
        parts = num_parts.get(d.name, 1)
        part_bytes = (d.bytes or 0) // parts
        tasks = []
        for _ in range(parts):
            # Prefer servers this variable does not use yet, then the least loaded; ties go to the lowest task.
            task = min(range(len(load)), key=lambda t: (t in tasks, load[t], t))
            load[task] += part_bytes
            tasks.append(task)
        out[d.name] = dataclasses.replace(d, ps_tasks=tuple(tasks),
                                          local_aggregation=local_aggregation and d.kind == "sparse")
    return [out.get(d.name, d) for d in decisions], load


def _place_state(analysis, decisions, load, num_workers):
    """Where updated non-trainable state lives.

    Without servers (MPI, or HYBRID on a dense-only model) every worker keeps and updates its own copy, as on one
    device. With servers, state is written once per step by the chief, so it lives on a server, where every worker
    reads the current value: with the variable it is colocated with when that one is on a server, else balanced
    by bytes. State colocated with a replicated variable stays replicated (an EMA shadow: the chief's copy is the
    one checkpointed), except optimizer state such as Adam's beta powers, which every worker's update reads."""
    if num_workers == 1:
        return ()
    with_servers = any(d.method == "PS" for d in decisions)
    part_task = {}
    for d in decisions:
        for part, task in zip((p.name for p in analysis.variable(d.name).parts), d.ps_tasks):
            part_task[part] = task
    placed = []
    for s in sorted(analysis.state, key=lambda s: (-(s.bytes or 0), s.name)):
        if s.colocated_with in part_task:
            task = part_task[s.colocated_with]
        elif not with_servers or (s.colocated_with is not None and s.kind != "optimizer"):
            task = None
        else:
            task = min(range(len(load)), key=lambda t: (load[t], t))
            load[task] += s.bytes or 0
        placed.append(StatePlan(s.name, s.kind, task, aggregate=task is not None and s.kind == "update_ops"))
    return tuple(sorted(placed, key=lambda s: s.name))
