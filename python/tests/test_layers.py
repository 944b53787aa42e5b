"""The package's modules import one another one way only.

A cycle among imports that run at import time hands one module a partly initialised other, so
what works depends on which module happens to be imported first. The graph is read from the
source (ast), so this test needs neither the library nor the optional engines."""
import ast
import os

import pytest

_PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "symmar")
_NAME = "symmar"

# Imports made inside a function, allowed to point back up: Comm.from_process_group and
# Comm.from_mpi load the engine modules on demand, since those need torch or mpi4py, which the
# core must not require; the engine modules in turn build their comms through _core.Comm.
DEFERRED_ALLOWED = {("_core", "torch"), ("_core", "mpi")}


def _modules():
    return sorted(f[:-3] for f in os.listdir(_PKG) if f.endswith(".py"))


def _targets(node, modules):
    """The package's modules that one import statement of a package module names."""
    if isinstance(node, ast.Import):
        found = []
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == _NAME:
                found.append(parts[1] if len(parts) > 1 and parts[1] in modules else "__init__")
        return found
    if node.level == 0:
        parts = (node.module or "").split(".")
        if parts[0] != _NAME:
            return []
        rest = parts[1:]
    elif node.level == 1:
        rest = node.module.split(".") if node.module else []
    else:
        return []  # above the package
    if rest:
        return [rest[0] if rest[0] in modules else "__init__"]
    # "from . import a, b": submodules by name; other names come from __init__
    return [a.name if a.name in modules else "__init__" for a in node.names]


class _Collector(ast.NodeVisitor):
    """Splits a module's imports into those run at import time and those deferred to a call."""

    def __init__(self, modules):
        self.modules = modules
        self.depth = 0
        self.eager, self.deferred = set(), set()

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _import(self, node):
        (self.deferred if self.depth else self.eager).update(_targets(node, self.modules))

    visit_Import = visit_ImportFrom = _import


def _graph():
    modules = set(_modules())
    eager, deferred = {}, {}
    for name in sorted(modules):
        with open(os.path.join(_PKG, name + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read(), name + ".py")
        c = _Collector(modules)
        c.visit(tree)
        eager[name] = c.eager - {name}
        deferred[name] = c.deferred - {name}
    return eager, deferred


def _cycle(graph):
    """One cycle of graph (a list of modules, first == last), or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def _merge(a, b):
    return {n: set(a.get(n, ())) | set(b.get(n, ())) for n in set(a) | set(b)}


def test_graph_reads_the_package():
    eager, _ = _graph()
    assert "_core" in eager and "_lib" in eager
    assert "_core" in eager["__init__"]


def test_import_time_imports_are_acyclic():
    eager, _ = _graph()
    cycle = _cycle(eager)
    assert cycle is None, "import cycle at import time: " + " -> ".join(cycle)


def test_deferred_imports_add_no_cycle_beyond_the_engines():
    eager, deferred = _graph()
    unexpected = {(a, b) for a, bs in deferred.items() for b in bs} - DEFERRED_ALLOWED
    graph = _merge(eager, {a: {b} for a, b in unexpected})
    cycle = _cycle(graph)
    assert cycle is None, "import cycle through a deferred import: " + " -> ".join(cycle)


@pytest.mark.parametrize("edge", sorted(DEFERRED_ALLOWED))
def test_allowed_deferred_imports_stay_deferred(edge):
    eager, deferred = _graph()
    a, b = edge
    assert b not in eager[a], "%s imports %s at import time" % edge
