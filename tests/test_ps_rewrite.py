"""The PS passes, checked on the rewritten graph (no processes started)."""
import pytest
import tensorflow as tf

import parallax
from parallax import graph_utils
from parallax.plan import make_plan
from parallax.rewrite import rewrite
from tests.models_for_tests import embedding_mlp

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
PS = parallax.Config(run_option="PS", local_aggregation=False)  # local aggregation: test_local_aggregation.py


def _rewrite(graph, config=PS):
    analysis = parallax.analyze(graph)
    plan = make_plan(analysis, TWO_HOSTS, config)
    return analysis, plan, rewrite(graph, analysis, plan, config)


@pytest.fixture(scope="module")
def adam_model():
    tf.compat.v1.reset_default_graph()
    g, _ = embedding_mlp.build("Adam", clip=1.0, ema=True, partitions=2)
    return _rewrite(g)


def test_variables_slots_and_updates_live_on_their_planned_server(adam_model):
    analysis, plan, out = adam_model
    g = out.graph
    emb = plan.variable("model/embedding")
    assert sorted(emb.ps_tasks) == [0, 1]  # the two shards on different servers
    for vp in plan.variables:
        for part, task in zip(analysis.variable(vp.name).parts, vp.ps_tasks):
            device = f"/job:ps/task:{task}"
            assert g.get_operation_by_name(part.name).device == device
            for _, slot in part.slots:
                assert g.get_operation_by_name(slot).device == device, slot
            for update in part.update_ops:
                assert g.get_operation_by_name(update).device == device, update
    for sp in plan.state:
        assert sp.ps_task is not None
        assert g.get_operation_by_name(sp.name).device == f"/job:ps/task:{sp.ps_task}"
    ema = [s for s in analysis.state if s.kind == "ema"]
    assert ema and all(s.colocated_with for s in ema)


def test_one_accumulator_per_variable_part_on_its_server(adam_model):
    analysis, plan, out = adam_model
    g = out.graph
    for vp in plan.variables:
        for part, task in zip(analysis.variable(vp.name).parts, vp.ps_tasks):
            acc = g.get_operation_by_name(f"parallax_ps/{part.name}/accumulator")
            expected = "SparseConditionalAccumulator" if vp.kind == "sparse" else "ResourceConditionalAccumulator"
            assert acc.type == expected and acc.device == f"/job:ps/task:{task}"
            assert acc.get_attr("reduction_type") == b"SUM"  # per-row MEAN is not single-device equivalent
            assert acc.get_attr("shared_name") == f"parallax_acc/{part.name}".encode()
    accumulators = [op.name for op in g.get_operations() if op.type.endswith("ConditionalAccumulator")]
    parts = [p.name for v in plan.variables for p in analysis.variable(v.name).parts]
    sparse_parts = [p.name for p in analysis.variable("model/embedding").parts]
    assert sorted(accumulators) == sorted([f"parallax_ps/{p}/accumulator" for p in parts] +
                                          [f"parallax_ps/{p}/row_norm_0/accumulator" for p in sparse_parts])


def test_global_norm_of_sparse_rows_is_summed_from_each_workers_raw_rows(adam_model):
    """The accumulator merges equal indices; TF's global norm squares every row. Each worker's raw-row L2Loss is
    summed instead, / N^2, so the clip sees exactly the single-device norm."""
    analysis, plan, out = adam_model
    g = out.graph
    for part in analysis.variable("model/embedding").parts:
        scope = f"parallax_ps/{part.name}/row_norm_0"
        local = g.get_operation_by_name(f"{scope}/local")
        assert local.type == "L2Loss" and local.inputs[0].name == part.gradient.values  # the raw rows
        average = g.get_operation_by_name(f"{scope}/average")
        assert average.inputs[0].op.name == f"{scope}/take"
        assert average.inputs[1].op.get_attr("value").float_val == [plan.num_workers ** 2]
        assert any(c.name.startswith("clip_by_global_norm") or "global_norm" in c.name
                   for c in average.outputs[0].consumers())


