"""Compare: a preset fills a pair and its contrast word; typing a new pair takes the preset's contrast away (it
asked about the preset's pair), while a contrast the user typed stays."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from model.io.checkpoint import ENV_MODEL
from tests.helpers import APP, ok, qp
from views.compare import PRESETS

A = "The cat is sleeping on the sofa."
B = "The man is sleeping on the sofa."


def open_compare(model_dir, monkeypatch) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"page": "Compare", "max_len": "6", "src": A})
    at.run()
    ok(at)
    return at


def asked(at: AppTest) -> bool:
    """Whether the page asks "why X rather than Y" (the contrast's figures or notes)."""
    return any(
        "rather than" in str(getattr(e, "value", "")) for e in (*at.markdown, *at.caption, *at.header, *at.subheader)
    )


def test_a_new_pair_resets_the_preset_s_contrast(tiny_model_dir, monkeypatch):
    at = open_compare(tiny_model_dir, monkeypatch)
    at.button(key="preset_0").click().run()
    ok(at)
    assert at.text_input(key="contrast").value == PRESETS[0][3] and qp(at, "contrast") == PRESETS[0][3]
    assert asked(at)
    at.text_area(key="source").set_value(A).run()
    at.text_area(key="source_b").set_value(B).run()
    ok(at)
    assert at.text_input(key="contrast").value == "" and qp(at, "contrast") is None
    assert not asked(at)


def test_a_typed_contrast_stays_with_a_new_pair(tiny_model_dir, monkeypatch):
    at = open_compare(tiny_model_dir, monkeypatch)
    at.button(key="preset_0").click().run()
    at.text_input(key="contrast").set_value("la").run()
    at.text_area(key="source_b").set_value(B).run()
    ok(at)
    assert at.text_input(key="contrast").value == "la" and qp(at, "contrast") == "la"
