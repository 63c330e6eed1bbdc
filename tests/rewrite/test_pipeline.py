"""The pass pipeline as data: which passes a plan selects, their contracts checked before anything is built, and
each pass on a small graph, run after only the passes it needs (its own test)."""
import dataclasses
import typing

import pytest
import tensorflow as tf

import parallax
from parallax.errors import PipelineError, RewritePassError
from parallax.plan.records import Method, Plan
from parallax.rules.catalog import RULES
from parallax.plan.planning import plan_job
from parallax.rewrite import pipeline
from parallax.rewrite.pipeline import PIPELINE, RewriteContext, check_order, passes_for, rewrite
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
MIXED = {"model/embedding": "AG", "model/hidden/kernel": "PS"}


def _plan(config, partitions=2, **build):
    g, _ = embedding_mlp.build("Adam", clip=1.0, partitions=partitions, **build)
    return g, plan_job(g, parallax.analyze(g), TWO_HOSTS, config)


def _names(plan):
    return [p.name for p in passes_for(plan)]


def test_the_plan_selects_the_passes():
    _, mpi = _plan(parallax.Config(run_option="MPI"))
    assert _names(mpi) == ["copy_graph", "scale_loss_seeds", "allreduce_dense_gradients",
                           "allgather_sparse_gradients", "broadcast_initial_values", "count_examples",
                           "add_initializers", "add_saver"]
    _, averaged = _plan(parallax.Config(run_option="MPI", average_dense=True, average_sparse=True))
    assert "scale_loss_seeds" not in _names(averaged)
    _, ps_async = _plan(parallax.Config(run_option="PS", sync=False))
    assert "aggregate_on_servers" not in _names(ps_async) and "prepare_sync_steps" not in _names(ps_async)
    _, mixed = _plan(parallax.Config(run_option="HYBRID", methods=MIXED))
    assert {Method.AG, Method.AR, Method.PS} == mixed.methods
    assert {"allreduce_dense_gradients", "allgather_sparse_gradients", "aggregate_on_servers",
            "prepare_sync_steps", "broadcast_initial_values"} <= set(_names(mixed))


def _fake(name, requires=(), after=(), provides=()):
    def run(ctx):
        pass
    run.__name__ = name
    return pipeline._pass(run, lambda plan: True, requires, after, provides)


def test_a_pass_before_what_it_requires_is_an_error_naming_both():
    with pytest.raises(PipelineError, match="pass b requires 'x', but pass a provides it only later"):
        check_order([_fake("b", requires={"x"}), _fake("a", provides={"x"})])
    with pytest.raises(PipelineError, match="pass b requires 'y', but no pass before it provides it"):
        check_order([_fake("a", provides={"x"}), _fake("b", requires={"y"})])
    with pytest.raises(PipelineError, match="pass b must run after every pass that provides 'x', but pass c"):
        check_order([_fake("a", provides={"x"}), _fake("b", after={"x"}), _fake("c", provides={"x"})])
    check_order([_fake("a", provides={"x"}), _fake("b", requires={"x"}, after={"z"})])  # no provider of z: fine


def test_the_real_pipeline_is_in_a_legal_order_for_every_selection():
    check_order(list(PIPELINE))  # all passes at once
    for config in (parallax.Config(run_option=o, sync=s) for o in ("MPI", "PS", "HYBRID") for s in (True, False)
                   if s or o == "PS"):
        passes_for(_plan(config)[1])


def test_a_pass_that_breaks_its_promise_is_named():
    g, plan = _plan(parallax.Config(run_option="PS"))
    broken = tuple(dataclasses.replace(p, run=lambda ctx: None) if p.name == "place_variables_on_servers" else p
                   for p in PIPELINE)
    with pytest.raises(PipelineError, match=r"pass <lambda> did not establish \['server_placement'\]"):
        rewrite(g, plan, parallax.Config(run_option="PS"), pipeline=broken)


# ---- each pass on its own, after the passes it requires -----------------------------------------------------
def _run_until(name, config, **build):
    g, plan = _plan(config, **build)
    ctx = RewriteContext(g, plan, config)
    for p in passes_for(plan):
        p.run(ctx)
        if p.name == name:
            return plan, ctx
    raise AssertionError(f"{name} is not selected for {config}")


