"""The MPI passes, checked on the rewritten graph itself (no processes started)."""
import pytest
import tensorflow as tf

import parallax
from parallax.core import graph_utils
from parallax.errors import GraphCycleError, ParallaxError
from parallax.plan.planning import plan_job
from parallax.rewrite import rewrite
from parallax.rewrite.fingerprint import first_difference, graph_fingerprint, node_digests
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
TWO = parallax.ResourceSpec.load("localhost:2")
MPI = parallax.Config(run_option="MPI", collective_backend="horovod")  # the Horovod rewrite (test_pipeline: both)


def _rewrite(graph, config=MPI):
    analysis = parallax.analyze(graph)
    return analysis, rewrite(graph, plan_job(graph, analysis, TWO, config), config)


def _grad_input(op):
    """The gradient input of an update op (dense Apply*/sparse SparseApply*)."""
    index = {"ResourceApplyAdam": 9, "ResourceApplyGradientDescent": 2, "ResourceSparseApplyMomentum": 3,
             "ResourceApplyMomentum": 3}[op.type]
    return op.inputs[index]


def test_update_ops_read_collectives_and_no_raw_gradient_reaches_an_update():
    g, _ = embedding_mlp.build("Momentum")
    # averaged by dividing the aggregate (a mean loss left to the law starts its gradients at 1/N instead)
    analysis, out = _rewrite(g, MPI.replace(average_dense=True, average_sparse=True))
    new = out.graph
    for record in analysis.variables:
        gradient = record.gradients[0]
        (update,) = [new.get_operation_by_name(n) for n in record.update_ops]
        if record.kind == "dense":
            fed = _grad_input(update).op  # the average of this variable's piece of the one fused allreduce
            assert (fed.type, fed.name) == ("RealDiv", f"parallax_allreduce/fused_0/{record.name}/average")
            (reduce,) = [op for op in graph_utils.ancestors([fed]) if op.type == "HorovodAllreduce"]
        else:  # the optimizer first sums duplicate indices, from the gathered values and indices (one collective)
            feeding = graph_utils.ancestors([update])
            average = new.get_operation_by_name(f"parallax_allgather/{record.name}/average")
            (gather,) = [op for op in feeding if op.type == "HorovodAllgather"]
            assert average in feeding and gather in graph_utils.ancestors([average])
        raw = [new.get_tensor_by_name(gradient.values)] + ([new.get_tensor_by_name(gradient.indices)]
                                                            if gradient.is_sparse else [])
        for t in raw:  # read only by the aggregation (a collective, or the packing in front of one)
            assert all(c.name.startswith(("parallax_allreduce/", "parallax_allgather/")) for c in t.consumers())


def test_summing_leaves_out_the_division():
    g, _ = embedding_mlp.build("GradientDescent")
    config = MPI.replace(average_dense=False, average_sparse=False)
    analysis, out = _rewrite(g, config)
    assert not [op for op in out.graph.get_operations() if op.name.endswith("/average")]
    update = out.graph.get_operation_by_name(analysis.variable("model/out/kernel").update_ops[0])
    assert _grad_input(update).op.type == "Reshape"  # its piece of the fused allreduce, not divided
    assert {op.type for op in graph_utils.ancestors([update])} & {"HorovodAllreduce"}


def test_clipping_consumes_the_aggregated_gradients():
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    analysis, out = _rewrite(g)
    norm_inputs = [op for op in out.graph.get_operations() if op.type == "L2Loss"]
    assert len(norm_inputs) == len(analysis.variables)
    for op in norm_inputs:
        source = op.inputs[0].op
        while source.type in ("Identity", "RealDiv", "Reshape", "StridedSlice", "SplitV"):  # averaging, unpacking
            source = source.inputs[0].op
        assert source.type in ("HorovodAllreduce", "HorovodAllgather"), (op.name, source.name)


