"""Figures drawn by a small custom component (``plot.js``) that keeps each graph on the page between reruns.

``st.plotly_chart`` makes every changed figure a new element, built from scratch in the browser (Plotly.newPlot and
a second pass for the theme): ~90 ms a figure, for every figure after every ▶. The component keeps its graph and
updates it in place with ``Plotly.react`` (Streamlit renders it again only when the figure changed); a figure out
of view is updated only when it scrolls near the viewport (in the "All stages" view most of ~25 figures are), and
its element carries ``data-deferred="1"`` until then; after a step, a figure in view is drawn at once and one just
below it once the page's update is over and the browser is idle, so the step paints what the reader sees first. A
figure new to the page (another stage's) is drawn at once in view; below the window, once the page's update is over,
one per idle moment, those near the view first, so that the page still ends with every figure drawn. A
graph taken off the page (another chapter, another stage) is kept drawn, off the page, under its figure's id
(``plot``: its digest and key), and put back instead of drawn again when that figure returns; an element can carry
the figure most likely shown next (the lesson's next chapter), which the browser draws off the page in an idle
moment and keeps the same way. ``app.py`` serves the component's code (``PLOT_JS_ROUTE``) and Plotly's cartesian
bundle (``PLOTLY_ROUTE``); each element carries only a short loader and its figure, as JSON bytes (no re-parsing).
A figure whose points can be picked (the Corpus page's scatters) hands the point clicked back to the server as its
element's state, so no page needs ``st.plotly_chart`` and its own, full Plotly bundle.

Building a figure and serialising it is most of a step's server time, so the views draw through ``builders``
(``viz`` whose figure builders return a ``Drawing``: the builder and its arguments): ``plot`` hashes the arguments
and sends the JSON kept for them when the same builder got the same inputs before (stepping back, a stage
opened again, the encoder's figures on every whole run, a sentence another student opened), and builds it
otherwise. The hash covers every argument, arrays by dtype, shape and bytes; a figure with an argument that is not
plain data is built every time.

The bundle is plotly.js's official "cartesian" distribution (npm ``plotly.js-cartesian-dist-min``, MIT licence,
``assets/vendor/``), of the plotly.js version the pinned plotly package is built for: every trace the figures use
(heatmap, scatter, bar) is in it, and at 1.5 MB against the full bundle's 4.8 MB the browser parses it about three
times as fast, which a fresh page waits for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import html
import json
import logging
import os
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from viz import api as viz_module
from viz.common import Figure, describe_heatmap, figure_json, figure_parts

from .routes import PLOT_JS_ROUTE, PLOTLY_ROUTE

# Sent with every element (on several lines: one line would be taken for a file path): starts loading Plotly's
# bundle and plot.js side by side, once per page, then hands each render to plot.js.
LOADER = f"""export default function (args) {{
  window.__decoderLensPlotly ??= new Promise((resolve, reject) => {{
    const s = document.createElement("script");
    s.src = new URL("{PLOTLY_ROUTE.lstrip("/")}", document.baseURI).href;
    s.onload = () => resolve(window.Plotly);
    s.onerror = () => reject(new Error("Plotly did not load from " + s.src));
    document.head.appendChild(s);
  }});
  const m = window.__decoderLensPlotModule;
  if (m) return m.default(args);
  import(new URL("{PLOT_JS_ROUTE.lstrip("/")}", document.baseURI).href).then((mod) => {{
    window.__decoderLensPlotModule = mod;
    mod.default(args);
  }});
}}"""


# The figures' JSON kept for every session together (least recently used go first): a figure whose builder gets the
# same inputs again (stepping back, another stage and back, the encoder's figures on every whole run, a sentence
# another student already opened) is sent without being built or serialised again.
FIGURE_CACHE_BYTES = 128 * 2**20


@functools.cache
def _component():
    """Registered once per process: registering the same name again logs a warning and replaces it."""
    return st.components.v2.component("decoder_lens_plot", js=LOADER, isolate_styles=False)


def text_alternative(fig: Figure | go.Figure) -> str | None:
    """The line a screen reader reads for a figure: a heatmap's (``viz.common.describe_heatmap`` of its first value
    trace; the grey overlay of masked cells is not one), a bar chart's bars largest first, or the points of a
    scatter drawing (a beam tree) counted by kind; None for other figures."""
    traces, layout = figure_parts(fig)  # without building Plotly's objects
    title = layout.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    title = " ".join(str(title or "Figure").split("<br>"))
    panels = [t for t in traces if t.get("type") == "heatmap" and t.get("name") != "masked"]
    if not panels:
        return _bars_alternative(title, traces) or _points_alternative(title, traces)
    t = panels[0]
    line = describe_heatmap(t["z"], list(t["y"]), list(t["x"]), title, t.get("name") or "value")
    return line if len(panels) == 1 else f"{line.removesuffix('.')} (the first of {len(panels)} panels)."


ALT_BARS = 5  # bars a bar chart's text alternative names


def _bars_alternative(title: str, traces: list[dict]) -> str | None:
    """ "Title: 10 bars, largest first: ‘a’ 10.3%, ‘b’ 2.1%, …" from the first bar trace (its shown values)."""
    bars = next((t for t in traces if t.get("type") == "bar"), None)
    if bars is None:
        return None
    flat = bars.get("orientation") == "h"
    labels, values = (bars.get("y"), bars.get("x")) if flat else (bars.get("x"), bars.get("y"))
    labels, values = list(labels if labels is not None else []), list(values if values is not None else [])
    texts, template = bars.get("text"), re.fullmatch(r"%\{[xy]:([^}]*)\}", str(bars.get("texttemplate") or ""))
    if isinstance(texts, list | tuple):
        shown = [str(t) for t in texts]
    else:  # as Plotly writes them: a plain number format ("%{x:.1%}") reads the same in Python's
        shown = [format(float(v), template[1] if template else ".3g") for v in values]
    order = sorted(range(len(values)), key=lambda i: -float(values[i]))[:ALT_BARS]
    named = ", ".join(f"‘{html.unescape(str(labels[i]))}’ {shown[i]}" for i in order)
    more = ", …" if len(values) > ALT_BARS else ""
    return f"{html.unescape(title)}: {len(values)} bars, largest first: {named}{more}."


def _points_alternative(title: str, traces: list[dict]) -> str | None:
    """ "Title: 5 kept, 2 finished and 12 pruned points" from the marker traces that carry points."""
    counts = [
        (sum(x is not None for x in ([] if t.get("x") is None else t["x"])), str(t.get("name") or "points"))
        for t in traces
        if t.get("type") == "scatter" and "markers" in str(t.get("mode", "")) and t.get("showlegend") is not True
    ]
    counts = [(n, name) for n, name in counts if n]
    if not counts:
        return None
    parts = [f"{n} {html.unescape(name)}" for n, name in counts]
    said = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"{html.unescape(title)}: {said} points."


@dataclass(frozen=True)
class Drawing:
    """A figure not built yet: a ``viz`` builder and its arguments (what ``builders`` returns)."""

    build: Callable
    args: tuple
    kwargs: dict = field(default_factory=dict)
    identity: tuple | None = None  # plain data that determines every argument but the scalars (``keyed``)

    @classmethod
    def of(cls, build: Callable, *args: Any, **kwargs: Any) -> Drawing:
        return cls(build, args, kwargs)

    def keyed(self, *identity: object) -> Drawing:
        """The same drawing, hashed by ``identity`` (plain data) and its scalar arguments: ``identity`` stands for
        every other argument (a decode's recorded steps and its token namer: the model, the source and the decode's
        options), which need not be plain data and are not hashed."""
        return replace(self, identity=identity)

    def figure(self) -> Figure:
        return self.build(*self.args, **self.kwargs)

    def digest(self) -> str | None:
        """The builder and every argument hashed (arrays by dtype, shape and bytes), or for a keyed drawing its
        identity and scalar arguments; None when an argument is not plain data (then the figure is built every
        time). Hashed once per drawing: a lesson chapter asks for its next chapter's both to build it ahead and to
        send it along."""
        return self._digest

    @functools.cached_property
    def _digest(self) -> str | None:
        h = hashlib.blake2b(f"{self.build.__module__}.{self.build.__qualname__}".encode(), digest_size=20)
        if self.identity is not None:
            scalars = [(i, a) for i, a in enumerate(self.args) if _scalar(a) or _options(a)]
            scalars += [(k, a) for k, a in sorted(self.kwargs.items()) if _scalar(a) or _options(a)]
            return h.hexdigest() if _feed(h, self.identity) and _feed(h, scalars) else None
        if any(callable(a) for a in (*self.args, *self.kwargs.values())):
            return None  # known before any argument is hashed
        return h.hexdigest() if _feed(h, self.args) and _feed(h, self.kwargs) else None


def _scalar(obj) -> bool:
    return obj is None or isinstance(obj, bool | int | float | str | np.generic)


def _options(obj) -> bool:
    """A builder's options: a frozen dataclass, hashed by its type and fields as a scalar is by its value."""
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type) and obj.__dataclass_params__.frozen  # type: ignore[attr-defined]


