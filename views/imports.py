"""A fresh server's first imports, each group made by one thread while any other thread that needs it waits.

Two threads that import a package for the first time at once can meet in its circular imports, one of them left with
a half-made module ("cannot import name ... from partially initialized module"); SQLAlchemy, pandas and torch
have such cycles. On a fresh server the warm start (``app.py``) and the first page runs are such threads, so both take
these groups, in this order, through one ``st.cache_resource`` entry each: the first caller imports, the others wait
for it. Only Streamlit and the standard library are imported before.
"""

from __future__ import annotations

from importlib import import_module

import streamlit as st

from views.streamlit_private import EMOJIS

GROUPS = {
    # the page script's own modules (figures: plotly, pandas), and the emoji table its icon is checked against
    "page script": ("views.page", "views.plot", EMOJIS),
    # torch, the model's code and Explore's modules
    "model": ("views.session", "views.common", "views.state", "model.io.checkpoint", "views.explore"),
    # the other pages' modules; Learn and Class keep a class's answers (SQLAlchemy)
    "pages": ("views.learn", "views.compare", "views.corpus", "views.teacher", "views.about", "classroom.store"),
}


@st.cache_resource(show_spinner=False)
def imported(group: str) -> str:
    """Import ``group`` (one of ``GROUPS``) once per server; a second thread asking meanwhile waits for the first."""
    for name in GROUPS[group]:
        import_module(name)
    return group


def imported_through(module: str) -> None:
    """Every group in order, up to the one that holds ``module``."""
    for group, names in GROUPS.items():
        imported(group)
        if module in names:
            return
    raise ValueError(f"{module} is in no import group")
