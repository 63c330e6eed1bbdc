"""The step time of a plan, predicted from measured inputs. Imports no TensorFlow.

Bytes follow the Parallax paper's Table 3, counted per host link and per server (so a hot link or server shows):
- AR (ring over the workers, ordered by host): each worker sends and receives 2(N-1)/N * b; the ring crosses each
  host's link once each way, so a host's link carries 2(N-1)/N * b out and in, the rest stays on the host.
- AG (ring allgather of every worker's a*b rows, every AG variable's in one collective): each ring edge carries
  (N-1) a b.
- PS: each worker pushes its gradient (b, or a*b rows) to the part's server and pulls as much back; with local
  aggregation (LA) a host's workers hand their rows to its first worker, which sends them in one message.
- A dense variable on a server costs each worker what its step reads of it, read off the graph
  (placement.server_reads): each read a worker consumes is a transfer, so a variable read twice is pulled twice.
- State a step writes (the global step, batch-norm statistics, EMA shadows) lives on a server when the plan has
  servers (plan._place_state): the chief's write is one message; averaged state (batch-norm statistics) also takes
  every worker's value first; and workers pull what they read of it. Without servers each worker updates its own
  copy, at no cost beyond its compute.
The rewrite's own rules per backend are modelled too: with TF's collectives a step that uses collectives and
servers ends with a fence (one more scalar gather), and local aggregation holds a host's rows on the host's server
rather than its first worker (collectives/__init__.py), which moves the same bytes within the host.
Time combines two bounds:
- the critical path: one worker's compute, its own communication CPU, the link time and the message rounds *
  latency. The link time has two phases, pushes and collectives, then pulls: each takes its busiest host's
  busier direction (bytes / bandwidth, less a shaper's burst the idle link has refilled: Machine.link_burst),
  since the pulls wait for the update. A worker sends its server messages of one round (push, then pull)
  concurrently, so a round costs its largest message, or all of them over the host's cores when that is more;
  between the rounds, the busiest part's server work (taking every worker's push, then the update), which runs
  serially;
- the CPU bound: every process's CPU seconds on a host (compute, and a per-byte and per-message cost of each
  method, which `parallax calibrate` measures) / the host's cores. This is the bound the 2-core test bed hits.
Their max holds only if the two overlap perfectly: no worker ever waits for a core, and no core ever idles. A host's
synchronous workers compute in the same phase of the step and wait on the link together, so the step is longer
than either bound, most so where the two are close. The step is their p-norm (combine_bounds), whose exponent the
script's own short real jobs measure (calibration.fit_in_job): p = 1 adds them (no overlap), p -> inf is the max.
"""
import dataclasses
from typing import Dict, Optional, Tuple

from parallax.plan.step_load import StepLoad

AR, AG, PS = "AR", "AG", "PS"
FENCED_BACKENDS = ("tf",)  # steps with collectives and servers end with a scalar gather (step_fence.py)


@dataclasses.dataclass(frozen=True)
class Machine:
    """Measured properties of the hosts (calibration.py measures them; the paper-scale benchmark states them)."""
    bandwidth: float  # bytes/s of a host's link, each direction
    latency: float  # seconds per message between hosts
    cores: float  # CPU cores per host
    cpu_per_byte: Dict[str, float]  # "allreduce/<backend>", "allgather/<backend>", "ps": CPU s per byte a process moves
    cpu_per_message: Dict[str, float]  # the same keys: CPU s per collective or per message, in each process
    update_cpu_per_byte: float = 0.0  # CPU s per byte of rows a sparse update applies
    machine_of_host: Tuple[int, ...] = ()  # hosts with the same number share `cores` (default: each its own)
    # "ps": CPU s that a step with any server variable costs each worker and each server once, whatever its messages
    cpu_per_step: Dict[str, float] = dataclasses.field(default_factory=dict)
    # the same keys: seconds one message round of that method waits on the critical path (default: `latency`)
    round_seconds: Dict[str, float] = dataclasses.field(default_factory=dict)
    # the same keys: bytes/s a method's transport gets from a host's link (default: `bandwidth`); gRPC over TCP
    # may get less of a fast link than MPI over verbs does
    link_bandwidth: Dict[str, float] = dataclasses.field(default_factory=dict)
    # p of the p-norm that combines the critical path and the CPU bound (combine_bounds); None: their max
    overlap_exponent: Optional[float] = None
    # bytes a link direction passes at once after it has idled (a shaper's token bucket; 0: none), refilled at
    # `bandwidth` while the step does anything but use that link
    link_burst: float = 0.0

    def round_time(self, key, rounds):
        return rounds * self.round_seconds.get(key, self.latency)

    def link_rate(self, key):
        return self.link_bandwidth.get(key, self.bandwidth)

    def machines_of(self, hosts):
        """The machine of each of `hosts` hosts: `machine_of_host`, or each host its own."""
        return self.machine_of_host if len(self.machine_of_host) == hosts else tuple(range(hosts))