PS = parallax.Config(run_option="PS", local_aggregation=False)
HYBRID = parallax.Config(run_option="HYBRID")


def test_copy_graph_keeps_names_and_devices():
    plan, ctx = _run_until("copy_graph", PS)
    assert [op.name for op in ctx.graph.get_operations()] == [op.name for op in ctx.source_graph.get_operations()]


def test_place_variables_on_servers_follows_the_plan():
    plan, ctx = _run_until("place_variables_on_servers", PS)
    for part in plan.parts:
        assert ctx.graph.get_operation_by_name(part.name).device == part.device
        assert ctx.server_variables[part.name] == part.device


def test_pin_ref_reads_reads_a_written_server_ref_variable_after_the_write():
    plan, ctx = _run_until("pin_ref_reads", PS, use_resource=False, ema=True)
    pinned = [op for op in ctx.graph.get_operations() if op.name.startswith("parallax_ref_read/")]
    assert pinned and all(op.control_inputs for op in pinned)
    assert all(op.device == ctx.server_variables[op.inputs[0].op.name] for op in pinned)


COLLECTIVE_TYPES = {"horovod": ("HorovodAllreduce", "HorovodAllgather"),
                    "tf": ("CollectiveReduceV2", "CollectiveGatherV2")}


@pytest.mark.parametrize("backend", sorted(COLLECTIVE_TYPES))
def test_allreduce_dense_gradients_feeds_every_update_the_collective(backend):
    plan, ctx = _run_until("allreduce_dense_gradients", parallax.Config(run_option="MPI", collective_backend=backend))
    assert plan.backend == backend
    dense = [g for v in plan.variables for g in v.gradients if g.indices is None]
    assert sorted(ctx.aggregated) == sorted(g.scope for g in dense)
    assert {ctx.graph.get_operation_by_name(c).type for c in ctx.collectives} == {COLLECTIVE_TYPES[backend][0]}


@pytest.mark.parametrize("backend", sorted(COLLECTIVE_TYPES))
def test_allgather_sparse_gradients_gathers_values_and_indices(backend):
    plan, ctx = _run_until("allgather_sparse_gradients", parallax.Config(run_option="MPI", collective_backend=backend))
    gathered = {ctx.graph.get_operation_by_name(c).type for c in ctx.collectives}
    assert gathered & {COLLECTIVE_TYPES[backend][1], "HorovodGroupedAllgather"}  # grouped: test_fusion.py
    assert all(isinstance(ctx.aggregated[g.scope], tuple) for v in plan.variables for g in v.gradients if g.indices)


def test_aggregate_on_servers_records_what_each_worker_contributes():
    plan, ctx = _run_until("aggregate_on_servers", PS)
    assert ctx.aggregations and all(set(a.contributions) == {0, 1, 2, 3} for a in ctx.aggregations)
    for a in ctx.aggregations:
        assert all(ctx.graph.get_operation_by_name(o).device.startswith("/job:ps/") for o in a.outputs)


def test_place_post_aggregation_ops_applies_the_planned_devices():
    plan, ctx = _run_until("place_post_aggregation_ops", parallax.Config(run_option="PS"))
    placed = plan.placed("place_post_aggregation_ops")
    assert placed  # the clip's ops (test_placement_passes.py checks which; place_boundary_ops there too)
    for op, device in placed:
        assert ctx.graph.get_operation_by_name(op).device == device, op


def test_prepare_sync_steps_gates_every_server_write():
    plan, ctx = _run_until("prepare_sync_steps", PS)
    gate = ctx.graph.get_operation_by_name(ctx.sync.gate)
    assert ctx.sync.gated_writes and all(gate in ctx.graph.get_operation_by_name(w).control_inputs
                                         for w in ctx.sync.gated_writes)
    assert gate.device == plan.coordinator


BROADCAST_TYPES = {"horovod": "HorovodBroadcast", "tf": "CollectiveGatherV2"}  # tf: a gather of worker 0's copy


@pytest.mark.parametrize("backend", sorted(BROADCAST_TYPES))
def test_broadcast_initial_values_skips_server_variables(backend):
    config = parallax.Config(run_option="HYBRID", collective_backend=backend)
    plan, ctx = _run_until("broadcast_initial_values", config)
    broadcast = {op.name.split("/broadcast")[0][len("parallax_broadcast/"):] for op in ctx.graph.get_operations()
                 if op.type == BROADCAST_TYPES[backend] and op.name.startswith("parallax_broadcast/")}
    assert broadcast and not broadcast & set(ctx.server_variables)


