"""The project's modules can be imported by several threads at once, as the server's warm start and the first page
runs do. Python's import locks deadlock (one thread then gets a half-made module: "cannot import name ... from
partially initialized module") when a thread holding one module's lock waits for a lock another thread holds while
that thread waits for the first. Two rules rule that out for our modules: a package's ``__init__`` imports none of
its own modules (so a thread running it waits on nothing), and the modules' import-time imports form no cycle (so
every wait runs down one order)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "viz", "views", "classroom", "harness", "deploy")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for top in PACKAGES for p in sorted((root / top).rglob("*.py"))}


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is imported: its top level, ``try`` and ``if`` blocks (but
    ``if TYPE_CHECKING:``), never a function's or a class's body."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If) and not is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    visit(block)

    visit(tree.body)
    return found


def imported_modules(name: str, path: Path, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The project modules one import statement of module ``name`` (at ``path``) runs."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = ".".join(p for p in (package, node.module or "") if p)
        else:
            base = node.module or ""
        targets = [base] + [f"{base}.{a.name}" for a in node.names]
    out = set()
    for target in targets:
        parts = target.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & known  # a module imports its packages first
    return out - {name}


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = project_modules(root)
    known = set(modules)
    return {
        name: set().union(
            *(imported_modules(name, path, n, known) for n in import_time_imports(ast.parse(path.read_text())))
        )
        for name, path in modules.items()
    }


def own_imports_of_inits(root: Path) -> list[str]:
    graph = import_graph(root)
    own = {
        name: sorted(m for m in graph[name] if m.startswith(name + "."))
        for name, path in project_modules(root).items()
        if path.name == "__init__.py"
    }
    return [f"{name.replace('.', '/')}/__init__.py imports {mods}" for name, mods in own.items() if mods]


def a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (its modules in order, the first repeated at the end), or ``[]``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_no_package_init_imports_its_own_modules():
    assert own_imports_of_inits(ROOT) == []


def test_modules_import_one_another_without_a_cycle():
    assert a_cycle(import_graph(ROOT)) == []


def test_the_checks_catch_an_eager_package_and_a_cycle(tmp_path):
    pkg = tmp_path / "viz"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .common import PAD\n")
    (pkg / "common.py").write_text("from . import plotly_private\nPAD = 1\n")
    (pkg / "plotly_private.py").write_text("import numpy\nif TYPE_CHECKING:\n    from .common import PAD\n")
    assert own_imports_of_inits(tmp_path) == ["viz/__init__.py imports ['viz.common']"]
    assert a_cycle(import_graph(tmp_path)) == ["viz", "viz.common", "viz"]  # a module imports its package first
    (pkg / "__init__.py").write_text('"""Nothing."""\n')
    assert own_imports_of_inits(tmp_path) == [] and a_cycle(import_graph(tmp_path)) == []
    (pkg / "plotly_private.py").write_text(
        "def f():\n    from .common import PAD\ntry:\n    from .common import PAD\nexcept ImportError:\n    pass\n"
    )
    assert a_cycle(import_graph(tmp_path)) == ["viz.common", "viz.plotly_private", "viz.common"]


RACE = """
import importlib, sys, threading
first, names = sys.argv[1].split(), sys.argv[2:]
for name in first:  # the third parties, as the server imports them: one thread, before (views.imports)
    importlib.import_module(name)
barrier = threading.Barrier(len(names))
errors = []
def load(name):
    barrier.wait()
    try:
        importlib.import_module(name)
    except Exception as e:
        errors.append(f"{name}: {type(e).__name__}: {e}")
threads = [threading.Thread(target=load, args=(n,)) for n in names]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\\n".join(errors))
sys.exit(1 if errors else 0)
"""


def third_parties(root: Path, names: list[str]) -> list[str]:
    """The modules outside the project that ``names`` import when imported (``from a.b import c``: ``a.b``)."""
    modules, found = project_modules(root), set()
    for name in names:
        for node in import_time_imports(ast.parse(modules[name].read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
    return sorted(m for m in found if m and m.split(".")[0] not in PACKAGES)


# run as programs, not imported: the page script, the command lines and the database's migrations (by Alembic)
SCRIPTS = ("views.main", "classroom.migrations")


@pytest.mark.slow
def test_threads_importing_every_module_at_once_all_succeed():
    """Each round, a fresh interpreter: one thread per module of the packages, all starting their import together
    (before the rules held, three threads importing ``viz``, ``viz.common`` and ``viz.classroom`` failed in 10 of
    30 rounds with "cannot import name 'PAD' from partially initialized module 'viz.common'")."""
    names = sorted(
        n
        for n in project_modules(ROOT)
        if n.split(".")[0] in ("viz", "views", "model", "classroom")
        and not n.endswith("__main__")
        and not n.startswith(SCRIPTS)
    )
    first = " ".join(third_parties(ROOT, names))
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", RACE, first, *names], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def closure(graph: dict[str, set[str]], names: tuple[str, ...]) -> set[str]:
    todo, seen = [n for n in names if n in graph], set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += graph[name]
    return seen


def test_a_fresh_server_s_pages_import_through_the_groups_and_explore_waits_for_no_database():
    """Every page's module is in one of ``views.imports``'s groups (its first run imports through them, as the warm
    start does); the page script imports nothing of ours but the groups before taking the first; and the groups an
    Explore page waits for import no SQLAlchemy (``classroom``), which only Learn and Class need."""
    from views.imports import GROUPS
    from views.main import PAGES

    grouped = {name for names in GROUPS.values() for name in names}
    assert {f"views.{p.module}" for p in PAGES} <= grouped
    graph = import_graph(ROOT)
    body = ast.parse((ROOT / "views" / "main.py").read_text()).body
    script = [node for node in body if isinstance(node, ast.Import | ast.ImportFrom)]  # before its first run
    ours = {m for node in script for m in imported_modules("views.main", ROOT / "views" / "main.py", node, set(graph))}
    assert ours == {"views", "views.imports"}
    explore = closure(graph, GROUPS["page script"] + GROUPS["model"])
    assert "views.explore" in explore and not any(m.startswith("classroom") for m in explore)
    pages = closure(graph, GROUPS["pages"])
    assert {"views.learn", "views.teacher", "classroom.store"} <= pages
