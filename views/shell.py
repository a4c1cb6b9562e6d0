"""The page Streamlit serves before any element (its ``index.html``), with Plotly's bundle loading beside its own.

A fresh page otherwise asks for Plotly (``views/plot.py``) only once its first figure's element is mounted: after
Streamlit's bundle has run, the WebSocket has opened, the page's script has sent its elements and the browser has
rendered them (~2 s on a fresh teacher's dashboard), and then waits for Plotly's 1.5 MB to load. The shell served
here preloads Plotly and the figures' module from its ``<head>``, beside Streamlit's own code: both are in the
browser's cache when the page's first element (``views.plot.preload``) asks for them, and Plotly runs while the
browser waits for the server's first figures. (Running it from the shell, as an ``async`` script, was no faster:
it then holds back Streamlit's own start, the WebSocket opening ~0.3 s later.)
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from streamlit import config

from views.routes import PLOT_JS_ROUTE, PLOTLY_ROUTE

INDEX = Path(streamlit.__file__).parent / "static" / "index.html"
# Streamlit's own paths (its files, WebSocket, health, media, components) and ours: never the page shell
NOT_PAGES = ("_stcore", "static", "media", "component", "vendor", "app", "auth", "oauth2callback", "favicon.png")


@functools.cache
def shell() -> str:
    """``index.html`` with our two tags at the end of its ``<head>`` (paths relative, as Streamlit's own are)."""
    tags = f'<link rel="preload" as="script" href=".{PLOTLY_ROUTE}"><link rel="modulepreload" href=".{PLOT_JS_ROUTE}">'
    html = INDEX.read_text(encoding="utf-8")
    return html.replace("</head>", tags + "</head>", 1)


def is_page(scope: Scope) -> bool:
    """A browser asking for a page (the root or a page's path), not for a file or one of Streamlit's routes."""
    if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
        return False
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
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
