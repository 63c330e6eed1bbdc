"""HYBRID mode on the rewritten graph: dense variables replicated and allreduced, sparse ones on the servers."""
import pytest
import tensorflow as tf

import parallax
from parallax import graph_utils
from parallax.plan import make_plan
from parallax.rewrite import passes_for, rewrite
from tests.models_for_tests import embedding_mlp

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
HYBRID = parallax.Config()


@pytest.fixture(scope="module")
def hybrid():
    tf.compat.v1.reset_default_graph()
    g, _ = embedding_mlp.build("Adam", clip=1.0, ema=True)
    analysis = parallax.analyze(g)
    plan = make_plan(analysis, TWO_HOSTS, HYBRID)
    return analysis, plan, rewrite(g, analysis, plan, HYBRID)


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


def test_worker_step_updates_replicas_then_applies_sparse_gradients(hybrid):
    analysis, plan, out = hybrid
    g = out.graph
    (variants,) = out.train_op_variants.values()
    takes = {g.get_operation_by_name(n) for n in out.sync_takes}
    dense_updates = {g.get_operation_by_name(n) for v in plan.variables if v.method == "AR"
                     for n in analysis.variable(v.name).update_ops}
    sparse_updates = {g.get_operation_by_name(n) for n in analysis.variable("model/embedding").update_ops}
    chief_deps = graph_utils.ancestors([g.get_operation_by_name(variants[0])])
    assert dense_updates | sparse_updates | takes <= chief_deps
    for name in variants[1:]:
        deps = graph_utils.ancestors([g.get_operation_by_name(name)])
        assert dense_updates <= deps and not (sparse_updates | takes) & deps
        chief_collectives = {op for op in chief_deps if op.type.startswith("Horovod")}
        assert chief_collectives and chief_collectives <= deps  # same collectives as the chief, or Horovod stalls
    applies = [op for op in g.get_operations() if op.name.startswith("parallax_ps/model/embedding/")
               and op.name.endswith("/apply")]
    assert applies
    for apply in applies:  # beta powers are read before the chief moves them on
        assert dense_updates <= set(apply.control_inputs), apply.name


def test_sparse_row_norm_is_allreduced_for_every_worker(hybrid):
    _, _, out = hybrid
    g = out.graph
    total = g.get_operation_by_name("parallax_ps/model/embedding/row_norm_0/allreduce")
    assert total.type == "HorovodAllreduce"
    assert not [op for op in g.get_operations() if "row_norm" in op.name and "Accumulator" in op.type]


def test_only_replicas_are_broadcast_and_initialized_by_every_worker(hybrid):
    analysis, plan, out = hybrid
    g = out.graph
    broadcast = {op.name[len("parallax_broadcast/"):-len("/broadcast")] for op in g.get_operations()
                 if op.type == "HorovodBroadcast"}
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
    dense_plan = make_plan(analysis, TWO_HOSTS, HYBRID)
    assert not dense_plan.uses_servers and passes_for(dense_plan) == passes_for(
        make_plan(analysis, TWO_HOSTS, HYBRID.replace(run_option="MPI")))
    sparse_analysis = parallax.analyze(embedding_mlp.build("Adam")[0])
    with pytest.raises(parallax.UnsupportedError, match="HYBRID runs synchronously"):
        passes_for(make_plan(sparse_analysis, TWO_HOSTS, HYBRID.replace(sync=False)))


def test_sparse_only_hybrid_is_ps():
    g = tf.Graph()
    with g.as_default():
        emb = tf.compat.v1.get_variable("emb", [20, 4], use_resource=True)
        loss = tf.reduce_sum(tf.gather(emb, [1, 2, 3]))
        tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss)
    analysis = parallax.analyze(g)
    hybrid, ps = (make_plan(analysis, TWO_HOSTS, HYBRID.replace(run_option=o)) for o in ("HYBRID", "PS"))
    assert {v.method for v in hybrid.variables} == {"PS"} and not hybrid.uses_collectives
    assert passes_for(hybrid) == passes_for(ps)
