"""Statistics of the batch computed from variables (batch normalization, a root-mean-square loss): which are found,
with the gradients that flow into them (batch_statistics.py), and the fused kernel's replacement
(fused_batch_norm.py), whose values and gradients equal the kernel's when every worker holds the same batch."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batch_statistics, fused_batch_norm
from parallax.plan import plan_json
from parallax.plan.records import Plan

tf1 = tf.compat.v1
F64 = tf.float64


def _found(build, dtype=F64, shape=(None, 3)):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(dtype, list(shape), name="x")
        loss = build(x)
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g, batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))


def _dense(x, units=3):
    return tf1.layers.dense(x, units, name=f"dense{units}")


def test_moments_and_the_gradients_flowing_into_them_are_combined():
    def build(x):
        h = _dense(x)
        mean, variance = tf.nn.moments(h, axes=[0])
        return tf.reduce_mean(tf.square(tf.nn.batch_normalization(h, mean, variance, None, None, 1e-3)))
    g, found = _found(build)
    records = {name: (law, readers) for name, law, readers in found.combined}
    assert records["moments/mean:0"] == ("mean", ("moments/Squeeze", "moments/StopGradient"))
    assert records["moments/variance:0"][0] == "mean"
    # the gradient that reaches each mean from the loss: every worker's, averaged, flows on into the examples
    upstream = [(name, readers) for name, (law, readers) in records.items() if name.startswith("gradients/")]
    assert len(upstream) == 2 and all(law == "mean" for law, _ in records.values())
    for name, readers in upstream:
        assert all(g.get_operation_by_name(r)._original_op.name in ("moments/mean", "moments/variance")
                   for r in readers)
    assert not found.uncombinable and not found.fused


def test_a_loss_that_is_a_nonlinear_function_of_a_batch_mean_is_combined_with_its_gradient():
    _, found = _found(lambda x: tf.sqrt(tf.reduce_mean(tf.square(_dense(x, 1)))))
    assert sorted((n.startswith("gradients/"), law) for n, law, _ in found.combined) == [(False, "mean"), (True, "mean")]


@pytest.mark.parametrize("build", [
    lambda x: tf.reduce_mean(tf.square(_dense(x))),  # a mean over examples: nothing reads it
    lambda x: tf.reduce_mean(tf.square(tf.nn.l2_normalize(_dense(x), axis=1))),  # over features
    lambda x: tf.reduce_mean(tf.square(_dense(x) - tf.reduce_mean(_dense(x, 4), axis=1, keepdims=True))),
])
def test_statistics_over_features_or_the_loss_itself_need_nothing(build):
    _, found = _found(build)
    assert found == batch_statistics.BatchStatistics()


def test_the_rows_a_slice_keeps_of_a_batch_and_a_sampled_block_are_no_statistic():
    """As a sampled softmax's sampled rows: a selection, not a reduction of the examples' values."""
    def build(x):
        both = tf.concat([_dense(x), tf1.get_variable("sampled", [4, 3], F64)], 0)
        return tf.reduce_mean(tf.matmul(x, both[tf.shape(x)[0]:], transpose_b=True))
    _, found = _found(build)
    assert found == batch_statistics.BatchStatistics()


def test_a_maximum_of_values_from_variables_that_gradients_flow_into_is_computed_on_every_workers_rows():
    """Its gradient belongs to the one worker whose example holds it: no law combines it, but paired_rows.py
    computes it, and what divides by it, on every worker's rows."""
    _, found = _found(lambda x: tf.reduce_mean(_dense(x, 1) / tf.reduce_max(tf.abs(_dense(x)))))
    assert not found.combined and found.uncombinable == ()
    assert ("gathered", "Abs:0") in {(kind, name) for kind, name, _ in found.paired}


def _conv_bn(training=True, momentum=0.9):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3, 3, 2], name="x")
        h = tf1.layers.conv2d(x, 2, 2, padding="same", use_bias=False, name="conv",
                              kernel_initializer=tf1.random_uniform_initializer(-0.5, 0.5, seed=1))
        h = tf1.layers.batch_normalization(h, training=training, momentum=momentum, name="bn",
                                           gamma_initializer=tf1.random_uniform_initializer(0.5, 1.5, seed=2),
                                           beta_initializer=tf1.random_uniform_initializer(-0.5, 0.5, seed=3))
        loss = tf.reduce_mean(tf.square(tf.nn.relu(h) - 0.3) * tf.range(1.0, 3.0))
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g, x, loss, train


def test_a_fused_batch_norm_in_training_is_recorded_with_its_gradient_op_and_in_inference_not():
    g, *_ = _conv_bn()
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert found.fused == (("bn/FusedBatchNormV3", ("gradients/bn/FusedBatchNormV3_grad/FusedBatchNormGradV3",)),)
    assert not found.combined and not found.uncombinable
    g, *_ = _conv_bn(training=False)
    assert batch_statistics.statistics_of_the_batch(g, parallax.analyze(g)) == batch_statistics.BatchStatistics()


