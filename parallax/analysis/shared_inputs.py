"""Inputs that are not examples: a placeholder (or another input) whose rows every worker is fed alike, as a pool of
candidate items that each example is scored against.

Parallax takes every input's first dimension for the batch's examples (batch_shapes.per_worker_inputs): its rules
split and combine what follows the batch. An input fed alike in every worker is no share of a batch; taken for
one, a value that pairs it with the examples (`queries @ pool^T`) looks like in-batch negatives, and the planner
warns that the job is not exact where it is. `parallax.shared_input(t)` says so: the input is then read as a
setting of the graph, the same in every worker (row_keys.reads_input), and its feed is the script's own.
"""
import tensorflow as tf

from parallax.analysis.row_keys import SHARED_INPUTS, reads_input
from parallax.errors import GraphAnalysisError


def shared_input(tensor):
    """Mark `tensor` (the output of an input: a placeholder, an iterator's get_next) as fed alike in every worker,
    not a share of the batch; returns it. Call it while building the graph, before get_runner or explain."""
    if not isinstance(tensor, tf.Tensor) or not reads_input(tensor.op):
        raise GraphAnalysisError(f"parallax.shared_input takes an input's output (a placeholder, an iterator's "
                                 f"get_next), not {tensor!r}")
    if tensor.op.name not in tensor.graph.get_collection(SHARED_INPUTS):
        tensor.graph.add_to_collection(SHARED_INPUTS, tensor.op.name)
    return tensor
