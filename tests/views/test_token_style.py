"""One token style on every page: a word-initial subword is shown with the page's visible space ``␣`` (the chips,
the position table, the tree), never SentencePiece's raw ``▁``, in the beam's tables and picker too. Read on the
bundled model, whose French words start with ``▁``."""

from __future__ import annotations

import pytest

from model.io.checkpoint import default_model_dir
from model.lesson.learn import CHAPTER_KEYS
from tests.helpers import ok, open_app, open_panel, show_stage, specs

TEXT = "My sister plays the piano."

pytestmark = pytest.mark.skipif(
    not (default_model_dir() / "model.safetensors").is_file(), reason="the bundled model is not built"
)


def test_the_beam_tables_and_picker_show_tokens_as_the_chips_do(monkeypatch):
    at = open_app(default_model_dir(), monkeypatch, src=TEXT, strategy="beam", beam="3", max_len="12", step="4")
    open_panel(at, "nbest_open")
    ok(at)
    show_stage(at, "output")
    # the n-best candidates, the live hypotheses at this position, the finished ones so far
    tables = [d.value for d in at.table if "score(y)" in d.value.columns]
    assert len(tables) == 3
    for key, table in enumerate(tables):
        cells = [str(t) for t in table["tokens"]]
        assert all("▁" not in c for c in cells), (key, cells)
        assert not cells or any("␣" in c for c in cells), (key, cells)
    assert len(tables[0]) == 3 and len(tables[1])  # the candidates and the live hypotheses are there to read
    picker = list(at.selectbox(key="follow_pick").options)  # as the page labels them
    assert all("▁" not in p for p in picker) and any("␣" in p for p in picker), picker


def test_the_lesson_s_beam_tree_shows_tokens_as_the_chips_do(monkeypatch):
    at = open_app(default_model_dir(), monkeypatch, chapter=str(CHAPTER_KEYS.index("decoding") + 1), src=TEXT)
    (tree,) = [s for s in specs(at) if s["layout"]["title"]["text"].startswith("Beam search")]
    texts = [str(x) for t in tree["data"] for x in (t.get("text") or []) + (t.get("hovertext") or [])]
    assert all("▁" not in x for x in texts), [x for x in texts if "▁" in x][:3]
    assert any("␣" in x for x in texts)
