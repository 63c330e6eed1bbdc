"""parallax.shard cuts the stream right before the batch (shard_placement.py): the union of N workers' k-th
batches of b is one device's k-th batch of N*b, whatever the script writes between parallax.shard and the batch."""
import pytest
import tensorflow as tf

import parallax
from parallax.capture import shard_placement
from parallax.process import protocol

tf1 = tf.compat.v1
N, B, STEPS = 2, 3, 4


def _batches(make, environ, graph_seed=None):
    """The first STEPS batches of `make(parallax.shard)` as lists of rows, in a graph built under `environ`."""
    g = tf.Graph()
    with g.as_default():
        if graph_seed is not None:
            tf1.set_random_seed(graph_seed)
        old = {k: protocol.os.environ.get(k) for k in environ}
        protocol.os.environ.update(environ)
        try:
            ds = make(parallax.shard)
        finally:
            for k, v in old.items():
                protocol.os.environ.pop(k) if v is None else protocol.os.environ.__setitem__(k, v)
        nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        with tf1.Session(graph=g) as sess:
            return [sess.run(nxt).tolist() for _ in range(STEPS)]


def _worker(i, job="/tmp/parallax-job-test"):
    return {protocol.ENV_ROLE: "worker", protocol.ENV_WORKER_ID: str(i), protocol.ENV_NUM_WORKERS: str(N),
            protocol.ENV_JOB_DIR: job}


def _one_device_and_workers(pipeline, graph_seed=None):
    """pipeline(shard, b): the script's dataset with batch b."""
    one = _batches(lambda shard: pipeline(shard, N * B), {}, graph_seed)
    workers = [_batches(lambda shard: pipeline(shard, B), _worker(i), graph_seed) for i in range(N)]
    return one, workers


def _rows(x):
    return sorted(map(repr, x))


SOURCE = tf.data.Dataset.range  # built inside each graph
PIPELINES = {
    "shuffle": lambda shard, b: shard(SOURCE(40)).shuffle(16, seed=7).batch(b),
    "filter then map": lambda shard, b: shard(SOURCE(60)).filter(lambda x: x % 4 > 0).map(lambda x: x * 10).batch(b),
    "map, shuffle, prefetch": lambda shard, b: shard(SOURCE(40)).map(lambda x: x + 1).shuffle(8, seed=3)
    .prefetch(2).batch(b),
    "take, repeat": lambda shard, b: shard(SOURCE(11)).take(7).repeat().batch(b),
    "unbatch": lambda shard, b: shard(SOURCE(40).batch(5)).unbatch().shuffle(10, seed=1).batch(b),
    "interleave": lambda shard, b: shard(SOURCE(4)).interleave(lambda x: SOURCE(6).map(lambda y: x * 100 + y),
                                                            cycle_length=2).batch(b),
    "apply": lambda shard, b: shard(SOURCE(40)).apply(lambda d: d.shuffle(8, seed=2).skip(3)).padded_batch(b),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_workers_kth_batches_are_one_devices_kth_batch(name):
    one, workers = _one_device_and_workers(PIPELINES[name])
    for k in range(STEPS):
        assert _rows(sum((w[k] for w in workers), [])) == _rows(one[k]), (name, k)


def test_a_shuffle_seeded_by_the_graph_alone_is_the_same_in_every_worker():
    one, workers = _one_device_and_workers(lambda shard, b: shard(SOURCE(40)).shuffle(16).batch(b), graph_seed=5)
    assert [_rows(sum((w[k] for w in workers), [])) for k in range(STEPS)] == [_rows(x) for x in one]


def test_an_unseeded_shuffle_is_seeded_by_the_job_so_the_shares_do_not_overlap():
    workers = [_batches(lambda shard: shard(SOURCE(24)).shuffle(24).batch(B), _worker(i)) for i in range(N)]
    seen = [row for w in workers for batch in w for row in batch]
    assert len(seen) == len(set(seen)) == N * B * STEPS
    again = [_batches(lambda shard: shard(SOURCE(24)).shuffle(24).batch(B), _worker(i, "/tmp/other-job"))
             for i in range(N)]
    assert again != workers  # another job draws another permutation


def test_element_wise_transforms_run_on_the_share_and_a_batch_ends_the_deferral():
    g = tf.Graph()
    with g.as_default():
        ds = shard_placement.DeferredShard(SOURCE(8), (), N, 1, "parallax_shard", {}).map(lambda x: x * 2)
        batched = ds.batch(2)
    assert isinstance(ds, shard_placement.DeferredShard)
    assert not isinstance(batched, shard_placement.DeferredShard)
    mapped = [op for op in g.get_operations() if op.type == "MapDataset"]
    assert [op.inputs[0].op.type for op in mapped] == ["ShardDataset"]


def test_a_transform_in_no_fixed_order_takes_the_share():
    g = tf.Graph()
    with g.as_default():
        ds = shard_placement.DeferredShard(SOURCE(4), (), N, 0, "parallax_shard", {})
        mixed = ds.interleave(lambda x: SOURCE(3), cycle_length=2, num_parallel_calls=2, deterministic=False)
    assert not isinstance(mixed, shard_placement.DeferredShard)
    interleave, = [op for op in g.get_operations() if "Interleave" in op.type]
    assert interleave.inputs[0].op.type == "ShardDataset"


def test_a_v1_dataset_keeps_its_v1_methods():
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf1.data.Dataset.range(6))
        it = ds.make_one_shot_iterator()
        with tf1.Session(graph=g) as sess:
            assert sess.run(it.get_next()) == 0


def test_every_transform_of_this_tensorflow_has_a_place():
    assert shard_placement.unclassified() == []