def test_exactly_one_update_per_variable_owned_by_the_chief(adam_model):
    analysis, plan, out = adam_model
    g = out.graph
    assert list(out.train_op_variants) == ["ExponentialMovingAverage"]  # the op the user runs: EMA after Adam
    chief, *workers = [g.get_operation_by_name(n) for n in out.train_op_variants["ExponentialMovingAverage"]]
    assert len(workers) == plan.num_workers - 1
    chief_deps = graph_utils.ancestors([chief])
    for record in analysis.variables:
        for name in record.update_ops:
            update = g.get_operation_by_name(name)
            assert update in chief_deps, name
            assert all(update not in graph_utils.ancestors([w]) for w in workers), name
        # every write of the variable in the graph is one of its update ops (no copy per worker)
        for part in record.parts:
            writers = [op.name for op in g.get_operations() if graph_utils.written_variable(op) == part.name
                       and op.name.startswith(("Adam/", "GradientDescent/"))]
            assert sorted(writers) == sorted(n for n in part.update_ops if graph_utils.written_variable(
                g.get_operation_by_name(n)) == part.name)
    # a worker's step applies its gradients to every accumulator, then waits for its token
    for w in workers:
        deps = graph_utils.ancestors([w])
        parts = sum(len(analysis.variable(v.name).parts) for v in plan.variables)
        sparse_parts = len(analysis.variable("model/embedding").parts)
        assert sum(op.name.endswith("/apply") for op in deps) == parts + sparse_parts  # + row norms
        assert any(op.type == "QueueDequeueV2" for op in deps)


def test_clip_reads_aggregated_gradients(adam_model):
    _, _, out = adam_model
    for op in out.graph.get_operations():
        if op.type == "L2Loss" and not op.name.startswith("parallax_ps/"):  # the user's, not row norms
            source = op.inputs[0].op
            while source.type in ("Identity", "RealDiv", "Cast"):
                source = source.inputs[0].op
            assert source.name.endswith("/take"), (op.name, source.name)


def test_async_mode_creates_no_barrier():
    g, _ = embedding_mlp.build("Adam", partitions=2)
    _, plan, out = _rewrite(g, PS.replace(sync=False))
    types = {op.type for op in out.graph.get_operations()}
    assert not {t for t in types if "Accumulator" in t or "Queue" in t}
    assert out.train_op_variants == {} and out.sync_takes == ()
    assert out.graph.get_operation_by_name("model/embedding/part_0").device.startswith("/job:ps/task:")


def test_sparse_plan_is_deterministic_across_rewrites():
    g, _ = embedding_mlp.build("Adagrad", partitions=2)
    assert _rewrite(g)[2].fingerprint == _rewrite(g)[2].fingerprint


def _batch_norm_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4])
        h = tf.compat.v1.layers.batch_normalization(tf.compat.v1.layers.dense(x, 3), training=True, name="bn")
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                tf.reduce_mean(h ** 2), global_step=tf.compat.v1.train.get_or_create_global_step())
    return g


@pytest.mark.parametrize("build", [lambda: embedding_mlp.build("Adam", clip=1.0, ema=True)[0], _batch_norm_graph],
                         ids=["adam_clip_ema", "batch_norm_update_ops"])
def test_worker_steps_never_take_aggregates_and_the_chief_step_takes_all(build):
    analysis, plan, out = _rewrite(build())
    g = out.graph
    takes = {g.get_operation_by_name(n) for n in out.sync_takes}
    assert len(out.train_op_variants) == 1
    for chief, *workers in [[g.get_operation_by_name(n) for n in v] for v in out.train_op_variants.values()]:
        assert takes <= graph_utils.ancestors([chief])
        for w in workers:
            assert not takes & graph_utils.ancestors([w]), w.name


def test_batch_norm_statistics_are_averaged_then_written_once_by_the_chief():
    analysis, plan, out = _rewrite(_batch_norm_graph())
    g = out.graph
    for name in ("bn/moving_mean", "bn/moving_variance"):
        assert next(s for s in plan.state if s.name == name).aggregate
        record = next(s for s in analysis.state if s.name == name)
        for writer in record.written_by:
            value = g.get_operation_by_name(writer).inputs[1]
            assert value.op.type == "RealDiv" and value.op.inputs[0].op.name == f"parallax_ps/{writer}/take"
