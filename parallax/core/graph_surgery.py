"""Graph surgery helpers shared by the passes."""
import contextlib

import tensorflow as tf


def reroute_consumers(old, new, keep=()):
    """Every op that read `old` reads `new` instead, except the ops in `keep` (those that compute `new`)."""
    keep = set(keep)
    for consumer in list(old.consumers()):
        if consumer in keep:
            continue
        for index, t in enumerate(consumer.inputs):
            if t is old:
                consumer._update_input(index, new)


@contextlib.contextmanager
def new_ops(graph):
    """Collects the ops created inside the block: `with new_ops(g) as created: ...; created` is a list."""
    first = len(graph.get_operations())
    created = []
    yield created
    created.extend(graph.get_operations()[first:])


def average_of(total, n, name="average"):
    """`total / n` with n a constant of total's dtype. N is a power of two in most jobs, and then this division is
    exact, so the only difference from one device is the order of summation."""
    return tf.math.truediv(total, tf.constant(n, total.dtype), name=name)
