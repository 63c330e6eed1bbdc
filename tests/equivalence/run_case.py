"""Run one equivalence case and dump every global variable with np.savez.

  --mode single     the unmodified graph in a plain Session, global batch N*b
  --mode parallax   parallax.get_runner on `localhost:N`, N workers of batch b; the chief dumps
"""
import argparse
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

from parallax.plan import plan_json# noqa: E402
from parallax.process.protocol import ENV_ROLE  # noqa: E402
from tests.equivalence.cases import CASES  # noqa: E402
from tests.equivalence import random_graphs, write_order  # noqa: E402
from tests.equivalence.user_graphs import USER_GRAPHS  # noqa: E402

ALL_CASES = {**CASES, **USER_GRAPHS}


def case_builder(name):
    """A named case, or `random:<seed>` (random_graphs.py)."""
    if name.startswith("random:"):
        seed, features = random_graphs.parse(name)
        return lambda *args: random_graphs.build(seed, *args, features=features)
    return ALL_CASES[name]

tf1 = tf.compat.v1


def parser():
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
    p.add_argument("--check-steps", type=int, default=0, help="Config.check_steps, the check only warning")
    p.add_argument("--plan-out", help="--mode parallax: the chief also writes the job's plan (plan_json) here")
    p.add_argument("--reference-out", help="--mode parallax: the launching process also runs the graph as one "
                                           "process (--mode single) first and dumps it here")
    return p


def main():
    args = parser().parse_args()
    if args.case not in KEEPS_EAGER:
        tf1.disable_eager_execution()
    if _reference_made(args, launched=ENV_ROLE in os.environ):
        return
    values, fetched = train_worker(case_builder(args.case), args)
    if values is not None:
        _save(args.out, {**values, **fetched})


def _reference_made(args, launched):
    """Run the case as one process when asked: --mode single (then True: nothing else to do), or --reference-out in
    the process that launches the parallax run (not in its workers): TF is loaded there already, and loading it is
    most of a short run's CPU."""
    if args.mode == "single" or (args.reference_out and not launched):
        n, b = args.workers, args.batch
        run_single(case_builder(args.case)(n, b, args.steps, n * b, args.lr_scale), args.steps, n * b,
                   args.out if args.mode == "single" else args.reference_out)
    return args.mode == "single"


def run_in_threads(args, pool, timeout_s):
    """The case as `main` runs it, with the parallax run a thread job on `pool` (parallax/thread_job.py): the
    reference first when asked, then the chief's values saved to --out."""
    from parallax.thread_job import ThreadJob
    if _reference_made(args, launched=False):
        return
    build = case_builder(args.case)
    job = ThreadJob(pool, args.spec or f"localhost:{args.workers}", timeout_s=timeout_s)
    (values, fetched), *others = job.run(lambda: train_worker(build, args))
    for i, (_, theirs) in enumerate(others, 1):
        _check_fetched_alike(fetched, theirs, i)
    _save(args.out, {**values, **fetched})


def _check_fetched_alike(chiefs, theirs, worker):
    """A case with compared fetches: worker `worker` fetched what the chief fetched (the chief's are compared with
    one device's by the harness)."""
    from tests.equivalence.harness import F64_TOLERANCE
    assert sorted(theirs) == sorted(chiefs), f"worker {worker} fetched {sorted(theirs)}, the chief {sorted(chiefs)}"
    for key, value in chiefs.items():
        diff = float(np.max(np.abs(np.asarray(theirs[key], np.float64) - value))) if np.size(value) else 0.0
        assert diff <= F64_TOLERANCE, f"worker {worker}'s {key} differs from the chief's by {diff:.3g}: " \
                                      f"{theirs[key]} against {value}"


def config_of(case, args):
    """The parallax.Config of a case's run, from its command-line settings."""
    on = set(args.switches.split(",")) - {"none", ""}
    average = False if args.no_average else case.average
    return parallax.Config(run_option=args.run_option, average_dense=average, average_sparse=average, sync=args.sync,
                           local_aggregation="LA" in on,
                           place_post_aggregation_ops="OPAU" in on, place_boundary_ops="OPSW" in on,
                           methods=case.methods or {}, collective_backend=args.backend,
                           calibration=args.calibration, check_steps=args.check_steps, check_fails=False)


def train_worker(build, args):
    """One worker's part of the parallax run, as a user's script does it: build the graph for batch b, get_runner,
    the steps: (every global variable by name from the chief, None elsewhere; what its steps fetched, when the case
    compares that). A launched worker runs it in its process, a thread job's in its thread."""
    n, b = args.workers, args.batch
    case = build(n, b, args.steps, b, args.lr_scale)
    with case.graph.as_default():
        variables = sorted(tf1.global_variables(), key=lambda v: v.op.name)
    fetched = {}
    with parallax.get_runner(case.graph, args.spec or f"localhost:{n}", config_of(case, args)) as runner:
        i = runner.worker_id
        for k in range(args.steps):
            _keep_fetched(case, k, runner.run(case.fetch(k), case.feeds(k, k * n * b + i * b, b) if case.feeds
                                              else None), fetched)
        values = runner.run(variables)
        if runner.is_chief:  # rule 4 on the job's own rewritten graph (write_order.py)
            write_order.check(case.graph, runner._rewritten)
        if runner.is_chief and args.plan_out:
            with open(args.plan_out, "w") as f:
                f.write(plan_json.dumps(runner.plan))
        return ({v.op.name: value for v, value in zip(variables, values)} if runner.is_chief else None), fetched


def _keep_fetched(case, step, result, into):
    """Step `step`'s fetched values into `into` by position, when the case compares them."""
    if case.fetches_compared:
        for j, value in enumerate(tf.nest.flatten(result)):
            if value is not None:
                into[f"fetched:{step}:{j}"] = np.asarray(value)


KEEPS_EAGER = {"eager_left_on"}  # legal TF2 code: a graph built in `with tf.Graph().as_default()`, eager left on


def run_single(case, steps, batch, out=None):
    """The unmodified graph in a plain Session, `batch` examples a step: every global variable by name, and what the
    steps fetched when the case compares that (also saved to `out`)."""
    with case.graph.as_default():
        variables = sorted(tf1.global_variables(), key=lambda v: v.op.name)
        init = [tf1.global_variables_initializer(), tf1.local_variables_initializer()]  # a script runs both
    fetched = {}
    with tf1.Session(graph=case.graph) as sess:
        sess.run(init)
        for k in range(steps):
            _keep_fetched(case, k, sess.run(case.fetch(k), case.feeds(k, k * batch, batch) if case.feeds else None),
                          fetched)
        values = sess.run(variables)
    values = {**{v.op.name: value for v, value in zip(variables, values)}, **fetched}
    if out:
        _save(out, values)
    return values


def _save(path, values):
    # whole or absent: another test's run may be reading the same reference, or writing it at once (each process
    # writes its own part: two writing one part file left one of them nothing to rename, FileNotFoundError)
    part = f"{path}.{os.getpid()}-{threading.get_ident()}.part.npz"
    np.savez(part, **values)
    os.replace(part, path)


if __name__ == "__main__":
    # Through the module, not this __main__ copy of it: its functions are then the ones a tool that wraps them
    # (benchmarks/job_stages) sees, and one copy of the cases' registries exists.
    from tests.equivalence import run_case
    run_case.main()
