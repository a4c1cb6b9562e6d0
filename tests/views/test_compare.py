"""The Compare page, driven headlessly with AppTest against the tiny model: two runs side by side, the patching
maps, the contrast, the URL and bad input as one sentence."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness import audit
from model.decode.decoding import DecodeOptions, decode
from model.interpret.contrast import contrast_token
from model.interpret.patching import activation_patching
from model.io.checkpoint import ENV_MODEL, load_model_dir, save_model_dir
from model.testing import make_model, make_tokenizer
from tests.helpers import shown_page
from views.state import Limits, View, clamp_view, from_query, to_query

APP = str(Path(__file__).resolve().parents[2] / "views" / "main.py")
A = "The cat is sleeping on the sofa."
B = "The man is sleeping on the sofa."  # the same 16 tokens for the tiny tokenizer


def open_compare(model_dir, monkeypatch, **query) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"page": "Compare", "max_len": "6", **query})
    at.run()
    ok(at)
    return at


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def figures(at: AppTest) -> dict[str, dict]:
    """The page's figures by title."""
    return {f["layout"]["title"]["text"]: f for f in audit.figures(at)}  # each checked against Plotly's schema


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_compare_page_shows_both_runs_the_maps_and_the_contrast(tiny_model_dir, monkeypatch):
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, contrast="la", step="2", site="enc", stage="cross")
    lm = load_model_dir(tiny_model_dir)
    tok, eos = lm.tokenizer, lm.cfg.eos_id
    src_a, src_b = tok.encode(A) + [eos], tok.encode(B) + [eos]
    out_a = list(decode(lm.model, src_a, DecodeOptions(max_len=6)).ids)
    y = contrast_token(tok, "la").id
    want = activation_patching(lm.model, src_a, out_a, src_b, position=2, contrast_id=y)
    figs = figures(at)
    x = tok.id_to_token(out_a[2]).replace("<", "&lt;").replace(">", "&gt;").replace("▁", "␣")
    assert f"p({x}) with one encoder output restored" in figs
    assert f"logit {x} − logit ␣la with one encoder output restored" in figs
    stage = html.escape("Cross-attention → Add & Norm 2, layer 0, mean of heads", quote=False)
    assert {f"A: {stage}", f"B: {stage}", f"A − B: {stage}"} <= set(figs)
    text = markdown(at)
    assert f"Clean run (A): **{want.prob.clean:.3f}**" in text
    assert f"corrupted run (source B): **{want.prob.corrupted:.3f}**. Each cell" in text
    assert f"= {want.diff.clean:+.3f}**" in text
    table = next(d.value for d in at.dataframe if "A chooses" in d.value.columns)
    assert len(table) == len(out_a)
    qp = at.query_params
    assert (
        shown_page(at) == "Compare"
        and "page" not in qp
        and qp["srcb"] == B
        and qp["contrast"] == "la"
        and qp["site"] == "enc"
    )
    assert qp["step"] == "2"
    # the JSON download holds the same maps (strict JSON)
    from model.core.jsonio import dumps
    from model.interpret.patching import Patcher, report

    p = Patcher(lm.model, src_a, out_a, src_b)
    rep = json.loads(dumps(report(tok, p, p.map(2, y))))
    np.testing.assert_allclose(rep["prob.enc"], want.prob.enc, atol=1e-6)
    assert len(at.get("download_button")) == 3
    assert not at.warning


def test_bad_input_is_one_sentence(tiny_model_dir, monkeypatch):
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb="The cat is standing on the sofa.")
    (w,) = at.warning
    assert "16 and 15 tokens" in w.value and "noise" in w.value and not at.get("download_button")
    at.toggle(key="noise").set_value(True).run()
    ok(at)
    assert not at.warning and len(at.get("download_button")) == 3
    assert any("Gaussian noise" in m.value for m in at.markdown)
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=A)
    assert [w.value for w in at.warning] == [
        "A and B are the same sentence: there is nothing to compare. Change one word of B."
    ]
    lm = load_model_dir(tiny_model_dir)
    first = lm.tokenizer.id_to_token(decode(lm.model, lm.tokenizer.encode(A) + [2], DecodeOptions(max_len=6)).ids[0])
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, contrast=first.replace("▁", "␣"), step="0")
    assert len(at.warning) == 1 and "nothing to compare" in at.warning[0].value
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, contrast="chienne")
    assert any("splits" in c.value and "the first" in c.value for c in at.caption)
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, site="nowhere")
    assert any("Unknown patching map" in w.value for w in at.warning)
    at = open_compare(tiny_model_dir, monkeypatch, src="")
    assert any("sentence A" in i.value for i in at.info)


