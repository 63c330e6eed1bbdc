"""The vertex cut that sync_passes uses to choose the fewest bytes to broadcast."""
from parallax.core.min_cut import INFINITE, min_vertex_cut


def test_cuts_the_narrowest_point_not_the_first():
    # two norms (1 each) -> stack (2) -> sum (1) -> scale (1) -> two clips (100 each) -> two updates (sinks)
    edges = [("n1", "stack"), ("n2", "stack"), ("stack", "sum"), ("sum", "scale"), ("scale", "c1"),
             ("scale", "c2"), ("c1", "u1"), ("c2", "u2")]
    cost = {"n1": 1, "n2": 1, "stack": 2, "sum": 1, "scale": 1, "c1": 100, "c2": 100, "u1": INFINITE,
            "u2": INFINITE}
    nodes = sorted(cost)
    cut = min_vertex_cut(nodes, edges, ["n1", "n2"], ["u1", "u2"], cost.get)
    assert cut in (["sum"], ["scale"])


def test_every_path_is_cut():
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    cost = {"a": 10, "b": 1, "c": 2, "d": INFINITE}
    assert sorted(min_vertex_cut(sorted(cost), edges, ["a"], ["d"], cost.get)) == ["b", "c"]


def test_no_finite_cut():
    edges = [("a", "b")]
    assert min_vertex_cut(["a", "b"], edges, ["a"], ["b"], lambda n: INFINITE) is None


def test_nothing_to_cut_without_a_path():
    assert min_vertex_cut(["a", "b"], [], ["a"], ["b"], lambda n: 1) == []
