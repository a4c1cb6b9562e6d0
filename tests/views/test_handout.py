"""The handout (``views.handout``): the Export panel offers it, and it holds every position of the followed line with
exactly the figures (and text alternatives) the step view draws there."""

from __future__ import annotations

import html
import json
import re

import pytest

from harness.handout import handout_of
from tests.helpers import open_app, open_panel, specs
from views.export import HANDOUT_LABEL
from views.plot import payload

SRC = "I like pizza."


def sections(page: str) -> tuple[list[tuple[str, list[str], list[str]]], dict]:
    """Each position's heading, figure refs and captions, and the figure table."""
    table = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>', page, re.S).group(1))
    out = []
    for body in page.split("<section")[1:]:
        heading = re.search(r"<h2[^>]*>(.*?)</h2>", body).group(1)
        refs = re.findall(r'data-ref="([0-9a-f]+)"', body)
        out.append((heading, refs, re.findall(r"<figcaption>(.*?)</figcaption>", body)))
    return out, table


def test_the_export_panel_offers_the_handout(tiny_model_dir, monkeypatch):
    at = open_panel(open_app(tiny_model_dir, monkeypatch, src=SRC, stage="all"), "export_open")
    assert HANDOUT_LABEL in [b.proto.label for b in at.get("download_button")]


@pytest.mark.parametrize("stage", ["all", "self"])
def test_every_position_holds_the_figures_the_step_view_draws_there(tiny_model_dir, monkeypatch, stage):
    got, table = sections(handout_of(tiny_model_dir, source=SRC, max_len=4, stage=stage).decode())
    n = 4  # the tiny model never stops early: the line is cut at max_len
    assert len(got) == n
    for t in (0, n - 1):
        heading, refs, captions = got[t]
        assert heading.startswith(f"Position {t}: reads ")
        at = open_app(tiny_model_dir, monkeypatch, src=SRC, max_len="4", stage=stage, step=str(t))
        drawn = specs(at)
        assert len(drawn) > (10 if stage == "all" else 0) and [table[r] for r in refs] == drawn
        alts = [p.get("alt") for p in map(payload, (c.proto.bytes for c in at.get("bidi_component"))) if "figure" in p]
        for caption, alt, fig in zip(captions, alts, drawn, strict=True):  # the heatmap's line, else the title
            title = html.unescape(fig["layout"]["title"]["text"].replace("<br>", " ")).strip()
            assert html.unescape(caption) == (alt or title), (caption, alt, title)


def test_the_end_of_the_lesson_offers_its_sentence_as_a_handout(tiny_model_dir, monkeypatch):
    from model.lesson.learn import CHAPTER_KEYS

    end = str(len(CHAPTER_KEYS) + 1)
    at = open_app(tiny_model_dir, monkeypatch, page="Learn", src=SRC, chapter=end)
    assert [b.proto.label for b in at.get("download_button") if "handout" in b.proto.label.lower()]
    at = open_app(tiny_model_dir, monkeypatch, page="Learn", src=SRC, chapter="3")  # only at the end
    assert not [b.proto.label for b in at.get("download_button") if "handout" in b.proto.label.lower()]


def test_the_handout_names_the_tokens_the_user_forced(tiny_model_dir):
    """The page said "1 token forced by you" while the handout printed the forced line as greedy decoding: printed
    notes would show the forced token as the model's own choice."""
    from model.io.checkpoint import load_model_dir

    lm = load_model_dir(tiny_model_dir)
    plain = handout_of(tiny_model_dir, source=SRC, max_len=4, stage="self").decode()
    token = lm.tokenizer.encode("le")[0]
    page = handout_of(
        tiny_model_dir, source=SRC, max_len=4, stage="self", forced=(token,), user_forced=frozenset({0})
    ).decode()
    assert "forced by you" not in plain
    said = re.search(r"forced by you: ([^<]*)", html.unescape(page))
    assert said and said.group(1).startswith("‘␣le’ at position 0"), said  # as the page shows tokens
