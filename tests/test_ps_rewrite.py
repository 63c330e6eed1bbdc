"""The PS passes, checked on the rewritten graph (no processes started)."""
import re

import pytest
import tensorflow as tf

import parallax
from parallax.core import graph_utils
from parallax.plan.planning import plan_job
from parallax.rewrite import rewrite
from tests.models_for_tests import embedding_mlp
from tests.models_for_tests.variants import names, runs, variants

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
PS = parallax.Config(run_option="PS", local_aggregation=False)  # local aggregation: test_local_aggregation.py


def _rewrite(graph, config=PS):
    analysis = parallax.analyze(graph)
    plan = plan_job(graph, analysis, TWO_HOSTS, config)
    return analysis, plan, rewrite(graph, plan, config)


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


def test_each_gradient_is_aggregated_on_its_variables_server(adam_model):
    """Dense: a ConditionalAccumulator (SUM) per part. Sparse: one row queue per worker, on the part's server."""
    analysis, plan, out = adam_model
    g = out.graph
    for vp in plan.variables:
        for part, task in zip(analysis.variable(vp.name).parts, vp.ps_tasks):
            device = f"/job:ps/task:{task}"
            if vp.kind == "sparse":
                for w in range(plan.num_workers):
                    queue = g.get_operation_by_name(f"parallax_ps/{part.name}/rows_{w}")
                    assert queue.type == "FIFOQueueV2" and queue.device.startswith(device)
                    assert queue.get_attr("shared_name") == f"parallax_rows/{part.name}/worker_{w}".encode()
            else:
                acc = g.get_operation_by_name(f"parallax_ps/{part.name}/accumulator")
                assert acc.type == "ResourceConditionalAccumulator" and acc.device == device
                assert acc.get_attr("reduction_type") == b"SUM"
    # Merging rows of equal index would change what a global norm (which squares every row) sees.
    assert not [op for op in g.get_operations() if op.type == "SparseConditionalAccumulator"]


def test_the_users_global_norm_squares_every_workers_rows(adam_model):
    """The user's L2Loss of an aggregated IndexedSlices reads every worker's rows, concatenated in worker order,
    / N: what one device's batch gives, so the clip sees exactly the single-device norm."""
    analysis, plan, out = adam_model
    g = out.graph
    for part in analysis.variable("model/embedding").parts:
        (l2,) = [op for op in g.get_operations() if op.type == "L2Loss"
                 and _source(op.inputs[0].op).name.startswith(f"parallax_ps/{part.name}/")]
        concat = _source(l2.inputs[0].op)
        assert concat.type == "ConcatV2"
        dequeues = [t.op for t in concat.inputs[:-1]]
        assert [d.inputs[0].op.name for d in dequeues] == [f"parallax_ps/{part.name}/rows_{w}"
                                                          for w in range(plan.num_workers)]


def _source(op):
    while op.type in ("Identity", "RealDiv", "Cast"):
        op = op.inputs[0].op
    return op


def test_only_the_chief_takes_and_updates_the_others_contribute_and_wait(adam_model):
    analysis, plan, out = adam_model
    g = out.graph
    updates = {g.get_operation_by_name(n) for v in analysis.variables for n in v.update_ops}
    takes = {g.get_operation_by_name(o) for a in out.sync.aggregations for o in a.outputs}
    gate = g.get_operation_by_name(out.sync.gate)
    assert all(gate in u.control_inputs for u in updates)  # server writes wait for every worker's arrival
    chief, *others = variants(out, "ExponentialMovingAverage", plan.num_workers)  # the op the user runs
    assert updates | takes | {gate} <= runs(chief)
    assert any(op.name.endswith("/release") for op in chief.targets)
    for w, variant in enumerate(others, start=1):
        ran = names(runs(variant))
        assert not (updates | takes | {gate}) & runs(variant)
        for part in analysis.variable("model/embedding").parts:
            assert f"parallax_ps/{part.name}/put_{w}" in ran and f"parallax_ps/{part.name}/put_0" not in ran
        assert any("/arrive" in op.name for op in variant.targets)
        assert variant.released is not None and variant.leaves == [None]  # the train op runs on the chief only


