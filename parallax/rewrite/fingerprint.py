"""A stable fingerprint of a GraphDef, so that workers can check they built the same rewritten graph.

Two kinds of node may legitimately differ between workers, and only their attributes (values) are left out:
- initializer subgraphs (`.../Initializer/...`): unseeded initializers bake a random seed into the graph, and
  rank 0's initial values are broadcast or owned by the servers anyway;
- `parallax_shard/...`: each worker's own shard index.
TF names some functions by a hash of their body (e.g. a one-shot iterator's `_make_dataset_<hash>`), so a shard
index inside a function changes the function's name too, and others by a counter of the process (a v2 while loop's
`rnn_while_body_79`), which differs between two graphs built in one process. Functions are therefore identified by
a digest of their normalized body, where any function's name inside its names (arguments are named after the
function, or the one it was rewritten from) reads `<fn>`, and every reference to a function (a node's op, a `func`
attribute) by that digest. Attributes that are keys into a registry of the process's Python functions (a py_func's
`token`, a custom gradient's `_gradient_op_type`) name code the graph does not hold, numbered in the order the
process registered it: they read as labels too.
"""
import hashlib
import re

# A scope opened twice gets a suffix (`parallax_shard_1`: two sharded datasets in one graph).
_VALUE_FREE_SCOPE = re.compile(r"(^|/)(Initializer|parallax_shard)(_\d+)?/")
_REGISTRY_KEYS = ("token", "_gradient_op_type")  # see the module docstring


class _Digester:
    def __init__(self, graph_def):
        self._functions = {f.signature.name: f for f in graph_def.library.function}
        self._memo = {}
        names = sorted(self._functions, key=len, reverse=True)  # the longest first: one name may extend another
        self._names = re.compile("|".join(re.escape(n) for n in names) + r"(?![0-9])") if names else None

    def _label(self, text):
        return self._names.sub("<fn>", text) if self._names else text

    def function(self, name):
        if name not in self._functions:
            return name
        if name not in self._memo:
            self._memo[name] = "<recursive>"
            fn = self._functions[name]
            signature = type(fn.signature)()
            signature.CopyFrom(fn.signature)
            signature.name = ""
            for arg in list(signature.input_arg) + list(signature.output_arg):
                arg.name = self._label(arg.name)
            h = hashlib.sha256(signature.SerializeToString(deterministic=True))
            for node in sorted(fn.node_def, key=lambda n: self._label(n.name)):
                h.update(self._label(node.name).encode() + b"=" + self.node(node, in_function=True).encode())
            for key in sorted(fn.ret):
                h.update(self._label(f"ret {key}={fn.ret[key]}").encode())
            self._memo[name] = "fn:" + h.hexdigest()
        return self._memo[name]

    def node(self, node, in_function=False):
        h = hashlib.sha256()
        h.update(self.function(node.op).encode())
        for i in node.input:
            h.update(b"\0i" + (self._label(i) if in_function else i).encode())
        h.update(b"\0d" + node.device.encode())
        if not _VALUE_FREE_SCOPE.search(node.name):
            for key in sorted(node.attr):
                value = b"<registry key>" if key in _REGISTRY_KEYS else self._attr(node.attr[key])
                h.update(b"\0a" + key.encode() + value)
        return h.hexdigest()

    def _attr(self, value):
        funcs = [value.func] if value.HasField("func") else list(value.list.func)
        if not funcs:
            return value.SerializeToString(deterministic=True)
        canonical = type(value)()
        canonical.CopyFrom(value)
        for f in ([canonical.func] if value.HasField("func") else canonical.list.func):
            f.name = self.function(f.name)
        return canonical.SerializeToString(deterministic=True)


def node_digests(graph_def):
    """(node name, digest) for every node in creation order, then (`function <digest>`, digest) per function."""
    d = _Digester(graph_def)
    out = [(node.name, d.node(node)) for node in graph_def.node]
    out += [(f"function {d.function(f.signature.name)[:19]}", d.function(f.signature.name))
            for f in graph_def.library.function]
    return out


def graph_fingerprint(graph_def):
    h = hashlib.sha256()
    for name, digest in sorted(node_digests(graph_def)):
        h.update(name.encode() + b"=" + digest.encode() + b"\n")
    return h.hexdigest()


def first_difference(reference, other):
    """The first node, in `other`'s creation order (so usually the root cause), that differs from `reference` or
    is missing there; then any node only `reference` has. None when the graphs agree."""
    ref, oth = dict(reference), dict(other)
    for name, digest in other:
        if ref.get(name) != digest:
            return name
    return next((name for name, _ in reference if name not in oth), None)
