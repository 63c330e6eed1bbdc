"""Passes every mode runs: copy the user's graph (start a mean loss's gradients at 1/N, pad its padded inputs to the
workers' longest, split its random draws over the batch, and combine the workers' statistics of the batch), then
add initialization and checkpointing."""
import tensorflow as tf
from tensorflow.python.framework import meta_graph

from parallax.rules import batch_draws, batchless_writes, example_counts, fused_batch_norm, loss_seeds, padded_inputs, paired_rows, statistics_combined

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


def scale_loss_seeds(ctx):
    """A mean loss's gradients start at 1/N, so that each worker's backward pass computes one device's values for
    its examples (loss_seeds.py)."""
    loss_seeds.scale(ctx.graph, ctx.plan.loss_seeds, ctx.plan.mean_term_edges, ctx.plan.num_workers)


def count_examples(ctx):
    """Each input's count of examples in a run, which synchronized steps report so the launcher can tell when the
    workers' batches differ (example_counts.py)."""
    ctx.example_counts = example_counts.add_counts(ctx.graph, ctx.source_graph)


def pad_inputs_to_the_longest(ctx):
    """Each input its dataset pads to the batch's longest example is padded further, with the same value, to the
    longest over every worker, as one device pads the whole batch (padded_inputs.py)."""
    padded_inputs.pad_to_the_longest(ctx.graph, ctx.collective_ops, ctx.plan.padded_inputs)
    ctx.collectives += ctx.collective_ops.created()


def split_batch_draws(ctx):
    """Each random draw whose shape follows the batch (dropout's mask) draws, as one device does, for the whole
    global batch, and this worker keeps its own examples' values (batch_draws.py)."""
    for name, axis in ctx.plan.batch_draws:
        batch_draws.draw_for_the_whole_batch(ctx.graph, name, axis, ctx.plan.num_workers, ctx.worker_id,
                                             ctx.plan.batch_layout)


def wait_for_the_batch(ctx):
    """Each write of the training step that reads no input that can end waits for the step's inputs: a step whose
    input ends (an epoch's) writes nothing, in every mode (batchless_writes.py)."""
    batchless_writes.wait_for_the_batch(ctx.graph, ctx.plan.batchless_writes)


def combine_batch_statistics(ctx):
    """Each statistic of the batch that the gradients are computed from (a token count) is, for the ops that read
    it there, every worker's value combined as the plan says (batch_statistics.py)."""
    for name, law, readers in ctx.plan.batch_statistics:
        statistics_combined.combine(ctx.graph, ctx.collective_ops, name, law, readers, ctx.plan.batch_layout)
        ctx.collectives += ctx.collective_ops.created()


def gather_paired_rows(ctx):
    """What pairs the batch's examples (in-batch negatives' logits) reads every worker's rows and is one device's;
    the rest reads the worker's own rows of it, and the gradients cross between the two as the plan says
    (paired_rows.py)."""
    paired_rows.rewrite(ctx.graph, ctx.collective_ops, ctx.plan.paired_rows, ctx.worker_id, ctx.plan.batch_layout)
    ctx.collectives += ctx.collective_ops.created()


def synchronize_fused_batch_norms(ctx):
    """Each fused batch normalization in training mode (and its gradient) computes with the whole batch's
    statistics, the mean over workers of the workers' (fused_batch_norm.py)."""
    for name, gradients in ctx.plan.fused_batch_norms:
        fused_batch_norm.synchronize(ctx.graph, ctx.collective_ops, name, gradients, ctx.plan.num_workers)
        ctx.collectives += ctx.collective_ops.created()


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
