"""Decoder Lens: step through an English→French Transformer decoder and see every stage.

``streamlit run app.py`` serves the page script ``views/main.py`` (the page registry and navigation, run once per
browser session and on every interaction) as an ``st.App``. Its lifespan starts loading the first model in the
background as the server starts, so torch's import, the model, its step decoder and the page modules (~2 s) are
done, or under way, when the first browser arrives instead of starting then. ``DECODER_LENS_MODEL=/path/to/model_dir``
picks another model.
"""

from __future__ import annotations

import functools
import gc
import gzip
import logging
import threading
from contextlib import asynccontextmanager
from pathlib import Path

import streamlit as st
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from views.net import no_nagle
from views.routes import PLOT_JS, PLOT_JS_ROUTE, PLOTLY_JS, PLOTLY_ROUTE
from views.shell import ShellMiddleware

PAGE = Path(__file__).resolve().parent / "views" / "main.py"


def warm_start() -> None:
    """Prepare what the first page run needs, in the caches every session shares: the page script's modules and
    Explore's (torch, the model's code), through ``views.imports`` (one thread imports a group, a page run that
    needs it meanwhile waits), the model (``views.common.load_model``), its step decoder
    (``views.common.lean_decoder``) and plotly's figure classes (their first figure imports ~40 ms of validators);
    then the other pages' modules and SQLAlchemy, which no Explore page needs (~1 s more that a first Explore page
    would otherwise wait behind). Without the garbage collector meanwhile: each of its full collections walks every
    object made so far, and torch's import makes ~250k (~0.3 s of collections, the first page's wait); frozen after,
    later collections skip them."""
    gc.disable()
    try:
        from views.imports import imported

        imported("page script")
        imported("model")
        from views.common import lean_decoder, load_model
        from views.state import offered_model_dirs

        lean_decoder(load_model(str(offered_model_dirs()[0])))
        import plotly.graph_objects as go

        go.Figure(go.Heatmap(z=[[0.0]]), layout={"title": {"text": "warm"}})
        imported("pages")
    except Exception as e:  # the page loads it again and says what is wrong
        logging.getLogger("decoder_lens").warning("warm start: %s", str(e).splitlines()[0] if str(e) else e)
    finally:
        gc.freeze()
        gc.enable()


@asynccontextmanager
async def lifespan(_app):
    no_nagle()  # the server's socket is bound and listening; it serves no one before the lifespan has started
    threading.Thread(target=warm_start, name="warm-start", daemon=True).start()
    yield


def script(path: Path, cache: str):
    """A route's handler that serves the JavaScript file ``path`` (the page's figures: ``views/plot.py``)."""

    async def serve(_request) -> FileResponse:
        return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": cache})

    return serve


@functools.cache
def gzipped(path: Path) -> bytes:
    return gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)


async def plotly_bundle(request: Request) -> Response:
    """Plotly's bundle (1.5 MB; 0.5 MB gzipped), compressed once per server rather than for every browser that loads
    it (~60 ms of the server's time, in the first seconds of every new visitor's page)."""
    headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
    if "gzip" not in request.headers.get("accept-encoding", ""):
        return FileResponse(PLOTLY_JS, media_type="text/javascript", headers=headers)
    body = await run_in_threadpool(gzipped, PLOTLY_JS)
    return Response(body, media_type="text/javascript", headers={**headers, "Content-Encoding": "gzip"})


app = st.App(
    PAGE,
    lifespan=lifespan,
    routes=[
        Route(PLOTLY_ROUTE, plotly_bundle),  # plotly.js, its cartesian bundle
        Route(PLOT_JS_ROUTE, script(PLOT_JS, "no-cache")),  # ours: revalidated, so an update is picked up
    ],
    middleware=[Middleware(ShellMiddleware)],  # the page's shell starts loading Plotly with Streamlit's own code
)