def test_presets_fill_both_sentences_and_a_contrast(tiny_model_dir, monkeypatch):
    from views.compare import PRESETS

    at = open_compare(tiny_model_dir, monkeypatch, src=A)
    assert any("Type sentence B" in i.value for i in at.info)
    at.button(key="preset_1").click().run()
    ok(at)
    _, a, b, c = PRESETS[1]
    assert at.session_state["source"] == a and at.session_state["source_b"] == b
    assert at.query_params["srcb"] == b and at.query_params["contrast"] == c


def test_view_round_trips_the_compare_fields():
    limits = Limits(vocab_size=120, max_len=200, n_layers=2, n_heads=4)
    v = View(source=A, source_b=B, contrast="la", site="heads", noise=True)
    q = to_query(v)
    assert {q["srcb"], q["contrast"], q["site"], q["noise"]} == {B, "la", "heads", "1"}
    raw, msgs = from_query(q)
    back, more = clamp_view(raw, limits)
    assert back == v and not msgs and not more
    assert "srcb" not in to_query(View())


def test_the_what_if_panel_links_to_the_contrast(tiny_model_dir, monkeypatch):
    from urllib.parse import parse_qsl, urlsplit

    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"src": A, "max_len": "6", "step": "2"})
    at.run()
    ok(at)
    at.session_state["whatif_open"] = True  # the panel opened
    at.run()
    pick = at.selectbox(key="whatif_pick")
    (link,) = at.get("link_button")
    url = urlsplit(link.proto.url)
    query = dict(parse_qsl(url.query))
    assert url.path == "compare" and query["src"] == A  # the Compare page beside this one and query["step"] == "2"
    assert query["contrast"] and query["contrast"] in pick.value.replace("␣", "▁")
    at = open_compare(tiny_model_dir, monkeypatch, **{k: v for k, v in query.items() if k != "max_len"})
    assert any(m.value.startswith("Logit difference") for m in at.markdown)


def test_every_stage_draws_both_runs_and_their_difference(tiny_model_dir, monkeypatch):
    from views.compare import STAGES
    from views.state import DEFAULT_STAGE

    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, head="1", layer="1")
    for stage in STAGES:
        at.selectbox(key="stage").set_value(stage).run()
        ok(at)
        titles = [t for t in figures(at) if t.startswith(("A: ", "B: ", "A − B: "))]
        assert len(titles) == 3 and len({t.split(": ", 1)[1] for t in titles}) == 1, titles
        assert at.query_params.get("stage", DEFAULT_STAGE) == stage


def test_user_text_is_never_html(tiny_model_dir, monkeypatch):
    xss = "<img src=x onerror=alert(1)>"
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, contrast=xss, site="heads")
    ok(at)
    texts = [e.value for e in (*at.markdown, *at.caption, *at.header, *at.subheader, *at.warning)]
    assert any("\\<img" in t for t in texts)  # the contrast's note quotes it, escaped
    assert not any(re.search(r"(?<!\\)<img", t) for t in texts)
    assert not any("<img" in t for t in figures(at))


def test_the_next_position_s_map_is_computed_while_this_one_is_read(tiny_model_dir, monkeypatch):
    """After the map at position t is shown, position t + 1's is computed off the page's run: ▶ then finds it in
    the session's cache (no map computed in the page's run), and shows the same numbers as computing it there."""
    import threading

    import views.compare as compare
    import views.plot as plot

    plot.ahead(lambda: None).result(timeout=120)  # the one thread for work ahead: earlier tests' maps are done
    made, real = [], compare._patch
    monkeypatch.setattr(compare, "_patch", lambda *a: made.append((a, threading.current_thread().name)) or real(*a))
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, step="1", site="dec", noise="1")
    for job in list(at.session_state["patching_ahead"].values()):
        job.result(timeout=120)
    assert [(a[4], name.startswith("ahead")) for a, name in made] == [(1, False), (2, True)]
    at.button(key="next").click().run()
    ok(at)
    assert "at position 2 (" in markdown(at)
    assert [a[4] for a, name in made if not name.startswith("ahead")] == [1]  # 2 came from the cache
    shown = re.search(r"Clean run \(A\): \*\*([\d.]+)\*\*; corrupted run .*?\*\*([\d.]+)\*\*", markdown(at))
    _, r = real(*made[1][0])  # position 2's map computed here, in the test's own thread
    assert shown.groups() == (f"{r.prob.clean:.3f}", f"{r.prob.corrupted:.3f}")


