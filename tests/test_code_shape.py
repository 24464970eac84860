"""Code-shape rules of the house, checked statically (ast only, nothing is imported):

* no function under ``fabric_lsp/engine`` takes more than five positional parameters
  (``self``/``cls`` not counted) — extra ones are keyword-only, so call sites name them;
* no import cycle among ``fabric_lsp`` modules at module level (imports inside functions
  and under ``if TYPE_CHECKING:`` are deferred, so they do not count).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fabric_lsp"
MAX_POSITIONAL = 5


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def test_no_engine_function_takes_more_than_five_positional_parameters():
    offenders = []
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            names = [a.arg for a in node.args.posonlyargs + node.args.args]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            if len(names) > MAX_POSITIONAL:
                name = getattr(node, "name", "<lambda>")
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name} ({len(names)})")
    assert not offenders, "more than five positional parameters (make the rest keyword-only):\n" + "\n".join(offenders)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports executed when the module is imported: top level, and inside module-level
    if/try/with blocks — but not in functions, classes' methods, or `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                found.append(stmt)
            elif isinstance(stmt, ast.If):
                if not _is_type_checking(stmt.test):
                    visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body)
                for handler in stmt.handlers:
                    visit(handler.body)
                visit(stmt.orelse)
                visit(stmt.finalbody)
            elif isinstance(stmt, (ast.With, ast.ClassDef)):
                visit(stmt.body)

    visit(tree.body)
    return found


def _every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: at module level, inside functions (deferred),
    and under `if TYPE_CHECKING:` (a cycle hidden there is still a cycle)."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def _import_graph(every: bool = False) -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        # a module's own enclosing packages are already being imported when it runs, so
        # they are no edge (else every `from . import sub` would look like a cycle)
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        if is_package:
            ancestors.add(name)
        for stmt in _every_import(tree) if every else _module_level_imports(tree):
            targets: list[str] = []
            if isinstance(stmt, ast.Import):
                targets = [alias.name for alias in stmt.names]
            else:
                if stmt.level:
                    base_parts = package.split(".")
                    base = ".".join(base_parts[: len(base_parts) - (stmt.level - 1)])
                    origin = f"{base}.{stmt.module}" if stmt.module else base
                else:
                    origin = stmt.module or ""
                for alias in stmt.names:
                    # `from pkg import sub` imports the submodule pkg.sub when there is one,
                    # else it takes a name from pkg itself
                    sub = f"{origin}.{alias.name}"
                    targets.append(sub if sub in modules else origin)
            for target in targets:
                # importing a.b.c runs a, a.b and a.b.c
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    dep = ".".join(parts[:i])
                    if dep in modules and dep != name and dep not in ancestors:
                        graph[name].add(dep)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return out


def test_import_graph_resolves_relative_imports():
    graph = _import_graph()
    # engine/session/__init__.py re-exports its submodules with `from .reader import ...`
    assert "fabric_lsp.engine.session.reader" in graph["fabric_lsp.engine.session"]
    assert sum(len(deps) for deps in graph.values()) > len(graph)


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle_in_fabric_lsp():
    cycles = _cycles(_import_graph())
    assert not cycles, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_full_graph_counts_deferred_and_type_checking_imports():
    full, top = _import_graph(every=True), _import_graph()
    # handlers/commands.py imports lifecycle inside `reload` (deferred)
    assert "fabric_lsp.handlers.lifecycle" in full["fabric_lsp.handlers.commands"]
    assert "fabric_lsp.handlers.lifecycle" not in top["fabric_lsp.handlers.commands"]
    # engine/memory/cold_index.py names SessionState under `if TYPE_CHECKING:`
    assert "fabric_lsp.engine.memory.state" in full["fabric_lsp.engine.memory.cold_index"]


def test_no_import_cycle_in_fabric_lsp_at_all():
    """The house (issue 33): imports point one way, deferred and TYPE_CHECKING ones too."""
    cycles = _cycles(_import_graph(every=True))
    assert not cycles, "import cycles (deferred and TYPE_CHECKING imports counted):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


MAX_MODULE_LINES = 600


def test_no_module_over_600_lines():
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by layer): {long}"
