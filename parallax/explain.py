"""`parallax.explain`: what a job would do, without starting any process.

    parallax.explain(graph, "resource_specs/cluster.txt")              # prints the table, returns Explanation
    python -m parallax.explain train.py --resource-spec F [script args]  # the same, for a training script

The plan shown is the very record the rewrite consumes, placements included (explain runs analysis and planning in
this process; nothing is rewritten). Traffic is predicted per training step by the Parallax paper's Table 3, as the bytes the step moves
between processes, each byte counted once, divided by the number of workers N: PS 2b (dense) or 2ab (sparse: each
worker pushes its gradient rows and pulls as many rows), AllReduce 2(N-1)b/N (ring: every worker sends that much),
AllGather (N-1)ab (every worker receives the other N-1 workers' rows). Here b is the variable's bytes and a the
fraction of its rows one worker's step touches: from the static shape of the gradient's indices, or measured by
running the graph's input pipeline for a few batches (`measure_sparsity`, `--measure-sparsity K`).
"""
import argparse
import dataclasses
import json
import os
import sys
from typing import Dict, Optional, Tuple

import tensorflow as tf

from parallax.rules import batch_draws, batch_statistics, input_sharding, loss_law, loss_seeds
from parallax.analysis.graph_analysis import analyze
from parallax.core.callable_module import make_callable
from parallax.config import Config
from parallax.errors import ConfigError
from parallax.process.resource_spec import ResourceSpec
from parallax.plan import auto_plan, plan_json
from parallax.plan.placement import server_devices
from parallax.plan.records import Plan
from parallax.plan.planning import plan_job
from parallax.core.text_table import format_table
from parallax.process import protocol
from parallax.process.script_roles import run_script_in_role


@dataclasses.dataclass(frozen=True)
class VariableTraffic:
    variable: str
    method: str
    bytes: Optional[int]
    sparsity: Optional[float]  # a: the fraction of rows a worker's step touches (sparse only; None = unknown)
    bytes_per_step: Optional[int]  # moved per step / N workers (module doc); None when it cannot be predicted


