"""The page script: the page registry and navigation; each page lives in its own module of ``views/``.

Streamlit runs it once per browser session and again on every interaction; ``app.py`` serves it. Run the app with
``streamlit run app.py``; ``DECODER_LENS_MODEL=/path/to/model_dir`` picks another model.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import streamlit as st

from views.page import behaviour
from views.plot import preload

RECONNECT_TIMER_S = 3600


@st.fragment(run_every=RECONNECT_TIMER_S)
def rerun_on_reconnect() -> None:
    """Shows nothing. Streamlit's browser side asks for a whole run after its websocket reconnects only when the page
    has a fragment on a timer; this is one (its hourly rerun costs nothing). When a browser's server is gone (a
    replica behind nginx stopped, see deploy/), the browser reconnects to another server, whose new session reopens
    the view from the URL at once; without it, the page would stay as it was and the step buttons (a fragment the
    new server does not know) would do nothing until a whole run."""


def choose_model(dirs: list[Path]) -> tuple[str, list[str]]:
    """The model directory: the link's (by name) on the session's first run, then the selector's."""
    s = st.session_state
    options = [str(p) for p in dirs]
    msgs: list[str] = []
    if "model_dir" not in s:
        wanted = st.query_params.get("model")
        by_name = {Path(p).name: p for p in options}
        if wanted and wanted not in by_name:
            msgs.append(
                f"The link asks for the model {wanted!r}, which this server does not have; showing "
                f"{Path(options[0]).name!r} instead, so the view may differ from the link's."
            )
        s["model_dir"] = by_name.get(wanted, options[0])
    if s["model_dir"] not in options:
        s["model_dir"] = options[0]
    if len(options) > 1:
        st.sidebar.selectbox("Model", options, key="model_dir", format_func=lambda p: Path(p).name)
    return s["model_dir"], msgs


@dataclass(frozen=True)
class Page:
    """A page: ``views/<module>.py``'s ``render``. A page that ``explores`` the model takes the offered model
    directories and the link's messages, and needs a loaded model; the others take the model, or the error that
    kept it from loading, and say what they can without it."""

    name: str
    module: str
    explores: bool = False


# The page selector's order; the first is where a link without parameters lands. A new page: one module, one line.
PAGES = (
    Page("Learn", "learn"),
    Page("Explore", "explore", True),
    Page("Compare", "compare", True),
    Page("About", "about"),
)
PAGE_ALIASES = {"Lesson": "Learn"}  # older links


def main() -> None:
    st.set_page_config(page_title="Decoder Lens", page_icon="🔎", layout="wide")
    with st.sidebar:
        preload()
        behaviour()
        rerun_on_reconnect()
    # The rest imports torch (~1 s on a fresh server, where the warm start may still be importing it): the first
    # elements go out before, so that the browser loads Plotly meanwhile.
    from model.checkpoint import ModelDirError
    from views.common import load_model, md
    from views.state import QUERY_KEYS, offered_model_dirs

    s = st.session_state
    names = [p.name for p in PAGES]
    if "page" not in s:  # a link to a page opens it; one with Explore's parameters only, Explore; none, Learn
        wanted = PAGE_ALIASES.get(st.query_params.get("page"), st.query_params.get("page"))
        explore_link = any(k in st.query_params for k in QUERY_KEYS)
        s["page"] = wanted if wanted in names else "Explore" if explore_link else names[0]
    page = PAGES[names.index(st.sidebar.radio("Page", names, key="page", horizontal=True))]
    dirs = offered_model_dirs()
    model_dir, msgs = choose_model(dirs)
    lm, error = None, None
    try:
        lm = load_model(model_dir)
    except ModelDirError as e:
        error = f"Cannot load the model: {e}"
    render = import_module(f"views.{page.module}").render
    if not page.explores:
        if page.name == "About":  # the About page holds no choice: its link is the page alone
            st.query_params.from_dict({"page": page.name})
        render(lm, error)
        return
    if lm is None:
        st.title(":material/frame_inspect: Decoder Lens")
        st.error(md(error))
        st.info("Set DECODER_LENS_MODEL to a model directory, or choose another model in the sidebar.")
        return
    render(lm, dirs, msgs)


try:
    main()
except Exception as exc:  # never a traceback in the page
    from views.common import fail

    fail("Something went wrong", exc)