def test_the_measured_position_steps_with_the_step_buttons(tiny_model_dir, monkeypatch):
    """The Compare page steps the measured position with the step view's buttons and slider."""
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=B, step="1", site="dec")
    assert "at position 1 (" in markdown(at)
    at.button(key="next").click().run()
    assert not at.exception and at.session_state["step"] == 2 and "at position 2 (" in markdown(at)
    assert at.query_params["step"] == "2"
    at.button(key="first").click().run()
    assert at.session_state["step"] == 0 and "at position 0 (" in markdown(at)
    at.button(key="last").click().run()
    assert at.session_state["step"] == at.slider(key="step").max > 2


@pytest.fixture(scope="module")
def parting_model_dir(tmp_path_factory):
    """The tiny model with another seed: its translations of A and B agree at first, then part (position 3)."""
    tok = make_tokenizer()
    return save_model_dir(make_model(tok.vocab_size, seed=9), tok, tmp_path_factory.mktemp("models") / "parting")


def test_a_pair_opens_where_its_outputs_part_on_cross_attention_with_each_run_s_rows_named(
    parting_model_dir, monkeypatch
):
    """Patching opens at the first position where the two translations differ (where they agree the map shows
    nothing), unless the link names one; the stage compared is cross-attention until the reader picks another; the
    A − B figure's rows name each run's tokens by their run."""
    lm = load_model_dir(parting_model_dir)
    tok, eos = lm.tokenizer, lm.cfg.eos_id
    out_a, out_b = (list(decode(lm.model, tok.encode(x) + [eos], DecodeOptions(max_len=6)).ids) for x in (A, B))
    first = next(i for i, (x, y) in enumerate(zip(out_a, out_b)) if x != y)
    assert first > 0  # the pair agrees at position 0: opening there would show an empty map
    at = open_compare(parting_model_dir, monkeypatch, src=A, srcb=B)
    assert at.session_state["step"] == first and at.slider(key="step").value == first
    assert f"at position {first} (" in markdown(at)
    assert at.selectbox(key="stage").value == "cross"
    diff = next(f for t, f in figures(at).items() if t.startswith("A − B: "))
    labels = [str(y) for y in diff["data"][0]["y"]] + [str(y) for y in diff["layout"]["yaxis"].get("ticktext") or []]
    mixed = [x for x in labels if " | " in x]
    assert not mixed, mixed
    assert any("A: " in x and " · B: " in x for x in labels), labels
    at.selectbox(key="stage").set_value("self").run()  # the reader's choice stays
    ok(at)
    assert at.selectbox(key="stage").value == "self"
    at = open_compare(parting_model_dir, monkeypatch, src=A, srcb=B, step="0", stage="self")  # a link's choices stay
    assert at.session_state["step"] == 0 and at.selectbox(key="stage").value == "self"


def test_one_sentence_decoded_two_ways(tiny_model_dir, monkeypatch):
    """The Corpus page's second run links here with B the same sentence and ``beamb``: B is decoded with its own beam
    width, the page says so, the patching reads A with noise, and the reader can decode B as A again."""
    at = open_compare(tiny_model_dir, monkeypatch, src=A, srcb=A, beamb="3")
    lm = load_model_dir(tiny_model_dir)
    src = lm.tokenizer.encode(A) + [lm.cfg.eos_id]
    want = lm.tokenizer.decode(decode(lm.model, src, DecodeOptions(strategy="beam", beam=3, max_len=6)).ids)
    assert not at.warning and at.query_params["beamb"] == "3"
    said = re.sub(r"\\(.)", r"\1", markdown(at))  # markdown's escapes undone
    assert "**French A** (greedy decoding)" in said and "**French B** (beam search (width 3," in said
    assert at.text[1].value == (want or "(empty)")
    assert any(
        "Sentence B is decoded with beam search (width 3," in re.sub(r"\\(.)", r"\1", c.value) for c in at.caption
    )
    at.button(key="compare_beam_b_off").click().run()
    ok_but_same = [w.value for w in at.warning]
    assert ok_but_same == ["A and B are the same sentence: there is nothing to compare. Change one word of B."]
    assert "beamb" not in at.query_params
    limits = Limits(vocab_size=120, max_len=200, n_layers=2, n_heads=4)
    back, msgs = clamp_view(from_query(to_query(View(source=A, source_b=A, beam_b=5)))[0], limits)
    assert back.beam_b == 5 and not msgs
    from model.core.constants import MAX_BEAM

    far, msgs = clamp_view({"beam_b": "99"}, limits)
    assert far.beam_b == MAX_BEAM and msgs == [
        f"Sentence B's beam width must be between 0 and {MAX_BEAM}; using {MAX_BEAM}."
    ]