@dataclasses.dataclass(frozen=True)
class Explanation:
    plan: Plan
    traffic: Tuple[VariableTraffic, ...]
    placements: Dict[str, Tuple[Tuple[str, str], ...]]  # placement pass -> ((op, device), ...)
    premise: str = ""  # when N workers of batch b compute exactly what one device computes with batch N*b
    # With a calibration (run_option="AUTO", or Config.calibration): the cost model's predicted step seconds per
    # mode, why each variable got its method, and what bounds the step (auto_plan.predictions).
    predicted: Optional[Dict[str, float]] = None
    reasons: Optional[Dict[str, str]] = None
    bound: str = ""
    measured: Optional[Dict[str, float]] = None  # the calibration's real jobs: step seconds per fixed mode
    basis: str = ""  # what AUTO's choice rests on: "model", or "measured <MODE>"
    cpu_scales: Optional[Dict[str, float]] = None  # each method's CPU costs, scaled to the real jobs (calibration.py)
    overlap_exponent: Optional[float] = None  # p of the p-norm of the model's two bounds (None: their max)

    def to_data(self):
        return {"plan": plan_json.to_data(self.plan), "traffic": [dataclasses.asdict(t) for t in self.traffic],
                "bytes_per_step": self.bytes_per_step, "premise": self.premise, "predicted_seconds": self.predicted,
                "measured_seconds": self.measured, "auto_basis": self.basis, "cpu_scales": self.cpu_scales,
                "overlap_exponent": self.overlap_exponent, "reasons": self.reasons,
                "placements": {k: [list(p) for p in v] for k, v in self.placements.items()}}

    @property
    def bytes_per_step(self):
        """Predicted bytes per worker per step over all variables, or None if any is unknown."""
        values = [t.bytes_per_step for t in self.traffic]
        return None if None in values else sum(values)

    def __str__(self):
        p = self.plan
        lines = [f"parallax plan: run_option={p.run_option}, {p.num_workers} workers on {p.num_hosts} host(s), "
                 f"sync={p.sync}", format_table(self._variable_rows())]
        total = self.bytes_per_step
        lines.append("predicted traffic per worker per step (Table 3): "
                     + ("unknown (a sparsity is unknown)" if total is None else f"{_num(total)} bytes"))
        for name, moved in self.placements.items():
            lines.append(f"{name}: {len(moved)} ops placed")
            lines += [f"  {op} -> {device}" for op, device in moved[:20]]
            if len(moved) > 20:
                lines.append(f"  ... and {len(moved) - 20} more")
        if p.state:
            lines.append(p.state_summary())
        lines += p.fusion_summaries()
        lines += p.sync_summaries()
        lines += p.batch_summaries()
        if p.counted_inputs:
            lines.append("example counts (each synchronized step reports them; the launcher compares the workers'): "
                         + ", ".join(f"{c.op} (from {c.tensor}{', a sparse dense shape' * c.dense_shape})"
                                     for c in p.counted_inputs))
        if p.partitions is not None:
            lines.append(f"partitions: AUTO splits the variables parallax.get_partitioner splits into {p.partitions} "
                         f"shards (a job runs the script with that number)")
        if self.predicted:
            lines += self._cost_lines()
        if self.premise:
            lines.append(self.premise)
        return "\n".join(lines)

    def _variable_rows(self):
        traffic = {t.variable: t for t in self.traffic}
        rows = [("variable", "kind", "bytes", "method", "server(s)", "partitions", "local agg", "a", "bytes/step")]
        for v in self.plan.variables:
            t = traffic[v.name]
            rows.append((v.name, v.kind, _num(v.bytes), _METHOD_NAMES[str(v.method)],
                         ",".join(f"ps{k}" for k in v.ps_tasks) or "-", str(max(1, len(v.ps_tasks))),
                         ("on host ps" if self.plan.rows_held_on_servers else "yes") if v.local_aggregation
                         else "no",
                         "-" if v.kind == "dense" else ("unknown" if t.sparsity is None else f"{t.sparsity:.3g}"),
                         "unknown" if t.bytes_per_step is None else _num(t.bytes_per_step)))
        return rows

    def _cost_lines(self):
        """What the cost model predicted, what the calibration measured, and why AUTO chose each method."""
        p = self.plan
        lines = ["predicted step time (cost model, calibration of the hosts): " + ", ".join(
            f"{mode} {seconds * 1000:.1f} ms" for mode, seconds in self.predicted.items())
            + f"; the step is {self.bound}-bound"]
        if self.measured:
            lines.append("measured step time (the calibration's real jobs): " + ", ".join(
                f"{mode} {seconds * 1000:.1f} ms" for mode, seconds in sorted(self.measured.items())))
        if self.cpu_scales:
            lines.append("communication CPU, the probes' costs scaled to the real jobs: " + ", ".join(
                f"{group} x{scale:.2f}" for group, scale in sorted(self.cpu_scales.items())))
        if self.measured:
            lines.append("the step from its critical path and CPU bound, as the real jobs overlapped them: "
                         + ("their max" if self.overlap_exponent is None else
                            f"their {self.overlap_exponent:g}-norm (1 would add them)"))
        if p.run_option == "AUTO" and self.basis != "model":
            lines.append(f"AUTO runs the plan of the fixed mode {self.basis.split()[-1]}: its expected step "
                         f"(the mean of its real job's and of its prediction scaled by the model's error on "
                         f"the real jobs) is below that of the model's best plan (the same, when that is a fixed "
                         f"mode's plan; otherwise its scaled prediction)")
        if p.run_option == "AUTO":
            lines += [f"  {name}: {_METHOD_NAMES[str(p.variable(name).method)]}; {why}"
                      for name, why in sorted(self.reasons.items())]
        return lines