def test_the_chief_takes_what_the_others_sent_only_after_its_own_part_has_run(adam_model):
    """Every take and the gate wait for the chief's readiness, a token its step puts in once its own contributions
    have run: a chief step that fails before (its input at its end) takes none of the rows or arrivals that a
    worker already in its next step sent (tests/test_uneven_data.py runs that case in every mode)."""
    _, plan, out = adam_model
    g = out.graph
    readiness = g.get_operation_by_name(out.sync.readiness)
    takes = {g.get_operation_by_name(o) for a in out.sync.aggregations for o in a.outputs}
    gate = g.get_operation_by_name(out.sync.gate)
    assert all(readiness in op.control_inputs for op in takes | {gate})
    chief, *others = variants(out, "ExponentialMovingAverage", plan.num_workers)
    ready = [op for op in chief.targets if re.search(r"/ready(_\d+)?$", op.name)]  # one more per derivation
    assert len(ready) == 1 and ready[0].type == "QueueEnqueueV2"
    before = graph_utils.ancestors(ready)
    own = {g.get_operation_by_name(c) for a in out.sync.aggregations for c in a.contributions[0]}
    assert own and own <= before  # the chief's rows and gradients are in before its token
    assert not (takes | {gate, readiness}) & before  # and nothing that waits for the token
    assert any(op.type == "IteratorGetNext" or op.type == "Placeholder" for op in before)
    for variant in others:
        assert readiness not in runs(variant) and not any("/ready" in op.name for op in variant.targets)


TAKING = ("Dequeue", "TakeGradient")  # op types that take what a shared queue or accumulator holds


@pytest.mark.parametrize("config", [PS, PS.replace(local_aggregation=True), parallax.Config(run_option="HYBRID")],
                         ids=["PS", "PS-local-aggregation", "HYBRID"])
def test_no_take_on_another_device_starts_before_the_workers_own_input(config):
    """TF may start a failed step's part on another task after the step's abort (the RPC's cancellation races its
    start), and nothing cancels it then. A take there that waited for nothing of the worker's would be left behind
    and take the next step's token, rows or arrival: the next step waited forever (CI: TF 2.21, PS, a new epoch).
    So every take that a worker's step runs off its own device waits for an op on its own device that ends only
    once its input has yielded: data of the input, or the chief's readiness, whose token the chief puts in after its
    own part (test above). A failed step aborts that device's part, and with it that wait."""
    tf.compat.v1.reset_default_graph()
    g, _ = embedding_mlp.build("Adam", clip=1.0, ema=True, partitions=2)
    _, plan, out = _rewrite(g, config)
    rg = out.graph
    inputs = {op for op in rg.get_operations() if op.type in ("Placeholder", "IteratorGetNext")}
    after_input = graph_utils.descendants(inputs) | {rg.get_operation_by_name(out.sync.readiness)}
    checked = 0
    for fetch in ("ExponentialMovingAverage", "loss"):
        for w, variant in enumerate(variants(out, fetch, plan.num_workers)):
            own = {"", f"/job:worker/task:{w}"}
            for op in runs(variant):
                if not any(t in op.type for t in TAKING) or op.device in own:
                    continue
                waited = {a for a in graph_utils.ancestors([op]) if a.device in own} & after_input
                assert waited, f"worker {w}: {op.name} on {op.device} waits for nothing its own input yielded"
                checked += 1
    assert checked >= 3  # the gate, the takes of rows and of dense gradients, the releases


def test_async_mode_creates_no_barrier():
    g, _ = embedding_mlp.build("Adam", partitions=2)
    _, plan, out = _rewrite(g, PS.replace(sync=False))
    types = {op.type for op in out.graph.get_operations()}
    assert not {t for t in types if "Accumulator" in t or "Queue" in t}
    assert out.sync is None
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


def test_batch_norm_writes_that_gradients_wait_for_run_on_the_chief_only():
    """`with control_dependencies(UPDATE_OPS): minimize(loss)` makes the gradient ops wait for the batch-norm
    writes, which read averaged statistics that only the chief has: the edges are cut and recorded, so that the
    chief still runs the writes in the same step and the others never wait for chief-only work."""
    analysis, plan, out = _rewrite(_batch_norm_graph())
    g = out.graph
    bn_writes = {g.get_operation_by_name(w) for s in analysis.state if s.kind == "update_ops" for w in s.written_by}
    assert {c for _, c in out.sync.deferred} and {c for _, c in out.sync.deferred} <= names(
        graph_utils.descendants(bn_writes))
    chief, *others = variants(out, "GradientDescent", plan.num_workers)
    assert bn_writes <= runs(chief) | set(chief.targets)
    for variant in others:
        assert not bn_writes & runs(variant)


def test_batch_norm_statistics_are_averaged_then_written_once_by_the_chief():
    analysis, plan, out = _rewrite(_batch_norm_graph())
    g = out.graph
    for name in ("bn/moving_mean", "bn/moving_variance"):
        assert next(s for s in plan.state if s.name == name).aggregate
        record = next(s for s in analysis.state if s.name == name)
        for writer in record.written_by:
            value = g.get_operation_by_name(writer).inputs[1]
            assert value.op.type == "RealDiv" and value.op.inputs[0].op.name == f"parallax_ps/{writer}/take"


