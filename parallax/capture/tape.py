"""Gradients taken with tf.GradientTape in a v1 graph get what tf.gradients' get from capture/gradients.py.

The loss rules (loss_law, loss_seeds, loss_terms) read three things tf.gradients leaves and a tape does not:
- the losses, recorded when the gradient is taken;
- a default seed per loss, a fill of ones named `grad_ys_<i>` in a `gradients` scope, whose value a worker
  scales to 1/N. A tape starts at ones it makes inside its C++ loop, which nothing can scale, so where the user
  gives no `output_gradients` the wrapper gives the tape that same fill (the gradients are the same values);
- each gradient op's record of the forward op it differentiates (`_original_op`), which tf.gradients sets and
  the tape's gradient function does not, so the wrapper sets it around the tape's per-op gradient function.
Where a target is not a float tensor of a graph (a variable, a ragged tensor), the tape runs unchanged and its
gradients are averaged as a mean's (docs/modes.md).
"""
import functools

import tensorflow as tf
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import backprop, execute

_installed = False
_ATTRS = 1  # position of the op's attributes in the tape's gradient function's arguments


def install(record_losses, record_seeds, record_pairs):
    """Wrap GradientTape.gradient and the tape's per-op gradient function once. The callbacks are capture/gradients.py's."""
    global _installed
    if _installed:
        return
    _installed = True
    backprop.GradientTape.gradient = _wrap_gradient(backprop.GradientTape.gradient, record_losses, record_seeds,
                                                    record_pairs)
    original = getattr(backprop, "_gradient_function", None)
    if original is not None and callable(getattr(execute, "record_gradient", None)):
        execute.record_gradient = _with_forward_op(execute.record_gradient)
        pywrap_tfe.TFE_Py_RegisterGradientFunction(_with_original_op(original))


def _graph_targets(target):
    """The flat targets when every one is a float tensor of one graph, else None."""
    flat = tf.nest.flatten(target)
    if not flat or not all(isinstance(t, tf.Tensor) and tf.is_symbolic_tensor(t) and t.dtype.is_floating
                           for t in flat):
        return None
    return flat if len({t.graph for t in flat}) == 1 else None


def _wrap_gradient(original, record_losses, record_seeds, record_pairs):
    @functools.wraps(original)
    def gradient(self, target, sources, output_gradients=None, *args, **kwargs):
        targets = None if tf.executing_eagerly() else _graph_targets(target)
        if targets is None:
            return original(self, target, sources, output_gradients, *args, **kwargs)
        graph = targets[0].graph
        if output_gradients is None:
            known = len(graph.get_operations())
            with graph.as_default(), tf.compat.v1.name_scope(None, "gradients"):
                # tf.gradients' default seeds: ones shaped like each loss, named so loss_seeds finds them
                output_gradients = [tf.ones(tf.shape(t), t.dtype, name=f"grad_ys_{i}")
                                    for i, t in enumerate(targets)]
            record_seeds(graph, graph.get_operations()[known:], targets)
            given = [None] * len(targets)
        else:
            given = list(tf.nest.flatten(output_gradients))
        record_losses(targets, given)
        grads = original(self, target, sources, output_gradients, *args, **kwargs)
        record_pairs(tf.nest.flatten(sources), tf.nest.flatten(grads))
        return grads
    return gradient


class _Attrs(tuple):
    """An op's attributes as the tape records them, and the op: the tape hands the same object back to the
    gradient function, whose other arguments (inputs, outputs) it drops where the op's gradient does not read
    them."""
    forward_op = None


def _with_forward_op(original):
    """The tape's recording of an op (gen ops call execute.record_gradient), its attributes carrying the op."""
    @functools.wraps(original)
    def record_gradient(op_name, inputs, attrs, outputs, *args):
        op = getattr(outputs[0], "op", None) if outputs and tf.is_symbolic_tensor(outputs[0]) else None
        if op is not None and isinstance(attrs, tuple):
            attrs = _Attrs(attrs)
            attrs.forward_op = op
        return original(op_name, inputs, attrs, outputs, *args)
    return record_gradient


def _with_original_op(original):
    """The tape's per-op gradient function, its ops recording the forward op as tf.gradients' do."""
    @functools.wraps(original)
    def gradient_function(*args):
        forward = getattr(args[_ATTRS], "forward_op", None) if len(args) > _ATTRS else None
        if forward is None:
            return original(*args)
        with forward.graph._original_op(forward):
            return original(*args)
    return gradient_function
