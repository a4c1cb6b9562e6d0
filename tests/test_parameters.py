"""No function of the product takes more than 8 parameters: values that travel together go as a dataclass (a
figure builder's options as a frozen one), with no exception listed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "viz", "views", "harness", "benchmarks", "classroom", "deploy")
MOST = 8


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Every parameter but a method's ``self`` or ``cls`` (``*args`` and ``**kwargs`` count one each)."""
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
    return len(names) - (1 if names and names[0].arg in ("self", "cls") else 0)


def long_signatures(root: Path) -> dict[str, int]:
    """``path:name`` → parameter count of every function of the product over ``MOST``."""
    paths = [root / "app.py", *(p for top in PACKAGES for p in sorted((root / top).rglob("*.py")))]
    return {
        f"{path.relative_to(root)}:{node.name}": parameters(node)
        for path in paths
        if path.is_file()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameters(node) > MOST
    }


def test_no_function_takes_more_than_eight_parameters():
    found = long_signatures(ROOT)
    assert not found, (
        f"these take more than {MOST} parameters; pass the values that travel together as a dataclass: {found}"
    )


def test_the_count_sees_every_kind_of_parameter(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "m.py").write_text(
        "def ok(a, b, c, d, e, f, g, h): ...\n"
        "def wide(a, b, c, d, e, f, g, *, h, i): ...\n"
        "def star(a, b, c, d, e, f, g, *args, **kw): ...\n"
        "class C:\n    def method(self, a, b, c, d, e, f, g, h): ...\n"
    )
    assert long_signatures(tmp_path) == {"model/m.py:wide": 9, "model/m.py:star": 9}
