"""The app on every family: an imported BART, mBART, M2M100, T5 and gated T5 model opens on Explore, steps, and
draws All stages (teacher forcing and the step view) without an error; the stages say what the model does."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from model.core import keys
from model.decode.decoding import DecodeOptions, decode
from model.decode.steps import follow_line
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import load_model_dir
from model.io.family import import_model
from tests.helpers import headings, ok, open_app, show_stage
from tests.model.family_models import EOS, FAMILIES, PAD, family_tokenizer, save_family
from tests.model.test_marian import neutral_generation
from views import export
from views.state import prepare_source

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
    selector = " | ".join(at.segmented_control(key="stage").options)
    if family != "bart":  # the pre-norm models say Norm → sublayer → add, in the headings and the stage selector
        assert "Norm → " in shown and "Add & Norm" not in shown, shown
        assert "Norm 3 → FFN → add" in selector and "Add & Norm" not in selector, selector
    else:
        assert "Add & Norm 1" in shown and "FFN → Add & Norm 3" in selector, (shown, selector)
    # the lens on every family, read through the final norm where the model has one, and said so
    at = show_stage(at, "lens")
    lens = " ".join(str(m.value) for m in at.markdown) + " ".join(str(i.value) for i in at.info)
    assert "Logit lens — what each layer would predict" in headings(at) and "not shown" not in lens, lens
    assert ("each layer's output first goes through the final norm" in lens) == (family != "bart"), lens


@pytest.mark.parametrize("family, codes", [("mbart", ("en_XX", "fr_XX")), ("m2m_100", ("eng_Latn", "fra_Latn"))])
def test_the_app_translates_with_the_language_codes_as_generate_does(tmp_path, monkeypatch, family, codes):
    """mBART-50 and NLLB: the page reads the source's language code before the sentence, as transformers does, and
    forces the target's; its source and its French are generate()'s, greedy and beam 4."""
    from transformers import AutoModelForSeq2SeqLM

    tok = family_tokenizer()
    hf_dir = save_family(family, tmp_path / "hf", tok)
    (hf_dir / "tokenizer_config.json").write_text(json.dumps({"src_lang": codes[0], "tgt_lang": codes[1]}))
    path = import_model(hf_dir, tmp_path / "ours")
    hf = AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval()
    src_code, tgt_code = (tok.token_to_id(c) for c in codes)
    source, n_new = "The man is on the beach tomorrow.", 8
    src = [src_code, *tok.encode(source), EOS]
    lm = load_model_dir(path)
    assert list(prepare_source(source, tok, lm.cfg).ids) == src
    res = decode(lm.model, src, DecodeOptions(max_len=n_new))  # the export's trace reads it once
    with np.load(io.BytesIO(export.trace_bytes(lm, res))) as z:
        assert list(z[keys.TOKENS_SRC]) == tok.tokens(src)
    for beam in (1, 4):
        at = open_app(path, monkeypatch, src=source, strategy="beam" if beam > 1 else "greedy", beam=str(beam))
        gen = neutral_generation(PAD, EOS, start=EOS, max_new_tokens=n_new, forced_bos_token_id=tgt_code)
        if beam > 1:
            gen.num_beams, gen.early_stopping = beam, False
        theirs = hf.generate(torch.tensor([src]), generation_config=gen)[0].tolist()
        assert [t.value for t in at.text][1] == (tok.decode(theirs) or "(empty)"), beam
        first = ":gray-badge[" + codes[0].replace("_", "\\_") + "]"  # the first source token: the code
        assert any(str(m.value).startswith(f"**Source tokens** {first}") for m in at.markdown)


def test_the_exported_scores_are_the_traces(family_dir):
    """The positions download recomputes the future cells of the self-attention scores that a KV-cached step never
    computed: as the model does (T5: unscaled, plus its relative position bias), equal to a teacher-forced pass."""
    _, path = family_dir
    lm = load_model_dir(path)
    cfg, tok = lm.cfg, lm.tokenizer
    src = [*tok.encode("The man is on the beach tomorrow."), cfg.eos_id]
    res = decode(lm.model, src, DecodeOptions(strategy="beam", beam=3, max_len=6, record=True))
    line = follow_line(res, cfg.eos_id)
    step = line.end
    reads = tok.tokens(line.inputs[: step + 1])
    with np.load(io.BytesIO(export.record_bytes(lm, res, line.rows[: step + 1], step, reads, tok.tokens(src)))) as z:
        exported = {k: z[k] for k in z.files}
    tr = teacher_forced_trace(lm.model, tok, src[:-1], [i for i in line.ids if i != cfg.eos_id][: step + 1])
    for layer in range(cfg.n_decoder_layers):
        for name in ("scores", "weights"):
            k = keys.dec(layer, "self", name)
            np.testing.assert_allclose(exported[k], tr.arrays[k][:, : step + 1, : step + 1], atol=1e-4, err_msg=k)


def test_learn_says_when_the_model_is_not_the_one_it_teaches(family_dir, monkeypatch, tiny_model_dir):
    family, path = family_dir
    at = open_app(path, monkeypatch, page="Learn")
    said = " ".join(str(i.value) for i in at.info)
    assert "the loaded model" in said and "differs" in said, said
    if family != "bart":  # pre-norm: the Add & Norm chapter teaches the paper's post-norm
        assert "pre-norm" in said and "Add & Norm: keep the input" in said, said
    if family.startswith("t5"):
        assert "no positional encoding" in said and "Embeddings and positional encoding" in said, said
    assert load_model_dir(tiny_model_dir).cfg.paper_differences() == []  # the paper's model: nothing said


def test_about_and_the_model_card_name_the_family_and_its_settings(family_dir, monkeypatch):
    """The model card says which family the model was imported from and its settings (``ModelConfig.family``); the
    About page names those settings beside the model's size, shows the card's text (its title line dropped) and
    holds every setting in its configuration table."""
    family, path = family_dir
    lm = load_model_dir(path)
    cfg = lm.cfg
    label = {"bart": "BART", "mbart": "mBART", "m2m_100": "M2M100", "t5": "T5", "t5_gated": "T5"}[family]
    named = f"Family: {label}: {cfg.family}."
    assert f"(imported from {label})" in lm.card and named in lm.card
    at = open_app(path, monkeypatch, page="About")
    said = " ".join(str(m.value) for m in at.markdown)
    assert f"parameters** ({cfg.family})" in said and named in said, said
    (settings,) = [d.value["value"] for d in at.dataframe if "norm_position" in d.value.index]
    for name in ("norm_position", "norm_kind", "positions", "gated_ffn", "scale_attention", "output_scale"):
        assert settings[name] == str(getattr(cfg, name)), name


def test_the_lens_chapter_reads_every_family_as_its_lens_does(family_dir, monkeypatch):
    """Learn's lens chapter on every family asks after which layer the label first ranks top and draws its figure;
    on a pre-norm model its text and equation say the lens reads each layer through the final norm, as
    ``explain.logit_lens`` does (held to transformers in tests/model/test_family.py)."""
    from model.lesson.learn import CHAPTER_KEYS

    family, path = family_dir
    at = open_app(path, monkeypatch, page="Learn", chapter=str(CHAPTER_KEYS.index("lens") + 1))
    assert at.header[0].value.startswith(f"{CHAPTER_KEYS.index('lens') + 1}. "), at.header[0].value
    pre = load_model_dir(path).cfg.norm_position == "pre"
    text = " ".join(str(m.value) for m in at.markdown).replace("\\", "")
    assert ("through the final norm and the output head" in text) == pre, text
    assert ("operatorname{Norm}" in " ".join(str(x.value) for x in at.latex)) == pre
    q = next(r for r in at.radio if r.key.startswith("learn_q_lens_"))
    assert "first become the top prediction" in q.label and "after layer 0" in q.options, (q.label, q.options)
    assert any("The figure in words" in c.value for c in at.caption)
