"""The one module that reads Plotly's private parts, for speed: a figure's trace and layout dicts as its JSON holds
them (``fig._data``, ``fig._layout``, which ``to_plotly_json`` deep-copies), whether it has frames, a numpy array as
Plotly's typed array, and a figure built from dicts without checking them again. ``tests/viz/test_plotly_private.py``
checks each against Plotly's public output, so a Plotly version that changes them fails there first."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from _plotly_utils.utils import to_typed_array_spec


def parts(fig: go.Figure) -> tuple[list[dict], dict]:
    """The figure's trace dicts and layout dict, as ``fig.to_plotly_json()`` holds them, without copying them."""
    return fig._data, fig._layout


def has_frames(fig: go.Figure) -> bool:
    return bool(fig._frame_objs)


def typed_array(values: np.ndarray) -> dict | list:
    """A numpy array as Plotly's JSON writes it (base64 with its dtype and shape, or a list)."""
    spec = to_typed_array_spec(values)
    return spec.tolist() if isinstance(spec, np.ndarray) else spec


def unchecked(data: list[dict], layout: dict) -> go.Figure:
    """Plotly's figure of ``data`` and ``layout``, built without validating them against its schema (its
    constructor's private ``_validate``)."""
    return go.Figure(data=data, layout=layout, _validate=False)
