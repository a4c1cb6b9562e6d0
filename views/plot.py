"""Figures drawn by a small custom component (``plot.js``) that keeps each graph on the page between reruns.

``st.plotly_chart`` makes every changed figure a new element, built from scratch in the browser (Plotly.newPlot
and a second pass for the theme): ~90 ms a figure, for every figure after every ▶. The component keeps its graph
and updates it in place with ``Plotly.react`` (Streamlit renders it again only when the figure changed); a figure
out of view is updated only when it scrolls near the viewport (in the "All stages" view most of ~25 figures are),
and its element carries ``data-deferred="1"`` until then. ``app.py`` serves the component's code
(``PLOT_JS_ROUTE``) and Plotly's cartesian bundle (``PLOTLY_ROUTE``); each element carries only a short loader and
its figure, as JSON bytes (no re-parsing).

The bundle is plotly.js's official "cartesian" distribution (npm ``plotly.js-cartesian-dist-min``, MIT licence,
``assets/vendor/``), of the plotly.js version the pinned plotly package is built for: every trace the figures use
(heatmap, scatter, bar) is in it, and at 1.5 MB against the full bundle's 4.8 MB the browser parses it about three
times as fast, which a fresh page waits for.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import plotly.io as pio
import streamlit as st

from viz.common import describe_heatmap

PLOTLY_JS = Path(__file__).resolve().parents[1] / "assets" / "vendor" / "plotly-cartesian.min.js"
PLOTLY_ROUTE = f"/vendor/{PLOTLY_JS.name}"
PLOT_JS_ROUTE = "/vendor/decoder-lens-plot.js"
PLOT_JS = Path(__file__).with_name("plot.js")
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


@functools.cache
def _component():
    """Registered once per process: registering the same name again logs a warning and replaces it."""
    return st.components.v2.component("decoder_lens_plot", js=LOADER, isolate_styles=False)


def text_alternative(fig) -> str | None:
    """The line a screen reader reads for a heatmap figure (``viz.common.describe_heatmap`` of its first value
    trace; the grey overlay of masked cells is not one); None for other figures."""
    panels = [t for t in fig.data if t.type == "heatmap" and t.name != "masked"]
    if not panels:
        return None
    t = panels[0]
    title = fig.layout.title.text if fig.layout.title else None
    line = describe_heatmap(t.z, list(t.y), list(t.x), title, t.name or "value")
    return line if len(panels) == 1 else f"{line.removesuffix('.')} (the first of {len(panels)} panels)."


def plot(fig, key: str, config: dict) -> None:
    """Draw ``fig`` under ``key`` (the same key keeps the same graph, updated in place); a heatmap carries its
    text alternative (``alt``: the element's aria-label, plot.js)."""
    figure = pio.to_json(fig, validate=False)  # numpy arrays as Plotly's base64 typed arrays
    alt = text_alternative(fig)
    extra = f', "alt": {json.dumps(alt)}' if alt else ""
    _component()(data=f'{{"figure": {figure}, "config": {json.dumps(config)}{extra}}}'.encode(), key=key)


def preload() -> None:
    """An empty element that starts loading Plotly's bundle as the page's first elements arrive (its loader does),
    so that it is loaded and parsed while the server still decodes and builds the first figures."""
    _component()(data=json.dumps({"preload": True}).encode(), key="plotly_preload")


def payload(data) -> dict:
    """What ``plot`` sent, from the element's data (bytes): for tests and checks of the page."""
    return json.loads(bytes(data))
