"""The cheapest set of nodes whose removal separates sources from sinks in a DAG (a vertex cut), by max flow.
Plain Python, no TensorFlow: sync_passes uses it to choose which chief-only values to broadcast."""
import collections

INFINITE = float("inf")


def min_vertex_cut(nodes, edges, sources, sinks, cost):
    """Nodes to cut, of least total `cost(node)`, so that no path from `sources` to `sinks` remains.

    Sources and sinks may themselves be cut when their cost is finite. Returns None when every cut is infinite.
    `edges` are (from, to) pairs among `nodes`. Each node is split into in -> out with capacity cost(node)."""
    capacity = collections.defaultdict(float)
    neighbours = collections.defaultdict(set)

    def arc(a, b, c):
        capacity[(a, b)] += c
        neighbours[a].add(b)
        neighbours[b].add(a)  # the residual arc

    for n in nodes:
        arc(("in", n), ("out", n), cost(n))
    for a, b in edges:
        arc(("out", a), ("in", b), INFINITE)
    for s in sources:
        arc("S", ("in", s), INFINITE)
    for t in sinks:
        arc(("out", t), "T", INFINITE)
    flow = collections.defaultdict(float)

    def residual(a, b):
        return capacity[(a, b)] - flow[(a, b)] + flow[(b, a)]

    total = 0.0
    while True:
        parent = {"S": None}
        queue = collections.deque(["S"])
        while queue and "T" not in parent:
            a = queue.popleft()
            for b in sorted(neighbours[a], key=repr):
                if b not in parent and residual(a, b) > 0:
                    parent[b] = a
                    queue.append(b)
        if "T" not in parent:
            break
        path, b = [], "T"
        while parent[b] is not None:
            path.append((parent[b], b))
            b = parent[b]
        push = min(residual(a, b) for a, b in path)
        if push == INFINITE:
            return None
        for a, b in path:
            back = min(push, flow[(b, a)])
            flow[(b, a)] -= back
            flow[(a, b)] += push - back
        total += push
    reached = set(parent)
    return [n for n in nodes if ("in", n) in reached and ("out", n) not in reached]
