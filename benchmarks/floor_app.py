"""The floor for benchmarks/app_latency.py: the least a Streamlit page can do per step.

One button (key "next", like the app's ▶) redraws one Plotly heatmap of ``?rows=R&cols=C`` cells
(app_latency.py passes the size of the app's largest heatmap) with new float32 values and a title
"step N", the same signal the app's figures are checked by. Run with ``streamlit run benchmarks/floor_app.py``.
Its connection has TCP_NODELAY, as the app's has (``views/net.py``), so both are measured without Nagle's delay;
``?nagle=1`` leaves it as stock Streamlit does, for comparison.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from views.net import no_nagle


def _size(name: str, default: int) -> int:
    try:
        return min(max(int(st.query_params.get(name, default)), 1), 100_000)
    except ValueError:
        return default


def _next() -> None:
    st.session_state["step"] += 1


if st.query_params.get("nagle") != "1":  # ?nagle=1: as stock Streamlit serves it, for comparison
    no_nagle(connected=True)  # served as the app is (app.py): the browser's connection, open by now, without Nagle
st.session_state.setdefault("step", 0)
rows, cols = _size("rows", 20), _size("cols", 1024)
step = st.session_state["step"]
st.button("next", key="next", on_click=_next)
z = np.random.default_rng(step).standard_normal((rows, cols), dtype=np.float32)
fig = go.Figure(go.Heatmap(z=z, colorscale="RdBu_r", zmid=0.0))
fig.update_layout(title=dict(text=f"Floor heatmap, step {step + 1}"), height=max(260, min(900, 150 + 18 * rows)))
st.plotly_chart(fig, key="floor", config={"displaylogo": False}, width="stretch")
