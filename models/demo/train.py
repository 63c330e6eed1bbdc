"""The demo job: a small embedding + MLP regression, trained through parallax.

A single-device v1 script with the two parallax lines: `parallax.shard(ds)` and `parallax.get_runner(...)`.
Run it with `make demo`, or `python models/demo/train.py --resource-spec resource_specs/localhost.txt`.
"""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
VOCAB, DIM = 1000, 16


def make_dataset(batch_size, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(20000, 4)).astype(np.int64)
    targets = np.sin(ids).sum(axis=1).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((ids, targets)).repeat()
    ds = parallax.shard(ds)  # parallax line 1: each worker reads its own slice
    return ds.batch(batch_size)


def build_graph(batch_size, learning_rate):
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        ids, targets = tf1.data.make_one_shot_iterator(make_dataset(batch_size)).get_next()
        embedding = tf1.get_variable("embedding", [VOCAB, DIM], use_resource=True)
        features = tf.reduce_sum(tf.nn.embedding_lookup(embedding, ids), axis=1)
        hidden = tf1.layers.dense(features, 32, activation=tf.nn.relu, name="hidden")
        prediction = tf.squeeze(tf1.layers.dense(hidden, 1, name="out"), 1)
        loss = tf.reduce_mean(tf.square(prediction - targets), name="loss")
        step = tf1.train.get_or_create_global_step()
        train_op = tf1.train.AdamOptimizer(learning_rate).minimize(loss, global_step=step)
    return graph, loss, train_op


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resource-spec", default="resource_specs/localhost.txt")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--run-option", default="HYBRID", choices=("HYBRID", "PS", "MPI"))
    args = parser.parse_args()
    tf1.disable_eager_execution()

    graph, loss, train_op = build_graph(args.batch_size, args.learning_rate)
    print(parallax.analyze(graph), flush=True)
    config = parallax.Config(run_option=args.run_option)
    with parallax.get_runner(graph, args.resource_spec, config) as runner:  # parallax line 2
        start = time.time()
        first = None
        for step in range(1, args.steps + 1):
            value, _ = runner.run([loss, train_op])
            first = value if first is None else first
            if step % 50 == 0 or step == args.steps:
                print(f"[worker {runner.worker_id}/{runner.num_workers}] step {step}/{args.steps} "
                      f"loss {value:.4f} ({step / (time.time() - start):.0f} steps/s)", flush=True)
    print(f"done: loss {first:.4f} -> {value:.4f}")


if __name__ == "__main__":
    main()