def test_initial_values_broadcast_in_sorted_name_order():
    g, _ = embedding_mlp.build("Adam")
    _, out = _rewrite(g)
    bcasts = [op for op in out.graph.get_operations() if op.type == "HorovodBroadcast"]
    with g.as_default():
        names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    assert [op.name for op in bcasts] == [f"parallax_broadcast/{n}/broadcast" for n in names]
    # Each broadcast depends on the previous one (through its assignment): a chain, so the order is enforced.
    for earlier, later in zip(bcasts, bcasts[1:]):
        assert earlier in graph_utils.ancestors([later]), later.name


def test_rewrite_is_deterministic_and_fingerprint_finds_the_first_difference():
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    _, a = _rewrite(g)
    _, b = _rewrite(g)
    assert a.fingerprint == b.fingerprint
    da, db = node_digests(a.graph.as_graph_def()), node_digests(b.graph.as_graph_def())
    assert first_difference(da, db) is None
    altered = [(n, "changed" if n in ("model/hidden/MatMul", "loss") else d) for n, d in db]
    assert first_difference(da, altered) == "model/hidden/MatMul"  # created before "loss"
    assert first_difference(da, db[:-1]) == db[-1][0]  # a node only the reference has


def _checked_in_order(order, extra=False):
    """Three variables and, for each in `order`, an is-initialized check (TF numbers them by creation, as a Keras
    model makes them in an order of its process); `extra`: one more op that reads a variable."""
    g = tf.Graph()
    with g.as_default():
        variables = [tf1.get_variable(name, [2], use_resource=True) for name in "abc"]
        for i in order:
            tf1.is_variable_initialized(variables[i])
        if extra:
            tf.identity(variables[1].read_value() * 2.0, name="doubled")
    return g.as_graph_def()


def test_the_fingerprint_compares_what_nodes_compute_not_the_order_tf_numbered_them():
    first, rotated = _checked_in_order([0, 1, 2]), _checked_in_order([2, 0, 1])
    assert [n.input for n in first.node if n.name == "VarIsInitializedOp_1"] != \
        [n.input for n in rotated.node if n.name == "VarIsInitializedOp_1"]  # by name they differ
    assert graph_fingerprint(first) == graph_fingerprint(rotated)
    assert first_difference(node_digests(first), node_digests(rotated)) is None
    more = _checked_in_order([2, 0, 1], extra=True)
    assert graph_fingerprint(more) != graph_fingerprint(first)
    assert first_difference(node_digests(first), node_digests(more)) == "Read/ReadVariableOp"  # the extra read


def test_a_cycle_outside_a_while_loop_is_named_not_walked_forever():
    """A rewrite that made an op read what it feeds used to make the fingerprint's walk push the cycle's nodes until
    memory ran out (a Keras ResNet's backward pass, before rewrite/collective_passes.py's backward_pass)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        c = tf.add(tf.identity(a, name="b"), a, name="c")
        tf.identity(c, name="d")
    gd = g.as_graph_def()
    next(n for n in gd.node if n.name == "b").input[0] = "d"  # b reads d, which reads c, which reads b
    with pytest.raises(GraphCycleError, match=r"3 nodes.*: b -> d -> c -> b$") as raised:
        node_digests(gd)
    assert raised.value.cycle == ["b", "d", "c"]
    assert isinstance(raised.value, ParallaxError)


def test_horovods_collectives_keep_their_names_by_which_the_workers_pair_them():
    def graph(names):
        gd = tf1.GraphDef()
        for const in ("a", "b"):
            gd.node.add(name=const, op="Const").attr["value"].tensor.CopyFrom(tf.make_tensor_proto(ord(const)))
        for name, source in zip(names, ("a", "b")):
            gd.node.add(name=name, op="HorovodAllreduce", input=[source])
        return gd
    # x reduces a in one worker and b in the other: by structure alike, paired wrongly by Horovod
    assert graph_fingerprint(graph(["x", "y"])) != graph_fingerprint(graph(["y", "x"]))
    assert graph_fingerprint(graph(["x", "y"])) == graph_fingerprint(graph(["x", "y"]))
