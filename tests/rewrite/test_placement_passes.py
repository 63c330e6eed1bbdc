"""The placement passes, on the rewritten graph: OPAU (place_post_aggregation_ops) and OPSW (place_boundary_ops)."""
import pytest
import tensorflow as tf

import parallax
from parallax.core import graph_utils
from parallax.plan.planning import plan_job
from parallax.rewrite import rewrite
from tests.models_for_tests import embedding_mlp

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")


def _rewrite(run_option, opau=True):
    g, _ = embedding_mlp.build("Adam", clip=1.0, partitions=2)
    # averaged by dividing the aggregate, whose `average` op the checks find (a mean loss left to the law starts its
    # gradients at 1/N instead, loss_seeds.py)
    config = parallax.Config(run_option=run_option, place_post_aggregation_ops=opau, average_dense=True,
                             average_sparse=True)
    analysis = parallax.analyze(g)
    plan = plan_job(g, analysis, TWO_HOSTS, config)
    return analysis, plan, rewrite(g, plan, config)


def _user_ops(graph, op_type):
    return [op for op in graph.get_operations() if op.type == op_type and not op.name.startswith("parallax_")]


def test_ps_mode_global_norm_on_server_0_and_each_l2_norm_with_its_gradient():
    analysis, plan, out = _rewrite("PS")
    g = out.graph
    assert g.get_operation_by_name("global_norm/global_norm").device == "/job:ps/task:0"
    l2_losses = [op for op in _user_ops(g, "L2Loss") if op.outputs[0].consumers()]
    assert len(l2_losses) == 6  # one per gradient part; the sparse ones square every worker's rows
    for l2 in l2_losses:
        assert l2.device == l2.inputs[0].op.device and l2.device.startswith("/job:ps/task:"), l2.name
        assert graph_utils.colocation_target(l2) is None  # no longer dragging its raw gradient to the server
    # each clip multiply runs with its gradient, on that variable's server; the scale is shared (server 0)
    _assert_clip_runs_with_each_server_gradient(analysis, plan, g)
    assert out.placements["place_post_aggregation_ops"]


def _assert_clip_runs_with_each_server_gradient(analysis, plan, g):
    checked = 0
    for vp in plan.variables:
        for part, task in zip(analysis.variable(vp.name).parts, vp.ps_tasks):
            average = g.get_operation_by_name(f"parallax_ps/{part.name}/average")
            (clip,) = [c for c in average.outputs[0].consumers() if c.type == "Mul"]
            assert clip.device == f"/job:ps/task:{task}", clip.name
            checked += 1
    return checked


def test_hybrid_keeps_the_norm_of_replicated_gradients_in_the_workers():
    analysis, plan, out = _rewrite("HYBRID")
    g = out.graph
    # The global norm joins the servers' rows with the replicated gradients: it runs on server 0, and the chief
    # sends the clip scale to the other workers (sync_passes: a queue each on the coordinator).
    assert g.get_operation_by_name("global_norm/global_norm").device == "/job:ps/task:0"
    assert len(out.sync.broadcasts) == 1
    # The scale comes from the workers but is a scalar: each server's aggregated rows are scaled where they are.
    # (Placed on server 0, the rows of a variable on server 1 went there and back: 1.6 MB per worker-step of the
    # benchmark LM.)
    assert _assert_clip_runs_with_each_server_gradient(analysis, plan, g) == 2  # the embedding's two shards
    for l2 in _user_ops(g, "L2Loss"):
        on_server = "embedding" in l2.inputs[0].name  # the servers' rows are squared where they are
        assert l2.device.startswith("/job:ps/task:") == on_server, l2.name  # allreduced ones in every worker


@pytest.mark.parametrize("run_option", ["PS", "HYBRID"])
def test_switch_off_places_nothing(run_option):
    _, plan, out = _rewrite(run_option, opau=False)
    assert not plan.place_post_aggregation_ops and "place_post_aggregation_ops" not in out.placements
    assert out.graph.get_operation_by_name("global_norm/global_norm").device == ""


