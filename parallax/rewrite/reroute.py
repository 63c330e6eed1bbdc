"""Graph surgery helpers shared by the passes."""
import contextlib


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
