"""Streamlit's private parts behind one door: everything the app reads or depends on of Streamlit (its page, chunk
names, routes, modules, element classes) is named in views/streamlit_private.py, checked there against the
installed Streamlit, and nowhere else; a Streamlit release that moves one fails here in one sentence."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import streamlit

from views import streamlit_private as sp

ROOT = Path(__file__).resolve().parents[2]
PAGE_FILES = tuple(ROOT / "views" / f for f in ("page.js", "page.css", "plot.js", "main.py", "shell.py"))


def test_the_installed_streamlit_has_every_private_part_the_app_depends_on():
    found = sp.problems(PAGE_FILES)
    assert not found, "Streamlit changed what the app reaches into:\n" + "\n".join(found)


def test_the_pinned_streamlit_is_the_one_checked():
    pins = dict(re.findall(r"^([\w-]+)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M))
    assert pins["streamlit"] == sp.STREAMLIT_VERSION, "requirements.txt pins another Streamlit than the one checked"


@pytest.mark.parametrize(
    "change,sentence",
    [
        (lambda mp, tmp: mp.setattr(streamlit, "__version__", "9.0.0"), "Streamlit 9.0.0 is installed"),
        (lambda mp, tmp: mp.setattr(sp, "COMPONENT_CHUNK", "Gone.*.js"), "not one"),
        (lambda mp, tmp: mp.setattr(sp, "INDEX", tmp / "index.html"), "is gone or has no </head>"),
        (lambda mp, tmp: mp.setattr(sp, "ROUTES", sp.ROUTES[1:]), "which ROUTES does not list"),
        (lambda mp, tmp: mp.setattr(sp, "TEST_IDS", ("stRenamed",)), "no longer names 'stRenamed'"),
        (lambda mp, tmp: mp.setattr(sp, "EMOJIS", "streamlit.gone"), "no module streamlit.gone"),
    ],
)
def test_a_change_in_streamlit_is_one_sentence(monkeypatch, tmp_path, change, sentence):
    change(monkeypatch, tmp_path)
    found = sp.problems()
    assert len(found) == 1 and sentence in found[0], found


def test_a_streamlit_class_styled_but_not_named_there_is_found(tmp_path):
    css = tmp_path / "page.css"
    css.write_text('[data-testid="stSidebarNav"] { gap: 0 } .stButton { margin: 0 }')
    assert sp.problems((css,)) == [
        "page.css names Streamlit's 'stButton', which views/streamlit_private.py does not list.",
        "page.css names Streamlit's 'stSidebarNav', which views/streamlit_private.py does not list.",
    ]


def private_reads(path: Path) -> list[str]:
    """``line: text`` of every import of Streamlit's submodules, literal naming one, or use of its files."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "streamlit":
            names = [node.module + "." + a.name for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        elif isinstance(node, ast.Attribute) and node.attr == "__file__" and ast.unparse(node.value) == "streamlit":
            names = ["streamlit.__file__"]
        found += [f"{node.lineno}: {n}" for n in names if n.startswith("streamlit.")]
    return found


def test_no_other_module_of_the_app_reads_streamlit_s_private_parts():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in [ROOT / "app.py", *sorted((ROOT / "views").rglob("*.py"))]
        if path.name != "streamlit_private.py"
        for line in private_reads(path)
    ]
    assert found == [], "only views/streamlit_private.py may name Streamlit's private parts"


def test_the_check_finds_a_private_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('import streamlit.emojis\nfrom streamlit.runtime import x\nlogger = "streamlit.web"\n')
    assert [r.split(": ")[1] for r in private_reads(planted)] == [
        "streamlit.emojis",
        "streamlit.runtime.x",
        "streamlit.web",
    ]
