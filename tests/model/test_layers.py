"""model/ by concern, imports going downwards only: a module of a subpackage imports model's modules of its own
subpackage or of one below it (core < io < decode < interpret < train < lesson), never one above or a sibling's
private name; the package's top (the CLI, ``python -m model``, the tests' tiny model) may import any."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("core", "io", "decode", "interpret", "train", "lesson")


def model_imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every ``import model.X`` / ``from model.X import names`` in the file, any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("model"):
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append(("." * node.level + (node.module or ""), [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("model")]
    return found


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def violations(root: Path) -> list[str]:
    bad = []
    for layer in LAYERS:
        for path in sorted((root / "model" / layer).glob("*.py")):
            for module, names in model_imports(path):
                where = f"{path.relative_to(root)} imports {module}"
                if module.startswith("."):
                    bad.append(f"{where}: relative (write model.{layer}.…)")
                    continue
                target = layer_of(module)
                if target is None and not (module == "model" and not names):
                    bad.append(f"{where}: the package's top, above every subpackage")
                elif target is not None and target > LAYERS.index(layer):
                    bad.append(f"{where}: {LAYERS[target]} is above {layer}")
                elif target is not None and target != LAYERS.index(layer):
                    bad += [f"{where}: private name {n}" for n in names if n.startswith("_")]
    return bad


def test_every_subpackage_imports_only_downwards():
    assert violations(ROOT) == []


def test_every_model_module_lives_in_a_subpackage():
    top = {p.name for p in (ROOT / "model").glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "cli.py", "testing.py"}
    assert {p.name for p in (ROOT / "model").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "from model.interpret.explain import report\n",
            "decode/x.py imports model.interpret.explain: interpret is above decode",
        ),
        (
            "from model.io.checkpoint import _private\n",
            "decode/x.py imports model.io.checkpoint: private name _private",
        ),
        ("from .lean import LeanDecoder\n", "decode/x.py imports .lean: relative"),
    ],
)
def test_the_check_fails_on_an_upward_a_private_or_a_relative_import(tmp_path, source, expected):
    for layer in LAYERS:
        (tmp_path / "model" / layer).mkdir(parents=True)
    (tmp_path / "model" / "decode" / "x.py").write_text(source)
    assert any(expected in v for v in violations(tmp_path)), violations(tmp_path)
