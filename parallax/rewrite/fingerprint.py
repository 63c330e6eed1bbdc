"""A stable fingerprint of a GraphDef, so that workers can check they built the same rewritten graph."""
import hashlib


def node_digests(graph_def):
    """(node name, digest of everything about the node) for every node, sorted by name."""
    out = []
    for node in graph_def.node:
        h = hashlib.sha256()
        h.update(node.op.encode())
        for i in node.input:
            h.update(b"\0i" + i.encode())
        h.update(b"\0d" + node.device.encode())
        for key in sorted(node.attr):
            h.update(b"\0a" + key.encode() + node.attr[key].SerializeToString(deterministic=True))
        out.append((node.name, h.hexdigest()))
    return sorted(out)


def graph_fingerprint(graph_def):
    h = hashlib.sha256()
    for name, digest in node_digests(graph_def):
        h.update(name.encode() + b"=" + digest.encode() + b"\n")
    for fn in sorted(graph_def.library.function, key=lambda f: f.signature.name):
        h.update(fn.SerializeToString(deterministic=True))
    return h.hexdigest()


def first_difference(digests_a, digests_b):
    """Name of the first node (in name order) that differs or exists on one side only, or None."""
    a, b = dict(digests_a), dict(digests_b)
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            return name
    return None
