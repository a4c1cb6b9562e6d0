"""What the tests share: opening the app in AppTest (on a page, as a link does), reading what a run showed (its
page, figures, chips, tables, URL), so no test module imports another."""

from __future__ import annotations

import base64
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from classroom.store import FINAL, QUESTIONS, Answer, Store
from harness import audit
from harness.browser import IDLE_JS, serve
from model.io.checkpoint import ENV_MODEL

APP = str(Path(__file__).resolve().parent.parent / "views" / "main.py")

ROOT = Path(__file__).resolve().parents[1]


def open_app(model_dir, monkeypatch, **query) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"max_len": "8", **query})  # short decodes keep the suite fast
    at.run()
    ok(at)
    return at


def open_panel(at: AppTest, key: str) -> AppTest:
    """Open the collapsed panel ``key`` (``views.common.lazy_panel``), as a click on its title does."""
    at.session_state[key] = True
    return at.run()


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def chip_markdown(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Generated so far"))


def n_chips(at: AppTest) -> int:
    body = chip_markdown(at)
    n = int(re.search(r"\((\d+) tokens?\)", body).group(1))
    assert body.count("-badge[") == max(n, 1)  # the empty state shows one <s> badge
    return n


def headings(at: AppTest) -> list[str]:
    """The page's subheadings in page order: ``st.subheader``'s, and the heading a section's Markdown element opens
    with (``views.common.heading``: a heading and its equation as one element)."""
    out = []
    for e in at:
        if e.type == "subheader":
            out.append(e.value)
        elif e.type == "markdown" and str(e.value).startswith("### "):
            out.append(e.value[4:].split("\n", 1)[0])
    return out


def frame(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def specs(at: AppTest) -> list[dict]:
    """The page's figures as sent to the browser (each a ``views.plot`` component's data), in page order."""
    return audit.figures(at)  # not the empty element that preloads Plotly; each checked against Plotly's schema


def title(spec: dict) -> str:
    """A figure's title as it reads: its lines (wrapped to the figure's width, ``<br>``) joined by spaces."""
    return (spec["layout"].get("title", {}).get("text") or "").replace("<br>", " ")


def titles(at: AppTest) -> list[str]:
    """The titles of the Plotly figures on the page, in page order."""
    return [title(s) for s in specs(at)]


def figure(at: AppTest, start: str) -> dict:
    return next(s for s in specs(at) if title(s).startswith(start))


def plotly_array(z) -> np.ndarray:
    """A figure array as sent to the browser: a nested list, or Plotly's base64 typed-array form."""
    if isinstance(z, dict):
        a = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        return a.reshape([int(n) for n in str(z.get("shape", len(a))).split(",")]).astype(float)
    return np.array([[np.nan if x is None else x for x in row] for row in z], dtype=float)


def qp(at: AppTest, key: str):
    v = at.query_params.get(key)
    return v[-1] if isinstance(v, list) else v


def show_stage(at: AppTest, stage: str) -> AppTest:
    at.segmented_control(key="stage").set_value(stage).run()
    ok(at)
    return at


TITLES = {  # a word each page's title holds, and no other page's
    "Learn": "Learn: how a decoder writes a translation",
    "Compare": "Compare two sentences",
    "About": "About Decoder Lens",
    "Explore": "Decoder Lens",
}


def open_page(at: AppTest, name: str) -> AppTest:
    at.query_params["page"] = name
    return at.run()


def shown_page(at: AppTest) -> str:
    title = at.title[0].value
    return next(name for name, text in TITLES.items() if text in title)


# Browser waits: each waits for a state of the page, never for a fixed time.
STILL_MS = 300  # a state counts as reached once it has held this long (a rerun starts within it after an input)


def wait_still(page, js: str, timeout: int, arg=None) -> None:
    """Wait until ``js`` (a function of ``arg``) returns the same non-null, non-false value for STILL_MS."""
    page.evaluate("() => { window.__still = null; }")
    page.wait_for_function(
        """([js, arg, ms]) => {
          const now = JSON.stringify((0, eval)(js)(arg));
          const t = performance.now(), s = window.__still;
          if (now === undefined || now === 'null' || now === 'false') { window.__still = null; return false; }
          if (!s || s.value !== now) { window.__still = {value: now, since: t}; return false; }
          return t - s.since >= ms;
        }""",
        arg=[js, arg, STILL_MS],
        polling=100,
        timeout=timeout,
    )


def wait_idle(page, timeout: int) -> None:
    """The script run is over and stays over: no "Running…" status, no stale element."""
    wait_still(page, IDLE_JS, timeout)


def wait_images_settled(page, timeout: int) -> None:
    """Every image of the page has loaded or failed (so any error handler it carries has had its turn)."""
    page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=timeout)


def seed_class(url: str, students: int, name: str = "Monday 9:00"):
    """A class in the store at ``url`` whose students have each answered every question once (a third right) and
    reached a chapter (every other one the end): the store and the class (its id and secret)."""
    store = Store.open(url)
    cls = store.create_class(name)
    for i in range(students):
        st = store.join(cls.id, f"student {i}")
        store.answer_many(
            Answer(f"{st.id}:{q}:1", cls.id, st.id, q, f"option {(i + j) % 3}", 0, (i + j) % 3 == 0, "I like pizza.")
            for j, q in enumerate(QUESTIONS)
        )
        store.reach(cls.id, st.id, FINAL if i % 2 else min(i, FINAL), "I like pizza.")
    return store, cls


@contextmanager
def app_served(model_dir: Path, log: Path):
    """The app served on the model ``model_dir`` (``harness.browser.serve``, writing ``log``): its URL; once it
    stops, its log must hold no traceback."""
    with serve(ROOT / "app.py", log, {ENV_MODEL: str(model_dir)}) as srv:
        yield srv.url
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]