def test_the_token_table_marks_where_a_run_ended_with_no_empty_number():
    """Past B's last token its columns say that B ended and hold no number (a None there was drawn as a grey
    "None"); where both runs have a token, both probabilities are shown."""
    from views.compare import ENDED, token_table

    a = ([5, 6, 7, 2], ["▁le", "▁chat", "▁dort", "</s>"], [0.9, 0.8, 0.7, 0.6])
    b = ([5, 9, 2], ["▁le", "▁chien", "</s>"], [0.9, 0.5, 0.4])
    table = token_table(a, b)
    assert table["B chooses"].tolist() == ["␣le", "␣chien", "</s>", ENDED]
    assert table["p (B)"].tolist() == ["0.900", "0.500", "0.400", ""]
    assert table["p (A)"].tolist() == ["0.900", "0.800", "0.700", "0.600"]
    assert table["same"].tolist() == [True, False, False, False]
    assert not table.isna().any().any()
    assert table.equals(token_table(a, b)) and token_table(b, a)["A chooses"].tolist()[-1] == ENDED


@pytest.fixture
def two_models(tmp_path, monkeypatch):
    """Two model directories offered side by side: the paper's post-norm tiny model and a pre-norm one with RMSNorm,
    relative positions and a gated FFN (T5's settings), 3 heads and 1 decoder layer, on the same tokenizer."""
    import views.state

    tok = make_tokenizer()
    post = save_model_dir(make_model(tok.vocab_size), tok, tmp_path / "post")
    pre_model = make_model(
        tok.vocab_size,
        seed=3,
        n_heads=3,
        d_kv=8,
        n_decoder_layers=1,
        norm_position="pre",
        final_norm=True,
        norm_kind="rms",
        positions="relative",
        relative_buckets=8,
        relative_max_distance=20,
        gated_ffn=True,
        activation="gelu_new",
        bias=False,
        scale_attention=False,
    )
    pre = save_model_dir(pre_model, tok, tmp_path / "pre")
    monkeypatch.setattr(views.state, "MODELS_ROOT", tmp_path)
    monkeypatch.delenv(ENV_MODEL, raising=False)
    return post, pre


def test_one_sentence_through_two_models(two_models, monkeypatch, capsys):
    """``modelb`` puts sentence B (here empty: A's sentence) through a second model directory: both translations are
    the two models' own decodes, every compared stage is drawn for both at a layer and head each model has (the
    link's layer 1 and head 3 exist only in A's model), the choice sits in the URL and a link reopens it; a name the
    server does not offer is one sentence and B goes through A's model. The CLI's translate with each model prints
    the page's two translations."""
    from model.cli import main as cli
    from views.compare import STAGES

    post, pre = two_models
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"page": "Compare", "max_len": "6", "src": A, "modelb": "pre", "layer": "1", "head": "3"})
    at.run()
    ok(at)
    assert not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key="model_b").value == "pre" and at.query_params["modelb"] == "pre"
    texts = []
    for path in (post, pre):
        lm = load_model_dir(path)
        src = lm.tokenizer.encode(A) + [lm.cfg.eos_id]
        texts.append(lm.tokenizer.decode(decode(lm.model, src, DecodeOptions(max_len=6)).ids) or "(empty)")
    assert [t.value for t in at.text[:2]] == texts and texts[0] != texts[1]
    for path, text in zip((post, pre), texts):
        capsys.readouterr()
        assert cli(["translate", A, "--model", str(path), "--max-len", "6"]) == 0
        assert capsys.readouterr().out.strip() == text
    said = re.sub(r"\\(.)", r"\1", markdown(at))
    assert "**French A** (post, greedy decoding)" in said and "**French B** (pre, greedy decoding)" in said
    for stage in STAGES:
        at.selectbox(key="stage").set_value(stage).run()
        ok(at)
        titles = set(figures(at))
        assert sum(t.startswith("A: ") for t in titles) == 1 and sum(t.startswith("B: ") for t in titles) == 1, stage
        assert any(t.startswith("A − B: ") for t in titles), stage
    assert any("layer 1" in t for t in titles if t.startswith("A: "))  # A's own layer; B has one decoder layer only
    assert any("layer 0" in t for t in titles if t.startswith("B: "))
    at.selectbox(key="model_b").set_value("").run()  # back to one model: A's sentence twice is nothing to compare
    ok(at)
    assert "modelb" not in at.query_params
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"page": "Compare", "max_len": "6", "src": A, "modelb": "nowhere"})
    at.run()
    ok(at)
    assert [re.sub(r"\\(.)", r"\1", w.value) for w in at.warning] == [
        "Sentence B's model 'nowhere' is not another model this server offers; B is put through A's model."
    ]
    assert "modelb" not in at.query_params
