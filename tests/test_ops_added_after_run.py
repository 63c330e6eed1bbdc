"""graph_utils.ops_added_after_run: ops a fetch set needs are added to a finalized graph that a session has run,
with their control inputs, and without setting an attribute on an op that ran (which TF's C API warns of)."""
import pytest
import tensorflow as tf

from parallax.core import graph_utils

tf1 = tf.compat.v1
MARK = "_has_manual_control_dependencies"


def _ran_graph():
    g = tf.Graph()
    with g.as_default():
        v = tf1.get_variable("v", [], initializer=tf1.ones_initializer(), use_resource=True)
        bump = v.assign_add(1.0, name="bump", read_value=False)
    g.finalize()
    sess = tf1.Session(graph=g)
    sess.run(v.initializer)
    sess.run(bump)
    return g, sess, v, bump


def _marked(op):
    try:
        return op.get_attr(MARK)
    except ValueError:
        return False


def test_new_ops_wait_for_ran_ops_and_the_ran_ops_are_not_changed():
    g, sess, v, bump = _ran_graph()
    with graph_utils.ops_added_after_run(g):
        with tf.control_dependencies([bump, v]):
            after = tf.identity(v.read_value(), name="after")
        with tf.control_dependencies(None):
            free = tf.constant(0.0, name="free")
    assert g.finalized
    assert bump in graph_utils.ancestors([after.op])
    assert not free.op.control_inputs
    assert not _marked(bump)
    assert sess.run(after) == 3.0  # the bump ran first: 1 + 1 (before) + 1 (as a control input)


def test_plain_control_dependencies_would_mark_the_ran_op():
    """What the helper avoids: without it TF sets the attribute on the op that ran."""
    g, _, v, bump = _ran_graph()
    g._unsafe_unfinalize()
    with g.as_default(), tf.control_dependencies([bump]):
        tf.identity(v.read_value())
    assert _marked(bump)


def test_the_graph_is_finalized_again_after_an_error_and_keeps_its_method():
    g, _, _, bump = _ran_graph()
    with pytest.raises(TypeError):
        with graph_utils.ops_added_after_run(g):
            with tf.control_dependencies([3]):
                pass
    assert g.finalized
    assert g.control_dependencies.__func__ is tf.Graph.control_dependencies