def test_count_examples_counts_the_users_inputs_not_the_rewrites_queues():
    plan, ctx = _run_until("count_examples", PS)
    user_inputs = {op.name for op in ctx.source_graph.get_operations() if op.type.startswith("Placeholder")}
    assert ctx.example_counts and {name for name, _, _ in ctx.example_counts} <= user_inputs
    assert any(op.type.startswith("QueueDequeue") or op.type == "AccumulatorTakeGradient"
               for op in ctx.graph.get_operations())  # the rewrite's own takes, which are not counted


def test_add_initializers_and_saver_cover_every_variable():
    plan, ctx = _run_until("add_initializers", HYBRID)
    with ctx.graph.as_default():
        variables = tf1.global_variables()
    assert ctx.ready_op is not None and ctx.replica_init_op is not None
    pipeline.add_saver(ctx)
    assert len(ctx.saver._var_list) == len(variables)


def test_no_pass_decides_from_device_strings_or_the_analysis():
    import os
    import re
    here = os.path.join(os.path.dirname(pipeline.__file__))
    pattern = re.compile(r'startswith\("/job|\.device ==|\.device\.startswith|(?<!parallax\.)\banalysis\b|op\.type\.startswith')
    found = [f"{name}:{i + 1}: {line.strip()}" for name in sorted(os.listdir(here)) if name.endswith(".py")
             for i, line in enumerate(open(os.path.join(here, name))) if pattern.search(line)]
    assert not found, found


def test_a_pass_that_fails_on_its_own_is_named_and_keeps_its_cause():
    g, plan = _plan(parallax.Config(run_option="PS"))

    def broken_run(ctx):
        raise ValueError("no such tensor")
    broken_run.__name__ = "place_variables_on_servers"
    broken = tuple(dataclasses.replace(p, run=broken_run) if p.name == "place_variables_on_servers" else p
                   for p in PIPELINE)
    with pytest.raises(RewritePassError, match="rewrite pass place_variables_on_servers failed: ValueError: no "
                                               "such tensor") as failed:
        rewrite(g, plan, parallax.Config(run_option="PS"), pipeline=broken)
    assert isinstance(failed.value.__cause__, ValueError)


def test_every_rule_is_a_pass_of_its_name_run_when_its_fields_are_set_and_checked_by_its_fact():
    names = [p.name for p in PIPELINE]
    plan_fields = {f.name for f in dataclasses.fields(Plan)}
    _, plan = _plan(parallax.Config(run_option="MPI", average_dense=True, average_sparse=True))
    for rule in RULES:
        assert rule.name in names and set(rule.fields) <= plan_fields and rule.doc
        assert pipeline.FACTS[rule.fact] is not None
        assert not rule.applies(plan)  # the embedding MLP with averaging given needs no rule
        (p,) = [p for p in PIPELINE if p.name == rule.name]
        assert rule.fact in p.provides and ("collectives" in p.provides) == rule.uses_collectives
        record = typing.get_args(typing.get_type_hints(Plan)[rule.fields[0]])[0]
        assert p.applies(dataclasses.replace(plan, **{rule.fields[0]: (record(*["x"] * len(record._fields)),)}))
    assert names[1:1 + len(RULES)] == [rule.name for rule in RULES]  # after the copy, before any mode's passes


def test_a_rule_whose_rewrite_does_not_hold_fails_the_rewrite_naming_it():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 2])
        loss = tf.reduce_mean(tf.nn.dropout(tf.matmul(x, w), rate=0.5, seed=1))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    plan = plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config(run_option="MPI"))
    draws = [r for r in RULES if r.name == "split_batch_draws"][0]
    assert draws.applies(plan)
    skipped = tuple(dataclasses.replace(p, run=lambda ctx: None) if p.name == draws.name else p for p in PIPELINE)
    with pytest.raises(PipelineError, match=r"did not establish \['draws_split'\]"):
        rewrite(g, plan, parallax.Config(run_option="MPI"), pipeline=skipped)
