"""The files the app serves beside Streamlit's (the figures' code and Plotly's bundle) and their paths.

Light on purpose: the server reads them as it starts (``app.py``, ``views/shell.py``), before it answers its health
check, and importing ``views/plot.py`` for them would bring pandas and the figure builders in first (~0.35 s).
"""

from __future__ import annotations

from pathlib import Path

PLOTLY_JS = Path(__file__).resolve().parents[1] / "assets" / "vendor" / "plotly-cartesian.min.js"
PLOTLY_ROUTE = f"/vendor/{PLOTLY_JS.name}"
PLOT_JS = Path(__file__).with_name("plot.js")
PLOT_JS_ROUTE = "/vendor/decoder-lens-plot.js"
