"""The app on every family: an imported BART, mBART, M2M100, T5 and gated T5 model opens on Explore, steps, and
draws All stages (teacher forcing and the step view) without an error; the stages say what the model does."""

from __future__ import annotations

import pytest

from model.io.family import import_model
from tests.helpers import headings, ok, open_app, show_stage
from tests.model.family_models import FAMILIES, family_tokenizer, save_family

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture(scope="module", params=FAMILIES)
def family_dir(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    hf_dir = save_family(request.param, root / "hf", family_tokenizer())
    return request.param, import_model(hf_dir, root / "ours")


@pytest.mark.parametrize("tab", ["step", "tf"])  # the step view (KV-cached records) and teacher forcing
def test_all_stages_draw_on_every_family(family_dir, monkeypatch, tab):
    family, path = family_dir
    at = open_app(path, monkeypatch, src="Hello world.", tab=tab, step="2")
    at = show_stage(at, "all")
    ok(at)
    shown = " | ".join(headings(at))
    text = " ".join(str(m.value) for m in at.markdown) + " ".join(str(c.value) for c in at.caption)
    if family.startswith("t5"):
        assert "Token embeddings" in shown and "positional encoding" not in shown.lower()
        assert "a learned bias per relative distance" in text  # the inputs stage says where the positions went
    if family != "bart":  # the pre-norm models say Norm → sublayer → add
        assert "Norm → " in shown, shown
    else:
        assert "Add & Norm 1" in shown, shown