def _feed(h, obj) -> bool:
    """Hash ``obj`` into ``h``, typed and length-prefixed so that different values never feed the same bytes."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            return False
        h.update(f"a{obj.dtype.str}{obj.shape}".encode())
        h.update(np.ascontiguousarray(obj).view(np.uint8).data)
        return True
    if _scalar(obj):
        text = repr(obj.item() if isinstance(obj, np.generic) else obj)
        h.update(f"{type(obj).__name__}{len(text)}:{text}".encode())
        return True
    if isinstance(obj, list | tuple):
        h.update(f"l{len(obj)}".encode())
        return all(_feed(h, x) for x in obj)
    if isinstance(obj, dict):
        h.update(f"d{len(obj)}".encode())
        return all(_feed(h, str(k)) and _feed(h, v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0])))
    if _options(obj):
        h.update(f"o{type(obj).__module__}.{type(obj).__qualname__}".encode())
        return _feed(h, {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    return False


class Builders:
    """``viz`` whose figure builders return a ``Drawing`` instead of building: ``plot`` builds it, or takes its
    JSON from the cache when the same builder got the same inputs before. The other functions are ``viz``'s own."""

    def __init__(self, module: ModuleType):
        self._module = module

    def __getattr__(self, name: str):
        return _drawing_maker(getattr(self._module, name), name in self._module.FIGURE_BUILDERS)


