"""parallax.analyze: every variable maps to the right gradient, update ops and slots, for every v1 optimizer."""
import re

import pytest
import tensorflow as tf

import parallax
from parallax.capture import gradients as capture
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
SPARSE_UPDATE = {  # op types a sparse (IndexedSlices) gradient is applied with, ref / resource variables
    "GradientDescent": r"^(ScatterSub|ResourceScatterAdd)$",
    "Adam": r"^(Assign|ScatterAdd|AssignSub|AssignVariableOp|ResourceScatterAdd|AssignSubVariableOp)$",
}


def _expected(h):
    opt = h["optimizer"]
    out = {}
    for grad, var in h["raw_grads_and_vars"]:
        slots = {opt.get_slot(var, s).op.name for s in opt.get_slot_names() if opt.get_slot(var, s) is not None}
        out[var.op.name] = (grad, slots)
    return out


def _forget_capture(graph):
    graph.clear_collection(capture.GRAD_COLLECTION)
    graph.clear_collection(capture.APPLY_COLLECTION)


@pytest.mark.parametrize("use_resource", [True, False], ids=["resource", "ref"])
@pytest.mark.parametrize("optimizer", sorted(embedding_mlp.OPTIMIZERS))
def test_every_variable_maps_to_its_gradient_update_and_slots(optimizer, use_resource):
    g, h = embedding_mlp.build(optimizer, use_resource=use_resource)
    expected = _expected(h)
    analysis = parallax.analyze(g)
    assert analysis.captured
    assert {v.name for v in analysis.variables} == set(expected)
    for record in analysis.variables:
        grad, slots = expected[record.name]
        assert record.optimizer == f"{optimizer}Optimizer"
        assert set(record.slots) == slots
        assert len(slots) == {"GradientDescent": 0, "Momentum": 1, "Adagrad": 1}.get(optimizer, 2)
        (gradient,) = record.gradients
        assert gradient.values == (grad.values.name if record.kind == "sparse" else grad.name)
        if record.name == "model/embedding":
            assert record.kind == "sparse" and isinstance(grad, tf.IndexedSlices)
            assert gradient.indices == grad.indices.name
            pattern = SPARSE_UPDATE.get(optimizer, rf"^(Resource)?SparseApply{optimizer}$")
        else:
            assert record.kind == "dense" and not isinstance(grad, tf.IndexedSlices)
            pattern = rf"^(Resource)?Apply{optimizer}$"
        written = set()
        for name in record.update_ops:
            op = g.get_operation_by_name(name)
            assert re.match(pattern, op.type), (name, op.type)
            written.add(op.inputs[0].op.name)
        assert record.name in written and written <= {record.name} | slots
        assert record.bytes == record.parts[0].shape[0] * (record.parts[0].shape[1] if len(record.shape) > 1 else 1) * 4

    # Without capture records (a graph built before `import parallax`), the update scopes give the same answer.
    _forget_capture(g)
    fallback = parallax.analyze(g)
    assert not fallback.captured
    for a, b in zip(analysis.variables, fallback.variables):
        assert (a.name, a.kind, a.update_ops, set(a.slots)) == (b.name, b.kind, b.update_ops, set(b.slots))
        # dense_shape of an IndexedSlices is not visible from the update op; the variable's shape gives it.
        assert [(x.values, x.indices) for x in a.gradients] == [(x.values, x.indices) for x in b.gradients]


def test_captured_gradient_is_the_raw_one_before_clipping():
    g, h = embedding_mlp.build("Adam", clip=1.0)
    analysis = parallax.analyze(g)
    raw = {v.op.name: gr for gr, v in h["raw_grads_and_vars"]}
    for record in analysis.variables:
        (gradient,) = record.gradients
        expected = raw[record.name]
        expected = expected.values if isinstance(expected, tf.IndexedSlices) else expected
        assert gradient.values == expected.name and "clip_by_global_norm" not in gradient.values
    # The fallback can only see what the optimizer received: the clipped gradient.
    _forget_capture(g)
    for record in parallax.analyze(g).variables:
        assert "clip_by_global_norm" in record.gradients[0].values


