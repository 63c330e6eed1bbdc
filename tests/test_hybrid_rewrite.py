"""HYBRID mode on the rewritten graph: dense variables replicated and allreduced, sparse ones on the servers."""
import pytest
import tensorflow as tf

import parallax
from parallax.core import graph_utils
from parallax.plan.variable_decisions import decide_variables
from parallax.plan.planning import plan_job
from parallax.rewrite import passes_for, rewrite
from tests.models_for_tests import embedding_mlp
from tests.models_for_tests.variants import runs, variants

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
HYBRID = parallax.Config(collective_backend="horovod")  # the Horovod rewrite (test_step_fence.py: tf)


@pytest.fixture(scope="module")
def hybrid():
    tf.compat.v1.reset_default_graph()
    g, _ = embedding_mlp.build("Adam", clip=1.0, ema=True)
    analysis = parallax.analyze(g)
    plan = plan_job(g, analysis, TWO_HOSTS, HYBRID)
    return analysis, plan, rewrite(g, plan, HYBRID)


def test_dense_replicated_sparse_and_chief_written_state_on_servers(hybrid):
    analysis, plan, out = hybrid
    g = out.graph
    assert plan.variable("model/embedding").method == "PS"
    assert {v.method for v in plan.variables if v.kind == "dense"} == {"AR"}
    assert g.get_operation_by_name("model/embedding").device.startswith("/job:ps/task:")
    for v in plan.variables:
        if v.method == "AR":
            assert g.get_operation_by_name(v.name).device == ""
            for slot in analysis.variable(v.name).slots:
                assert g.get_operation_by_name(slot).device == "", slot
    for name in ("beta1_power", "beta2_power", "global_step"):  # read by every worker, written by the chief
        op = g.get_operation_by_name(name)
        assert op.device.startswith("/job:ps/task:"), name
        assert graph_utils.colocation_target(op) in (None, "model/embedding"), name
    ema = [s.name for s in plan.state if s.kind == "ema" and not s.name.startswith("model/embedding")]
    assert ema and all(g.get_operation_by_name(n).device == "" for n in ema)  # with their replicated variables


def test_every_worker_updates_its_replicas_with_the_chiefs_collectives(hybrid):
    analysis, plan, out = hybrid
    g = out.graph
    dense_updates = {g.get_operation_by_name(n) for v in plan.variables if v.method == "AR"
                     for n in analysis.variable(v.name).update_ops}
    sparse_updates = {g.get_operation_by_name(n) for n in analysis.variable("model/embedding").update_ops}
    takes = {g.get_operation_by_name(o) for a in out.sync.aggregations for o in a.outputs}
    chief, *others = variants(out, "ExponentialMovingAverage", plan.num_workers)
    chief_runs = runs(chief)
    assert dense_updates | sparse_updates | takes <= chief_runs
    chief_collectives = {op for op in chief_runs if op.type.startswith("Horovod")}
    for variant in others:
        ran = runs(variant)
        assert dense_updates <= ran and not (sparse_updates | takes) & ran
        # the same collectives as the chief (Horovod stalls otherwise), as targets, so Grappler cannot prune them
        assert chief_collectives and {op for op in ran if op.type.startswith("Horovod")} == chief_collectives
        assert {op for op in chief_collectives if op.type == "HorovodAllreduce"} <= set(variant.targets)


def test_the_global_norm_is_sent_from_the_chief_through_the_coordinator(hybrid):
    """The clip scale of the replicated gradients depends on the server-held rows, which only the chief takes: the
    chief sends it to every worker through one queue per worker on the coordinator (no collective), and each worker
    takes the copy of its own index (the others feed it; the chief's is the default, 0)."""
    analysis, plan, out = hybrid
    g = out.graph
    (chief_value, copy, send), = out.sync.broadcasts
    t, copy = g.get_tensor_by_name(chief_value), g.get_operation_by_name(copy)
    assert copy.type == "QueueDequeueV2" and copy.device == plan.coordinator and t.shape.num_elements() == 1
    enqueues = [e for e in g.get_operation_by_name(send).control_inputs if e.type == "QueueEnqueueV2"]
    assert len(enqueues) == plan.num_workers
    # taken only once this worker's gradients are computed (test_ps_rewrite: no take before the input yields)
    assert any("gradients" in a.name and a.device == "" for a in graph_utils.ancestors([copy]))
    assert all(e.inputs[1] is t for e in enqueues)
    assert not [op for op in g.get_operations() if op.type == "HorovodBroadcast" and "parallax_sync" in op.name]
    chief, *others = variants(out, "ExponentialMovingAverage", plan.num_workers)
    assert set(enqueues) <= set(chief.targets) and not chief.feeds
    index = g.get_tensor_by_name(out.sync.worker_index)
    for w, variant in enumerate(others, 1):
        assert variant.feeds == {index: w} and not set(enqueues) & set(variant.targets)
    assert not [op for op in g.get_operations() if "row_norm" in op.name]


def test_only_replicas_are_broadcast_and_initialized_by_every_worker(hybrid):
    analysis, plan, out = hybrid
    g = out.graph
    broadcast = {op.name[len("parallax_broadcast/"):-len("/broadcast")] for op in g.get_operations()
                 if op.type == "HorovodBroadcast" and op.name.startswith("parallax_broadcast/")}
    on_servers = {op.name for op in g.get_operations() if op.type == "VarHandleOp" and op.device.startswith("/job:ps")}
    assert "model/embedding" in on_servers and "global_step" in on_servers
    assert broadcast and not broadcast & on_servers
    assert "model/out/kernel" in broadcast and "model/out/kernel/Adam" in broadcast


def test_dense_only_hybrid_is_mpi_and_async_hybrid_is_refused():
    g = tf.Graph()
    with g.as_default():
        w = tf.compat.v1.get_variable("w", [3], use_resource=True)
        tf.compat.v1.train.AdamOptimizer().minimize(tf.reduce_sum(w * w))
    analysis = parallax.analyze(g)
    dense_plan = decide_variables(analysis, TWO_HOSTS, HYBRID)
    assert not dense_plan.uses_servers and passes_for(dense_plan) == passes_for(
        decide_variables(analysis, TWO_HOSTS, HYBRID.replace(run_option="MPI")))
    sparse_analysis = parallax.analyze(embedding_mlp.build("Adam")[0])
    with pytest.raises(parallax.UnsupportedError, match="HYBRID runs synchronously"):
        passes_for(decide_variables(sparse_analysis, TWO_HOSTS, HYBRID.replace(sync=False)))


def test_sparse_only_hybrid_is_ps():
    g = tf.Graph()
    with g.as_default():
        emb = tf.compat.v1.get_variable("emb", [20, 4], use_resource=True)
        loss = tf.reduce_sum(tf.gather(emb, [1, 2, 3]))
        tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss)
    analysis = parallax.analyze(g)
    hybrid, ps = (decide_variables(analysis, TWO_HOSTS, HYBRID.replace(run_option=o)) for o in ("HYBRID", "PS"))
    assert {v.method for v in hybrid.variables} == {"PS"} and not hybrid.uses_collectives
    assert passes_for(hybrid) == passes_for(ps)