def per_machine(values, machine_of_host):
    """{machine: the sum of its hosts' `values`}."""
    totals = {}
    for value, k in zip(values, machine_of_host):
        totals[k] = totals.get(k, 0.0) + value
    return totals


@dataclasses.dataclass(frozen=True)
class VariableLoad:
    name: str
    kind: str  # "dense" | "sparse"
    bytes: int
    alpha: float = 1.0  # rows one worker's step touches / rows (1 for dense)
    parts: int = 1
    # A dense variable on servers: what a worker's step reads of it (placement.server_reads), all parts together:
    # each read a worker consumes is a transfer. None: one copy of the variable.
    reads: Optional[Tuple[int, float]] = None  # (tensors, bytes)


@dataclasses.dataclass(frozen=True)
class StateLoad:
    """Non-trainable state a step writes (analysis.StateRecord): where it lives follows the plan's rule
    (plan._place_state), and on a server it costs messages like a variable does."""
    name: str
    bytes: int
    averaged: bool = False  # every worker sends its value (batch-norm statistics), the chief writes the mean
    colocated_with: Optional[str] = None
    optimizer: bool = False  # optimizer state (Adam's beta powers) goes to a server even beside a replica
    reads: Tuple[int, float] = (0, 0.0)  # what a worker's step reads of it on a server: (tensors, bytes)


@dataclasses.dataclass(frozen=True)
class Workload:
    compute_seconds: float  # one worker's step on one device (forward, backward, dense updates), wall time
    compute_cpu: float  # CPU seconds of that step
    variables: Tuple[VariableLoad, ...]
    state: Tuple[StateLoad, ...] = ()
    # Bytes of each value the workers gather every step for the statistics of the batch (batch_statistics.py,
    # fused_batch_norm.py): one collective each, in every mode.
    statistics: Tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Choice:
    """One variable's decision: method, the host of each part's server (PS), local aggregation (sparse PS)."""
    method: str
    servers: Tuple[int, ...] = ()
    local_aggregation: bool = False


@dataclasses.dataclass(frozen=True)
class Prediction:
    seconds: float
    critical_path: float
    cpu_bound: float
    link_bytes: Tuple[float, ...]  # per host: the larger of bytes out and in per step
    host_cpu: Tuple[float, ...]  # per host: CPU seconds per step, every process
    server_bytes: Tuple[float, ...]  # per host's server: bytes in + out per step
    bound: str  # "cpu" | "network" | "compute"
    link_seconds: float = 0.0  # the links' time per step (both phases), each method's bytes at its transport's rate


def predict(workload, choices, workers_per_host, machine, backend="tf"):
    """Prediction for `choices` ({variable name: Choice}) with `workers_per_host` (one entry per host)."""
    hosts, n = len(workers_per_host), sum(workers_per_host)
    load = StepLoad(hosts)
    by_method = {AR: [], AG: [], PS: []}
    for v in workload.variables:
        by_method[choices[v.name].method].append(v)
    collectives = _uses_collectives(workload, choices)
    if n > 1:
        _allreduce(load, by_method[AR], workers_per_host, machine, backend)
        _allgather(load, by_method[AG], workers_per_host, machine, backend)
        _servers(load, by_method[PS], choices, workers_per_host, machine, workload.state)
        _allgather(load, [VariableLoad(f"statistic {k}", "dense", b) for k, b in enumerate(workload.statistics)],
                   workers_per_host, machine, backend, applied=False)
        if collectives and by_method[PS] and backend in FENCED_BACKENDS:
            # the fence: one scalar gather per worker and step, after all its work
            _allgather(load, [VariableLoad("fence", "dense", 0)], workers_per_host, machine, backend, applied=False)
    link = [max(o, i) for o, i in zip(load.out, load.into)]
    compute = workload.compute_seconds + load.worker_cpu
    # the bucket refills while the step computes and waits on rounds, at most to its depth
    link_seconds = load.link_seconds(min(machine.link_burst / machine.bandwidth, compute + load.waits))
    network = link_seconds + load.waits
    critical = compute + network
    host_cpu = [w * workload.compute_cpu + c for w, c in zip(workers_per_host, load.cpu)]
    cpu_bound = max(per_machine(host_cpu, machine.machines_of(hosts)).values()) / machine.cores
    bound = "cpu" if cpu_bound > critical else ("network" if network > compute else "compute")
    return Prediction(combine_bounds(critical, cpu_bound, machine.overlap_exponent), critical, cpu_bound, tuple(link),
                      tuple(host_cpu), tuple(load.server), bound, link_seconds)


