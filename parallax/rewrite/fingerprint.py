"""A stable fingerprint of a GraphDef, so that workers can check they built the same rewritten graph.

Two kinds of node may legitimately differ between workers, and only their attributes (values) are left out:
- initializer subgraphs (`.../Initializer/...`): unseeded initializers bake a random seed into the graph, and
  rank 0's initial values are broadcast or owned by the servers anyway;
- `parallax_shard/...`: each worker's own shard index.
TF names some functions by a hash of their body (e.g. a one-shot iterator's `_make_dataset_<hash>`), so a shard
index inside a function changes the function's name too. Functions are therefore identified by a digest of their
normalized body, and every reference to a function (a node's op, a `func` attribute) by that digest.
"""
import hashlib
import re

# A scope opened twice gets a suffix (`parallax_shard_1`: two sharded datasets in one graph).
_VALUE_FREE_SCOPE = re.compile(r"(^|/)(Initializer|parallax_shard)(_\d+)?/")


class _Digester:
    def __init__(self, graph_def):
        self._functions = {f.signature.name: f for f in graph_def.library.function}
        self._memo = {}

    def function(self, name):
        if name not in self._functions:
            return name
        if name not in self._memo:
            self._memo[name] = "<recursive>"
            fn = self._functions[name]
            signature = type(fn.signature)()
            signature.CopyFrom(fn.signature)
            signature.name = ""
            h = hashlib.sha256(signature.SerializeToString(deterministic=True))
            for node in sorted(fn.node_def, key=lambda n: n.name):
                h.update(node.name.encode() + b"=" + self.node(node).encode())
            for key in sorted(fn.ret):
                h.update(f"ret {key}={fn.ret[key]}".encode())
            self._memo[name] = "fn:" + h.hexdigest()
        return self._memo[name]

    def node(self, node):
        h = hashlib.sha256()
        h.update(self.function(node.op).encode())
        for i in node.input:
            h.update(b"\0i" + i.encode())
        h.update(b"\0d" + node.device.encode())
        if not _VALUE_FREE_SCOPE.search(node.name):
            for key in sorted(node.attr):
                h.update(b"\0a" + key.encode() + self._attr(node.attr[key]))
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
