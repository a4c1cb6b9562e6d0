"""The About page (views/about.py) on its own: credits, limits and how to load another checkpoint, with a model,
with a load error instead, and with the bundled model's card; never an issue number or a word about GPUs."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from model.io.checkpoint import CARD, default_model_dir
from views.about import card_sections

NOT_FOR_USERS = re.compile(r"issue|#\s*\d|gpu", re.I)


def about_script(model_dir, error):
    from model.io.checkpoint import load_model_dir
    from views.about import render

    render(load_model_dir(model_dir) if model_dir else None, error)


def run_about(model_dir, error=None) -> AppTest:
    at = AppTest.from_function(about_script, args=(model_dir and str(model_dir), error), default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def page_text(at: AppTest) -> str:
    """Every text the page shows, markdown escapes undone."""
    kinds = ("title", "subheader", "markdown", "caption", "code", "text", "error", "info", "warning")
    parts = [str(e.value) for kind in kinds for e in getattr(at, kind)] + [e.label for e in at.expander]
    return re.sub(r"\\([<>])", r"\1", "\n".join(parts))


def assert_for_users(text: str, max_tokens: str) -> None:
    for credit in (
        "Tatoeba",
        "CC-BY 2.0 (France)",
        "www.manythings.org/anki",
        "tatoeba.org",
        "Multi30k",
        "research use",
        "Flickr30k",
    ):
        assert credit in text, credit
    for limit in ("Names and rare words", "byte by byte", "image captions", f"Text is cut at {max_tokens}"):
        assert limit in text, limit
    for command in (
        "python -m model import-marian HF_DIR",
        "every directory under assets/models/",
        "DECODER_LENS_MODEL=assets/models/opus-mt-en-fr streamlit run app.py",
    ):
        assert command in text, command
    for guide in ("Learn", "Explore", "worked", "Stage selector", "Teacher forcing", "beam search", "What if?", "PNG"):
        assert guide in text, guide
    assert not NOT_FOR_USERS.search(text), NOT_FOR_USERS.search(text)
    assert not re.search(r"\bseeds\b|seed's|seeds'", text)  # the sampling seed is the only seed users see
    assert "previous version" not in text and "--substitute" not in text  # the card's changelog and recipe stay out


def test_about_with_a_model(tiny_model_dir):
    at = run_about(tiny_model_dir)
    text = page_text(at)
    assert_for_users(text, "63 tokens")
    assert "2 encoder and 2 decoder layers, d_model 32, 4 attention heads of 8 dimensions" in text
    assert tiny_model_dir.name in [c.value for c in at.code]  # the directory's name, in a code block
    assert str(tiny_model_dir.parent) not in text  # and no path of the server
    assert any("Random weights, for tests only." in m.value for m in at.markdown)  # the model card's introduction
    table = at.dataframe[0].value
    assert table.loc["d_model", "value"] == "32" and table.loc["n_decoder_layers", "value"] == "2"
    assert not at.error


def test_about_without_a_model():
    error = "Cannot load the model: /tmp/<b>x</b>_*m*/model.safetensors is missing"
    at = run_about(None, error)
    text = page_text(at)
    assert_for_users(text, "the model's maximum length (127 tokens for the bundled model)")
    assert at.error and [t.value for t in at.text] == [error]  # shown verbatim as plain text
    assert not any("<b>" in m.value for m in at.markdown)
    assert not at.dataframe


@pytest.mark.skipif(not (default_model_dir() / CARD).is_file(), reason="the bundled model is not built")
def test_about_with_the_bundled_model():
    at = run_about(default_model_dir())
    text = page_text(at)
    assert_for_users(text, "127 tokens")
    card = (default_model_dir() / CARD).read_text()
    intro, sections = card_sections(card)
    (scores,) = [e for e in at.expander if e.label == "Scores (from the model card)"]
    table = scores.dataframe[0].value  # the card's first table, in a student's columns
    assert list(table.columns) == ["test set", "decoding", "sentences", "BLEU", "chrF"]
    assert "57.96" in table["BLEU"].tolist() and "52.85" in table["BLEU"].tolist()
    assert "README" in scores.markdown[-1].value and at.get("download_button")  # the rest, for developers
    assert any(m.value == intro for m in at.markdown)
    assert str(default_model_dir().parent) not in text
    for developer in ("benchmarks/", "threads", "idle machine", "nrefs:", "Signatures", "sacrebleu"):
        assert developer not in text, developer
    assert "model card below" not in text and 'model card above (under "The model")' in text
    # the two numbers a student compares, explained side by side
    assert "at most 127 tokens per sentence: the configuration's max_len, 128, is the number of positions" in text


def test_card_sections():
    intro, sections = card_sections("# Title\n\nFirst words.\n\n## Scores\n| a |\n\n## Limits\n- b\n")
    assert intro == "First words." and sections == {"Scores": "| a |", "Limits": "- b"}


def test_about_names_every_page(tiny_model_dir):
    text = page_text(run_about(tiny_model_dir))
    for name in ("Learn", "Explore", "Compare", "Corpus", "Class"):
        assert f"**{name}**" in text or f"{name}:" in text or f"**{name}" in text, name
