"""Passes every mode runs that are no equivalence rule (those are rules/rule.py's): copy the user's graph, count
each input's examples, then add initialization and checkpointing."""
import tensorflow as tf
from tensorflow.python.framework import meta_graph

from parallax.rules import example_counts

tf1 = tf.compat.v1


def copy_graph(ctx):
    """The rewritten graph starts as an exact copy of the user's graph (same names, seeds, collections)."""
    with ctx.source_graph.as_default():  # inside a graph, so also when the script left eager execution on
        meta = tf1.train.export_meta_graph(graph=ctx.source_graph, clear_devices=False)
    _drop_names_of_function_ops(meta)
    ctx.graph = tf.Graph()
    with ctx.graph.as_default():
        # Not tf1.train.import_meta_graph: that also adds a default Saver, and add_saver makes our own.
        meta_graph.import_scoped_meta_graph(meta, clear_devices=False)
        ctx.graph.seed = ctx.source_graph.seed


def count_examples(ctx):
    """Each input's count of examples in a run, which synchronized steps report so the launcher can tell when the
    workers' batches differ (example_counts.py)."""
    ctx.example_counts = example_counts.add_counts(ctx.graph, ctx.plan.counted_inputs)


def _drop_names_of_function_ops(meta):
    """A v2 tf.cond's branches share the graph's collections, so an op built in a branch (the train op of an
    apply_gradients under a loss scale's finiteness check) is listed there without being in the graph, and
    importing the list would fail. Such entries name nothing the graph can run; they are dropped."""
    names = {node.name for node in meta.graph_def.node}
    for key in list(meta.collection_def):
        collection = meta.collection_def[key]
        if not collection.HasField("node_list"):
            continue
        kept = [v for v in collection.node_list.value if v.lstrip("^").split(":")[0] in names]
        if len(kept) != len(collection.node_list.value):
            del collection.node_list.value[:]
            collection.node_list.value.extend(kept)


def add_initializers(ctx):
    """One op initializes every global variable; another local variables and tables (as a Scaffold would)."""
    with ctx.graph.as_default(), tf.name_scope("parallax_init"):
        ctx.init_op = tf1.variables_initializer(tf1.global_variables(), name="global")
        ctx.local_init_op = tf.group(tf1.variables_initializer(tf1.local_variables()), tf1.tables_initializer(),
                                     name="local")
        if ctx.plan.uses_servers:
            # The chief initializes what lives on the servers; the others wait for it, then initialize their own
            # replicas (HYBRID), which the broadcast then overwrites with the chief's values.
            on_servers = [v for v in tf1.global_variables() if v.op.name in ctx.server_variables]
            ctx.ready_op = tf1.report_uninitialized_variables(on_servers, name="uninitialized")
            ctx.ready_op.mark_used()  # TF's should-use wrapper would warn in the chief, which never runs it
            ctx.replica_init_op = tf1.variables_initializer(
                [v for v in tf1.global_variables() if v not in on_servers], name="replicas")


def add_saver(ctx):
    """Checkpoints use the user's variable names, so the unmodified single-device graph can restore them."""
    with ctx.graph.as_default(), tf.name_scope("parallax_saver"):
        ctx.saver = tf1.train.Saver(var_list=tf1.global_variables(), max_to_keep=5, sharded=False,
                                    allow_empty=True)
