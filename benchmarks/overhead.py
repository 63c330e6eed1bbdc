"""Overhead: a 1-worker get_runner job against the same graph in a plain Session, on the LM (models/lm). Both run
in this process, in alternating blocks of steps, so that both see the same machine; the ratio is taken per pair of
blocks and the median reported. Target: >= 0.95.

    python benchmarks/overhead.py [--blocks 7] [--steps-per-block 100]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "models", "lm"), os.path.join(HERE, "..", "models")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402
import lm  # noqa: E402
import tensorflow as tf  # noqa: E402

import parallax  # noqa: E402

tf1 = tf.compat.v1


def build(args, vocab_size):
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        windows = lm.token_windows(args.data_dir, args.num_steps)
        model = lm.Model(windows.batch(args.batch_size), args, vocab_size)
    return graph, model


def timed(run, train_op, steps):
    start = time.perf_counter()
    for _ in range(steps):
        run(train_op)
    return steps / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--steps-per-block", type=int, default=100)
    bench = p.parse_args()
    tf1.disable_eager_execution()
    with tempfile.TemporaryDirectory() as data:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "lm", "make_data.py"), "--out", data],
                       check=True, capture_output=True)
        args = lm.parse_args(["--data-dir", data])
        vocab_size = len(lm.vocabulary(data))
        lines = common.header("Overhead of a 1-worker parallax job", {
            "model": f"LM (vocab {vocab_size}, batch {args.batch_size}, {args.num_steps} steps unrolled)",
            "blocks": bench.blocks, "steps per block": bench.steps_per_block})
        plain_graph, plain_model = build(args, vocab_size)
        session = tf1.Session(graph=plain_graph)
        with plain_graph.as_default():
            session.run([tf1.global_variables_initializer(), tf1.tables_initializer()])
        runner_graph, runner_model = build(args, vocab_size)
        runner = parallax.get_runner(runner_graph, "localhost:1", parallax.Config())
        for run, op in ((session.run, plain_model.train_op), (runner.run, runner_model.train_op)):
            timed(run, op, 20)  # warm-up
        lines += ["| block | plain Session steps/s | get_runner steps/s | ratio |", "|---|---|---|---|"]
        ratios = []
        for block in range(bench.blocks):
            plain = timed(session.run, plain_model.train_op, bench.steps_per_block)
            ours = timed(runner.run, runner_model.train_op, bench.steps_per_block)
            ratios.append(ours / plain)
            lines.append(f"| {block + 1} | {plain:.1f} | {ours:.1f} | {ours / plain:.3f} |")
            print(lines[-1], flush=True)
        runner.close()
        session.close()
    lines += ["", f"Median ratio get_runner / plain Session: **{common.median(ratios):.3f}** (target >= 0.95)."]
    common.write("overhead.md", lines)


if __name__ == "__main__":
    main()