def premise(plan, analysis):
    """The condition under which the plan is exactly single-device equivalent (docs/modes.md)."""
    if plan.noted(input_sharding.READS_NO_INPUT):  # no condition makes N copies of one step one device's step
        return f"not exact: {plan.noted(input_sharding.READS_NO_INPUT)}"
    averaged = {v.average for v in plan.variables}
    loss = (loss_seeds.loss_words(plan.loss_seeds, plan.mean_term_edges) if plan.loss_seeds else
            "a mean over the batch" if averaged == {True} else "a sum over the batch" if averaged == {False}
            else "a mean over the batch for averaged variables, a sum for the others")
    # The note says why the loss could not be checked, and what to set if it is a sum.
    averaging = "; ".join(filter(None, [plan.averaging if plan.averaging != loss_law.NOT_CHECKED else "",
                                        plan.noted(loss_law.UNCHECKED_LOSS)]))
    text = (f"exact: {plan.num_workers} workers of batch b compute what one device computes with batch "
            f"{plan.num_workers}*b when the loss is {loss} (average_dense/average_sparse: True for a mean, False "
            f"for a sum{'; ' + averaging if averaging else ''}), and every worker runs the same sequence "
            f"of synchronized steps")
    text += ", each worker's batch being its share of the global batch, of the same size in every worker"
    if plan.num_workers > 1 and plan.sync:
        text += (" (a step whose batches differ, at the end of data whose size is not a multiple of N*b, is warned "
                 "about when it runs)")
    if plan.padded_inputs:
        text += (f"; {len(plan.padded_inputs)} input(s) padded to the batch's longest example are padded further, "
                 f"with the dataset's padding value, to the longest over every worker, as one device pads its batch")
    if plan.batch_draws:
        share = ("every N-th example (the input is sharded element-wise)" if plan.batch_layout == "interleaved"
                 else "a block of the global batch's examples, in worker order")
        text += (f"; {len(plan.batch_draws)} random draw(s) whose shape follows the batch (dropout) draw for the whole "
                 f"batch with the same seed as one device, each worker keeping its share: {share}")
    text += "".join(f"; {note}" for note in (batch_draws.unsplittable_note(plan), batch_draws.guarded_note(plan))
                    if note)
    if plan.batchless_writes:
        text += (f"; a step whose input ends (an epoch's last) writes nothing: {len(plan.batchless_writes)} write(s) "
                 f"of the step that read no input (an optimizer's slot decays) wait for the batch, where one device "
                 f"runs them before the end stops its step (warned when the data ends)")
    if plan.batch_statistics:
        text += (f"; {len(plan.batch_statistics)} statistic(s) of the batch that the step computes with (a token "
                 f"count a loss divides by, batch norm's moments, the gradients flowing into them) are every "
                 f"worker's values combined, so each worker computes its share of one device's step")
    if plan.fused_batch_norms:
        text += (f"; {len(plan.fused_batch_norms)} fused batch norm(s) normalize with the whole batch's mean and "
                 f"variance")
    if plan.uncombinable_statistics:
        text += f"; {batch_statistics.uncombinable_note(plan)}"
    text += "".join(f"; {plan.noted(kind)}" for kind in (input_sharding.UNSHARDED_INPUTS,
                                                         input_sharding.REPEATED_SHARDS) if plan.noted(kind))
    return text


_METHOD_NAMES = {"LOCAL": "local (1 worker)", "AR": "AllReduce", "AG": "AllGather", "PS": "PS"}


def explain(graph, resource_spec, config=None, print_table=True, measure_sparsity=0):
    """Analyze and plan `graph` for `resource_spec` in this process; print and return the Explanation.
    `measure_sparsity=K`: measure each sparse variable's `a` as the mean over K batches of the graph's own input
    (a copy of the graph runs its gradients' indices; nothing is trained), instead of from static shapes."""
    config = Config() if config is None else config
    if isinstance(measure_sparsity, bool) or not isinstance(measure_sparsity, int) or measure_sparsity < 0:
        raise ConfigError(f"explain: measure_sparsity={measure_sparsity!r} must be a number of batches >= 0")
    spec = ResourceSpec.load(resource_spec)
    analysis = analyze(graph)
    plan = plan_job(graph, analysis, spec, config)
    sparse = [r for r in analysis.variables if r.kind == "sparse"]
    measured = _measured_sparsity(graph, sparse, measure_sparsity) if measure_sparsity and sparse else {}
    traffic = tuple(_traffic(graph, analysis.variable(v.name), v, plan.num_workers, measured.get(v.name))
                    for v in plan.variables)
    on_servers = server_devices(graph, plan)[0]
    placements = {"place_variables_on_servers": tuple(sorted(on_servers.items()))} if on_servers else {}
    placements.update({name: tuple((op, device or "worker") for op, device in moved)
                       for name, moved in plan.placements})
    predicted = auto_plan.predictions(graph, analysis, spec, config)
    result = Explanation(plan, traffic, placements, premise(plan, analysis),
                         *(predicted if predicted else (None, None, "", None, "", None, None)))
    if print_table:
        print(result, flush=True)
    return result


