"""tf.gradients' ops for a forward op, and the gradients they take in: the backward pass seen from the forward."""
import re

from parallax.core import graph_utils


def upstream(op, out, gradient_ops):
    """[(tensor, the ops that read it)]: the gradients of the loss(es) with respect to `out` that `op`'s gradient
    (tf.gradients' ops for it, in each of its calls) takes in; [] when none is taken (no gradient flows through
    it); None when they cannot be told from those of `op`'s other outputs."""
    grads = gradient_ops(op)
    if not grads:
        return []
    own = graph_utils.ancestors([op], False) | {op}
    upstream = sorted({t for g in grads for t in g.inputs if t.op not in grads and t.op not in own},
                      key=lambda t: t.name)
    others = [o for o in op.outputs if o is not out and o.dtype.is_floating]
    if any(t.dtype != out.dtype or not t.shape.is_compatible_with(out.shape) or
           any(t.shape.is_compatible_with(o.shape) and t.dtype == o.dtype for o in others) for t in upstream):
        return None
    return [(t, [c for c in t.consumers() if c in grads]) for t in upstream]


def by_forward_op(graph):
    """`op` -> the ops tf.gradients built for `op`'s gradient: those it recorded `op` as the origin of, or (in a
    graph imported without that record) those in a `<gradients scope>/<op name>_grad/` name scope."""
    by_origin, by_scope = {}, {}
    scope = re.compile(r"^(?:.*/)?gradients(?:_\d+)?/(.+?)_grad/")
    for g in graph.get_operations():
        origin = getattr(g, "_original_op", None)
        if origin is not None:
            by_origin.setdefault(origin, set()).add(g)
        for match in scope.finditer(g.name):
            by_scope.setdefault(match.group(1), set()).add(g)
    return lambda op: by_origin.get(op) or by_scope.get(op.name, set())
