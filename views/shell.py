"""The page Streamlit serves before any element (its ``index.html``), with Plotly's bundle loading beside its own
(what it reads of Streamlit's files is named in ``views/streamlit_private.py``).

A fresh page otherwise asks for Plotly (``views/plot.py``) only once its first figure's element is mounted: after
Streamlit's bundle has run, the WebSocket has opened, the page's script has sent its elements and the browser has
rendered them (~2 s on a fresh teacher's dashboard), and then waits for Plotly's 1.5 MB to load. The shell served
here preloads Plotly and the figures' module from its ``<head>``, beside Streamlit's own code: both are in the
browser's cache when the page's first element (``views.plot.preload``) asks for them, and Plotly runs while the
browser waits for the server's first figures (run from the shell instead, it would hold back Streamlit's own
start). The elements that ask for them are
Streamlit components, whose own code Streamlit fetches only when the first one arrives, from a server then busy with
the page's run: the shell preloads that code too, so the first element mounts, and Plotly runs, while the page's
run goes on rather than after it.
"""

from __future__ import annotations

import functools

import streamlit as st
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from views.routes import PLOT_JS_ROUTE, PLOTLY_ROUTE
from views.streamlit_private import INDEX, ROUTES, component_chunks, module_graph

# Streamlit's own paths and ours (the figures' code, Plotly's bundle): never the page shell
NOT_PAGES = (*ROUTES, "vendor")
NAV_LINKS_MIN_PX = 768  # the narrowest window whose header Streamlit shows the top navigation's links in
# The phone's page menu (``views.main.phone_menu``) out of the page's flow, in the header's band, and no room taken
# where the header shows the links.
MENU_WRAPPER = '[data-testid="stLayoutWrapper"]:has(> .st-key-phone_pages)'
# The top navigation's links at the header's right, beside its menu: their place then hangs on the window's right
# edge alone. At its left they slid by the sidebar's width between a page that shows the sidebar and one that closes
# it, under a pointer already on its way (a press and its release on two links make no click). In the shell, not
# sent by the page's run: a run of another page takes the last run's elements away before it sends its own, and on
# a busy server the links stood at their left for a moment in between. ``!important``: Streamlit's own styles come
# later in the page.
HEADER_CSS = (
    f"<style>{MENU_WRAPPER} {{ position: fixed !important; top: 0.55rem; left: 3.25rem; z-index: 999991; }}"
    f"@media (min-width: {NAV_LINKS_MIN_PX}px) {{ {MENU_WRAPPER} {{ display: none !important; }} }}"
    f'[data-testid="stTopNav"] {{ justify-content: flex-end !important; }}</style>'
)


@functools.cache
def shell() -> str:
    """``index.html`` with our tags at the end of its ``<head>`` (paths relative, as Streamlit's own are): Plotly, the
    figures' module, the header's style, and Streamlit's components code with what it imports that the page does not
    preload already."""
    tags = f'<link rel="preload" as="script" href=".{PLOTLY_ROUTE}"><link rel="modulepreload" href=".{PLOT_JS_ROUTE}">'
    tags += HEADER_CSS
    html = INDEX.read_text(encoding="utf-8")
    for chunk in component_chunks()[:1]:
        for module in module_graph(chunk.name):
            if f"/{module}" not in html:
                tags += f'<link rel="modulepreload" crossorigin href="./static/js/{module}">'
    return html.replace("</head>", tags + "</head>", 1)


def is_page(scope: Scope) -> bool:
    """A browser asking for a page (the root or a page's path), not for a file or one of Streamlit's routes."""
    if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
        return False
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    path = scope["path"].strip("/")
    if base:
        if path != base and not path.startswith(base + "/"):
            return False
        path = path[len(base) :].strip("/")
    if path.split("/")[0] in NOT_PAGES or "." in path.rsplit("/", 1)[-1]:
        return False
    return b"text/html" in dict(scope["headers"]).get(b"accept", b"")


class ShellMiddleware:
    """Serves ``shell()`` for the pages' paths; everything else goes to Streamlit as before."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_page(scope):
            await self.app(scope, receive, send)
            return
        response = HTMLResponse(shell(), headers={"Cache-Control": "no-cache"})
        await response(scope, receive, send)
