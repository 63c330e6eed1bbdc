"""Transform time: how long get_runner's analysis, plan and rewrite take against graph size (HYBRID plan for
2 hosts x 2 slots, so every pass runs). Medians over repeats; a PNG of the curve.

    python benchmarks/transform_time.py [--layers 25,50,100,200,400] [--repeats 3]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402
import tensorflow as tf  # noqa: E402

import parallax  # noqa: E402
from parallax.analysis.graph_analysis import analyze  # noqa: E402
from parallax.process.resource_spec import ResourceSpec  # noqa: E402
from parallax.plan.planning import plan_job  # noqa: E402
from parallax.rewrite import rewrite  # noqa: E402

tf1 = tf.compat.v1
SPEC = "127.0.0.1 slots=2\n127.0.0.2 slots=2"


def model_graph(layers):
    """An embedding (sparse) and `layers` dense layers, with global-norm clipping and Adam."""
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.placeholder(tf.int64, [None, 4])
        y = tf1.placeholder(tf.float32, [None, 1])
        emb = tf1.get_variable("embedding", [1000, 16], use_resource=True)
        h = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), 1)
        for i in range(layers):
            h = tf1.layers.dense(h, 16, activation=tf.nn.relu, name=f"dense{i}")
        loss = tf.reduce_mean(tf.square(tf1.layers.dense(h, 1, name="out") - y))
        opt = tf1.train.AdamOptimizer(1e-3)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        opt.apply_gradients(zip(clipped, variables), global_step=tf1.train.get_or_create_global_step())
    return graph


def measure(graph, config):
    start = time.perf_counter()
    analysis = analyze(graph)
    plan = plan_job(graph, analysis, ResourceSpec.load(SPEC), config)
    rewritten = rewrite(graph, plan, config)
    return time.perf_counter() - start, len(rewritten.graph.get_operations())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", default="25,50,100,200,400,600")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    tf1.disable_eager_execution()
    config = parallax.Config()
    lines = common.header("Transform time against graph size", {"plan": "HYBRID, 2 hosts x 2 slots",
                                                               "repeats": args.repeats})
    lines += ["| dense layers | nodes in | nodes out | median seconds | seconds per 1k input nodes |",
              "|---|---|---|---|---|"]
    points = []
    for layers in map(int, args.layers.split(",")):
        graph = model_graph(layers)
        nodes = len(graph.get_operations())
        times, out_nodes = [], 0
        for _ in range(args.repeats):
            seconds, out_nodes = measure(graph, config)
            times.append(seconds)
        t = common.median(times)
        points.append((nodes, t))
        lines.append(f"| {layers} | {nodes} | {out_nodes} | {t:.2f} | {t / nodes * 1000:.3f} |")
        print(lines[-1], flush=True)
    slope = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
    lines += ["", f"Slope between the smallest and the largest graph: {slope * 1000:.3f} s per 1k nodes."]
    common.write("transform_time.md", lines)
    _plot(points)


def _plot(points):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot([n for n, _ in points], [t for _, t in points], "o-")
    ax.axhline(5.0, color="grey", linestyle="--", linewidth=1, label="target at 20k nodes: 5 s")
    ax.axvline(20000, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("nodes in the user's graph")
    ax.set_ylabel("analyze + plan + rewrite (s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(common.RESULTS, "transform_time.png"), dpi=100)


if __name__ == "__main__":
    main()
