"""No import cycle inside ``hierarchy/``, read from the modules' own import statements.

Every ``import`` and ``from ... import`` of a module counts, wherever it stands: at module
level, under ``if``/``try``, and inside functions. A function-level ("lazy") import is still a
dependency of the module (it runs whenever the function does), and hiding a cycle inside a
function is how the cycles this test was written against survived; so lazy imports count too.
The one exception is a block under ``if TYPE_CHECKING:``, which never runs.

``from package import name`` is an edge to the submodule ``package.name`` when that is a
module, else to ``package`` itself (its ``__init__``). A submodule's implicit import of its
parent package is not an edge (Python initialises the parent first, whatever the submodule
says), so a package whose ``__init__`` re-exports its submodules is not a cycle by itself.
"""

import ast
import pathlib

import hierarchy

ROOT = pathlib.Path(hierarchy.__file__).parent


def module_files(root=ROOT):
    """``{dotted name: path}`` of every module under ``root`` (packages by their ``__init__``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_blocks(tree):
    """The ``if TYPE_CHECKING:`` nodes of a module (their imports never run)."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"]


def imported_modules(name, path, modules):
    """The modules of ``modules`` that module ``name`` (file ``path``) imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = {id(n) for block in _type_checking_blocks(tree) for n in ast.walk(block)}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    edges = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[:len(package) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                edges.add(sub if sub in modules else base)
    return {target for target in edges if target in modules and target != name}


def import_graph(root=ROOT):
    """``{module: set of imported modules}`` inside ``root``."""
    modules = module_files(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
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
                    work.append((child, iter(sorted(graph[child]))))
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_inside_hierarchy():
    found = cycles(import_graph())
    assert not found, "import cycles (lazy imports count): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_lazy_cycle_and_ignores_type_checking(tmp_path):
    """The checker itself: a function-level import closing a circle is found; the same
    import under ``if TYPE_CHECKING:``, or a package ``__init__`` re-exporting, is not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import f\n")
    (package / "a.py").write_text("from pkg import b\n\ndef f():\n    return b\n")
    (package / "b.py").write_text("def g():\n    from pkg.a import f\n    return f\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]
    (package / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pkg.a import f\n")
    assert cycles(import_graph(package)) == []
    (package / "c.py").write_text("from . import a\n")
    (package / "a.py").write_text("from .c import a as _\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.c"]]


def test_the_network_description_imports_nothing_of_the_evaluation():
    """``model.py`` (the network, its data law and its loss) and the data laws reach none of
    the evaluators, directly or through what they import."""
    graph = import_graph()
    evaluation = {f"hierarchy.models.network.{m}" for m in
                  ("field", "kernel", "quadrature", "closed_forms", "derivation", "structured")}
    reached, todo = set(), ["hierarchy.models.network.model"]
    while todo:
        for target in graph[todo.pop()]:
            if target not in reached:
                reached.add(target)
                todo.append(target)
    assert not reached & evaluation, sorted(reached & evaluation)
