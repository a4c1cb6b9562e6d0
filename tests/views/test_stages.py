"""A stage is one unit: one module and one line in the registry, and every page shows it. A throwaway stage (a
module-like object and one ``Stage`` line holding its functions) appears in Explore's stage selector and draws
there, in Compare's stage choice (or among the stages it leaves out, with its reason) and, named by a chapter that
teaches it, in that chapter's links on Learn."""

from __future__ import annotations

import html
import re
import sys
import types
from dataclasses import replace
from urllib.parse import parse_qs, urlparse

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from model.io.checkpoint import ENV_MODEL
from model.lesson.learn import CHAPTER_KEYS
from tests.helpers import APP, ok, open_app, show_stage, titles

LABEL = "Throwaway stage"
CHAPTER = "ffn"  # the lesson chapter the throwaway stage says teaches it


def throwaway_module() -> types.ModuleType:
    module = types.ModuleType("views.stages.throwaway")

    def render(ctx) -> None:
        st.markdown(f"Throwaway stage drawn at position {ctx.current}")

    def compared(trace, layer, head):
        from views.stages.context import RunMatrix, dimensions

        x = 2 * trace.arrays["dec.input"]
        return RunMatrix(x, dimensions(x), "dimension", "twice the input", True, f", layer {layer}")

    module.render, module.compared = render, compared
    return module


@pytest.fixture
def register():
    """``register(**declaration)``: the app's views imported afresh with one more registry line, the throwaway
    stage's, and its module beside the stages'; the app's own modules are put back afterwards."""
    saved = {k: m for k, m in sys.modules.items() if k == "views" or k.startswith("views.")}

    def add(taught_by: str | None = None, not_compared: str = ""):
        for k in [k for k in sys.modules if k == "views" or k.startswith("views.")]:
            del sys.modules[k]
        import views.stages as stages  # afresh: every page reads the registry from here

        module = throwaway_module()
        compared = None if not_compared else module.compared
        stage = stages.Stage("throwaway", LABEL, module.render, compared=compared, not_compared=not_compared)
        stages.REGISTRY = (*stages.REGISTRY, stage)
        if taught_by is not None:  # the chapter ``taught_by`` names it among the stages it teaches
            import views.chapters as chapters

            i = CHAPTER_KEYS.index(taught_by)
            c = chapters.CHAPTERS[i]
            chapters.CHAPTERS = (
                *chapters.CHAPTERS[:i],
                replace(c, stages=(*c.stages, "throwaway")),
                *chapters.CHAPTERS[i + 1 :],
            )
        return stages

    yield add
    for k in [k for k in sys.modules if k == "views" or k.startswith("views.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def open_on(model_dir, monkeypatch, **query) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"max_len": "6", **query})
    at.run()
    ok(at)
    return at


def test_a_throwaway_stage_appears_in_explore_compare_and_learn(register, tiny_model_dir, monkeypatch):
    register(taught_by=CHAPTER)

    at = open_app(tiny_model_dir, monkeypatch)  # Explore: the selector offers it, and choosing it draws it
    assert LABEL in at.segmented_control(key="stage").options
    show_stage(at, "throwaway")
    assert any(m.value == "Throwaway stage drawn at position 0" for m in at.markdown)
    show_stage(at, "all")  # a decoder stage: All stages draws it too, after the others
    assert any(m.value == "Throwaway stage drawn at position 0" for m in at.markdown)

    A, B = "The dog runs in the park.", "The dogs run in the park."
    at = open_on(tiny_model_dir, monkeypatch, page="Compare", src=A, srcb=B, stage="throwaway", layer="1")
    assert LABEL in at.selectbox(key="stage").options and at.selectbox(key="stage").value == "throwaway"
    shown = [html.unescape(t) for t in titles(at)]
    assert {f"A: {LABEL}, layer 1", f"B: {LABEL}, layer 1", f"A − B: {LABEL}, layer 1"} <= set(shown)
    left_out = next(c.value for c in at.caption if c.value.startswith("Not compared here")).replace("\\", "")
    assert LABEL not in left_out and "Output & beam" in left_out

    k = CHAPTER_KEYS.index(CHAPTER) + 1  # Learn: the chapter that teaches it links to it in Explore
    at = open_on(tiny_model_dir, monkeypatch, chapter=str(k))
    links = next(m.value for m in at.markdown if m.value.startswith("**See it in Explore**"))
    urls = dict(re.findall(r"\[([^\]]+)\]\(([^)]+)\)", links))
    assert list(urls)[-1] == LABEL
    url = urlparse(urls[LABEL])
    assert url.path == "explore" and parse_qs(url.query)["stage"] == ["throwaway"]


def test_a_stage_that_cannot_be_compared_says_so_and_compare_names_it(register, tiny_model_dir, monkeypatch):
    register(not_compared="it is only a test")
    A, B = "The dog runs in the park.", "The dogs run in the park."
    at = open_on(tiny_model_dir, monkeypatch, page="Compare", src=A, srcb=B)
    assert LABEL not in at.selectbox(key="stage").options
    left_out = next(c.value for c in at.caption if c.value.startswith("Not compared here")).replace("\\", "")
    assert f"{LABEL} (it is only a test)" in left_out


def test_a_stage_declares_compare_s_matrix_or_why_there_is_none():
    from views.stages import Stage

    module = throwaway_module()
    with pytest.raises(ValueError, match="compared"):
        Stage("x", "X", module.render)
    with pytest.raises(ValueError, match="compared"):
        Stage("x", "X", module.render, compared=module.compared, not_compared="both")


def test_the_top_ten_bars_and_the_hypothesis_tree_have_text_alternatives(tiny_model_dir, monkeypatch):
    """As the heatmaps do: the bars read largest first with the values they show, the chosen token's among them;
    the tree reads its points by kind."""
    from views.plot import payload

    at = open_app(tiny_model_dir, monkeypatch, src="I like pizza.", strategy="beam", beam="3", stage="output", step="2")
    ok(at)
    sent = [payload(c.proto.bytes) for c in at.get("bidi_component")]
    alts = {
        html.unescape(p["figure"]["layout"]["title"]["text"]).split(" at ")[0]: p.get("alt")
        for p in sent
        if "figure" in p
    }
    top = next(a for t, a in alts.items() if t.startswith("Top 10 next tokens"))
    tree = next(a for t, a in alts.items() if t.startswith("Hypothesis tree"))
    assert top and re.search(r": 10 bars, largest first: ‘.+?’ [\d.]+%", top), top
    line = next(m.value for m in at.markdown if m.value.startswith("**Position 2**"))
    p = re.search(r"p \\= ([\d\\.]+)", line)[1].replace("\\", "")
    assert f"{float(p):.1%}" in top, (p, top)  # the number the position line shows, in the bars' words
    assert tree and re.search(r"\d+ kept.* points\.$", tree), tree


def test_a_stage_s_functions_are_references_not_names():
    """The registry holds each stage's functions themselves (mypy and a reader follow them), never their names to
    look up at run time."""
    from pathlib import Path

    from views import stages

    source = Path(stages.__file__).read_text()
    assert "import_module" not in source and "getattr(" not in source
    for s in stages.REGISTRY:
        assert all(callable(f) for f in (s.render, s.header, s.compared) if f is not None), s.id
