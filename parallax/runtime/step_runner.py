"""The runner of a TF2 training step: called like the step (`loss = runner(x, y)`), it runs the step's lifted graph
(capture/function_step.py) through a v1 Runner, the same plan, rewrite and synchronization as a v1 script's.

`get_runner(step, ...)` returns it at once. Its first call traces the step for that call's arguments and then does
what `get_runner` does for a v1 graph: plans, and launches the job (the script run by hand exits with the job's
status, as a v1 script's) or joins it (a launched worker). Each call feeds the batch, runs the step's return value
and its writes, and returns that value as the step does, in eager tensors. When the runner is closed, the user's
eager variables take the trained values, so that the script's code after the loop (an evaluation, `model.save`)
sees the trained model, as on one device.
"""
import numpy as np
import tensorflow as tf

from parallax.capture.function_step import lift
from parallax.errors import ParallaxError, UnsupportedError
from parallax.runtime.lifted_job import LiftedJob
from parallax.rewrite.fingerprint import first_difference, node_digests


def _lifted(step, args):
    """The step lifted for `args`. A plain Python function runs eagerly on one device, its Python code at every
    call, where a traced graph runs what one call's Python made: it is traced twice, and two traces that differ
    (a Python counter, a NumPy draw, a value read from a file) are refused, naming the first op they differ in."""
    lifted = lift(step, args)
    if hasattr(step, "get_concrete_function"):  # a tf.function: its Python runs when it traces, on one device too
        return lifted
    first = node_digests(lifted.graph.as_graph_def())
    differs = first_difference(first, node_digests(lift(step, args).graph.as_graph_def()))
    if differs is not None:
        raise UnsupportedError(
            f"the training step is a Python function whose code computes something else at each call (two "
            f"traces of it differ, first in {differs}): a Python value that changes per call (a counter, a NumPy "
            f"draw, a value read from a file) becomes a constant of the traced graph. Compute it with TensorFlow "
            f"ops or pass it as an argument of the step; or decorate the step with @tf.function, which runs its "
            f"Python once, on one device too")
    return lifted


class StepRunner(LiftedJob):
    def __init__(self, step, join, report=None):
        """`join(graph)`: get_runner's v1 path for the lifted graph, which returns its Runner; `report`: LiftedJob's."""
        if not callable(step):
            raise UnsupportedError(f"get_runner takes a tf.Graph, a training step (a function of a batch) or a "
                                   f"compiled Keras model, not {type(step).__name__}")
        if not tf.executing_eagerly():
            raise UnsupportedError(
                "a TF2 training step (a function of a batch) needs eager execution, which this script turned off "
                "(tf.compat.v1.disable_eager_execution): remove that call, or build a v1 graph with a training op "
                "and pass the graph to get_runner")
        super().__init__(join, report)
        self._step, self._lifted = step, None

    # ---- identity: the job's, known once the first call joined it ------------------------------------------------
    @property
    def worker_id(self):
        return self._joined().worker_id

    @property
    def num_workers(self):
        return self._joined().num_workers

    @property
    def is_chief(self):
        return self._joined().is_chief

    def _joined(self):
        if self._runner is None:
            raise ParallaxError("this runner joins its job at its first call, with the first batch: call it before "
                                "asking for worker_id, num_workers or is_chief")
        return self._runner

    # ---- running ----------------------------------------------------------------------------------------------
    def __call__(self, *args):
        if self._closed:
            raise ParallaxError("this runner is closed; create a new one with get_runner")
        if self._runner is None:
            self._lifted = self._join_job(lambda: _lifted(self._step, args))
        values = tf.nest.flatten(args)
        if len(values) != len(self._lifted.inputs):
            raise UnsupportedError(f"the training step was traced for {len(self._lifted.inputs)} input tensor(s) "
                                   f"and is now called with {len(values)}: call it with batches of one structure")
        feeds = {placeholder: np.asarray(value) for placeholder, value in zip(self._lifted.inputs, values)}
        if self._lifted.outputs is None:
            self._runner.run(self._lifted.train_op, feed_dict=feeds)
            return None
        outputs, _ = self._runner.run([self._lifted.outputs, self._lifted.train_op], feed_dict=feeds)
        return tf.nest.map_structure(tf.convert_to_tensor, outputs)  # as the step returns them: eager tensors

    def close(self):
        """End the job for this process; the user's eager variables take the trained values first."""
        if self._closed:
            return
        self._closed = True
        self._end_job()
