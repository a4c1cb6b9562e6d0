"""Public functions are annotated: every parameter (but a method's ``self`` or ``cls``) and the return, in every
package that runs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "viz", "views", "classroom", "harness")


def unannotated(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    if method and not static and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    return fn.returns is None or any(p.annotation is None for p in params)


def public_unannotated(root: Path) -> list[str]:
    """``path:line:name`` of each public function (a module's, or a public class's method; not one nested in a
    function) that lacks an annotation."""
    found = []

    def visit(node: ast.AST, path: Path, method: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and not child.name.startswith("_"):
                visit(child, path, True)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and not child.name.startswith("_"):
                if unannotated(child, method):
                    found.append(f"{path.relative_to(root)}:{child.lineno}:{child.name}")

    for top in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            visit(ast.parse(path.read_text()), path, False)
    return found


def test_every_public_function_is_annotated():
    found = public_unannotated(ROOT)
    assert found == [], f"{len(found)} public functions lack annotations: {found}"


def test_the_count_sees_parameters_returns_and_methods(tmp_path):
    source = """
def ok(a: int) -> int: ...
def no_return(a: int): ...
def bare(a) -> None: ...
def _private(a): ...
class C:
    def method(self, a: int) -> None: ...
    def loose(self, a): ...
    @staticmethod
    def static(self) -> None: ...
class _Hidden:
    def m(self, a): ...
"""
    (tmp_path / "viz").mkdir()
    (tmp_path / "viz" / "m.py").write_text(source.lstrip())
    assert public_unannotated(tmp_path) == [
        "viz/m.py:2:no_return",
        "viz/m.py:3:bare",
        "viz/m.py:7:loose",
        "viz/m.py:9:static",
    ]
