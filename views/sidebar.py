"""The sidebar Explore and Compare share: the decoding choices and the view's layer, head and grid."""

from __future__ import annotations

import streamlit as st

from model.io.checkpoint import LoadedModel

from . import session
from .common import head_label
from .state import CHOICE, MEAN_HEADS, STRATEGIES, STRATEGY_LABELS, View


def section(title: str) -> None:
    """A section's title in the sidebar, drawn as a subheader is but not a heading: the sidebar comes before the
    page's title in the document, so headings there would open the page's outline above its h1 (page.css)."""
    st.sidebar.container(key=f"sidebar_section_{title.lower()}").markdown(f"**{title}**")


def sidebar(lm: LoadedModel, view: View) -> None:
    """The decoding and view choices; bounds, keys and help from the choice table (``views.state.CHOICES``)."""
    limits, sb = session.limits_of(lm.cfg, str(lm.path)), st.sidebar

    def widget(name: str) -> dict:
        return CHOICE[name].widget(limits)

    section("Decoding")
    sb.radio(**widget("strategy"), options=STRATEGIES, format_func=STRATEGY_LABELS.get, horizontal=True)
    if view.decode.strategy == "beam":
        sb.slider(**widget("beam"))
        sb.number_input(**widget("length_penalty"), step=0.1)
    elif view.decode.strategy == "sample":
        sb.number_input(**widget("temperature"), step=0.1)
        sb.number_input(**widget("top_k"), step=1)
        sb.slider(**widget("top_p"), step=0.01)
        sb.number_input(**widget("seed"), step=1)
    if limits.max_new > 1:
        sb.slider(**widget("max_len"))
    section("View")
    layer, head = widget("layer"), widget("head")
    sb.selectbox(layer["label"], list(range(layer["max_value"] + 1)), key="layer", on_change=session.layer_head_chosen)
    sb.selectbox(
        head["label"],
        [MEAN_HEADS, *range(head["max_value"] + 1)],
        key="head",
        format_func=head_label,
        on_change=session.layer_head_chosen,
    )
    sb.toggle("Show every head (grid)", key="grid")
