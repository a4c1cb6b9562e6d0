"""No function of the product takes more than 8 parameters: values that travel together go as a dataclass. The
functions that still do are listed by name, so the list can only shrink: a new one fails, and so does a listed one
brought down to 8 and left on the list."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "viz", "views", "harness", "benchmarks", "classroom", "deploy")
MOST = 8
# What still takes more: they wait for a dataclass of the values they pass on.
STILL_MORE = {
    "viz/heatmap.py:add_heatmap",
    "viz/heatmap.py:heatmap",
    "viz/figures.py:_grid_panels",
    "viz/figures.py:_grid_layout",
    "viz/figures.py:attention_figure",
    "viz/figures.py:heads_grid",
    "viz/figures.py:_norm_heatmaps",
    "viz/figures.py:matrix_figure",
    "viz/figures.py:addnorm_figure",
    "viz/figures.py:alignment_figure",
    "viz/patching.py:pair_figures",
    "viz/explain.py:layer_position_figure",
    "viz/decoding.py:beam_tree_figure",
    "views/compare.py:explain_contrast",
}


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


def test_no_new_function_takes_more_than_eight_parameters():
    found = long_signatures(ROOT)
    new = {k: n for k, n in found.items() if k not in STILL_MORE}
    assert not new, (
        f"these take more than {MOST} parameters; pass the values that travel together as a dataclass: {new}"
    )
    done = sorted(STILL_MORE - set(found))
    assert not done, f"these take {MOST} or fewer now: take them off STILL_MORE: {done}"


def test_the_count_sees_every_kind_of_parameter(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "m.py").write_text(
        "def ok(a, b, c, d, e, f, g, h): ...\n"
        "def wide(a, b, c, d, e, f, g, *, h, i): ...\n"
        "def star(a, b, c, d, e, f, g, *args, **kw): ...\n"
        "class C:\n    def method(self, a, b, c, d, e, f, g, h): ...\n"
    )
    assert long_signatures(tmp_path) == {"model/m.py:wide": 9, "model/m.py:star": 9}