def test_a_chief_only_value_that_every_worker_writes_is_sent_through_the_coordinator():
    """A local variable (each worker's own) written from the aggregated global norm: only the chief takes the
    aggregated gradients, and PS mode has no collectives, so the chief sends the norm through a queue per worker on
    the coordinator; every worker's step writes its own variable from its copy, and none runs the chief's work."""
    g = tf.Graph()
    with g.as_default():
        emb = tf.compat.v1.get_variable("emb", [10, 3], use_resource=True)
        loss = tf.reduce_sum(tf.gather(emb, [1, 2]) ** 2)
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, norm = tf.clip_by_global_norm(grads, 1.0)
        last_norm = tf.compat.v1.get_local_variable("last_norm", [], initializer=tf.compat.v1.zeros_initializer())
        train = tf.group(opt.apply_gradients(zip(clipped, variables)), last_norm.assign(norm), name="train")
    analysis, plan, out = _rewrite(g)
    assert not out.sync.unsupported and not out.sync.collectives
    (_, copy, send), = out.sync.broadcasts
    out_graph = out.graph
    init = graph_utils.initialization_ops(out_graph)
    write, = [op for op in out_graph.get_operations() if op.type == "AssignVariableOp"
              and op.inputs[0].op.name == "last_norm" and op.name not in init]
    assert out_graph.get_operation_by_name(copy) in graph_utils.ancestors([write])
    chief, *others = variants(out, train, plan.num_workers)
    index = out_graph.get_tensor_by_name(out.sync.worker_index)
    takes = {out_graph.get_operation_by_name(o) for a in out.sync.aggregations for o in a.outputs}
    assert write in runs(chief) and not chief.feeds
    for w, variant in enumerate(others, 1):
        assert write in runs(variant) and variant.feeds == {index: w}
        assert not takes & runs(variant)


def _v1_loop_over_a_server_variable():
    """A v1 while loop whose body reads a variable (on a server in PS) into a TensorArray: its gradient saves the
    reads on stacks colocated with them."""
    tf1 = tf.compat.v1
    tf1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(tf.float32, [None, 3])
            w = tf1.get_variable("w", [3, 3], initializer=tf1.ones_initializer(), use_resource=True)
            ta = tf.TensorArray(tf.float32, size=2)

            def body(i, h, ta):
                h = tf.tanh(tf.matmul(h, w))
                return i + 1, h, ta.write(i, h)
            _, _, ta = tf1.while_loop(lambda i, h, ta: i < 2, body, [tf.constant(0), x, ta])
            loss = tf.reduce_sum(ta.stack())
            tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_or_create_global_step())
        return g
    finally:
        tf1.enable_control_flow_v2()


def test_the_steps_own_stacks_and_tensor_arrays_leave_a_server_variables_colocation_group():
    """A stack that saves a server variable's read was colocated with the read, on the server, and its pops found
    no step container there (padded_v1_loop_lookups in PS, 21 of 25 runs). The step's own state runs on the
    worker: no colocation hint, no server device."""
    g = _v1_loop_over_a_server_variable()
    stacks = [op for op in g.get_operations() if op.type in graph_utils.PER_STEP_RESOURCE_OPS]
    assert any(graph_utils.colocation_target(op) == "while/MatMul/ReadVariableOp" for op in stacks)
    _, _, out = _rewrite(g)
    for op in stacks:
        rewritten = out.graph.get_operation_by_name(op.name)
        assert graph_utils.colocation_target(rewritten) is None, op.name
        assert not rewritten.device.startswith("/job:ps"), (op.name, rewritten.device)


def test_every_op_that_passes_a_stacks_handle_on_leaves_a_server_variables_colocation_group():
    """A loop in a v1 cond reaches its gradient's stacks through the cond's Switch and an Enter, which TF colocated
    with the read the stack saves (a server variable's, in PS). TF places every op that takes a resource beside
    the op that made it, so the stacks went to the server with them, where the workers' steps (one step id with
    TF's collectives) shared one step container: `Container __per_step_... does not exist` at a pop
    (v1_loop_in_cond_lookups in PS, every run). Every op that makes or passes on the step's own state is left to
    the worker."""
    from tests.equivalence.run_case import case_builder
    v2 = tf.compat.v1.control_flow_v2_enabled()
    try:
        case = case_builder("v1_loop_in_cond_lookups")(2, 2, 6, 2)
    finally:
        if v2:
            tf.compat.v1.enable_control_flow_v2()
    carriers = [op for op in case.graph.get_operations() if graph_utils.carries_step_state(op)]
    passing = [op for op in carriers if op.type in ("Switch", "Enter")]
    assert any(graph_utils.colocation_target(op) for op in passing), "TF colocates the cond's Switch with the read"
    _, _, out = _rewrite(case.graph, parallax.Config(run_option="PS", collective_backend="tf"))
    for op in carriers:
        rewritten = out.graph.get_operation_by_name(op.name)
        assert graph_utils.colocation_target(rewritten) is None, op.name
        assert not rewritten.device.startswith("/job:ps"), (op.name, rewritten.device)
