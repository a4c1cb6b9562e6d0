"""The Explore page's state in st.session_state: loaded from the URL once per session, bounded before the widgets
exist, read back as one ``View`` and written to the URL after every change."""

from __future__ import annotations

import streamlit as st

from .common import log
from .state import VIEW_FIELDS, Limits, View, clamp_view, from_query, to_query

LOADED = "url_loaded"  # set once the session has read its URL
# Set once the layer or head was chosen (by the link or in the sidebar): until then the attribution stage may open
# on the head that agrees best with its attribution (``open_on``).
LAYER_HEAD_CHOSEN = "layer_head_chosen"
PENDING_LAYER_HEAD = "pending_layer_head"
WIDGETS = (
    "source",
    "reference",
    "strategy",
    "beam",
    "length_penalty",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "max_len",
    "tab",
    "stage",
    "layer",
    "head",
    "grid",
    "no_mask",
    "step",
    "source_b",
    "contrast",
    "site",
    "noise",
)


def limits_of(cfg) -> Limits:
    return Limits(cfg.vocab_size, cfg.max_len, cfg.n_decoder_layers, cfg.n_heads)


def load(limits: Limits) -> list[str]:
    """Bound the session's choices for this model (reading the URL on the session's first run); returns one
    message per value that had to change. Runs before any widget of the page exists."""
    s = st.session_state
    for key in WIDGETS:  # keep widget values while their widgets are not on the page (other tab, other page)
        if key in s:
            s[key] = s[key]
    msgs: list[str] = []
    raw = {name: s[name] for name in VIEW_FIELDS if name in s}
    if not s.get(LOADED):
        s[LOADED] = True
        url, msgs = from_query(st.query_params.to_dict())
        raw.update(url)
        if "step" in url:  # the decode's length bounds it, once known
            s["pending_step"], s["step_from_link"] = url["step"], True
        s["forced_base"] = None  # the forced prefix from the link belongs to the link's sentence
        if "layer" in url or "head" in url:
            s[LAYER_HEAD_CHOSEN] = True
    if PENDING_LAYER_HEAD in s:  # asked for by the last run, before the sidebar's widgets exist
        raw["layer"], raw["head"] = s.pop(PENDING_LAYER_HEAD)
    view, more = clamp_view(raw, limits)
    for name in VIEW_FIELDS:
        value = getattr(view, name)
        if name == "step" and "step" in s:
            continue  # bounded by the decode's length in the step view
        if s.get(name) != value or type(s.get(name)) is not type(value):
            s[name] = value
    return msgs + more


def layer_head_chosen() -> None:
    """The sidebar's layer or head was changed: the user's choice from now on."""
    st.session_state[LAYER_HEAD_CHOSEN] = True


def open_on(layer: int, head: int) -> bool:
    """Show ``layer`` and ``head`` from the next run on (the whole page: the sidebar shows them too), unless the
    layer or head was chosen; True when the page must run again for it."""
    s = st.session_state
    if s.get(LAYER_HEAD_CHOSEN) or (s.get("layer"), s.get("head")) == (layer, head):
        return False
    s[PENDING_LAYER_HEAD] = (layer, head)
    return True


def current(limits: Limits) -> View:
    """The view the session shows now (the state is bounded already; nothing is reported)."""
    s = st.session_state
    return clamp_view({name: s[name] for name in VIEW_FIELDS if name in s}, limits)[0]


def sync_url(view: View) -> None:
    """Write the view to the URL (the URL is a convenience: never fail the page for it)."""
    chosen = ("layer", "head") if st.session_state.get(LAYER_HEAD_CHOSEN) else ()  # the link must keep the choice
    qp = to_query(view, keep=chosen)
    try:
        if st.query_params.to_dict() != qp:
            st.query_params.from_dict(qp)
    except Exception:
        log.exception("could not update the query parameters")
