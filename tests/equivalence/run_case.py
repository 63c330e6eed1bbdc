"""Run one equivalence case and dump every global variable with np.savez.

  --mode single     the unmodified graph in a plain Session, global batch N*b
  --mode parallax   parallax.get_runner on `localhost:N`, N workers of batch b; the chief dumps
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

from parallax.launcher.protocol import ENV_ROLE  # noqa: E402
from tests.equivalence.cases import CASES  # noqa: E402
from tests.equivalence import random_graphs  # noqa: E402
from tests.equivalence.user_graphs import USER_GRAPHS  # noqa: E402

ALL_CASES = {**CASES, **USER_GRAPHS}


def case_builder(name):
    """A named case, or `random:<seed>` (random_graphs.py)."""
    if name.startswith("random:"):
        seed, features = random_graphs.parse(name)
        return lambda *args: random_graphs.build(seed, *args, features=features)
    return ALL_CASES[name]

tf1 = tf.compat.v1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", required=True, help=f"one of {sorted(ALL_CASES)}, or random:<seed>")
    p.add_argument("--mode", required=True, choices=("single", "parallax"))
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--batch", type=int, required=True, help="per-worker batch b")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--run-option", default="MPI")
    p.add_argument("--lr-scale", type=float, default=1.0)
    p.add_argument("--no-average", action="store_true", help="average_dense=average_sparse=False")
    p.add_argument("--async", dest="sync", action="store_false", help="Config(sync=False)")
    p.add_argument("--spec", help="resource spec text; default localhost:N")
    p.add_argument("--switches", default="LA,OPAU,OPSW", help="optimizations on: any of LA,OPAU,OPSW (or none)")
    p.add_argument("--backend", default="auto", help="Config.collective_backend")
    p.add_argument("--calibration", help="Config.calibration (run option AUTO)")
    p.add_argument("--reference-out", help="--mode parallax: the launching process also runs the graph as one "
                                           "process (--mode single) first and dumps it here")
    args = p.parse_args()
    build = case_builder(args.case)
    if args.case not in KEEPS_EAGER:
        tf1.disable_eager_execution()
    n, b = args.workers, args.batch
    if args.mode == "single" or (args.reference_out and ENV_ROLE not in os.environ):
        # As a reference for a parallax run, in its launching process (not its workers): TF is loaded here already,
        # and loading it is most of a short run's CPU.
        _run_single(build(n, b, args.steps, n * b, args.lr_scale), args.steps, n * b,
                    args.out if args.mode == "single" else args.reference_out)
        if args.mode == "single":
            return
    case = build(n, b, args.steps, b, args.lr_scale)
    with case.graph.as_default():
        variables = sorted(tf1.global_variables(), key=lambda v: v.op.name)
    on = set(args.switches.split(",")) - {"none", ""}
    average = False if args.no_average else case.average
    config = parallax.Config(run_option=args.run_option, average_dense=average, average_sparse=average, sync=args.sync,
                             local_aggregation="LA" in on,
                             place_post_aggregation_ops="OPAU" in on, place_boundary_ops="OPSW" in on,
                             methods=case.methods or {}, collective_backend=args.backend,
                             calibration=args.calibration)
    with parallax.get_runner(case.graph, args.spec or f"localhost:{n}", config) as runner:
        i = runner.worker_id
        for k in range(args.steps):
            runner.run(case.fetch(k), case.feeds(k, k * n * b + i * b, b) if case.feeds else None)
        values = runner.run(variables)
        if runner.is_chief:
            _dump(args.out, variables, values)


KEEPS_EAGER = {"eager_left_on"}  # legal TF2 code: a graph built in `with tf.Graph().as_default()`, eager left on


def _run_single(case, steps, batch, out):
    """The unmodified graph in a plain Session, `batch` examples a step."""
    with case.graph.as_default():
        variables = sorted(tf1.global_variables(), key=lambda v: v.op.name)
        init = [tf1.global_variables_initializer(), tf1.local_variables_initializer()]  # a script runs both
    with tf1.Session(graph=case.graph) as sess:
        sess.run(init)
        for k in range(steps):
            sess.run(case.fetch(k), case.feeds(k, k * batch, batch) if case.feeds else None)
        _dump(out, variables, sess.run(variables))


def _dump(path, variables, values):
    part = path + ".part.npz"  # whole or absent: another test's run may be reading the same reference
    np.savez(part, **{v.op.name: value for v, value in zip(variables, values)})
    os.replace(part, path)


if __name__ == "__main__":
    main()
