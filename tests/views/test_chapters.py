"""A chapter is one unit like a stage: declared once in ``views.chapters`` (its writer, its stages, its figure from a
stage's own builder, what it adds below). A throwaway chapter (a writer and one registry line) appears on Learn in
its place: numbered, in the progress bar and the navigation, its figure drawn by the stage's builder, its links to
the stage it teaches, its question checked; and the page chooses no chapter by its key."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from model.io.checkpoint import ENV_MODEL
from model.lesson import learn as lesson
from model.lesson.learn import CHAPTER_KEYS, Chapter, Question
from tests.helpers import APP, ok, specs, title

ROOT = Path(__file__).resolve().parents[2]
TITLE = "A throwaway chapter: the feed-forward units again"


def throwaway_writer(r: lesson.Run) -> Chapter:
    """A chapter written from the lesson's run: its question's answer read from the trace."""
    zeros = int((r.arrays.ffn(0, "hidden")[r.f] == 0).sum())
    options = tuple(dict.fromkeys((str(zeros), str(zeros + 1), str(zeros + 2))))
    return Chapter(
        "throwaway",
        TITLE,
        "A chapter added by a test.",
        r"h = \max(0, xW_1 + b_1)",
        f"Row {r.f} has {zeros} zeros.",
        "The FFN's hidden units.",
        Question("throwaway", f"How many hidden units of row {r.f} are exactly 0?", options, 0, "the row", "zeros"),
    )


@pytest.fixture
def registered():
    """The app's views imported afresh with one more chapter, the throwaway one, before the worked example (which
    stays last); the app's own modules are put back afterwards. Returns the throwaway chapter's number."""
    saved = {k: m for k, m in sys.modules.items() if k == "views" or k.startswith("views.")}
    for k in [k for k in sys.modules if k == "views" or k.startswith("views.")]:
        del sys.modules[k]
    import views.chapters as chapters
    from views.stages import ffn

    unit = chapters.Chapter(throwaway_writer, chapters.live(lambda r: ffn.hidden_figure(r.ctx)), ("ffn",))
    chapters.CHAPTERS = (*chapters.CHAPTERS[:-1], unit, chapters.CHAPTERS[-1])
    yield len(chapters.CHAPTERS) - 1
    for k in [k for k in sys.modules if k == "views" or k.startswith("views.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def test_a_throwaway_chapter_appears_on_learn(registered, tiny_model_dir, monkeypatch):
    k = registered
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"chapter": str(k - 1), "src": "I like pizza.", "max_len": "6"})
    at.run()
    ok(at)
    assert at.button(key="learn_next").label == f"Next: {TITLE} ▶"  # the chapter before leads to it
    at.button(key="learn_next").click().run()
    ok(at)
    assert at.header[0].value == f"{k}. {TITLE}"
    assert f"Chapter {k} of {k + 1}" in at.get("progress")[0].proto.text  # the worked example still follows
    from views.plot import payload

    sent = [p for p in map(payload, (c.proto.bytes for c in at.get("bidi_component"))) if p.get("figure")]
    (shown,) = [p["figure"] for p in sent if p["id"].endswith(":learn_fig_throwaway")]
    assert title(shown).startswith("FFN hidden activations"), title(shown)  # the FFN stage's own figure
    assert [title(s) for s in specs(at)] == [title(shown)]
    links = next(m.value for m in at.markdown if m.value.startswith("**See it in Explore**"))
    assert "[FFN → Add & Norm 3](explore?" in links.replace("\\", "") and "stage=ffn" in links  # its stage
    q = next(r for r in at.radio if r.key and r.key.startswith("learn_q_throwaway_"))
    q.set_value(q.options[0]).run()
    next(b for b in at.button if b.key and b.key.startswith("learn_check_throwaway_")).click().run()
    ok(at)
    assert at.success and at.success[0].value.startswith("Right")
    assert any(m.value.startswith("**What to notice.** Row ") for m in at.markdown)
    at.button(key="learn_next").click().run()  # the worked example, last as before
    ok(at)
    assert at.header[0].value.startswith(f"{k + 1}. Check it by hand")


def test_the_registry_writes_the_chapters_the_class_knows_in_their_order():
    """The class stores answers by chapter key (``CHAPTER_KEYS``): the registry writes those chapters, in order,
    and each chapter's figure is drawn through the registry, never chosen by the chapter's key."""
    from views import chapters

    assert tuple(c.write.__name__ for c in chapters.CHAPTERS) == tuple(f"{k}_chapter" for k in CHAPTER_KEYS)
    assert lesson.CHAPTERS == tuple(c.write for c in chapters.CHAPTERS)
    for name in ("views/learn.py", "views/chapters.py"):
        text = (ROOT / name).read_text()
        assert "key ==" not in text and "key in (" not in text, name


def test_every_chapter_with_stages_names_stages_that_exist():
    from views import chapters, stages

    ids = {s.id for s in stages.REGISTRY}
    assert all(set(c.stages) <= ids for c in chapters.CHAPTERS)
    assert {s for c in chapters.CHAPTERS for s in c.stages} >= {"inputs", "qkv", "scores", "self", "cross", "ffn"}