def _uses_collectives(workload, choices):
    return bool(workload.statistics) or any(c.method != PS for c in choices.values())


def aggregates_locally(workload, choices, backend):
    """Whether a host's local aggregation takes effect in `choices` (a sparse variable on a server has it), with
    any backend (TF's collectives hold the rows on the host's server)."""
    return any(c.local_aggregation for c in choices.values())


def combine_bounds(critical, cpu_bound, exponent=None):
    """The step from its two bounds: (critical^p + cpu_bound^p)^(1/p) with p = `exponent`, their max for None."""
    larger = max(critical, cpu_bound)
    if exponent is None or larger <= 0:
        return larger
    return larger * ((critical / larger) ** exponent + (cpu_bound / larger) ** exponent) ** (1 / exponent)


def _cost(machine, key, nbytes, messages=1.0):
    return nbytes * machine.cpu_per_byte.get(key, 0.0) + messages * machine.cpu_per_message.get(key, 0.0)


def _allreduce(load, variables, workers_per_host, machine, backend):
    """One fused collective for all dense AR gradients (analysis/fusion.py, the plan's fusion groups)."""
    if not variables:
        return
    n, hosts = sum(workers_per_host), len(workers_per_host)
    b = sum(v.bytes for v in variables)
    moved = 2 * (n - 1) / n * b  # sent by each worker, and received
    if hosts > 1:
        for h in range(hosts):
            load.send(h, (h + 1) % hosts, moved, machine.link_rate(f"allreduce/{backend}"))
    per_worker = _cost(machine, f"allreduce/{backend}", 2 * moved)
    for h, w in enumerate(workers_per_host):
        load.cpu[h] += w * per_worker
    load.worker_cpu += per_worker
    load.waits += machine.round_time(f"allreduce/{backend}", 2 * (n - 1))


def _allgather(load, variables, workers_per_host, machine, backend, applied=True):
    """The sparse variables' rows (each one's rows and indices packed together) in one collective (the plan's
    fusion groups), rows that every worker applies (`applied`); with `applied` False, statistics of the batch
    (batch_statistics.py): a collective each, whose values none applies."""
    if not variables:
        return
    n, hosts = sum(workers_per_host), len(workers_per_host)
    key = f"allgather/{backend}"
    collectives = 1 if applied else len(variables)
    moved = sum((n - 1) * v.alpha * v.bytes for v in variables)
    if hosts > 1:
        for h in range(hosts):
            load.send(h, (h + 1) % hosts, moved, machine.link_rate(key))
    per_worker = _cost(machine, key, 2 * moved, collectives) + \
        applied * sum(n * v.alpha * v.bytes for v in variables) * machine.update_cpu_per_byte  # each applies all
    for h, w in enumerate(workers_per_host):
        load.cpu[h] += w * per_worker
    load.worker_cpu += per_worker
    load.waits += machine.round_time(key, collectives * (n - 1))


def _state_at_servers(load, state, variables, choices, workers_per_host, machine):
    """The load of the state the servers hold; returns (its messages' costs, its busiest accumulator's serial work)."""
    messages, serial = [], 0.0
    bandwidth = machine.link_rate("ps")
    for item, s in _state_on_servers(state, variables, choices, len(workers_per_host)):
        # Averaged state: every worker's value into an accumulator at its server, then the chief's write; other
        # state: the chief's write alone. Both sides pay per message, as for a variable.
        senders = workers_per_host if item.averaged else [1 if h == 0 else 0 for h in range(len(workers_per_host))]
        read_tensors, read_bytes = item.reads
        for h, (w, sending) in enumerate(zip(workers_per_host, senders)):
            load.send(h, s, sending * item.bytes, bandwidth)
            load.send(s, h, w * read_bytes, bandwidth, "pull")
            load.server[s] += sending * item.bytes + w * read_bytes
            for side in (s, h):
                load.cpu[side] += _cost(machine, "ps", sending * item.bytes + w * read_bytes,
                                        sending + w * read_tensors)
        if item.averaged:
            load.cpu[s] += _cost(machine, "ps", 0, 1)  # the chief's write of the mean
        messages.append(_cost(machine, "ps", item.bytes))
        serial = max(serial, _cost(machine, "ps", sum(senders) * item.bytes, sum(senders) + item.averaged))
    return messages, serial