def test_a_fused_batch_norm_inside_a_cond_on_a_training_tensor_is_listed_with_what_to_do():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3, 3, 2], name="x")
        training = tf1.placeholder_with_default(True, [], name="training")
        h = tf1.layers.batch_normalization(x, training=training, name="bn")
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert not found.fused and any(u.startswith("bn/cond: FusedBatchNormV3 (a fused batch norm in training mode "
                                                "inside a graph function") and "training=True" in u
                                   for u in found.uncombinable)


class _Mirror:
    """The collectives of one of two workers whose batches are the same: every gather holds its value twice."""
    def __init__(self):
        self.made = []

    def allgather(self, tensor, name):
        self.made.append(tensor)
        return tf.concat([tensor, tensor], 0, name=name)

    def created(self):
        return []


def _run(g, x, fetches, images):
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.global_variables_initializer())
        return sess.run(fetches, {x: images})


def test_the_synchronized_fused_batch_norm_computes_what_the_kernel_computes_for_the_whole_batch():
    """Two workers with the same batch: the whole batch is that batch twice, so its normalized values and every
    gradient are the kernel's on one batch; the moving variance is corrected by the whole batch's count."""
    images = np.random.RandomState(0).randn(4, 3, 3, 2).astype(np.float32) * 2 + 1
    built = []
    for synchronized in (False, True):
        g, x, loss, train = _conv_bn(momentum=0.5)
        with g.as_default():
            moving_variables = sorted((v for v in tf1.global_variables() if "moving" in v.op.name),
                                      key=lambda v: v.op.name)  # mean, then variance
            grads = tf.gradients(loss, [g.get_tensor_by_name("conv/Conv2D:0")] + tf1.trainable_variables())
        if synchronized:
            (name, gradient_ops), = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g)).fused
            gather = _Mirror()
            assert len(gradient_ops) == 2  # the train op's, and the gradients fetched here
            fused_batch_norm.synchronize(g, gather, name, gradient_ops, num_workers=2)
            assert fused_batch_norm.is_synchronized(g, name, gradient_ops)
            assert len(gather.made) == 1 + 2  # the moments; each gradient op's two means
        with g.as_default():
            with tf.control_dependencies([train]):
                moving = [tf.identity(v.read_value()) for v in moving_variables]
        built.append(_run(g, x, [loss, grads, moving], images))
    (loss, grads, moving), (loss_s, grads_s, moving_s) = built
    assert loss_s == pytest.approx(loss, rel=1e-6)
    for a, b in zip(grads, grads_s):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(moving_s[0], moving[0], rtol=1e-5, atol=1e-6)  # moving mean
    count = 4 * 3 * 3  # elements per channel of one batch; the kernel corrects by count / (count - 1)
    biased = (moving[1] - 0.5) / 0.5 * (count - 1) / count  # moving variance from 1 at momentum 0.5
    np.testing.assert_allclose(moving_s[1], 0.5 + 0.5 * biased * 2 * count / (2 * count - 1), rtol=1e-5)


def test_the_plan_carries_fused_batch_norms_through_json_and_states_them():
    plan = Plan("MPI", 2, 1, (), fused_batch_norms=(("bn/FusedBatchNormV3", ("gradients/bn/grad",)),))
    assert plan.uses_collectives and plan_json.loads(plan_json.dumps(plan)) == plan
    assert "statistics of the batch: bn/FusedBatchNormV3 (fused batch norm, its mean and variance over workers)" \
        in str(plan)


@pytest.mark.parametrize("run_option, backend, gather", [("PS", "auto", "CollectiveGatherV2"),
                                                         ("MPI", "horovod", "HorovodAllgather")])
def test_the_pass_synchronizes_each_fused_batch_norm_with_the_plans_collectives(run_option, backend, gather):
    from parallax.plan.planning import plan_job
    from parallax.rewrite.pipeline import FACTS, RewriteContext, passes_for
    g, *_ = _conv_bn()
    config = parallax.Config(run_option=run_option, collective_backend=backend)
    plan = plan_job(g, parallax.analyze(g), parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1"), config)
    assert plan.uses_collectives and len(plan.fused_batch_norms) == 1
    ctx = RewriteContext(g, plan, config)
    for p in passes_for(plan):
        p.run(ctx)
        if p.name == "synchronize_fused_batch_norms":
            break
    else:
        raise AssertionError("no synchronize_fused_batch_norms pass")
    assert [ctx.graph.get_operation_by_name(c).type for c in ctx.collectives] == [gather] * 2
    assert FACTS["batch_norms_synchronized"](ctx)


def test_values_that_pair_the_examples_with_each_other_are_rewritten_not_listed():
    """In-batch negatives: each query scored against every key of the batch (its shape has the batch twice);
    paired_rows.py computes them on every worker's rows (tests/rules/test_paired_rows.py)."""
    def build(x):
        query, key = _dense(x), _dense(x, 4)[:, :3]
        logits = tf.matmul(query, key, transpose_b=True)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.range(tf.shape(x)[0]), logits=logits))
    _, found = _found(build)
    assert found.uncombinable == ()
    assert {kind for kind, _, _ in found.paired} == {"gathered", "own", "padded", "summed"}


def test_the_cost_model_counts_each_gathered_statistic():
    from parallax.plan import auto_plan
    g, *_ = _conv_bn()
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert auto_plan.statistic_bytes(g, found) == (16, 16)  # 2 channels of float32, 2 statistics each, 2 gathers
