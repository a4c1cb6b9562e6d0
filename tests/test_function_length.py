"""Functions outside tests stay readable: at most MAX_LONG are over LONG lines, and each of those says why in a
comment right above its def (or its decorators) that starts with "# Long on purpose:"."""

import ast
import functools
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LONG = 80
MAX_LONG = 10
WHY = "# Long on purpose:"


def python_files(root: Path):
    """Every .py file under root, leaving out tests/ and hidden folders (.venv, .git)."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if not d.startswith(".") and not (here == root and d == "tests")]
        yield from (here / f for f in files if f.endswith(".py"))


@functools.cache  # both tests read the same tree: parsed once
def long_functions(root: Path) -> list[tuple[str, str, int, bool]]:
    """(file, name, length, says why) of every function over LONG lines outside tests/ and .venv."""
    out = []
    for path in sorted(python_files(root)):
        rel = path.relative_to(root)
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            if length <= LONG:
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            above = first - 2  # 0-based index of the line just above the def or its first decorator
            while above >= 0 and lines[above].lstrip().startswith("#") and WHY not in lines[above]:
                above -= 1
            says = above >= 0 and lines[above].lstrip().startswith(WHY)
            out.append((str(rel), node.name, length, says))
    return out


def test_long_functions_are_few():
    found = long_functions(ROOT)
    listing = "\n".join(f"{f} {n}: {k} lines" for f, n, k, _ in sorted(found, key=lambda x: -x[2]))
    assert len(found) <= MAX_LONG, f"over {LONG} lines (split where a reader would):\n{listing}"


def test_each_long_function_says_why():
    silent = [f"{f} {n} ({k} lines)" for f, n, k, says in long_functions(ROOT) if not says]
    assert not silent, f'no "{WHY}" comment above: ' + ", ".join(silent)


def test_the_count_catches_a_long_silent_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(LONG))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        f"def short():\n    return 1\n\n\ndef long():\n{body}\n\n{WHY} a table.\ndef told():\n{body}"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text(f"def ignored():\n{body}")
    assert long_functions(tmp_path) == [("pkg/m.py", "long", LONG + 1, False), ("pkg/m.py", "told", LONG + 1, True)]
