"""The packages of parallax are layers: a module imports only the layers its own layer may import (LAYERS, the
table docs/architecture.md draws), and no modules import each other round in a cycle. Every import counts, those
inside functions too: a function-level import that would close a cycle is one.

Run alone: python -m pytest tests/test_layers.py -q
"""
import ast
import os
import shutil

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "parallax")

# layer: (the modules in it, by dotted prefix; the layers it may import). Order: bottom first.
LAYERS = {
    "core": (("parallax.errors", "parallax.core"), ()),
    "process": (("parallax.process",), ("core",)),
    "config": (("parallax.config",), ("core", "process")),
    "collectives": (("parallax.collectives",), ("core", "config")),
    "capture": (("parallax.capture",), ("core", "process", "config")),
    "analysis": (("parallax.analysis",), ("core", "capture")),
    "rules": (("parallax.rules",), ("core", "config", "capture", "analysis")),
    "plan": (("parallax.plan",), ("core", "process", "config", "collectives", "capture", "analysis", "rules",
                                  "plan.serialized")),
    # the launcher reads the plan only in its serialized form
    "launcher": (("parallax.launcher",), ("core", "process", "config", "plan.serialized")),
    "plan.serialized": (("parallax.plan.records", "parallax.plan.plan_json"), ("core",)),
    "rewrite": (("parallax.rewrite",), ("core", "config", "collectives", "capture", "analysis", "rules", "plan",
                                        "plan.serialized")),
    "runtime": (("parallax.runtime",), ("core", "process", "config", "collectives", "capture", "analysis", "rules",
                                        "plan", "plan.serialized", "launcher", "rewrite")),
    # what a user calls, and the commands and the original Parallax's API, on top of everything
    "top": (("parallax", "parallax.explain", "parallax.thread_job", "parallax.tools", "parallax.legacy"), "*"),
}


def modules(root):
    """{dotted name: path} of every module under `root` (the parallax package directory)."""
    found = {}
    base = os.path.dirname(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                dotted = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
                found[dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted] = path
    return found


def imports(name, path, known):
    """[(imported module, line)] of every parallax import in the module, at any depth of the code."""
    tree = ast.parse(open(path).read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name:
                found.append((target, node.lineno))
    return sorted(set(found))


def layer_of(name):
    """The layer whose longest prefix holds `name`."""
    best, length = None, -1
    for layer, (prefixes, _) in LAYERS.items():
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > length:
                best, length = layer, len(prefix)
    return best


def violations(root=ROOT):
    """Messages, one per import against the layers and one per cycle, naming the files."""
    known = modules(root)
    graph, problems = {}, []
    for name, path in sorted(known.items()):
        layer = layer_of(name)
        if layer is None:
            problems.append(f"{path}: module {name} is in no layer of tests/test_layers.py")
            continue
        graph[name] = set()
        for target, line in imports(name, path, known):
            graph[name].add(target)
            allowed = LAYERS[layer][1]
            other = layer_of(target)
            if allowed != "*" and other != layer and other not in allowed:
                problems.append(f"{path}:{line}: {name} ({layer}) imports {target} ({other}), which layer "
                                f"{layer!r} may not import ({known[target]})")
    problems += [f"import cycle: {' -> '.join(known[m] for m in cycle)}" for cycle in cycles(graph)]
    return problems


def cycles(graph):
    """One cycle per strongly connected component of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(_a_cycle_in(sorted(component), graph))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _a_cycle_in(component, graph):
    """A path from the component's first module back to itself, through the component."""
    start, members = component[0], set(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for target in sorted(graph.get(path[-1], ())):
            if target == start:
                return path + [start]
            if target in members and target not in seen:
                seen.add(target)
                paths.append(path + [target])
    return component


def test_parallax_imports_follow_the_layers_without_cycles():
    assert violations() == []


def test_every_layer_it_may_import_is_a_layer():
    for layer, (_, allowed) in LAYERS.items():
        assert allowed == "*" or set(allowed) <= set(LAYERS), layer


@pytest.fixture
def copy_of_parallax(tmp_path):
    shutil.copytree(ROOT, tmp_path / "parallax", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return tmp_path / "parallax"


def _append(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_an_upward_import_is_named_with_both_files(copy_of_parallax):
    _append(copy_of_parallax / "capture" / "partitioner.py",
            "\n\ndef _planted():\n    from parallax.runtime import step_measure\n")
    found = violations(str(copy_of_parallax))
    assert len(found) == 1, found
    assert "capture/partitioner.py" in found[0] and "runtime/step_measure.py" in found[0] \
        and "'capture' may not" in found[0]


def test_a_cycle_inside_one_layer_is_named_with_its_files(copy_of_parallax):
    _append(copy_of_parallax / "launcher" / "watchdog.py", "\nfrom parallax.launcher import supervisor\n")
    found = violations(str(copy_of_parallax))
    assert len(found) == 1, found
    assert found[0].startswith("import cycle:") and "launcher/watchdog.py" in found[0] \
        and "launcher/supervisor.py" in found[0]


def test_the_launcher_reads_no_plan_module_but_the_serialized_form(copy_of_parallax):
    _append(copy_of_parallax / "launcher" / "ports.py", "\nfrom parallax.plan import planning\n")
    found = violations(str(copy_of_parallax))
    assert len(found) == 1 and "plan/planning.py" in found[0], found