def _servers(load, variables, choices, workers_per_host, machine, state=()):
    if not variables:
        return  # no servers: every worker keeps its own copy of the state (plan._place_state)
    load.waits += machine.round_time("ps", 3)  # push, the servers' barrier, pull
    step = machine.cpu_per_step.get("ps", 0.0)
    messages = []  # one worker's pushes (and as many pulls): concurrent within a round
    serial = 0.0  # the busiest part's own work at its server
    bandwidth = machine.link_rate("ps")
    n = sum(workers_per_host)
    for h, w in enumerate(workers_per_host):
        load.cpu[h] += w * step
    for s in sorted({s for v in variables for s in choices[v.name].servers}):
        load.cpu[s] += step
    for v in variables:
        choice = choices[v.name]
        part = v.bytes / max(len(choice.servers), 1)
        rows = v.alpha * part if v.kind == "sparse" else part
        # what a worker pulls from each part: its rows, or the reads of a dense variable (one transfer each)
        pulled, pulls = (rows, 1.0) if v.kind == "sparse" or v.reads is None else \
            (v.reads[1] / len(choice.servers), v.reads[0] / len(choice.servers))
        la = choice.local_aggregation and v.kind == "sparse"
        for s in choice.servers:
            for h, w in enumerate(workers_per_host):
                pushers = 1 if la and w > 1 else w  # LA: the host's first worker sends every row of the host
                load.send(h, s, w * rows, bandwidth)  # the same bytes either way; LA saves messages, not bytes
                load.send(s, h, w * pulled, bandwidth, "pull")  # each worker pulls its own
                load.server[s] += w * (rows + pulled)
                load.cpu[s] += _cost(machine, "ps", w * (rows + pulled), pushers + w * pulls)  # the server's side
                load.cpu[h] += _cost(machine, "ps", w * (rows + pulled), pushers + w * pulls)  # the workers' side
                if la and w > 1:
                    load.cpu[h] += _cost(machine, "ps", 2 * (w - 1) * rows, 2 * (w - 1))  # the local hop
            applied = min(1.0, n * v.alpha) * part if v.kind == "sparse" else part
            load.cpu[s] += applied * machine.update_cpu_per_byte
            messages.append(_cost(machine, "ps", rows))
            # One part's accumulator takes the pushes one at a time and its update follows them: however many
            # cores the server has, the step waits for its busiest part (why the paper partitions variables).
            serial = max(serial, _cost(machine, "ps", n * rows, n) + applied * machine.update_cpu_per_byte)
    state_messages, state_serial = _state_at_servers(load, state, variables, choices, workers_per_host, machine)
    messages += state_messages
    serial = max(serial, state_serial)
    round_ = max(max(messages, default=0.0), sum(messages) / machine.cores)
    load.worker_cpu += step + 2 * round_ + serial


def _state_on_servers(state, variables, choices, hosts):
    """(state, server host) for the state that lives on a server when the plan has servers, by plan._place_state's
    rule: beside the variable or state it is colocated with when that one is on a server; replicated beside a
    replica (optimizer state excepted); otherwise on the least loaded server, largest first."""
    server_of = {}
    for v in variables:  # a variable's parts are named as TF's partitioner names them
        for k, s in enumerate(choices[v.name].servers):
            server_of.setdefault(v.name, s)
            server_of[f"{v.name}/part_{k}"] = s
    load = [0.0] * hosts
    for v in variables:
        for s in choices[v.name].servers:
            load[s] += v.bytes / len(choices[v.name].servers)
    out = []
    names = {x.name for x in state}
    # state colocated with other state (renormalization's moving deviation) goes where that state goes, after it
    for item in sorted(state, key=lambda x: (x.colocated_with in names, -x.bytes, x.name)):
        if item.colocated_with in server_of:
            out.append((item, server_of[item.colocated_with]))
            server_of.setdefault(item.name, server_of[item.colocated_with])
        elif item.colocated_with is None or item.optimizer:
            s = min(range(hosts), key=lambda t: (load[t], t))
            load[s] += item.bytes
            out.append((item, s))
            server_of.setdefault(item.name, s)
    return out
