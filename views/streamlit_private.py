"""The one module that knows Streamlit's private parts: every file, route, chunk name, module, logger and element
class of Streamlit the app depends on, named here and checked against the installed Streamlit by ``problems()``
(``tests/views/test_streamlit_private.py``), so a Streamlit release that moves one fails in one place, in one
sentence, rather than as a page that quietly loads slower or looks wrong.

Checked against Streamlit ``STREAMLIT_VERSION`` (requirements.txt pins it). What the app reaches into, and why:

- the page's shell (``views/shell.py``): Streamlit's ``static/index.html``, served with preloads added, the chunk of
  its components code (``COMPONENT_CHUNK``) and the chunks it imports statically (``STATIC_IMPORT``), and Streamlit's
  own routes (``ROUTES``), which never get the shell;
- the element classes and test ids that ``views/page.js``, ``views/page.css`` and the header's style in
  ``views/shell.py`` find and style elements by (``ELEMENT_CLASSES``, ``TEST_IDS``), and the class Streamlit gives an
  element with a key (``KEY_CLASS`` + key);
- the emoji table ``st.set_page_config`` checks a page's icon against (``EMOJIS``), imported with the page script's
  modules (``views.imports``);
- the logger of Streamlit's script-run context (``SCRIPT_RUN_CONTEXT_LOGGER``), whose warnings a handout built
  outside a page run would print (``views/handout.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import streamlit

STREAMLIT_VERSION = "1.67.0"
STATIC = Path(streamlit.__file__).parent / "static"
INDEX = STATIC / "index.html"
STATIC_JS = STATIC / "static" / "js"
# Streamlit's code for the elements the app draws with (its components v2: every figure, the page's behaviour)
COMPONENT_CHUNK = "BidiComponent.*.js"
STATIC_IMPORT = re.compile(r'(?:from|import)\s*"\./([\w.-]+\.js)"')
# the first part of every path Streamlit serves itself (its files, WebSocket, health, media, components, sign-in)
ROUTES = ("_stcore", "static", "media", "component", "app", "auth", "oauth2callback", "favicon.png")
ROUTE_MODULES = (
    "streamlit.web.server.starlette.starlette_routes",
    "streamlit.web.server.starlette.starlette_auth_routes",
)
KEY_CLASS = "st-key-"
ELEMENT_CLASSES = ("stElementContainer", "stVerticalBlock", "stMarkdown", "stMarkdownEllipsis")
TEST_IDS = (
    "stLayoutWrapper",
    "stCaptionContainer",
    "stPopoverBody",
    "stFileChip",
    "stTopNav",
    "stTable",
    "stMain",
    "stDataFrame",
)
EMOJIS = "streamlit.emojis"
SCRIPT_RUN_CONTEXT_LOGGER = "streamlit.runtime.scriptrunner_utils.script_run_context"
# what page.js and page.css name of Streamlit's: its element classes (stName) and test ids
NAMED_IN_PAGE = re.compile(r'\.(st[A-Z]\w+)|data-testid="(\w+)"')


def component_chunks() -> list[Path]:
    return sorted(STATIC_JS.glob(COMPONENT_CHUNK))


def module_graph(name: str) -> list[str]:
    """``name`` (a file of Streamlit's ``static/js``) and every module it imports statically, transitively."""
    seen: list[str] = []
    todo = [name]
    while todo:
        module = todo.pop()
        if module not in seen and (STATIC_JS / module).is_file():
            seen.append(module)
            todo += STATIC_IMPORT.findall((STATIC_JS / module).read_text(encoding="utf-8"))
    return seen


def _served_routes() -> set[str]:
    """The first part of every route Streamlit's server defines (its route modules' path constants)."""
    found = set()
    for name in ROUTE_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if "ROUTE" in attr and isinstance(value, str) and value.strip("/"):
                found.add(value.strip("/").split("/")[0])
    return found


def _bundle_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(STATIC_JS.glob("*.js")))


def _shell_problems() -> list[str]:
    out = []
    if not INDEX.is_file() or "</head>" not in INDEX.read_text(encoding="utf-8"):
        out.append(f"Streamlit's page ({INDEX}) is gone or has no </head>: the shell cannot add its preloads.")
    chunks = component_chunks()
    if len(chunks) != 1:
        out.append(
            f"Streamlit's static/js holds {len(chunks)} files named {COMPONENT_CHUNK}, not one: the shell "
            "preloads the components code by that name."
        )
    elif len(module_graph(chunks[0].name)) < 2:
        out.append(
            f"{chunks[0].name} imports no other chunk by STATIC_IMPORT's pattern: its imports are written "
            "another way now."
        )
    return out


def problems(page_files: tuple[Path, ...] = ()) -> list[str]:
    """One sentence for each private part of Streamlit the app depends on that the installed Streamlit no longer
    has as named here; ``page_files``: the app's JavaScript and CSS, whose Streamlit classes and test ids must all
    be named here. Empty when everything holds."""
    out = []
    if streamlit.__version__ != STREAMLIT_VERSION:
        out.append(
            f"Streamlit {streamlit.__version__} is installed, but views/streamlit_private.py was checked "
            f"against {STREAMLIT_VERSION}: check what it names, then set STREAMLIT_VERSION."
        )
    out += _shell_problems()
    missing = sorted(_served_routes() - set(ROUTES))
    if missing:
        out.append(f"Streamlit serves paths under {missing}, which ROUTES does not list: the shell would answer them.")
    bundle = _bundle_text()
    for name in (KEY_CLASS, *ELEMENT_CLASSES, *TEST_IDS):
        if name not in bundle:
            out.append(f"Streamlit's JavaScript no longer names {name!r}: page.js and page.css find elements by it.")
    for module in (EMOJIS, SCRIPT_RUN_CONTEXT_LOGGER):
        if importlib.util.find_spec(module) is None:
            out.append(f"Streamlit has no module {module} any more.")
    for path in page_files:
        named = {a or b for a, b in NAMED_IN_PAGE.findall(path.read_text(encoding="utf-8"))}
        for name in sorted(named - {*ELEMENT_CLASSES, *TEST_IDS}):
            out.append(f"{path.name} names Streamlit's {name!r}, which views/streamlit_private.py does not list.")
    return out
