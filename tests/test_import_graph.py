"""The package's import graph has no cycle (issue 22: the audit modules imported each
other in a circle held together by lazy imports).

Every module of ``skdpsparse`` is read with ``ast`` (nothing is imported), and each
import that runs when the module is loaded (module level, including ``if``/``try``
blocks and class bodies; not inside functions, which run later) gives an edge to the
``skdpsparse`` module it names (``from .x import y``: to ``x``, and to ``x.y`` when that
is a module; a package is its ``__init__``) and to that module's parent packages, which
Python initialises first. A module's own parents are not edges: they are already being
initialised when it is loaded, so a package importing its submodules is not a cycle.
``benchmarks/layout_report.py`` prints the same graph.

The graph *with* the imports inside functions added (:func:`import_graph` with
``lazy=True``) must have no cycle either, except the groups in
:data:`LAZY_CYCLE_ALLOWLIST`, each with its reason: a lazy import that closes a circle
only hides a module that needs another which needs it back, and the fix is to move what
both need down a layer (as the ledger's error and the events' base type were moved).
"""

import ast
from pathlib import Path

import skdpsparse

PACKAGE = "skdpsparse"


def module_files(root=None):
    """``{dotted name: path}`` of every module of the package."""
    root = Path(root or Path(skdpsparse.__file__).parent)
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _load_time_imports(tree, lazy=False):
    """Import statements executed at load: not inside a function (or lambda), unless
    ``lazy`` (then every import statement of the module)."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if not lazy and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                          ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _ancestors(name):
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _targets(node, name, is_package, modules):
    """The package's modules an import statement of module ``name`` loads: the
    module it names (``from x import y``: x.y too when that is a module) and their
    parent packages, except ``name``'s own parents (already being initialised)."""
    if isinstance(node, ast.Import):
        named = [alias.name for alias in node.names]
    else:
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        named = [source] + [f"{source}.{alias.name}" for alias in node.names]
    loaded = set()
    for target in named:
        if target in modules:
            loaded |= {target} | _ancestors(target)
    return loaded & set(modules) - _ancestors(name) - {name}


def import_graph(root=None, lazy=False):
    """``{module: set of modules it imports at load}`` over the whole package (with
    ``lazy``: also the modules its functions import when they run)."""
    files = module_files(root)
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = set()
        for node in _load_time_imports(tree, lazy):
            graph[name] |= _targets(node, name, is_package, files)
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (or a module
    importing itself): each holds at least one cycle. Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def test_the_package_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 200
    assert cycles(graph) == []


def test_the_graph_with_imports_inside_functions_has_no_cycle_either():
    """An import inside a function is still a dependency: counting them, the package is
    layered too (no import inside a function hides a cycle)."""
    graph = import_graph(lazy=True)
    assert sum(map(len, graph.values())) > sum(map(len, import_graph().values()))
    assert cycles(graph) == []


def test_the_graph_sees_the_package_imports():
    """Edges of known imports, relative and absolute, to modules and to packages."""
    graph = import_graph()
    assert "skdpsparse.mechanisms.heavy_tailed" in graph["skdpsparse.mechanisms.heavy_tailed_sco"]
    assert "skdpsparse.accounting" in graph["skdpsparse.mechanisms.heavy_tailed_sco"]
    assert "skdpsparse.linear_model._heavy_tailed" in graph["skdpsparse.linear_model"]
    # the plans' index loads its modules lazily (inside __getattr__): no edge
    assert not any(m.startswith("skdpsparse.mechanisms.") for m in graph["skdpsparse.mechanisms"])


def test_cycles_are_found_in_a_graph_with_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}, "b": set()}) == [["a"]]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "e"}, "e": set()}) == [
        ["a", "b"], ["c", "d"]]


def test_a_cycle_written_into_a_copy_of_the_package_is_found(tmp_path):
    """The whole pipeline (files, ast, relative imports, packages) on a small package
    whose modules import each other in a circle through a package ``__init__``."""
    pkg = tmp_path / "skdpsparse"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import helper\n")
    (pkg / "sub" / "__init__.py").write_text("from .helper import f\n")
    (pkg / "sub" / "helper.py").write_text("def f():\n    from .. import a\n")
    graph = import_graph(pkg)
    assert graph["skdpsparse.a"] == {"skdpsparse.sub", "skdpsparse.sub.helper"}
    assert cycles(graph) == []  # the import back to ``a`` is inside a function
    assert cycles(import_graph(pkg, lazy=True)) == [  # ...which the lazy graph sees
        ["skdpsparse.a", "skdpsparse.sub", "skdpsparse.sub.helper"]]
    (pkg / "sub" / "helper.py").write_text("import skdpsparse.a\n")
    assert cycles(import_graph(pkg)) == [["skdpsparse.a", "skdpsparse.sub",
                                          "skdpsparse.sub.helper"]]
