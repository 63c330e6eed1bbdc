"""The decisions of a plan that need only the analysis, the spec and the config (planning.py adds the rest from the
graph): each variable's method, its parts' server tasks, its gradients' aggregation, local aggregation, and where
the updated state lives. Deterministic: the same analysis, spec and config give the same plan in every process.
Imports no TensorFlow."""
import dataclasses

from parallax.errors import ConfigError, UnsupportedError
from parallax.plan.records import (Aggregation, GradientPlan, Method, PartPlan, Plan, StatePlan, VariablePlan,
                                     WORKER_DEVICE, ps_device)


def decide_variables(analysis, spec, config):
    """Decide everything but op placements (planning.py adds those from the graph). Deterministic: the same
    analysis, spec and config give the same plan in every process."""
    n = spec.num_workers
    trained = sorted(analysis.trained_variables, key=lambda r: r.name)
    overrides = _method_overrides(config, trained, n)
    decisions = []
    for v in trained:
        # None (from the loss) is plan_job's to decide; alone, decide_variables takes the loss for a mean.
        average = (config.average_sparse if v.kind == "sparse" else config.average_dense) is not False
        method = overrides.get(v.name) or _method(v.kind, config.run_option, n)
        decisions.append(VariablePlan(v.name, v.kind, method, v.bytes, average, shape=tuple(v.shape),
                                      dtype=v.dtype))
    decisions = _one_side_per_update(decisions, trained)
    if any(d.method.replicated for d in decisions) and not config.sync:
        who = f"{config.run_option} with Config.methods" if overrides else config.run_option
        raise UnsupportedError(f"{who} runs synchronously (its AllReduce and AllGather are collectives of all "
                               f"workers); use Config(run_option='PS', sync=False) for asynchronous training")
    worker_hosts = tuple(spec.host_of_worker(w) for w in range(n))
    shared_host = len(set(worker_hosts)) < n  # local aggregation needs a host with several workers
    local = config.local_aggregation and shared_host and config.sync
    tasks, load = _assign_servers(decisions, {v.name: len(v.parts) for v in trained}, spec.num_hosts)
    records = {v.name: v for v in trained}
    decisions = [dataclasses.replace(d, parts=_parts(records[d.name], d.method, tasks.get(d.name)),
                                     local_aggregation=local and d.method == Method.PS and d.kind == "sparse")
                 for d in decisions]
    state = _place_state(analysis, decisions, load, n)
    with_servers = any(d.method == Method.PS for d in decisions)
    return Plan(config.run_option, n, spec.num_hosts, tuple(decisions), config.sync, state,
                place_post_aggregation_ops=config.place_post_aggregation_ops and with_servers and config.sync,
                worker_hosts=worker_hosts, place_boundary_ops=config.place_boundary_ops and with_servers,
                holders=_holders(worker_hosts))


def _one_side_per_update(decisions, trained):
    """Variables that one op updates together (an optimizer's apply_gradients inside a v2 tf.cond, which loss
    scaling builds) cannot be split between the servers and every worker: that op runs once, on the chief, when
    it writes server state. So when one of them is on a server, all of them are."""
    group = {}  # variable -> representative, by shared update ops (union-find)

    def find(name):
        while group.setdefault(name, name) != name:
            name = group[name]
        return name
    writer_of = {}
    for v in trained:
        for op in v.update_ops:
            if op in writer_of:
                group[find(v.name)] = find(writer_of[op])
            writer_of.setdefault(op, v.name)
    on_servers = {find(d.name) for d in decisions if d.method == Method.PS}
    return [dataclasses.replace(d, method=Method.PS) if d.method.replicated and find(d.name) in on_servers else d
            for d in decisions]


def _method(kind, run_option, num_workers):
    if num_workers == 1:
        return Method.LOCAL
    if run_option == "MPI":
        return Method.AG if kind == "sparse" else Method.AR
    if run_option == "PS":
        return Method.PS
    return Method.PS if kind == "sparse" else Method.AR  # HYBRID (and AUTO's default: auto_plan.py chooses)


def _method_overrides(config, trained, num_workers):
    """Config.methods: {variable name: method} for variables the user places by hand (a mixed plan)."""
    chosen = dict(config.methods)
    known = {v.name for v in trained}
    unknown = sorted(set(chosen) - known)
    if unknown:
        raise ConfigError(f"Config.methods names {unknown}, which the graph does not train; trained variables: "
                          f"{sorted(known)}")
    if num_workers == 1:
        return {}
    return {name: Method(m) for name, m in chosen.items()}


def _parts(record, method, tasks):
    parts = []
    for i, part in enumerate(record.parts):
        task = tasks[i] if tasks else None
        grads = tuple(GradientPlan(part.name if k == 0 else f"{part.name}/g{k}", g.values, g.indices,
                                   _aggregation(method, g.is_sparse), g.merge_rows)
                      for k, g in enumerate(part.gradients))
        parts.append(PartPlan(part.name, WORKER_DEVICE if task is None else ps_device(task), task,
                              tuple(s for _, s in part.slots), tuple(part.update_ops), grads))
    return tuple(parts)


