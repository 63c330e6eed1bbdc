"""Fusion of gradients into one collective (analysis/fusion.py): which gradients may share a buffer, and the
rewritten graph's collectives. Exactness of fused plans is the equivalence suite's (two_losses_own_inputs there
fails if the rule below is wrong)."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.plan.planning import plan_job
from parallax.rewrite import rewrite
from parallax.analysis.fusion import effect_signatures, fusion_groups

tf1 = tf.compat.v1
COLLECTIVE_TYPES = {"horovod": {"HorovodAllreduce"}, "tf": {"CollectiveReduceV2"}}


def _grads(loss, variables):
    return [g for g in tf1.gradients(loss, variables)]


def _groups(grads):
    return [[grads.index(t) for t in group] for group in fusion_groups(grads, lambda t: [t], lambda t: t.shape.is_fully_defined())]


def test_gradients_of_one_loss_share_a_buffer_per_dtype():
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        w1, w2 = tf1.get_variable("w1", [3, 4]), tf1.get_variable("w2", [4, 1])
        w3 = tf1.get_variable("w3", [3, 1], dtype=tf.float64)
        loss = tf.reduce_sum(tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)) + \
            tf.cast(tf.reduce_sum(tf.matmul(tf.cast(x, tf.float64), w3)), tf.float32)
        assert _groups(_grads(loss, [w1, w2, w3])) == [[0, 1], [2]]


def test_gradients_behind_different_inputs_or_random_ops_do_not_share():
    with tf.Graph().as_default():
        xa, xb = tf1.placeholder(tf.float32, [None, 3]), tf1.placeholder(tf.float32, [None, 3])
        wa, wb, wc = (tf1.get_variable(n, [3, 1]) for n in ("wa", "wb", "wc"))
        dropped = tf.nn.dropout(xb, rate=0.5, seed=1)  # a stateful random op only wc's gradient runs
        loss = tf.reduce_sum(tf.matmul(xa, wa)) + tf.reduce_sum(tf.matmul(xb, wb)) + \
            tf.reduce_sum(tf.matmul(dropped, wc))
        grads = _grads(loss, [wa, wb, wc])
        signatures = effect_signatures(grads)
        assert {op.type for op in signatures[grads[2]]} >= {"Placeholder", "RandomUniform"}
        assert _groups(grads) == [[0], [1], [2]]


def test_a_gradient_of_unknown_shape_is_reduced_alone():
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        w = tf1.get_variable("w", [3, 1])
        loss = tf.reduce_sum(tf.matmul(x, w))
        g = _grads(loss, [w])[0]
        unknown = tf1.placeholder_with_default(g, None)
        assert _groups([g, unknown, g * 2.0]) == [[0, 2], [1]]


@pytest.mark.parametrize("backend", sorted(COLLECTIVE_TYPES))
def test_a_model_with_many_dense_variables_runs_one_allreduce(backend):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [8, 5], name="x")
        h = x
        for i in range(6):
            h = tf1.layers.dense(h, 5, tf.tanh, name=f"layer{i}")
        loss = tf.reduce_mean(tf.square(h))
        train = tf1.train.AdamOptimizer(0.01).minimize(loss, tf1.train.get_or_create_global_step())
    # averaged by dividing the aggregate (a mean loss left to the law starts its gradients at 1/N instead)
    config = parallax.Config(run_option="MPI", collective_backend=backend, average_dense=True, average_sparse=True)
    spec = parallax.ResourceSpec.load("localhost:2")
    analysis = parallax.analyze(g)
    out = rewrite(g, plan_job(g, analysis, spec, config), config)
    reduces = [op for op in out.graph.get_operations() if op.type in COLLECTIVE_TYPES[backend]]
    assert len(analysis.variables) == 12 and len(reduces) == 1
    # every update reads its own piece of the buffer, averaged
    for record in analysis.variables:
        update = out.graph.get_operation_by_name(record.update_ops[0])
        assert any(t.op.name == f"parallax_allreduce/fused_0/{record.name}/average" for t in update.inputs)
    assert train is not None


def _three_embeddings(second_input=False):
    """Three embeddings of different widths read through one batch of ids (and a fourth through `second_input`)."""
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        other = tf1.placeholder(tf.int32, [None], name="other_ids")
        tables = [tf1.get_variable(f"emb{k}", [20, width]) for k, width in enumerate((4, 1, 3))]
        h = tf.concat([tf.nn.embedding_lookup(t, ids) for t in tables], axis=1)
        loss = tf.reduce_mean(tf.square(h))
        if second_input:
            loss += tf.reduce_mean(tf.nn.embedding_lookup(tf1.get_variable("emb_other", [20, 4]), other))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


@pytest.mark.parametrize("backend", sorted(COLLECTIVE_TYPES))
def test_sparse_gradients_behind_one_input_share_one_allgather(backend):
    """The rows of the three embeddings read through `ids` travel in one allgather (tf: one gather of the row
    counts and one of the rows; Horovod: one grouped allgather); the fourth, behind another input, in its own."""
    g = _three_embeddings(second_input=True)
    config = parallax.Config(run_option="MPI", collective_backend=backend)
    out = rewrite(g, plan_job(g, parallax.analyze(g), parallax.ResourceSpec.load("localhost:2"), config), config)
    gathers = [op for op in out.graph.get_operations() if op.name.startswith("parallax_allgather/")
               and op.type in ("CollectiveGatherV2", "HorovodAllgather", "HorovodGroupedAllgather")]
    by_scope = sorted((op.name.split("/")[1], op.type) for op in gathers)
    if backend == "tf":
        assert by_scope == [("emb_other", "CollectiveGatherV2")] * 2 + [("fused_0", "CollectiveGatherV2")] * 2
    else:
        assert by_scope == [("emb_other", "HorovodAllgather"), ("fused_0", "HorovodGroupedAllgather")]


def test_a_grouped_allgather_gives_each_tensor_back():
    """TF's collectives, one worker: the buffer of tensors of different row shapes (one of them empty) is cut back
    into each tensor, bit for bit. (Several workers' buffers: the equivalence suite's MPI cases with the tf
    backend.)"""
    from parallax.collectives.tf_ops import TFCollectives
    g = tf.Graph()
    with g.as_default():
        fed = [tf1.placeholder(tf.float32, shape) for shape in ([None, 3], [None, 2, 2], [None, 1])]
        gathered = TFCollectives(1).allgather_group(fed, "group")
        init = tf1.local_variables_initializer()
    rng = np.random.RandomState(0)
    values = [rng.rand(4, 3), rng.rand(0, 2, 2), rng.rand(5, 1)]
    with tf1.Session(graph=g) as session:
        session.run(init)
        for _ in range(2):  # the rows' collective takes a new key each step
            got = session.run(gathered, dict(zip(fed, values)))
            assert [x.shape for x in got] == [(4, 3), (0, 2, 2), (5, 1)]
            assert all(np.array_equal(x, v.astype(np.float32)) for x, v in zip(got, values))