def _traffic(graph, record, vp, n, measured=None):
    b = vp.bytes
    a = (measured if measured is not None else auto_plan.static_sparsity(graph, record)) if vp.kind == "sparse" else None
    # A replicated variable's IndexedSlices gradients are all-gathered, its dense ones all-reduced (plan/records.py).
    method = ("AG" if vp.kind == "sparse" else "AR") if vp.method.replicated else str(vp.method)
    if b is None or (vp.kind == "sparse" and method in ("PS", "AG") and a is None):
        return VariableTraffic(vp.name, str(vp.method), b, a, None)
    formula = {"LOCAL": lambda: 0, "AR": lambda: 2 * (n - 1) * b / n, "AG": lambda: (n - 1) * a * b,
               "PS": lambda: 2 * a * b if vp.kind == "sparse" else 2 * b}[method]
    return VariableTraffic(vp.name, str(vp.method), b, a, int(round(formula())))


def _measured_sparsity(graph, records, batches):
    """{variable: mean rows touched per batch / rows} over `batches` batches, from a copy of `graph` with its
    variables and tables initialized. Variables whose gradient has no indices tensor are left out."""
    tf1 = tf.compat.v1
    copy = tf.Graph()
    with copy.as_default():
        tf1.train.import_meta_graph(tf1.train.export_meta_graph(graph=graph))
        init = [tf1.global_variables_initializer(), tf1.tables_initializer()]
        fetches = {r.name: [copy.get_tensor_by_name(p.gradient.indices) for p in r.parts]
                   for r in records if r.shape and all(p.gradient and p.gradient.indices for p in r.parts)}
        counts = {name: 0 for name in fetches}
        with tf1.Session(graph=copy) as session:
            session.run(init)
            for _ in range(batches):
                for name, sizes in session.run(fetches).items():
                    counts[name] += sum(s.size for s in sizes)
    rows = {r.name: r.shape[0] for r in records}
    return {name: min(1.0, count / batches / rows[name]) for name, count in counts.items()}


def _num(n):
    return "?" if n is None else f"{n:,}"


# ---- command line -------------------------------------------------------------------------------------------
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m parallax.explain",
        usage="python -m parallax.explain SCRIPT [--resource-spec F] [--measure-sparsity K] [--json] "
              "[script arguments] [-- script arguments]",
        description="Build a training script's graph without training, and print what parallax would do with it. "
                    "The options below are explain's wherever they stand; every other argument, and everything "
                    "after `--`, goes to the script.")
    parser.add_argument("script", help="the training script (it calls parallax.get_runner)")
    parser.add_argument("--resource-spec", help="the spec to plan for (default: the one the script passes)")
    parser.add_argument("--measure-sparsity", type=int, default=0, metavar="K",
                        help="measure each sparse variable's a over K batches of the script's input instead of "
                             "from static shapes (needs the input data; trains nothing)")
    parser.add_argument("--json", action="store_true",
                        help="print the plan, the traffic and the premise as JSON (the plan as the job loads it)")
    argv = sys.argv[1:] if argv is None else list(argv)
    head, tail = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args, script_args = parser.parse_known_args(head)
    args.script_args = script_args + tail
    if not os.path.isfile(args.script):
        parser.error(f"script {args.script!r} does not exist")
    role = {protocol.ENV_ROLE: "explain"}
    if args.resource_spec:
        role[protocol.ENV_RESOURCE_SPEC] = str(ResourceSpec.load(args.resource_spec))

    def explain_the_graph(graph, spec, config):
        result = explain(graph, spec, config, print_table=not args.json, measure_sparsity=args.measure_sparsity)
        if args.json:
            print(json.dumps(result.to_data(), indent=1, sort_keys=True), flush=True)

    if run_script_in_role(args.script, args.script_args, role, explain_the_graph):
        return 0
    print("parallax.explain: the script ended without calling parallax.get_runner", file=sys.stderr)
    return 1


make_callable(__name__, explain)  # parallax.explain(...) also once this module has been imported

if __name__ == "__main__":
    # eager stays on: a TF2 script (a training step, a Keras model) needs it; a v1 script turns it off itself
    sys.exit(main())
