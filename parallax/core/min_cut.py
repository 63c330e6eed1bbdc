"""The cheapest set of nodes whose removal separates sources from sinks in a DAG (a vertex cut), by max flow.
Plain Python, no TensorFlow: sync_passes uses it to choose which chief-only values to broadcast."""
import collections

INFINITE = float("inf")


class _Network:
    """A flow network with residual arcs, augmented along shortest paths (Edmonds-Karp)."""

    def __init__(self):
        self.capacity = collections.defaultdict(float)
        self.flow = collections.defaultdict(float)
        self.neighbours = collections.defaultdict(set)

    def arc(self, a, b, c):
        self.capacity[(a, b)] += c
        self.neighbours[a].add(b)
        self.neighbours[b].add(a)  # the residual arc

    def residual(self, a, b):
        return self.capacity[(a, b)] - self.flow[(a, b)] + self.flow[(b, a)]

    def reached(self, source, sink):
        """{node: its parent} on shortest residual paths from `source`, until `sink` is reached."""
        parent = {source: None}
        queue = collections.deque([source])
        while queue and sink not in parent:
            a = queue.popleft()
            for b in sorted(self.neighbours[a], key=repr):  # sorted: the same cut in every process
                if b not in parent and self.residual(a, b) > 0:
                    parent[b] = a
                    queue.append(b)
        return parent

    def augment(self, parent, sink):
        """Push the most the path to `sink` in `parent` carries; return that amount."""
        path, b = [], sink
        while parent[b] is not None:
            path.append((parent[b], b))
            b = parent[b]
        push = min(self.residual(a, b) for a, b in path)
        if push != INFINITE:
            for a, b in path:
                back = min(push, self.flow[(b, a)])
                self.flow[(b, a)] -= back
                self.flow[(a, b)] += push - back
        return push


def min_vertex_cut(nodes, edges, sources, sinks, cost):
    """Nodes to cut, of least total `cost(node)`, so that no path from `sources` to `sinks` remains.

    Sources and sinks may themselves be cut when their cost is finite. Returns None when every cut is infinite.
    `edges` are (from, to) pairs among `nodes`. Each node is split into in -> out with capacity cost(node)."""
    network = _Network()
    for n in nodes:
        network.arc(("in", n), ("out", n), cost(n))
    for a, b in edges:
        network.arc(("out", a), ("in", b), INFINITE)
    for s in sources:
        network.arc("S", ("in", s), INFINITE)
    for t in sinks:
        network.arc(("out", t), "T", INFINITE)
    while True:
        parent = network.reached("S", "T")
        if "T" not in parent:
            break
        if network.augment(parent, "T") == INFINITE:
            return None
    reached = set(parent)
    return [n for n in nodes if ("in", n) in reached and ("out", n) not in reached]
