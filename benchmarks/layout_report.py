"""The package's layout, as issue 22's closing note asks for it: the directory tree,
the longest files and functions in code lines, and the import graph (modules, edges,
cycles).

Code lines are the lines holding code: not blank, not only a comment, not part of a
docstring. The import graph is that of ``tests/test_import_graph.py`` (imports run
when a module is loaded); the report also shows the graph with the imports inside
functions added, where lazy imports could hide a circle.

Usage::

    python benchmarks/layout_report.py [--top 15] [--root skdpsparse] [--rev REV]

``--rev``: the layout at a git revision (read with ``git archive``), for a before and
after. Static analysis only: nothing of the package is imported, no timing is taken.
"""

import argparse
import ast
import importlib.util
import io
import statistics
import subprocess
import tarfile
import tempfile
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _graph_module():
    spec = importlib.util.spec_from_file_location(
        "import_graph_checks", REPO / "tests" / "test_import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _docstring_lines(tree):
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def code_lines(source, tree):
    """The set of line numbers holding code (module notes)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
    lines = set()
    for tok in tokenize.tokenize(io.BytesIO(source.encode("utf-8")).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines - _docstring_lines(tree)


def functions(tree, prefix=""):
    """``(qualified name, node)`` for every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def measure(root):
    files, funcs = [], []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        lines = code_lines(source, tree)
        rel = path.relative_to(root.parent)
        files.append((len(lines), str(rel)))
        for name, node in functions(tree):
            own = set(range(node.lineno, node.end_lineno + 1))
            for _, inner in functions(node):  # a nested function counts for itself
                own -= set(range(inner.lineno, inner.end_lineno + 1))
            funcs.append((len(own & lines), f"{rel}::{name}"))
    return files, funcs


def tree(root, files):
    per_dir = {}
    for n, rel in files:
        key = str(Path(rel).parent)
        count, total = per_dir.get(key, (0, 0))
        per_dir[key] = (count + 1, total + n)
    out = []
    for key in sorted(per_dir):
        depth = key.count("/")
        count, total = per_dir[key]
        out.append(f"{'    ' * depth}{Path(key).name}/  ({count} files, {total} code lines)")
    return out


def _test_mirror(root, tests):
    """Modules without ``tests/<subpackage>/test_<module>.py`` (or ``test_<subpackage>_
    <module>.py`` where the basename is taken elsewhere; a ``_<topic>`` suffix after the
    module's name counts), and test files named for no module (the same suffix counts as
    named). ``tests/README.md`` states the rule and where the rest are tested."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if path.name == "__init__.py" or path.name.startswith("__"):
            continue
        package = rel.parts[0].lstrip("_") if len(rel.parts) > 1 else ""
        modules[(package, path.stem.lstrip("_"))] = str(rel)
    found = {}
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        package = rel.parts[0] if len(rel.parts) > 1 else ""
        found.setdefault(package, []).append(path.stem.removeprefix("test_"))
    missing, unnamed = [], []
    for (package, name), rel in modules.items():
        stems = (name, f"{package}_{name}")
        if not any(n in stems or n.startswith(tuple(f"{s}_" for s in stems))
                   for n in found.get(package, [])):
            missing.append(rel)
    for package, names in found.items():
        stems = {n for p, n in modules if p == package}
        for name in names:
            bare = name.removeprefix(f"{package}_") if package else name
            if not any(bare == m or bare.startswith(m + "_") for m in stems):
                unnamed.append(f"{package + '/' if package else ''}test_{name}.py")
    return missing, unnamed


def _function_level_graph(graph_module, root):
    """The import graph with the imports inside functions added (lazy imports)."""
    files = graph_module.module_files(root)
    graph = {}
    for name, path in files.items():
        tree_ = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        graph[name] = set()
        for node in ast.walk(tree_):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= graph_module._targets(node, name, is_package, files)
    return graph


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--root", default="skdpsparse")
    parser.add_argument("--rev", default=None, help="a git revision (default: the tree)")
    args = parser.parse_args(argv)
    if args.rev is None:
        return report(args, REPO)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.rev, args.root,
                                  "tests"], capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        print(f"(at {args.rev})")
        return report(args, Path(tmp))


def report(args, base):
    root = base / args.root
    files, funcs = measure(root)
    print(f"# Layout of {args.root}/ (code lines: no blank, comment or docstring lines)\n")
    print("\n".join(tree(root, files)))
    print(f"\n{len(files)} files, {sum(n for n, _ in files)} code lines")
    print(f"\n# The {args.top} longest files\n")
    for n, rel in sorted(files, reverse=True)[:args.top]:
        print(f"{n:6d}  {rel}")
    lengths = [n for n, _ in funcs]
    print(f"\n# The {args.top} longest functions ({len(funcs)} functions; median "
          f"{statistics.median(lengths):g} code lines, {sum(n > 50 for n in lengths)} over "
          "50)\n")
    for n, name in sorted(funcs, reverse=True)[:args.top]:
        print(f"{n:6d}  {name}")
    g = _graph_module()
    graph = g.import_graph(root)
    cycles = g.cycles(graph)
    print("\n# Import graph (imports run when a module is loaded)\n")
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} edges; "
          + ("acyclic" if not cycles else f"{len(cycles)} cycles: {cycles}"))
    lazy = _function_level_graph(g, root)
    lazy_cycles = g.cycles(lazy)
    print(f"with the imports inside functions: {sum(map(len, lazy.values()))} edges; "
          + ("acyclic" if not lazy_cycles else f"{len(lazy_cycles)} strongly connected "
             "groups:"))
    for group in lazy_cycles:
        print(f"  {len(group)} modules: " + ", ".join(m.removeprefix(args.root + ".")
                                                      for m in group))
    missing, unnamed = _test_mirror(root, base / "tests")
    print("\n# tests/ against the package (tests/<subpackage>/test_<module>.py)\n")
    print(f"modules without a test file of their name ({len(missing)}): "
          + ", ".join(missing))
    print(f"test files named for no module ({len(unnamed)}): " + ", ".join(unnamed))


if __name__ == "__main__":
    main()
