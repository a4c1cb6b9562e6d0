"""Page-wide behaviour, mounted once per page (``views.main``): the stepper sticks to the top of the window, ← / →
step from anywhere on the page, and the step buttons carry names for screen readers (``page.js``, ``page.css``).
Neither file holds user text."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent


@functools.cache
def _component():
    """Registered once per process (registering the same name again replaces it, with a warning)."""
    return st.components.v2.component(
        "decoder_lens_page",
        js=(HERE / "page.js").read_text(),
        css=(HERE / "page.css").read_text(),
        isolate_styles=False,
    )


def behaviour() -> None:
    """Mounted once per page run (its code installs itself once per browser page)."""
    _component()(data=json.dumps({"page": True}).encode(), key="page_behaviour")  # JSON, as every element's data
