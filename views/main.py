"""The page script: the page registry, registered with ``st.navigation`` (each page at its own path, Learn at the
root); each page lives in its own module of ``views/``.

Streamlit runs it once per browser session and again on every interaction; ``app.py`` serves it. Run the app with
``streamlit run app.py``; ``DECODER_LENS_MODEL=/path/to/model_dir`` picks another model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from importlib import import_module
from pathlib import Path

import streamlit as st

from views.imports import imported, imported_through

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
        s["model_dir"] = by_name.get(wanted or "", options[0])
    if s["model_dir"] not in options:
        s["model_dir"] = options[0]
    if len(options) > 1:
        st.sidebar.selectbox("Model", options, key="model_dir", format_func=lambda p: Path(p).name)
    return s["model_dir"], msgs


@dataclass(frozen=True)
class Page:
    """A page: ``views/<module>.py``'s ``render``, at ``/<path>``. A page that ``explores`` the model takes the offered
    model directories and the link's messages, and needs a loaded model; the others take the model, or the error that
    kept it from loading, and say what they can without it."""

    name: str
    module: str
    icon: str
    explores: bool = False
    choices: bool = True  # False: the page holds no choice, so its link is the page alone

    @property
    def path(self) -> str:
        return self.name.lower()


# The navigation's order; the first is the default, at the site's root. A new page: one module, one line.
PAGES = (
    Page("Learn", "learn", ":material/school:"),
    Page("Explore", "explore", ":material/frame_inspect:", True),
    Page("Compare", "compare", ":material/compare:", True),
    Page("Corpus", "corpus", ":material/table_chart:"),
    # a teacher's class: made here, its dashboard by the teacher link
    Page("Class", "teacher", ":material/groups:"),
    Page("About", "about", ":material/info:", choices=False),
)
PAGE_ALIASES = {"Lesson": "Learn"}  # older links
OPENED = "session_opened"  # set on a session's first run: a link's page is chosen then


def show(page: Page) -> None:
    """Run ``page``: the model (the sidebar may offer others), then the page's module."""
    from model.io.checkpoint import ModelDirError
    from views.common import load_model, md
    from views.state import offered_model_dirs

    # the sidebar holds the exploring pages' choices ("auto": shown, but not over a phone's page); the others close it
    st.set_page_config(
        page_title=f"{page.name} · Decoder Lens", initial_sidebar_state="auto" if page.explores else "collapsed"
    )
    dirs = offered_model_dirs()
    model_dir, msgs = choose_model(dirs)
    lm, error = None, None
    try:
        lm = load_model(model_dir)
    except ModelDirError as e:
        error = f"Cannot load the model: {e}"
    imported_through(f"views.{page.module}")  # a fresh server's other pages: imported by one thread at a time
    render = import_module(f"views.{page.module}").render
    if not page.choices:
        st.query_params.clear()
    if not page.explores:
        render(lm, error)
    elif lm is None:
        st.title(":material/frame_inspect: Decoder Lens")
        st.error(md(error))
        st.info("Set DECODER_LENS_MODEL to a model directory, or choose another model in the sidebar.")
    else:
        render(lm, dirs, msgs)


def linked_page(current: Page, query: dict[str, str], opening: bool) -> Page | None:
    """The page an older link names: ``?page=Compare&…`` (any page), or, when the session opens at the root,
    Explore's parameters without Learn's chapter or class (``/?src=…&step=2``, as Explore's links were). None when
    the link is already on its page."""
    names = {p.name: p for p in PAGES}
    wanted = names.get(PAGE_ALIASES.get(query.get("page", ""), query.get("page", "")))
    if wanted is None and opening and current is PAGES[0] and not {"chapter", "class"} & query.keys():
        from views.state import QUERY_KEYS

        wanted = PAGES[1] if any(k in query for k in QUERY_KEYS) else None
    return None if wanted is current else wanted


def main() -> None:
    imported("page script")  # on a fresh server, after the warm start's import or before it (views.imports)
    from views.page import behaviour
    from views.plot import preload

    st.set_page_config(page_title="Decoder Lens", page_icon="🔎", layout="wide")
    preload()  # first, and not in the sidebar: a closed sidebar (on the pages that close it) renders it late
    with st.sidebar:
        behaviour()
        rerun_on_reconnect()
    # The rest imports torch (~1 s on a fresh server, where the warm start may still be importing it): the first
    # elements go out before, so that the browser loads Plotly meanwhile.
    imported("model")
    from views.session import keep_widget_values

    keep_widget_values()
    # A page at /<path> (the first at the root): its links keep working when the page's query changes
    routes = [
        st.Page(partial(show, p), title=p.name, icon=p.icon, url_path=p.path, default=i == 0)
        for i, p in enumerate(PAGES)
    ]
    current = st.navigation(routes, position="top")
    page = PAGES[routes.index(current)]
    query = st.query_params.to_dict()
    opening = OPENED not in st.session_state
    st.session_state[OPENED] = True
    target = linked_page(page, query, opening)
    if target is not None:  # an older link: open its page with the rest of its query
        st.switch_page(routes[PAGES.index(target)], query_params=without_page(query))
    if "page" in query:
        st.query_params.from_dict(without_page(query))
    phone_menu(routes)
    current.run()


def phone_menu(routes: list) -> None:
    """The pages as a menu that opens (a button, then a link per page; keyboard and screen reader alike; page.js
    moves the keyboard into it), in the header of a window too narrow for the top navigation's links, which
    Streamlit then takes out of the header."""
    with st.container(key="phone_pages"):  # placed by the shell's style (views.shell.HEADER_CSS)
        with st.popover("Pages", icon=":material/menu:"):
            for route in routes:
                st.page_link(route)


def without_page(query: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in query.items() if k != "page"}


try:
    main()
except Exception as exc:  # never a traceback in the page
    from views.common import fail

    fail("Something went wrong", exc)
