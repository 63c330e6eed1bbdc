"""The plan as JSON: what the launcher writes into the job's directory and every worker loads (docs/architecture.md
documents the schema). `loads(dumps(plan)) == plan`; `check_matches` checks a loaded plan against the worker's own
graph. Imports no TensorFlow."""
import dataclasses
import json

from parallax.errors import GraphMismatchError
from parallax.plan.records import Aggregation, GradientPlan, Method, PartPlan, Plan, StatePlan, VariablePlan

SCHEMA = "parallax-plan/1"


def to_data(plan):
    data = dataclasses.asdict(plan)
    data["placements"] = {name: [list(p) for p in placed] for name, placed in plan.placements}
    return {"schema": SCHEMA, **_plain(data)}


def dumps(plan):
    return json.dumps(to_data(plan), indent=1, sort_keys=True)


def loads(text):
    data = json.loads(text)
    if data.get("schema") != SCHEMA:
        raise GraphMismatchError(f"the plan file has schema {data.get('schema')!r}, but this parallax reads "
                                 f"{SCHEMA!r}; run every process of a job with the same parallax version")
    return from_data(data)


def from_data(data):
    variables = tuple(VariablePlan(
        v["name"], v["kind"], Method(v["method"]), v["bytes"], v["average"],
        tuple(PartPlan(p["name"], p["device"], p["ps_task"], tuple(p["slots"]), tuple(p["update_ops"]),
                       tuple(GradientPlan(g["scope"], g["values"], g["indices"], Aggregation(g["aggregation"]),
                                          g["merge_rows"])
                             for g in p["gradients"])) for p in v["parts"]),
        v["local_aggregation"], tuple(v["shape"]), v["dtype"]) for v in data["variables"])
    state = tuple(StatePlan(s["name"], s["kind"], s["ps_task"], s["aggregate"], tuple(s["written_by"]),
                            s["colocated_with"]) for s in data["state"])
    placements = tuple((name, tuple((op, device) for op, device in placed))
                       for name, placed in data["placements"].items())
    return Plan(data["run_option"], data["num_workers"], data["num_hosts"], variables, data["sync"], state,
                data["place_post_aggregation_ops"], tuple(data["worker_hosts"]), data["place_boundary_ops"],
                tuple(data["holders"]), data["backend"], placements, data.get("partitions"),
                tuple((name, axis) for name, axis in data.get("batch_draws", [])), data.get("batch_layout", "blocks"),
                tuple(data.get("unsplittable_draws", [])),
                tuple((name, law, tuple(readers)) for name, law, readers in data.get("batch_statistics", [])),
                tuple(data.get("uncombinable_statistics", [])),
                tuple((name, tuple(gradients)) for name, gradients in data.get("fused_batch_norms", [])),
                data.get("averaging", ""),
                tuple((name, tuple(axes), value) for name, axes, value in data.get("padded_inputs", [])),
                tuple((name, law) for name, law in data.get("loss_seeds", [])),
                tuple((name, index) for name, index in data.get("mean_term_edges", [])),
                tuple(data.get("unsharded_inputs", [])),
                tuple((name, examples) for name, examples in data.get("repeated_shards", [])),
                tuple((kind, name, tuple(readers)) for kind, name, readers in data.get("paired_rows", [])),
                data.get("reads_no_input", False),
                tuple((draw, runs, pred, kind, tuple(branches), count)
                      for draw, runs, pred, kind, branches, count in data.get("guarded_draws", [])),
                tuple((write, tuple(inputs)) for write, inputs in data.get("batchless_writes", [])))


def _plain(x):
    """Enums as their values, tuples as lists: JSON's own types."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (Method, Aggregation)):
        return x.value
    return x


def check_matches(plan, analysis, who="this process"):
    """Raise GraphMismatchError at the first trained variable where `analysis` (of this process's own graph)
    differs from the plan's: name, shape, dtype, parts, gradients, updates."""
    mine = {v.name: v for v in analysis.trained_variables}
    for name in sorted(set(mine) | {v.name for v in plan.variables}):
        if name not in mine:
            raise GraphMismatchError(f"{who}'s graph does not train {name!r}, which the job's plan has; every "
                                     f"process of a job must build the same graph (same script, arguments, data)")
        try:
            planned = plan.variable(name)
        except KeyError:
            raise GraphMismatchError(f"{who}'s graph trains {name!r}, which the job's plan does not have; every "
                                     f"process of a job must build the same graph (same script, arguments, "
                                     f"data)") from None
        own = mine[name]
        facts = [("shape", tuple(own.shape), planned.shape), ("dtype", own.dtype, planned.dtype),
                 ("parts", tuple(p.name for p in own.parts), tuple(p.name for p in planned.parts)),
                 ("gradients", tuple((g.values, g.indices) for p in own.parts for g in p.gradients),
                  tuple((g.values, g.indices) for g in planned.gradients)),
                 ("update ops", tuple(u for p in own.parts for u in p.update_ops),
                  tuple(u for p in planned.parts for u in p.update_ops))]
        for what, here, there in facts:
            if here != there:
                raise GraphMismatchError(f"{who}'s graph differs from the job's plan at variable {name!r}: {what} "
                                         f"{here} here, {there} in the plan; every process of a job must build the "
                                         f"same graph (same script, arguments, data)")
