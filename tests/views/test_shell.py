"""The page's shell (views/shell.py): Streamlit's index.html with Plotly and the figures' module preloaded, served
for the pages' paths only."""

from __future__ import annotations

import asyncio

import pytest

from views.routes import PLOT_JS_ROUTE, PLOTLY_ROUTE
from views.shell import HEADER_CSS, ShellMiddleware, is_page, shell
from views.streamlit_private import INDEX, STATIC_IMPORT, STATIC_JS

HTML = [(b"accept", b"text/html,application/xhtml+xml,*/*;q=0.8")]


def request(path: str, method: str = "GET", headers=HTML) -> dict:
    return {"type": "http", "method": method, "path": path, "headers": headers}


def test_the_shell_is_streamlit_s_page_with_plotly_and_the_figures_module_preloaded():
    page, index = shell(), INDEX.read_text(encoding="utf-8")
    head = page.split("</head>")[0]
    assert f'<link rel="preload" as="script" href=".{PLOTLY_ROUTE}">' in head
    assert f'<link rel="modulepreload" href=".{PLOT_JS_ROUTE}">' in head
    assert HEADER_CSS in head and "stTopNav" in HEADER_CSS and "st-key-phone_pages" in HEADER_CSS  # the header's style
    # nothing of Streamlit's own page is lost or changed
    assert page.replace(head, "") == index.replace(index.split("</head>")[0], "")
    assert head.startswith(index.split("</head>")[0])


def test_the_shell_preloads_streamlit_s_components_code_and_what_it_imports():
    """The figures are Streamlit components (v2): the shell preloads Streamlit's code for them and each module it
    imports, so that it is not fetched only once the page's first element has arrived. Fails when Streamlit renames
    that code (the glob finds nothing) or imports a module the page loads neither way."""
    import re

    page = shell()
    head = page.split("</head>")[0]
    preloaded = set(re.findall(r'<link rel="modulepreload" crossorigin href="\./static/js/([^"]+)"', head))
    chunk = [p.name for p in STATIC_JS.glob("BidiComponent.*.js")]
    assert len(chunk) == 1 and chunk[0] in preloaded
    assert all((STATIC_JS / name).is_file() for name in preloaded)
    for name in preloaded:  # every static import of a preloaded module is preloaded or loaded by the page itself
        for imported in STATIC_IMPORT.findall((STATIC_JS / name).read_text()):
            assert imported in preloaded or f"/{imported}" in head, (name, imported)


@pytest.mark.parametrize("path", ["/", "/learn", "/class", "/corpus", "/explore/"])
def test_a_browser_asking_for_a_page_gets_the_shell(path):
    assert is_page(request(path))


@pytest.mark.parametrize(
    "scope",
    [
        request("/static/js/index.js"),  # a file
        request("/favicon.png"),
        request("/_stcore/health"),  # Streamlit's own routes, even asked for as a page
        request("/media/abc"),
        request(PLOTLY_ROUTE),
        request("/learn", method="POST"),
        request("/learn", headers=[(b"accept", b"application/json")]),  # not a browser's page
        {"type": "websocket", "path": "/_stcore/stream", "headers": HTML},
    ],
)
def test_everything_else_goes_to_streamlit(scope):
    assert not is_page(scope)


def test_the_middleware_answers_pages_and_passes_the_rest_on():
    passed, sent = [], []

    async def app(scope, receive, send):
        passed.append(scope["path"])

    async def receive():
        return {"type": "http.request"}

    async def send(message):
        sent.append(message)

    middleware = ShellMiddleware(app)
    asyncio.run(middleware(request("/static/js/index.js"), receive, send))
    assert passed == ["/static/js/index.js"] and sent == []
    asyncio.run(middleware(request("/class"), receive, send))
    assert passed == ["/static/js/index.js"]
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    assert start["status"] == 200 and body.decode() == shell()
    assert (b"cache-control", b"no-cache") in start["headers"]


def test_under_a_base_path_the_same_paths_are_pages(monkeypatch):
    import streamlit as st

    real = st.get_option
    monkeypatch.setattr(st, "get_option", lambda k: "lens" if k == "server.baseUrlPath" else real(k))
    assert is_page(request("/lens/")) and is_page(request("/lens/class"))
    assert not is_page(request("/lens/_stcore/health")) and not is_page(request("/lens/static/js/index.js"))


def test_outside_the_base_path_nothing_is_a_page(monkeypatch):
    import streamlit as st

    real = st.get_option
    monkeypatch.setattr(st, "get_option", lambda k: "lens" if k == "server.baseUrlPath" else real(k))
    assert not is_page(request("/lensfoo/class")) and not is_page(request("/other"))
