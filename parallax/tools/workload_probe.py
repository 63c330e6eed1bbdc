"""The workload half of a calibration: how long one worker's step of the user's own graph takes on one device, and
the fraction of each sparse variable's rows a step touches. parallax-calibrate runs the training script in role
`calibrate` (python -m parallax.tools.workload_probe OUT script.py [args]); its get_runner call lands here.

A step is every trained variable's update (what a training op runs), on a copy of the graph with its variables
initialized: nothing of the user's is trained or written.
"""
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

from parallax.analysis.graph_analysis import analyze
from parallax.errors import ConfigError
from parallax.process import protocol
from parallax.process.script_roles import run_script_in_role

tf1 = tf.compat.v1
WARMUP = 3


def measure(graph, steps=10):
    """{"compute_seconds", "compute_cpu", "alpha": {sparse variable: a}} over `steps` steps after a warm-up."""
    analysis = analyze(graph)
    if not analysis.trained_variables:
        raise ConfigError("parallax-calibrate: the graph trains no variable, so it has no step to time")
    copy = tf.Graph()
    with copy.as_default():
        tf1.train.import_meta_graph(tf1.train.export_meta_graph(graph=graph))
        updates = [copy.get_operation_by_name(u) for v in analysis.trained_variables for p in v.parts
                   for u in p.update_ops]
        indices = {v.name: [copy.get_tensor_by_name(p.gradient.indices) for p in v.parts]
                   for v in analysis.trained_variables if v.kind == "sparse" and v.shape
                   and all(p.gradient and p.gradient.indices for p in v.parts)}
        init = [tf1.global_variables_initializer(), tf1.local_variables_initializer(), tf1.tables_initializer()]
        rows = {v.name: v.shape[0] for v in analysis.trained_variables}
    walls, cpus, touched = [], [], {name: 0 for name in indices}
    with tf1.Session(graph=copy) as session:
        session.run(init)
        for k in range(WARMUP + steps):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                _, seen = session.run([updates, indices])
            except tf.errors.InvalidArgumentError as e:
                if "must feed a value for placeholder" in str(e):
                    raise ConfigError("parallax-calibrate times one step of the graph on its own input, but this "
                                      "graph takes its input from placeholders (feed_dict); give the step time "
                                      "instead: parallax-calibrate --compute-seconds S") from None
                raise
            if k >= WARMUP:
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                for name, parts in seen.items():
                    touched[name] += sum(p.size for p in parts)
    return {"compute_seconds": float(np.median(walls)), "compute_cpu": float(np.median(cpus)),
            "alpha": {name: min(1.0, count / steps / rows[name]) for name, count in touched.items()}}


def measure_into(out, graph, steps=10):
    """measure(graph), written to the file `out` as JSON, and said in one line."""
    result = measure(graph, steps)
    with open(out, "w") as f:
        json.dump(result, f)
    print(f"parallax-calibrate: one worker step takes {result['compute_seconds'] * 1000:.1f} ms "
          f"({result['compute_cpu'] * 1000:.1f} ms CPU)", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m parallax.tools.workload_probe OUT.json script.py [script args]", file=sys.stderr)
        return 2
    out, script, *script_args = argv
    out = os.path.abspath(out)
    role = {protocol.ENV_ROLE: "calibrate"}
    if run_script_in_role(script, script_args, role, lambda graph, spec, config: measure_into(out, graph)):
        return 0
    print("parallax-calibrate: the script ended without calling parallax.get_runner", file=sys.stderr)
    return 1


if __name__ == "__main__":
    tf1.disable_eager_execution()
    sys.exit(main())
