"""The one module that reads Plotly's private parts (``viz.plotly_private``) against Plotly's public output: its
dicts are what ``to_plotly_json`` gives, its typed arrays what ``plotly.io.to_json`` writes, its unchecked figure the
checked one."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from viz import plotly_private

DATA = [
    {
        "type": "heatmap",
        "z": [[0.25, 0.75], [0.5, 0.5]],
        "x": ["a", "b"],
        "y": ["c", "d"],
        "colorscale": [[0.0, "rgb(255,255,255)"], [1.0, "rgb(0,0,255)"]],
    },
    {"type": "scatter", "x": [0, 1], "y": [1, 0], "mode": "lines"},
]
LAYOUT = {"title": {"text": "A figure"}, "width": 400, "xaxis": {"title": {"text": "key"}}}


def test_parts_are_the_figure_s_own_json():
    fig = go.Figure(DATA, LAYOUT)
    data, layout = plotly_private.parts(fig)
    public = fig.to_plotly_json()
    assert data == public["data"] and layout == public["layout"]
    fig.update_layout(height=300)  # the parts are the figure's live dicts, not a copy taken once
    assert plotly_private.parts(fig)[1]["height"] == 300


def test_frames_are_seen():
    assert not plotly_private.has_frames(go.Figure(DATA, LAYOUT))
    assert plotly_private.has_frames(go.Figure(DATA, LAYOUT, frames=[go.Frame(data=[go.Scatter(y=[0, 1])])]))


def test_typed_arrays_are_what_plotly_writes():
    for values in (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1.5, -2.0]), np.array([3, 1], np.int8)):
        written = json.loads(pio.to_json(go.Figure(go.Heatmap(z=values)), validate=False))["data"][0]["z"]
        assert plotly_private.typed_array(values) == written


def test_an_unchecked_figure_is_the_checked_one():
    fig = plotly_private.unchecked([dict(t) for t in DATA], dict(LAYOUT))
    assert fig.to_plotly_json() == go.Figure(DATA, LAYOUT).to_plotly_json()