def _aggregation(method, sparse):
    if method == Method.LOCAL:
        return Aggregation.NONE
    if method.replicated:
        return Aggregation.ALLGATHER if sparse else Aggregation.ALLREDUCE
    return Aggregation.ROW_QUEUES if sparse else Aggregation.ACCUMULATOR


def _holders(worker_hosts):
    first = {}
    for w, h in enumerate(worker_hosts):
        first.setdefault(h, w)
    return tuple(first[h] for h in worker_hosts)


def _assign_servers(decisions, num_parts, num_servers):
    """Greedy balance by bytes, largest first; the shards of one variable go to different servers.
    Returns ({variable: task per part}, load per server)."""
    load = [0] * max(num_servers, 1)
    out = {}
    for d in sorted((d for d in decisions if d.method == Method.PS), key=lambda d: (-(d.bytes or 0), d.name)):
        parts = num_parts.get(d.name, 1)
        part_bytes = (d.bytes or 0) // parts
        tasks = []
        for _ in range(parts):
            # Prefer servers this variable does not use yet, then the least loaded; ties go to the lowest task.
            task = min(range(len(load)), key=lambda t: (t in tasks, load[t], t))
            load[task] += part_bytes
            tasks.append(task)
        out[d.name] = tuple(tasks)
    return out, load


def _place_state(analysis, decisions, load, num_workers):
    """Where updated non-trainable state lives.

    Without servers (MPI, or HYBRID on a dense-only model) every worker keeps and updates its own copy, as on one
    device. With servers, state is written once per step by the chief, so it lives on a server, where every worker
    reads the current value: with the variable it is colocated with when that one is on a server, else balanced
    by bytes. State colocated with a replicated variable stays replicated (an EMA shadow: the chief's copy is the
    one checkpointed), except optimizer state such as Adam's beta powers, which every worker's update reads."""
    if num_workers == 1:
        return ()
    with_servers = any(d.method == Method.PS for d in decisions)
    part_task = {p.name: p.ps_task for d in decisions for p in d.parts if p.ps_task is not None}
    read_back = _read_back_by_every_worker(analysis.state, decisions, part_task)
    # TF places state colocated with other state (batch renormalization's moving deviation with the moving
    # variance) beside it, so the two live together: where their group's root does, on every worker if either is.
    names = {s.name for s in analysis.state}
    group = {s.name: s.colocated_with if s.colocated_with in names else s.name for s in analysis.state}
    groups_read_back = {group[x] for x in read_back if x in group}
    read_back |= {name for name in names if group[name] in groups_read_back}
    tasks = {}
    for s in sorted(analysis.state, key=lambda s: (group[s.name] != s.name, -(s.bytes or 0), s.name)):
        if group[s.name] != s.name:
            task = tasks[group[s.name]]
        elif s.name in read_back:
            task = None
        elif s.colocated_with in part_task:
            task = part_task[s.colocated_with]
        elif not with_servers or (s.colocated_with is not None and s.kind != "optimizer"):
            task = None
        else:
            task = min(range(len(load)), key=lambda t: (load[t], t))
            load[task] += s.bytes or 0
        tasks[s.name] = task
    # Written from a server's state as read back after the chief's write of it (batch renormalization's moving
    # variance, the square of its moving deviation as just updated): only the chief has that value, so the chief
    # writes it alone. Its other inputs are one device's (combined statistics), as in a mode without servers.
    from_chief_writes = {x for s in analysis.state if tasks[s.name] is not None for x in s.read_back_by}
    placed = [StatePlan(s.name, s.kind, tasks[s.name], tasks[s.name] is not None and s.kind == "update_ops"
                        and s.name not in from_chief_writes, tuple(s.written_by), s.colocated_with)
              for s in analysis.state]
    return tuple(sorted(placed, key=lambda s: s.name))


def _read_back_by_every_worker(state, decisions, part_task):
    """State whose value, read back after the step wrote it, feeds a write that every worker makes (a replica's
    update, a replicated average): every worker holds its own copy and writes it, as one device does. On a server
    only the chief's step writes it, after every worker's step, too late for the others' reads."""
    held = {p.name for d in decisions if d.method != Method.PS for p in d.parts}
    held |= {s.name for s in state if s.colocated_with is not None and s.kind != "optimizer"
             and s.colocated_with not in part_task}  # replicated beside a replica (_place_state)
    every_worker = set()
    grown = True
    while grown:
        grown = False
        for s in state:
            if s.name not in every_worker and any(x in held or x in every_worker for x in s.read_back_by):
                every_worker.add(s.name)
                grown = True
    return every_worker