@functools.cache
def _drawing_maker(fn, builds_figure: bool):
    """``fn`` itself, or for a figure builder (``viz.api.FIGURE_BUILDERS``) a function of its arguments that returns
    their ``Drawing`` (made once per builder: an attribute of ``builders`` is read for every figure drawn)."""
    return functools.wraps(fn)(functools.partial(Drawing.of, fn)) if builds_figure else fn


builders = Builders(viz_module)


class FigureCache:
    """Figures' JSON and text alternatives by digest, within ``max_bytes`` (least recently used first out); one
    per server process, every session's script thread using it under its lock."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.nbytes = max_bytes, 0
        self.data: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def peek(self, digest: str) -> tuple[str, str | None] | None:  # as get, counting neither a hit nor a miss
        with self.lock:
            return self.data.get(digest)

    def get(self, digest: str) -> tuple[str, str | None] | None:
        with self.lock:
            item = self.data.get(digest)
            if item is not None:
                self.data.move_to_end(digest)
            self.hits += item is not None
            self.misses += item is None
            return item

    def put(self, digest: str, item: tuple[str, str | None]) -> None:
        size = len(item[0]) + len(item[1] or "")
        with self.lock:
            if digest in self.data or size > self.max_bytes:
                return
            self.data[digest] = item
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                _, (fig, alt) = self.data.popitem(last=False)
                self.nbytes -= len(fig) + len(alt or "")


@functools.cache  # one per process, like st.cache_resource, without its per-call bookkeeping (one call per figure)
def figure_cache() -> FigureCache:
    return FigureCache(FIGURE_CACHE_BYTES)


def serialised(fig: Figure | go.Figure) -> tuple[str, str | None]:
    """A figure's JSON (numpy arrays as Plotly's base64 typed arrays) and its text alternative."""
    return figure_json(fig), text_alternative(fig)


def figure_item(fig: Figure | Drawing) -> tuple[str, str | None]:
    """``serialised(fig)`` (a figure, or a ``Drawing``, built only if the cache does not hold it)."""
    if not isinstance(fig, Drawing):
        return serialised(fig)
    digest, cache = fig.digest(), figure_cache()
    if digest is None:  # an argument that is not plain data: built every time
        return serialised(fig.figure())
    item = cache.get(digest)
    if item is None:
        item = serialised(fig.figure())
        cache.put(digest, item)
    return item


def plot(
    fig: Figure | Drawing, key: str, config: dict, ahead: tuple[Drawing, str, dict] | None = None, pick: bool = False
) -> Any:
    """Draw ``fig`` (a figure, or a ``Drawing``, built only if the cache does not hold it) under ``key`` (the same
    key keeps the same graph, updated in place); a heatmap carries its text alternative (``alt``: its drawing's
    aria-label, plot.js). A cached figure carries its ``id`` (its digest and key): a graph the browser keeps off the
    page under that id is shown again instead of drawn. ``ahead``: the figure most likely shown next under
    its own key (the lesson's next chapter), sent along when the cache holds it, which the browser draws off the
    page while the reader reads (``plot.js``): (the drawing, its key, its config). ``pick``: a click on a point
    hands back its first ``customdata`` value, kept as the element's state: the value last clicked, or None."""
    digest = fig.digest() if isinstance(fig, Drawing) else None
    parts = [_payload(figure_item(fig), config, digest and f"{digest}:{key}")]
    if ahead is not None:
        next_fig, next_key, next_config = ahead
        d = next_fig.digest()
        held = figure_cache().peek(d) if d else None
        if held is not None:
            parts.append(f'"ahead": {{{_payload(held, next_config, f"{d}:{next_key}")}}}')
    if pick:
        parts.append('"pick": true')
    at = getattr(threading.current_thread(), AT, None)
    if at is not None:  # last: plot.js tells a figure that only changed position from one that changed
        parts.append(f'"at": {json.dumps(at)}')
    data = f"{{{', '.join(parts)}}}".encode()
    if not pick:
        _component()(data=data, key=key)
        return None
    return _component()(data=data, key=key, on_picked_change=_nothing).get("picked")


@contextlib.contextmanager
def tagged(at: str) -> Iterator[None]:
    """The figures shown inside are of the position ``at`` (the step view's): the browser marks one whose drawing is
    of another position than the page's position line shows, until it is drawn (plot.js, page.js)."""
    thread = threading.current_thread()
    before = getattr(thread, AT, None)
    setattr(thread, AT, at)
    try:
        yield
    finally:
        setattr(thread, AT, before)


def _nothing() -> None:
    """A picked point's callback: the rerun it causes is all a pick needs (the page reads the pick)."""


def _payload(item: tuple[str, str | None], config: dict, fid: str | None) -> str:
    figure, alt = item
    out = f'"figure": {figure}, "config": {json.dumps(config)}'
    if alt:
        out += f', "alt": {json.dumps(alt)}'
    return out + (f', "id": {json.dumps(fid)}' if fid else "")


AT = "plot_at"  # the thread's attribute naming the position its figures are of (``tagged``)

# The work ahead starts once the run that asked for it is over (its thread, a session's script thread, has ended:
# it ends when no rerun waits), at most AHEAD_WAIT_S later, then AHEAD_DELAY_S more, by when that run's last messages
# are out: the build never holds Python's lock while the page's own run, or a rerun it caused, sends its elements.
AHEAD_WAIT_S, AHEAD_DELAY_S = 10.0, 0.05
# Its thread's niceness (Linux): the browser drawing the page on the same cores, and the sessions' own runs, come
# first; the work ahead takes what they leave.
AHEAD_NICE = 10


def _lower_priority() -> None:
    """Make the calling thread (the work ahead's) yield the cores to everything at the default priority: on Linux
    a thread's id names that thread alone (elsewhere it could name another process: left as it is)."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), AHEAD_NICE)


@functools.cache  # one per process: one thread, so that work done ahead never crowds the sessions' own runs
def _ahead() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead", initializer=_lower_priority)


def ahead(fn: Callable, *args: Any) -> Future:
    """Run ``fn(*args)`` on the process's one thread for work done ahead (a figure, a patching map the reader most
    likely asks for next), once the run that asked for it is over and has sent its elements (``AHEAD_WAIT_S``)."""
    asker = threading.current_thread()

    def later():
        if asker is not threading.main_thread() and asker is not threading.current_thread():
            asker.join(AHEAD_WAIT_S)
        time.sleep(AHEAD_DELAY_S)
        return fn(*args)

    return _ahead().submit(later)


def build_ahead(fig: Drawing) -> Future | None:
    """Build ``fig`` into the figure cache in the background, unless it is there or cannot be cached: the figure a
    reader most likely asks for next (the lesson's next chapter), ready when they do. The future, or None."""
    digest = fig.digest()
    if digest is None or figure_cache().peek(digest) is not None:
        return None
    return ahead(_build_into_cache, fig, digest)


def _build_into_cache(fig: Drawing, digest: str) -> None:
    cache = figure_cache()
    if cache.peek(digest) is not None:
        return
    try:
        cache.put(digest, serialised(fig.figure()))
    except Exception:  # the reader's own run builds it again and shows what went wrong
        logging.getLogger("decoder_lens").exception("Building a figure ahead failed")


def preload() -> None:
    """An empty element that starts loading Plotly's bundle as the page's first elements arrive (its loader does),
    so that it is loaded and parsed while the server still decodes and builds the first figures."""
    _component()(data=json.dumps({"preload": True}).encode(), key="plotly_preload")


def payload(data: bytes) -> dict:
    """What ``plot`` sent, from the element's data (bytes): for tests and checks of the page."""
    return json.loads(bytes(data))