def test_records_survive_export_and_import_meta_graph():
    g, _ = embedding_mlp.build("Momentum")
    before = parallax.analyze(g)
    meta = tf1.train.export_meta_graph(graph=g)
    fresh = tf.Graph()
    with fresh.as_default():
        tf1.train.import_meta_graph(meta)
    after = parallax.analyze(fresh)
    assert after.captured and after == before  # also: the Saver import adds is not counted as a writer


def test_direct_tf_gradients_calls_are_captured():
    g = tf.Graph()
    with g.as_default():
        w = tf1.get_variable("w", [3, 2], use_resource=True)
        v = tf1.get_variable("v", [2], use_resource=False)
        loss = tf.reduce_sum(tf.matmul(tf.ones([1, 3]), w) * v)
        gw, gv = tf1.gradients(loss, [w, v])
        gw2 = tf.gradients(loss, [w])[0]
        clipped = [tf.clip_by_norm(gw, 1.0), tf.clip_by_norm(gv, 1.0)]
        tf1.train.GradientDescentOptimizer(0.1).apply_gradients(zip(clipped, [w, v]))
    records = {(r["var"], r["grad"]["values"]) for r in capture.grad_records(g)}
    assert {("w", gw.name), ("v", gv.name), ("w", gw2.name)} <= records
    analysis = parallax.analyze(g)
    # Two gradients of w exist; the one that feeds the update is chosen.
    assert analysis.variable("w").gradients[0].values in (gw.name, gw2.name)
    assert analysis.variable("v").gradients[0].values == gv.name


def test_partitioned_variable_is_one_logical_record_with_its_shards():
    g, _ = embedding_mlp.build("Adagrad", partitions=3)
    record = parallax.analyze(g).variable("model/embedding")
    assert record.is_partitioned and record.kind == "sparse"
    assert [p.name for p in record.parts] == [f"model/embedding/part_{i}" for i in range(3)]
    assert record.shape == (embedding_mlp.VOCAB, embedding_mlp.DIM)
    assert sum(p.shape[0] for p in record.parts) == embedding_mlp.VOCAB
    assert [p.offset[0] for p in record.parts] == [0, 14, 27]
    assert all(p.gradient.is_sparse and len(p.update_ops) == 1 and len(p.slots) == 1 for p in record.parts)
    assert record.bytes == embedding_mlp.VOCAB * embedding_mlp.DIM * 4


def test_state_lists_global_step_ema_batch_norm_and_optimizer_variables():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 4])
        h = tf1.layers.dense(x, 3, name="dense")
        h = tf1.layers.batch_normalization(h, training=True, name="bn")
        loss = tf.reduce_mean(h ** 2)
        step = tf1.train.get_or_create_global_step()
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            train = tf1.train.AdamOptimizer().minimize(loss, global_step=step)
        ema = tf1.train.ExponentialMovingAverage(0.99)
        with tf.control_dependencies([train]):
            ema.apply(tf1.trainable_variables())
    state = {s.name: s.kind for s in parallax.analyze(g).state}
    assert state["global_step"] == "global_step"
    assert state["bn/moving_mean"] == state["bn/moving_variance"] == "update_ops"
    assert state["beta1_power"] == state["beta2_power"] == "optimizer"
    assert state["dense/kernel/ExponentialMovingAverage"] == "ema"
    assert len([k for k in state.values() if k == "ema"]) == 4  # dense kernel+bias, bn gamma+beta
    text = str(parallax.analyze(g))
    assert "bn/moving_mean" in text and "captured raw, before clipping" in text


def test_analyze_rejects_non_graphs_and_empty_graphs():
    with pytest.raises(parallax.GraphAnalysisError, match="tf.Graph"):
        parallax.analyze("not a graph")
    with pytest.raises(parallax.GraphAnalysisError, match="no trainable variables"):
        parallax.analyze(tf.Graph())
