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

A node is identified by what it computes, not by its name: its op, attributes and device, the digests of the
nodes it reads (in order: which output of which) and of its control inputs (as a set). TF numbers unnamed ops by
their order of creation (`VarIsInitializedOp_2`, `Const_5`), and a Keras model creates some in an order that
changes from process to process: by name, two such workers differ, by structure they agree. Names of nodes in
attributes (a colocation's `loc:@name`) read as that node's own digest (op, attributes, device); Horovod's ops
keep their names, by which the workers' collectives are paired. A v1 loop's back
edge (NextIteration into Merge) reads as the NextIteration's own digest, which keeps the graph acyclic.
"""
import collections
import hashlib
import re

from parallax.errors import GraphCycleError

# A scope opened twice gets a suffix (`parallax_shard_1`: two sharded datasets in one graph).
_VALUE_FREE_SCOPE = re.compile(r"(^|/)(Initializer|parallax_shard)(_\d+)?/")
_REGISTRY_KEYS = ("token", "_gradient_op_type")  # see the module docstring
# Ops that workers pair by their node's name: Horovod negotiates a collective by it (TF's collectives pair by
# their instance key, an attribute). Their names are part of what they compute.
_PAIRED_BY_NAME = ("Horovod",)


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

    def node(self, node, in_function=False, inputs=True, skip_attrs=()):
        h = hashlib.sha256()
        h.update(self.function(node.op).encode())
        for i in node.input if inputs else ():
            h.update(b"\0i" + (self._label(i) if in_function else i).encode())
        h.update(b"\0d" + node.device.encode())
        if not _VALUE_FREE_SCOPE.search(node.name):
            for key in sorted(k for k in node.attr if k not in skip_attrs):
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


def _source(text):
    """(node name, output index, whether a control input) of a NodeDef input string."""
    if text.startswith("^"):
        return text[1:], 0, True
    name, _, index = text.partition(":")
    return name, int(index or 0), False


def _structural_digests(graph_def, d):
    """{node name: digest by structure} (module docstring), computed inputs first, without recursion."""
    nodes = {n.name: n for n in graph_def.node}
    own = {}

    def own_digest(name):  # op, attributes (a colocation read as its target's own digest), device
        if name not in own:
            own[name] = "<colocated in a cycle>"  # until known: a colocation that leads back here reads so
            node = nodes[name]
            mine = d.node(node, inputs=False, skip_attrs=("_class",))
            if node.op.startswith(_PAIRED_BY_NAME):
                mine += f"@{name}"
            targets = [t.decode() for t in node.attr["_class"].list.s] if "_class" in node.attr else []
            own[name] = "+".join([mine] + [own_digest(t[5:]) if t.startswith("loc:@") and t[5:] in nodes else t
                                           for t in targets])
        return own[name]

    def back_edge(node, source):
        return node.op == "Merge" and nodes[source].op == "NextIteration"

    done, expanding = {}, set()  # expanding: nodes whose inputs are being digested (on the walk's path)
    for root in nodes:
        todo = [root]
        while todo:
            name = todo[-1]
            if name in done:
                todo.pop()
                continue
            node = nodes[name]
            waiting = [s for s, _, _ in map(_source, node.input)
                       if s in nodes and s not in done and not back_edge(node, s)]
            if waiting:
                looped = [s for s in waiting if s in expanding]
                if looped:  # without this check the walk would push the cycle's nodes forever
                    raise GraphCycleError(_cycle(todo, expanding, looped[0]))
                expanding.add(name)
                todo.extend(waiting)
                continue
            todo.pop()
            expanding.discard(name)
            h = hashlib.sha256(own_digest(name).encode())
            controls = []
            for source, index, control in map(_source, node.input):
                if source not in nodes:
                    ref = f"<missing {source}>"
                else:
                    ref = f"<next {own_digest(source)}>" if back_edge(node, source) else done[source]
                (controls.append(ref) if control else h.update(f"\0i{ref}:{index}".encode()))
            for ref in sorted(controls):
                h.update(f"\0c{ref}".encode())
            done[name] = h.hexdigest()
    return done


def _cycle(todo, expanding, back_to):
    """The cycle's nodes, from `back_to` along the walk's path to the node that reads it. A node on the path may
    also wait lower in `todo`, pushed by another reader before it was expanded: its place is its last."""
    path = list(dict.fromkeys(n for n in reversed(todo) if n in expanding or n == todo[-1]))[::-1]
    return path[path.index(back_to):]


def node_digests(graph_def):
    """(node name, digest by structure) for every node in creation order, then (`function <digest>`, digest) per
    function."""
    d = _Digester(graph_def)
    digests = _structural_digests(graph_def, d)
    out = [(node.name, digests[node.name]) for node in graph_def.node]
    out += [(f"function {d.function(f.signature.name)[:19]}", d.function(f.signature.name))
            for f in graph_def.library.function]
    return out


def graph_fingerprint(graph_def, digests=None):
    """A digest of the graph's nodes and functions by structure, whatever their names and order of creation
    (`digests`: its node_digests, if made already)."""
    h = hashlib.sha256()
    for digest in sorted(digest for _, digest in (digests or node_digests(graph_def))):
        h.update(digest.encode() + b"\n")
    return h.hexdigest()


def first_difference(reference, other):
    """The first node, in `other`'s creation order (so usually the root cause: its readers differ with it), that
    `reference` has no node of the same structure for; then any such node only `reference` has. None when the
    graphs agree."""
    unmatched = collections.Counter(digest for _, digest in reference)
    for name, digest in other:
        if not unmatched[digest]:
            return name
        unmatched[digest] -= 1
    theirs = collections.Counter(digest for _, digest in other)
    for name, digest in reference:
        if not theirs[digest]:
            return name
        theirs[digest] -= 1
    return None