# ---- OPSW (place_boundary_ops) --------------------------------------------------------------------------------
def _boundary_graph(table_rows, lookups):
    """Server variables read on the workers: a float16 cast of `w` (mixed precision) and a gather of `table`."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float16, [8, 100], name="x")
        ids = tf.compat.v1.placeholder(tf.int32, [lookups], name="ids")
        w = tf.compat.v1.get_variable("w", [100, 50], use_resource=False)
        table = tf.compat.v1.get_variable("table", [table_rows, 4], use_resource=False)
        h = tf.matmul(x, tf.cast(w, tf.float16, name="w_fp16"))
        rows = tf.gather(table, ids, name="rows")
        loss = tf.reduce_mean(tf.cast(h, tf.float32)) + tf.reduce_mean(rows)
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


def _opsw(graph, on=True):
    config = parallax.Config(run_option="PS", place_boundary_ops=on)
    analysis = parallax.analyze(graph)
    plan = plan_job(graph, analysis, TWO_HOSTS, config)
    return plan, rewrite(graph, plan, config)


def test_cast_to_float16_of_a_server_variable_moves_onto_the_server():
    plan, out = _opsw(_boundary_graph(table_rows=1000, lookups=8))
    g = out.graph
    w_task = plan.variable("w").ps_tasks[0]
    assert g.get_operation_by_name("w_fp16").device == f"/job:ps/task:{w_task}"  # 20 KB crosses instead of 40 KB
    assert ("w_fp16", f"/job:ps/task:{w_task}") in out.placements["place_boundary_ops"]


def test_gather_moves_only_when_it_reduces_traffic():
    plan, out = _opsw(_boundary_graph(table_rows=1000, lookups=8))  # 16 KB table vs 32 B ids + 128 B rows
    assert out.graph.get_operation_by_name("rows").device == f"/job:ps/task:{plan.variable('table').ps_tasks[0]}"
    _, out = _opsw(_boundary_graph(table_rows=10, lookups=200))  # 160 B table vs 800 B ids + 3.2 KB rows
    assert out.graph.get_operation_by_name("rows").device == ""
    assert "rows" not in dict(out.placements["place_boundary_ops"])


def test_boundary_switch_off_moves_nothing():
    plan, out = _opsw(_boundary_graph(table_rows=1000, lookups=8), on=False)
    assert not plan.place_boundary_ops and "place_boundary_ops" not in out.placements
    assert out.graph.get_operation_by_name("w_fp16").device == ""


def test_heavy_gradient_ops_stay_in_the_workers():
    """Placing post-aggregation ops on servers must not drag the backward pass along (through colocation)."""
    _, _, out = _rewrite("PS")
    for op in out.graph.get_operations():
        if op.name.startswith("gradients/") and op.type in ("MatMul", "BatchMatMulV2", "Conv2D"):
            assert op.device == "" and graph_utils.colocation_target(op) in (None, op.name), op.name
            assert not any(graph_utils.colocation_target(c) == op.name and c.device for c in out.graph.get_operations())


def _reads_graph():
    """w (resource) read twice by the model and once by a weight decay; v (ref) used twice; batch norm's state."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 100], name="x")
        w = tf.compat.v1.get_variable("w", [100, 50], use_resource=True)
        v = tf.compat.v1.get_variable("v", [50], use_resource=False)
        h = tf.matmul(x, w) + tf.matmul(2 * x, w.read_value()) + v
        h = tf.compat.v1.layers.batch_normalization(h * v, training=True, name="bn")
        loss = tf.reduce_mean(h) + 0.01 * tf.nn.l2_loss(w)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


def _crossings_in_the_rewritten_step(g, plan, rewritten, worker):
    """Tensors that ops on a server send to a worker's ops in its training step: the rewritten graph's truth."""
    from parallax import collectives
    from parallax.runtime.sync_step import SyncSteps
    out = rewritten.graph

    def device(op):  # where TF puts it: its device, or its variable's (through a handle or colocation)
        if op.device:
            return op.device
        handles = [t.op for t in op.inputs if t.dtype == tf.resource or t.dtype._is_ref_dtype]
        target = graph_utils.colocation_target(op)
        return device(handles[0]) if handles else device(out.get_operation_by_name(target)) if target else ""
    train = [out.get_operation_by_name(op.name) for op in g.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)]
    train = train or [out.get_operation_by_name("GradientDescent")]
    variant = SyncSteps(out, rewritten.sync, worker, plan.num_workers, collectives.step_fence_for(plan)).variant(
        tuple(op.name for op in train), train)
    step = graph_utils.ancestors(list(variant.targets))
    # the sync protocol's own tokens (a step with collectives and servers waits on one in-step) are no reads
    return {t.name for op in step if device(op).startswith("/job:ps") and not op.name.startswith("parallax_sync/")
            for t in op.outputs if any(c in step and not device(c).startswith("/job:ps") for c in t.consumers())}


def test_server_reads_count_each_read_a_worker_consumes_as_the_rewritten_step_sends_it():
    from parallax.plan.placement import server_reads
    g = _reads_graph()
    analysis = parallax.analyze(g)
    config = parallax.Config(run_option="PS")
    plan = plan_job(g, analysis, TWO_HOSTS, config)
    reads = server_reads(g, plan)
    # w: two reads of 20 KB by the model, and the weight decay's: its L2Loss moves onto the server and sends a
    # scalar, but its gradient (w itself, scaled) is computed on the worker from that read
    assert reads["w"] == (4, 3 * 100 * 50 * 4 + 4)
    assert reads["v"] == (1, 50 * 4)  # a ref variable's value is sent once, however many ops use it
    assert {"bn/moving_mean", "bn/moving_variance"} <= set(reads)
    truth = _crossings_in_the_rewritten_step(g, plan, rewrite(g, plan, config), worker=1)
    assert sum(tensors for tensors, _ in reads.values()) == len(truth), truth
