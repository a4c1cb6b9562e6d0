"""The Streamlit app, driven headlessly with AppTest against the tiny random model, and its pure state helpers."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from model.core import keys
from model.core.config import ModelConfig
from model.decode.decoding import DecodeOptions, decode
from model.decode.steps import follow_line, live_rows
from model.io.checkpoint import ENV_MODEL, load_model_dir
from tests.helpers import (
    APP,
    chip_markdown,
    figure,
    frame,
    headings,
    n_chips,
    ok,
    open_app,
    open_page,
    open_panel,
    plotly_array,
    qp,
    show_stage,
    specs,
    titles,
)
from views import export
from views.common import escape_markdown
from views.stages.lens import head_words
from views.state import (
    DECODER_STAGES,
    DEFAULT_STAGE,
    DEFAULTS,
    MEAN_HEADS,
    STAGE_LABELS,
    STAGES,
    Limits,
    View,
    clamp_view,
    from_query,
    model_dirs,
    move,
    prepare_source,
    to_query,
    with_choices,
)
from views.stepping import WHATIF_LABEL, followed_summary, line_story

XSS = "<img src=x onerror=alert(1)>"
LIMITS = Limits(vocab_size=120, max_len=200, n_layers=2, n_heads=4)  # room for the default max_len


@pytest.fixture
def app(tiny_model_dir, monkeypatch) -> AppTest:
    return open_app(tiny_model_dir, monkeypatch)


ENCODER = ("Encoder self-attention", "Encoder output")  # outside the step view: shown whatever the stage
# Figures (title starts) each stage draws in the step view, and the section headers it shows.
STAGE_FIGURES = {
    "inputs": ("Token embeddings", "Positional encoding PE", "Sum X", "The model's positional encoding"),
    "qkv": ("Q = X·W_Q", "K = X·W_K", "V = X·W_V"),
    "scores": ("Raw scores", "Causal mask M", "Masked scores"),
    "self": ("Attention weights α",),
    "self_out": ("α·V", "Output after W_O", "Add &amp; Norm 1"),
    "cross": ("Alignment, head", "Alignment, mean", "Cross Q", "Cross K", "Cross V", "Add &amp; Norm 2"),
    "ffn": ("FFN hidden activations", "Add &amp; Norm 3"),
    "output": ("Top 10 next tokens", "Position "),
    "lens": ("What each layer would predict", "p(token finally chosen)"),
    "ablation": ("Masked self-attention heads: loss", "Cross-attention heads: loss"),
    "attribution": ("Attribution to the source", "Cross-attention, mean of heads", "Attribution to the earlier"),
}
STAGE_HEADERS = {
    "inputs": ("1 · Decoder inputs", "2 · Token embeddings"),
    "qkv": ("3 · Masked self-attention",),
    "scores": ("3 · Masked self-attention",),
    "self": ("3 · Masked self-attention",),
    "self_out": ("3 · Masked self-attention", "4 · Add & Norm 1"),
    "cross": ("5 · Cross-attention", "5.1 · Add & Norm 2"),
    "ffn": ("6 · Feed-forward", "6.1 · Add & Norm 3"),
    "output": ("7 · Output", "8 · What the KV cache holds"),
    "lens": ("Logit lens",),
    "ablation": ("Head ablation",),
    "attribution": ("Attribution vs attention",),
}


def step_figures(at: AppTest) -> list[str]:
    return [t for t in titles(at) if not t.startswith(ENCODER)]


# ---------------------------------------------------------------------------
# The page.


def test_loads_and_shows_every_stage(app):
    assert app.text_area(key="source").value == "I am a student."
    assert n_chips(app) == 0
    assert app.session_state["step"] == 0
    assert app.segmented_control(key="stage").value == DEFAULT_STAGE == "self"  # a step redraws one figure
    assert [t.split(",")[0] for t in step_figures(app)] == ["Attention weights α"]
    show_stage(app, "all")
    headers = headings(app)
    order = [
        "1 · Decoder inputs",
        "2 · Token embeddings",
        "3 · Masked self-attention",
        "4 · Add & Norm 1",
        "5 · Cross-attention",
        "5.1 · Add & Norm 2",
        "6 · Feed-forward",
        "6.1 · Add & Norm 3",
        "7 · Output",
        "8 · What the KV cache holds",
    ]
    pos = [next(i for i, h in enumerate(headers) if h.startswith(o)) for o in order]
    assert pos == sorted(pos), headers
    panels = [e.label for e in app.expander]
    assert panels.index(WHATIF_LABEL) < panels.index(export.LABEL), panels  # then What if? and Export, closed
    assert not app.get("download_button") and not [s for s in app.selectbox if s.key == "whatif_pick"]
    assert len(specs(app)) >= 20
    formulas = [e for e in app if e.type == "latex" or (e.type == "markdown" and "$$" in str(e.value))]
    assert len(formulas) >= 10  # the formulas beside the panels, alone or under their heading
    assert frame(app, "reads (decoder input)")["reads (decoder input)"].tolist() == ["<s>"]


def test_one_numbering_for_positions(app):
    """The slider, the header line, the table and the figure titles all count decoder positions from 0."""
    show_stage(app, "all")
    for _ in range(2):
        app.button(key="next").click().run()
    ok(app)
    assert app.slider(key="step").label == "Position" and app.slider(key="step").value == 2
    line = next(m.value for m in app.markdown if m.value.startswith("**Position"))
    assert line.startswith("**Position 2** of 0–")
    assert frame(app, "position")["position"].tolist() == [0, 1, 2]
    assert any(t.startswith("Position 2:") for t in titles(app))  # the KV-cache figure
    assert any(t.startswith("Top 10 next tokens at position 2") for t in titles(app))


def test_rows_say_what_they_read_and_predict(app):
    """Every attention row is labelled "token read → token predicted", and the row of position i predicts the token
    that position i + 1 reads (the cross-attention misreading of a row labelled by its input is gone)."""
    show_stage(app, "cross")
    for _ in range(3):
        app.button(key="next").click().run()
    ok(app)
    show_stage(app, "inputs")
    table = frame(app, "reads (decoder input)")
    show_stage(app, "cross")
    ys = figure(app, "Alignment, mean")["data"][0]["y"]
    assert len(ys) == len(table) == 4
    for i, label in enumerate(ys):
        read = table["reads (decoder input)"].iloc[i]
        pred = table["predicts (chosen next token)"].iloc[i]
        assert html.escape(f"{read} → {pred}", quote=False) in label, (label, read, pred)
        if i + 1 < len(table):
            assert table["reads (decoder input)"].iloc[i + 1] == pred
    assert any("token it reads → token it predicts" in m.value for m in app.markdown)


def test_step_forward_and_back(app):
    show_stage(app, "inputs")  # the shifted-inputs table
    app.button(key="next").click().run()
    app.button(key="next").click().run()
    ok(app)
    assert app.session_state["step"] == 2 and n_chips(app) == 2
    assert len(frame(app, "reads (decoder input)")) == 3
    app.button(key="prev").click().run()
    ok(app)
    assert app.session_state["step"] == 1 and n_chips(app) == 1
    app.button(key="last").click().run()
    last = app.session_state["step"]
    assert last == app.slider(key="step").max > 1 and n_chips(app) == last
    app.button(key="next").click().run()  # past the end: stays on the last position
    assert app.session_state["step"] == last
    app.button(key="first").click().run()
    assert app.session_state["step"] == 0 and n_chips(app) == 0
    app.slider(key="step").set_value(4).run()
    ok(app)
    assert n_chips(app) == 4
    assert qp(app, "step") == "4"


def test_layer_head_and_all_heads(app):
    show_stage(app, "all")
    app.selectbox(key="layer").set_value(1).run()
    app.selectbox(key="head").set_value(2).run()
    ok(app)
    headers = headings(app)
    assert any(h.startswith("3 · Masked self-attention — layer 1, head 2") for h in headers)
    assert qp(app, "layer") == "1" and qp(app, "head") == "2"
    n = len(specs(app))
    app.toggle(key="grid").set_value(True).run()
    ok(app)
    assert len(specs(app)) == n + 2  # self- and cross-attention grids
    assert qp(app, "grid") == "1"
    app.selectbox(key="head").set_value(MEAN_HEADS).run()
    ok(app)
    assert any("mean of heads" in h for h in (h.value for h in app.subheader))


def test_concatenated_heads_show_their_boundaries(app):
    show_stage(app, "qkv")
    q = figure(app, "Q = X·W_Q")
    lines = [s for s in q["layout"].get("shapes", []) if s.get("type") == "line"]
    assert len(lines) >= 3  # 4 heads side by side: 3 boundaries
    app.selectbox(key="head").set_value(1).run()
    q = figure(app, "Q = X·W_Q")
    assert not [s for s in q["layout"].get("shapes", []) if s.get("type") == "line"]


def test_stage_selector_shows_each_group_and_every_stage_is_reachable(tiny_model_dir, monkeypatch):
    app = open_app(tiny_model_dir, monkeypatch, head="mean")  # chosen: the attribution stage keeps it
    assert not [t for t in titles(app) if t.startswith(ENCODER)]  # its panel closed: not built, not sent
    open_panel(app, "encoder_open")
    app.button(key="next").click().run()
    assert app.segmented_control(key="stage").options == [STAGE_LABELS[s] for s in STAGES]
    seen: dict[str, list[str]] = {}
    for stage in STAGES:
        show_stage(app, stage)
        assert app.segmented_control(key="stage").value == stage
        assert qp(app, "stage") in (stage, None if stage == DEFAULT_STAGE else stage)  # the URL keeps the stage
        assert all(any(t.startswith(e) for t in titles(app)) for e in ENCODER)
        seen[stage] = step_figures(app)
        assert app.session_state["step"] == 1 and n_chips(app) == 1  # changing the stage keeps the step
        headers = headings(app)
        for want in STAGE_HEADERS.get(stage, ()):
            assert any(h.startswith(want) for h in headers), (stage, want, headers)
    for stage, want in STAGE_FIGURES.items():
        got = seen[stage]
        assert len(got) == len(want) and all(t.startswith(w) for t, w in zip(got, want)), (stage, got)
        others = [t for s, figs in seen.items() if s not in (stage, "all") for t in figs]
        assert not set(got) & set(others), stage  # each figure belongs to one stage
    # every decoder stage, in data-flow order; the explanations stay on their own
    assert seen["all"] == [t for s in DECODER_STAGES for t in seen[s]]
    show_stage(app, "ffn")
    app.button(key="next").click().run()
    ok(app)
    assert app.session_state["step"] == 2 and app.segmented_control(key="stage").value == "ffn"
    figs = step_figures(app)
    assert len(figs) == 2 and all(t.startswith(("FFN hidden", "Add &amp; Norm 3")) for t in figs), figs


def test_step_view_shows_scores_then_mask_then_masked_scores(app):
    """The raw scores of the whole prefix are computed (no masked cell), unlike the masked scores, and the page
    says why the KV cache never needs the future cells."""
    show_stage(app, "scores")
    for _ in range(3):
        app.button(key="next").click().run()
    ok(app)
    raw, masked = figure(app, "Raw scores"), figure(app, "Masked scores")

    def z(fig):
        return plotly_array(fig["data"][0]["z"])

    assert np.isfinite(z(raw)).all() and z(raw).shape == (4, 4)
    finite = np.isfinite(z(masked))
    assert (finite == np.tril(np.ones((4, 4), bool))).all()
    np.testing.assert_allclose(z(raw)[finite], z(masked)[finite], rtol=1e-3)
    assert any("never needs them" in c.value for c in app.caption)


def test_stage_from_the_url_and_in_teacher_forcing(tiny_model_dir, monkeypatch):
    at = open_app(tiny_model_dir, monkeypatch, src="Hello world.", stage="cross", max_len="6", ref="Bonjour le monde.")
    assert at.segmented_control(key="stage").value == "cross"
    figs = step_figures(at)
    assert len(figs) == len(STAGE_FIGURES["cross"]) and all(t.startswith(STAGE_FIGURES["cross"]) for t in figs)
    at.segmented_control(key="tab").set_value("tf").run()
    ok(at)
    assert qp(at, "tab") == "tf"
    figs = step_figures(at)
    assert len(figs) == len(STAGE_FIGURES["cross"]) and all(t.startswith(STAGE_FIGURES["cross"]) for t in figs)
    show_stage(at, "output")
    assert any(t.startswith("Top 10 at position") for t in titles(at))
    assert frame(at, "p(label)") is not None  # the loss table of teacher forcing shows whatever the stage
    at = open_app(tiny_model_dir, monkeypatch, src="Hello world.", stage="nonsense", max_len="6")
    assert at.segmented_control(key="stage").value == DEFAULT_STAGE
    assert any("Unknown stage" in w.value for w in at.warning)


def test_following_a_hypothesis_forward_and_back_across_a_pruning(tiny_model_dir, monkeypatch):
    """By default the step view walks the translation shown; a live hypothesis picked at position t is followed to
    where its line was pruned (the page says so, with its candidate's rank), back through its ancestors, and the
    chips always equal the followed line's tokens."""
    text, k, max_len = "The cat is sleeping on the sofa.", 3, 10
    lm = load_model_dir(tiny_model_dir)
    eos = lm.cfg.eos_id
    src = lm.tokenizer.encode(text) + [eos]
    res = decode(lm.model, src, DecodeOptions(strategy="beam", beam=k, max_len=max_len, record=True))
    winner = follow_line(res, eos)
    # a hypothesis (step, row) whose line is pruned later: found from the recorded decode
    t, r = next(
        (t, r)
        for t in range(1, len(res.steps))
        for r in live_rows(res, t)
        if follow_line(res, eos, res.beam_steps[t].live[r].ids).how == "pruned"
    )
    ids = tuple(res.beam_steps[t].live[r].ids)
    line = follow_line(res, eos, ids)
    at = open_app(
        tiny_model_dir,
        monkeypatch,
        src=text,
        strategy="beam",
        beam=str(k),
        max_len=str(max_len),
        step=str(t),
        stage="output",
    )
    assert at.session_state["step"] == t and at.selectbox(key="follow_pick").value == "final:0"
    assert at.slider(key="step").max == winner.end

    def chip_ids() -> tuple[int, ...]:
        body = chip_markdown(at)
        toks = re.findall(r"-badge\[(.*?)(?: [0-9\\.]+)?\]", body)
        return tuple(lm.tokenizer.token_to_id(escape_back(x).replace("␣", "▁")) for x in toks if x != "\\<s\\>")

    assert chip_ids() == winner.predicts[:t]
    at.selectbox(key="follow_pick").set_value(f"live:{r}").run()
    ok(at)
    assert tuple(at.session_state["follow"]) == ids
    assert qp(at, "follow") == ".".join(map(str, ids))
    assert chip_ids() == ids
    assert at.slider(key="step").max == line.end  # the line's positions, from <s> to where it ended
    story = " ".join(c.value for c in at.caption)
    assert f"pruned at position {line.end}" in story and f"ranked {line.rank}" in story
    for u in range(t + 1, line.end + 1):
        at.button(key="next").click().run()
        ok(at)
        assert at.session_state["step"] == u and chip_ids() == line.predicts[:u]
    assert "pruned here" in next(m.value for m in at.markdown if m.value.startswith("**Position"))
    at.slider(key="step").set_value(t).run()
    ok(at)
    assert chip_ids() == ids
    at.button(key="prev").click().run()
    ok(at)
    assert chip_ids() == ids[:-1]  # its ancestor


def test_the_summary_names_the_hypothesis_followed(tiny_model_dir):
    """The Summary (JSON) of a followed hypothesis says which one it is (its tokens, how and where it ended, its
    final rank) and what the page said of it; the translation shown is final candidate 1."""
    import pandas as pd

    from views.state import Choices

    lm = load_model_dir(tiny_model_dir)
    eos, k = lm.cfg.eos_id, 3
    src = lm.tokenizer.encode("The cat is sleeping on the sofa.") + [eos]
    opts = DecodeOptions(strategy="beam", beam=k, max_len=10, record=True)
    res = decode(lm.model, src, opts)
    pruned = next(
        line
        for t in range(1, len(res.steps))
        for r in live_rows(res, t)
        if (line := follow_line(res, eos, res.beam_steps[t].live[r].ids)).how == "pruned"
    )
    tok = lm.tokenizer.id_to_token
    for line in (follow_line(res, eos), pruned):
        tokens = [tok(i) for i in line.ids]
        followed = followed_summary(line, len(res.n_best), k, tokens, True)
        step = line.end
        data = export.summary_bytes(
            Choices(str(tiny_model_dir), "x", opts), res, line.rows, step, ["a"], tok, pd.DataFrame(), followed
        )
        got = json.loads(data)["followed"]
        assert got["tokens"] == tokens and got["how"] == line.how and got["end"] == line.end
        assert got["said"] == line_story(line, len(res.n_best), k)
        assert got["final_rank"] == line.final_rank
    assert json.loads(data)["followed"]["final_rank"] is None and "pruned at position" in got["said"]
    winner = followed_summary(follow_line(res, eos), len(res.n_best), k, [], True)
    assert winner["final_rank"] == 1 and winner["said"].startswith("It is the translation shown above")


def escape_back(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def test_a_sentence_two_sessions_open_is_decoded_once(tiny_model_dir, monkeypatch):
    import views.common

    calls = []
    real = views.common.decode
    monkeypatch.setattr(views.common, "decode", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    first = open_app(tiny_model_dir, monkeypatch, src="The cat sat on a mat.", beam="3")
    second = open_app(tiny_model_dir, monkeypatch, src="The cat sat on a mat.", beam="3")
    assert len(calls) == 1
    assert chip_markdown(second) == chip_markdown(first) and second.text[1].value == first.text[1].value
    open_app(tiny_model_dir, monkeypatch, src="The cat sat on a mat.", beam="2")  # other choices: another decode
    assert len(calls) == 2


def test_sampling_with_parameters(app):
    app.radio(key="strategy").set_value("sample").run()
    app.number_input(key="temperature").set_value(0.7).run()
    app.number_input(key="top_k").set_value(5).run()
    app.slider(key="top_p").set_value(0.9).run()
    app.number_input(key="seed").set_value(7).run()
    ok(app)
    want = escape_markdown("sampling (temperature 0.7, top-k 5, top-p 0.9, seed 7)")
    assert any(want in m.value for m in app.markdown)
    assert (qp(app, "temp"), qp(app, "top_k"), qp(app, "top_p"), qp(app, "seed")) == ("0.7", "5", "0.9", "7")


def test_force_a_token_marks_only_that_token(app):
    own = [t.value for t in app.text]  # the English, and the model's own French
    show_stage(app, "inputs")
    app.button(key="next").click().run()
    app.button(key="next").click().run()
    before = frame(app, "reads (decoder input)")["reads (decoder input)"].tolist()  # <s> y1 y2
    open_panel(app, "whatif_open")
    alt = app.selectbox(key="whatif_pick").options[3]  # the 4th most likely token
    app.selectbox(key="whatif_pick").select_index(3).run()
    app.button(key="whatif_go").click().run()
    ok(app)
    forced = app.session_state["forced"]
    assert len(forced) == 3 and app.session_state["user_forced"] == frozenset({2})
    assert app.session_state["step"] == 3
    after = frame(app, "reads (decoder input)")
    assert after["reads (decoder input)"].tolist()[:3] == before  # the tokens so far are kept
    assert alt.startswith("4. ") and alt[3:].split("  (p")[0] == after["reads (decoder input)"].tolist()[3]
    assert after["forced by you"].tolist() == [False, False, True, False]
    body = chip_markdown(app)
    assert body.count(":orange-badge[") == 1 and body.count(":blue-badge[") == 2
    assert qp(app, "forced").split(".")[2].startswith("!")  # the link keeps which one the user forced
    app.button(key="whatif_typed_go").click().run()  # nothing typed: said in the panel, nothing forced
    nothing = "Type a token or a word first."
    assert nothing in [w.value for w in app.warning] and app.session_state["forced"] == forced
    app.text_input(key="whatif_text").input("pizza").run()
    assert nothing not in [w.value for w in app.warning]  # said once
    app.button(key="whatif_typed_go").click().run()
    ok(app)
    assert len(app.session_state["forced"]) > 3 and app.session_state["forced"][:3] == forced
    assert 2 in app.session_state["user_forced"] and 3 in app.session_state["user_forced"]
    pieces = len(app.session_state["forced"]) - 3
    assert pieces > 1  # the word is several pieces: each shows the model's probability of it
    app.slider(key="step").set_value(len(app.session_state["forced"])).run()
    forced_chips = re.findall(r":orange-badge\[(.*?)\]", chip_markdown(app))
    assert len(forced_chips) == pieces + 1 and all(re.search(r" 0\\\.\d{3}$", c) for c in forced_chips)
    assert [t.value for t in app.text] != own
    app.button(key="clear_forced").click().run()
    ok(app)
    assert app.session_state["forced"] == () and qp(app, "forced") is None
    assert [t.value for t in app.text] == own  # the French line is the model's own again, at once
    assert not re.findall(r":orange-badge", chip_markdown(app))


def test_teacher_forcing_and_the_mask_toggle(app):
    app.text_input(key="reference").input("Je suis étudiant.").run()
    app.segmented_control(key="tab").set_value("tf").run()
    ok(app)
    table = frame(app, "p(label)")
    assert table["decoder input"].iloc[0] == "<s>" and table["expected output (label)"].iloc[-1] == "</s>"
    assert "Mean loss (cross-entropy per token)" in [m.label for m in app.metric]
    assert any(h.value.startswith("3 · Masked self-attention") for h in app.subheader)
    app.toggle(key="no_mask").set_value(True).run()
    ok(app)
    assert qp(app, "nomask") == "1"
    metrics = {m.label: m.value for m in app.metric}
    masked, unmasked = float(metrics["Mean loss with the mask"]), float(metrics["Mean loss without the mask"])
    assert masked != unmasked
    assert float(metrics["Attention on future tokens"].rstrip("%")) > 0
    assert np.isfinite(frame(app, "loss, no mask")["loss, no mask"]).all()
    # every text about the view says the mask is gone
    headers = headings(app)
    assert any("WITHOUT the causal mask" in h for h in headers)
    assert not any(h.startswith("3 · Masked self-attention") for h in headers)
    assert any(t.startswith("Attention weights α without the mask") for t in titles(app))
    assert not any("masked to −∞ before the softmax" in m.value for m in app.markdown)
    assert any("The causal mask is removed" in m.value for m in app.markdown)
    show_stage(app, "scores")
    assert any(t.startswith("No mask") for t in titles(app))
    app.slider(key="step").set_value(1).run()
    ok(app)


def test_learn_and_about_pages(app):
    open_page(app, "Learn")
    ok(app)
    assert "Learn" in app.title[0].value
    app.session_state["learn_chapter"] = 14  # the hand-sized worked example, recomputed
    app.run()
    ok(app)
    assert any(h.value == "Common mistakes to avoid" for h in app.subheader)
    open_page(app, "About")
    ok(app)
    assert any("import-marian" in c.value for c in app.code)
    open_page(app, "Explore")
    ok(app)
    assert app.text_area(key="source").value == "I am a student."  # kept while away


def test_example_buttons(app):
    app.button(key="example_4").click().run()
    ok(app)
    assert app.text_area(key="source").value == "The cat is sleeping on the sofa."
    assert qp(app, "src") == "The cat is sleeping on the sofa."


def test_xss_is_shown_as_plain_text(app):
    app.text_area(key="source").input(XSS).run()
    ok(app)
    for m in app.markdown:  # user text reaches markdown only escaped: every "<" is "\\<"
        assert not re.search(r"(?<!\\)<", m.value), m.value
    app.text_input(key="reference").input(XSS).run()
    ok(app)


def test_empty_long_odd_and_unreadable_input(app):
    app.text_area(key="source").input("   \n  ").run()
    assert not app.exception and not app.error
    assert any("empty" in i.value for i in app.info)
    app.text_area(key="source").input(" ".join(["the cat is sleeping on the sofa"] * 40)).run()
    ok(app)
    assert any("only the first" in w.value for w in app.warning)
    app.text_area(key="source").input("🍕🍕 日本語").run()  # every character outside the vocabulary
    ok(app)
    assert any("cannot read this text as words" in w.value and "raw bytes" in w.value for w in app.warning)
    assert not any("<unk>" in t.value for t in app.text)  # spelled in bytes, nothing lost
    assert any("🍕🍕 日本語" == t.value for t in app.text)
    chips = " ".join(m.value for m in app.markdown if "Source tokens" in m.value).replace("\\", "")
    assert "🍕 1/4" in chips and "日 1/3" in chips  # byte pieces named by the character they spell
    assert len(specs(app)) > 0


def test_a_name_in_another_script_is_not_called_unreadable(app):
    # 11 Cyrillic letters, 22 byte tokens: most of the tokens but a third of the characters
    app.text_area(key="source").input("Our new teacher is called Възкресения.").run()
    ok(app)
    assert not any("cannot read this text" in w.value for w in app.warning)
    assert any("raw bytes" in c.value for c in app.caption)
    app.text_area(key="source").input("Я Възкресения 日本語 cat").run()  # 15 of 18 characters
    ok(app)
    assert any("15 of its 18 characters" in w.value for w in app.warning), [w.value for w in app.warning]


def test_cut_off_and_low_confidence_are_flagged(tiny_model_dir, monkeypatch):
    import views.explore

    monkeypatch.setattr(views.explore, "LOW_CONFIDENCE", 0.0)  # no output is below that
    at = open_app(tiny_model_dir, monkeypatch)
    assert any("cut off at the maximum length" in w.value for w in at.warning)  # max_len=8, random model
    assert not any("out of its depth" in w.value for w in at.warning)
    monkeypatch.setattr(views.explore, "LOW_CONFIDENCE", 0.999)  # every output is below that
    at = open_app(tiny_model_dir, monkeypatch)
    assert any("out of its depth" in w.value for w in at.warning)
    at = open_app(tiny_model_dir, monkeypatch, max_len="40")
    assert not any("cut off" in w.value for w in at.warning) or "</s>" not in " ".join(t.value for t in at.text)


def place(node, starts: str) -> tuple[int, ...] | None:
    """Where the first markdown element that starts with ``starts`` sits in the page's tree (its indices)."""
    for i, child in getattr(node, "children", {}).items():
        if child.type == "markdown" and str(child.value).startswith(starts):
            return (i,)
        if (inner := place(child, starts)) is not None:
            return (i, *inner)
    return None


def test_a_note_that_comes_or_goes_moves_no_element_below_it(tiny_model_dir, monkeypatch):
    """The browser mounts anew an element whose place in the page's tree shifts (drawing its figures from scratch):
    a note on the output that a forced token brings or takes away leaves every element below it where it was."""
    import views.explore

    monkeypatch.setattr(views.explore, "LOW_CONFIDENCE", 0.0)  # no output is below that
    at = open_app(tiny_model_dir, monkeypatch)
    notes = len(at.warning)
    below = [place(at.main, s) for s in ("**English**", "**Generated so far")]
    assert None not in below
    monkeypatch.setattr(views.explore, "LOW_CONFIDENCE", 0.999)  # every output is below that
    at.run()
    ok(at)
    assert len(at.warning) == notes + 1
    assert [place(at.main, s) for s in ("**English**", "**Generated so far")] == below


def test_generated_byte_pieces_are_named_by_the_character_they_spell(tiny_model_dir, monkeypatch):
    lm = load_model_dir(tiny_model_dir)
    c3, a9 = (lm.tokenizer.token_to_id(f"<0x{b:02X}>") for b in "é".encode())
    at = open_app(tiny_model_dir, monkeypatch, src="Hello world.", forced=f"!{c3}.!{a9}", stage="inputs", step="2")
    assert at.session_state["forced"] == (c3, a9)
    body = chip_markdown(at).replace("\\", "")
    assert "é 1/2" in body and "é 2/2" in body and "<0x" not in body, body
    reads = frame(at, "reads (decoder input)")
    assert reads["reads (decoder input)"].tolist()[1:3] == ["é 1/2", "é 2/2"]
    assert reads["predicts (chosen next token)"].tolist()[:2] == ["é 1/2", "é 2/2"]
    at = open_app(tiny_model_dir, monkeypatch, src="Hello world.", forced=f"!{c3}.!{a9}", stage="inputs", step="1")
    assert "reads :gray-badge[é 1\\/2]" in next(m.value for m in at.markdown if m.value.startswith("**Position 1"))
    at = open_app(tiny_model_dir, monkeypatch, src="Hello world.", forced=f"!{c3}", stage="inputs", step="0")
    predicts = frame(at, "reads (decoder input)")["predicts (chosen next token)"].tolist()
    assert predicts[0] == "<0xC3> 1/2", predicts  # a character begun: the byte and its place, before the next step


def test_every_url_field_round_trips_through_the_page(tiny_model_dir, monkeypatch):
    """A link with every field set reopens the same view, and the page writes back the same link."""
    lm = load_model_dir(tiny_model_dir)
    text = "Hello world."
    src = lm.tokenizer.encode(text) + [lm.cfg.eos_id]
    forced = [int(i) for i in decode(lm.model, src, DecodeOptions(max_len=3)).ids[:2]]
    link = {
        "src": text,
        "ref": "Bonjour le monde.",
        "strategy": "beam",
        "beam": "3",
        "lp": "1.5",
        "max_len": "9",
        "forced": f"{forced[0]}.!{forced[1]}",
        "tab": "step",
        "stage": "cross",
        "layer": "1",
        "head": "2",
        "grid": "1",
        "step": "3",
    }
    at = open_app(tiny_model_dir, monkeypatch, **link)
    assert at.radio(key="strategy").value == "beam" and at.slider(key="beam").value == 3
    assert at.number_input(key="length_penalty").value == 1.5 and at.slider(key="max_len").value == 9
    assert at.session_state["forced"] == tuple(forced) and at.session_state["user_forced"] == frozenset({1})
    assert at.segmented_control(key="stage").value == "cross" and at.selectbox(key="layer").value == 1
    assert at.selectbox(key="head").value == 2 and at.toggle(key="grid").value is True
    assert at.session_state["step"] == 3 and n_chips(at) == 3
    assert chip_markdown(at).count(":orange-badge[") == 1
    assert {k: qp(at, k) for k in link} == {**link, "tab": None}  # "step" is the default tab: left out
    live = at.session_state["follow_pick"]
    at2 = open_app(
        tiny_model_dir, monkeypatch, **{**link, "follow": ".".join(map(str, forced)), "tab": "tf", "nomask": "1"}
    )
    assert at2.segmented_control(key="tab").value == "tf" and at2.toggle(key="no_mask").value is True
    assert qp(at2, "follow") == ".".join(map(str, forced)) and qp(at2, "nomask") == "1"
    assert live is not None


def test_links_that_cannot_be_reproduced_say_so(tiny_model_dir, monkeypatch):
    at = open_app(tiny_model_dir, monkeypatch, model="no-such-model", forced="99999.3", beam="x")
    warnings = " ".join(w.value for w in at.warning)
    assert "no\\-such\\-model" in warnings and "does not have" in warnings
    assert "vocabulary" in warnings and "not a number" in warnings
    at = open_app(tiny_model_dir, monkeypatch, follow="a.b")
    assert any("not a list of token ids" in w.value for w in at.warning)


def test_bad_url_values_are_clamped(tiny_model_dir, monkeypatch):
    at = open_app(
        tiny_model_dir,
        monkeypatch,
        src=XSS,
        strategy="evil",
        beam="-4",
        temp="nan",
        max_len="99999",
        step="abc",
        layer="77",
        head="x",
        top_p="7",
    )
    assert at.radio(key="strategy").value == "greedy"
    assert at.slider(key="max_len").value == at.slider(key="max_len").max
    assert at.selectbox(key="layer").value == 1  # clamped to the last layer


def test_missing_model_is_a_clean_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tmp_path / "nope"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)
    open_page(at, "Explore")
    open_page(at, "Learn")  # the hand-sized example needs no model
    assert not at.exception and any(h.value == "Common mistakes to avoid" for h in at.subheader)


# ---------------------------------------------------------------------------
# Pure state helpers.

FIELD_VALUES = {  # a non-default value for every View field
    "source": "Hi there.",
    "reference": "Salut.",
    "model": "other",
    "strategy": "sample",
    "beam": 3,
    "length_penalty": 0.5,
    "temperature": 0.7,
    "top_k": 5,
    "top_p": 0.9,
    "seed": 11,
    "max_len": 12,
    "forced": (5, 6, 7),
    "user_forced": frozenset({2}),
    "tab": "tf",
    "stage": "ffn",
    "layer": 1,
    "head": 3,
    "grid": True,
    "no_mask": True,
    "follow": (5, 6),
    "step": 4,
    "ablate": "dec.0.self.1,dec.0.self.2,dec.1.cross.0,dec.1.cross.3",
    "ablate_mode": "mean",
    "attribution": "ixg",
}


@pytest.mark.parametrize("name", list(FIELD_VALUES))
def test_each_view_field_round_trips_through_the_url(name):
    view = with_choices(
        View(), **{name: FIELD_VALUES[name]}, **({"forced": (5, 6, 7)} if name == "user_forced" else {})
    )
    query = to_query(view)
    assert all(isinstance(v, str) for v in query.values())
    raw, msgs = from_query(query)
    back, more = clamp_view(raw, LIMITS)
    assert not msgs and not more
    assert back == view


def test_default_view_has_a_short_url_and_decoding_defaults_come_from_decode_options():
    assert to_query(View()) == {"src": View().source}
    assert View().decode == DEFAULTS and (View().decode.beam, View().decode.max_len, View().decode.length_penalty) == (
        DEFAULTS.beam,
        DEFAULTS.max_len,
        DEFAULTS.length_penalty,
    )


def test_clamp_view_bounds_every_number():
    raw = {
        "strategy": "x",
        "beam": "99",
        "temperature": "inf",
        "top_k": -3,
        "top_p": 2,
        "seed": "1e40",
        "max_len": 0,
        "layer": 9,
        "head": "7",
        "forced": (1, 500),
        "step": "-3",
    }
    v, msgs = clamp_view(raw, LIMITS)
    d = v.decode
    assert (d.strategy, d.beam, d.temperature, d.top_k, d.top_p, d.seed, d.max_len) == (
        "greedy",
        8,
        1.0,
        0,
        1.0,
        2**31 - 1,
        1,
    )
    assert v.layer == 1 and v.head == 3 and d.prefix == () and v.step == 0
    assert len(msgs) == 10
    DecodeOptions(
        **{k: getattr(d, k) for k in ("strategy", "beam", "temperature", "top_k", "top_p", "seed", "max_len")}
    )  # always valid
    assert [move(2, a, 5) for a in ("first", "prev", "next", "last")] == [0, 1, 3, 4]
    assert move(4, "next", 5) == 4 and move(0, "prev", 5) == 0


def test_escape_markdown_and_model_dirs(tmp_path, tiny_model_dir):
    assert escape_markdown(XSS) == r"\<img src\=x onerror\=alert\(1\)\>"
    assert escape_markdown("a\nb") == "a b"
    root = tmp_path / "models"
    (root / "a").mkdir(parents=True)
    (root / "a" / "config.json").write_text("{}")
    (root / "empty").mkdir()
    dirs = model_dirs(root, env={ENV_MODEL: str(tiny_model_dir)})
    assert dirs == [tiny_model_dir, root / "a"]
    assert model_dirs(tmp_path / "none", env={}, default=tmp_path / "d") == [tmp_path / "d"]


def test_prepare_source(tiny_model_dir):
    lm = load_model_dir(tiny_model_dir)
    assert prepare_source("  \t ", lm.tokenizer, lm.cfg) is None
    src = prepare_source("the cat " * 100, lm.tokenizer, lm.cfg)
    assert src.truncated and len(src.ids) == lm.cfg.max_len and src.ids[-1] == lm.cfg.eos_id


# ---------------------------------------------------------------------------
# The explanations.


def test_logit_lens_last_layer_is_the_output(app):
    """The lens table's last layer gives the probability the chips show for the chosen token (greedy)."""
    show_stage(app, "lens")
    for _ in range(2):
        app.button(key="next").click().run()
    ok(app)
    table = frame(app, "rank of the chosen token")
    assert len(table) == 2  # one row per decoder layer of the tiny model
    line = next(m.value for m in app.markdown if m.value.startswith("**Position 2**"))
    p = float(re.search(r"p \\= ([0-9\\.]+)", line).group(1).replace("\\", ""))
    assert table["p(chosen token)"].iloc[-1] == pytest.approx(p, abs=1e-3)
    assert any(t.startswith("What each layer would predict at position 2") for t in titles(app))
    assert any("not *why*" in m.value for m in app.markdown)  # what the view does not prove
    # the tiny model's head is its tied embedding, with no output bias: the text says so and names no bias
    assert any("(the transposed token embedding, shared with the input)" in m.value for m in app.markdown)
    assert not any("output head" in m.value and "bias" in m.value for m in app.markdown)


def test_lens_text_names_the_output_head_each_model_has():
    tied, untied = "the transposed token embedding, shared with the input", "the final linear layer"
    bias = ", plus the final logits bias"
    cases = {(True, False): tied, (False, False): untied, (True, True): tied + bias, (False, True): untied + bias}
    for (tie, has_bias), words in cases.items():
        assert head_words(ModelConfig(tie_output=tie, final_logits_bias=has_bias)) == words


def test_head_ablation_from_the_pickers_and_the_link(tiny_model_dir, monkeypatch):
    at = open_app(tiny_model_dir, monkeypatch, stage="ablation", max_len="6")
    assert any("No head is switched off" in i.value for i in at.info)
    assert any(t.startswith("Cross-attention heads: loss increase") for t in titles(at))
    at.pills(key="ablate_cross_0").set_value([0, 1, 2, 3]).run()
    at.pills(key="ablate_cross_1").set_value([0, 1, 2, 3]).run()
    ok(at)
    assert (
        qp(at, "ablate") == "dec.0.cross.0,dec.0.cross.1,dec.0.cross.2,dec.0.cross.3,dec.1.cross.0,dec.1.cross.1,"
        "dec.1.cross.2,dec.1.cross.3"
    )
    without = next(m.value for m in at.markdown if m.value.startswith("**Without"))
    assert "8 heads" in without
    # the link reopens the same ablation, and the pickers show it
    at2 = open_app(
        tiny_model_dir,
        monkeypatch,
        stage="ablation",
        max_len="6",
        ablate="dec.1.self.2",
        amode="mean",
        ref="Bonjour le monde.",
    )
    assert at2.pills(key="ablate_self_1").value == [2] and at2.radio(key="ablate_mode").value == "mean"
    assert any(t.startswith("Reference loss change per position") for t in titles(at2))
    assert any("one intervention among several" in m.value for m in at2.markdown)


def best_head_by_hand(model_dir, method: str) -> tuple[int, int]:
    """Every cross-attention head of the tiny model compared with the attribution of its greedy output (max_len 5) of
    the default sentence: the most positions with the same top source word, ties by mean Spearman ρ."""
    from model.decode.trace import teacher_forced_trace
    from model.interpret.attribution import agreement, attribute

    lm = load_model_dir(model_dir)
    src = lm.tokenizer.encode(View().source) + [lm.cfg.eos_id]
    out = list(decode(lm.model, src, DecodeOptions(max_len=5)).ids)
    attr = attribute(lm.model, src, out, method=method)
    y = out[:-1] if out[-1] == lm.cfg.eos_id else out
    tr = teacher_forced_trace(lm.model, lm.tokenizer, src[:-1], y)
    score = {}
    for layer in range(lm.cfg.n_decoder_layers):
        for head in range(lm.cfg.n_heads):
            ag = agreement(attr.src, tr.arrays[keys.dec(layer, "cross", "weights")][head, : len(out)])
            rho = ag.spearman[np.isfinite(ag.spearman)]
            score[layer, head] = (int(ag.top1.sum()), rho.mean() if rho.size else -np.inf)
    return max(score, key=lambda k: (score[k], -k[0], -k[1]))


def test_attribution_opens_on_the_best_agreeing_head_until_one_is_chosen(tiny_model_dir, monkeypatch):
    """Without a layer or head in the link, the stage opens on the head that agrees best (sidebar and URL follow
    and the page says why); a head chosen in the sidebar, or given by the link, stays."""
    layer, head = best_head_by_hand(tiny_model_dir, "ixg")
    at = open_app(tiny_model_dir, monkeypatch, stage="attribution", max_len="5", step="3", attr="ixg")
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (layer, head)
    assert (qp(at, "layer") or "0", qp(at, "head")) == (str(layer), str(head))
    assert any(t.startswith(f"Cross-attention, head {head} (layer {layer})") for t in titles(at))
    assert any(f"Showing **layer {layer}, head {head}**" in i.value for i in at.info)
    other = (head + 1) % 4
    at.selectbox(key="head").set_value(other).run()
    ok(at)
    at.radio(key="attribution").set_value("ig").run()  # a new attribution: the chosen head stays
    ok(at)
    assert at.selectbox(key="head").value == other
    assert any(t.startswith(f"Cross-attention, head {other} (layer {layer})") for t in titles(at))
    assert any("The head that agrees best is **layer" in i.value for i in at.info)
    linked = open_app(tiny_model_dir, monkeypatch, stage="attribution", max_len="5", attr="ixg", head="mean")
    assert linked.selectbox(key="head").value == MEAN_HEADS and linked.selectbox(key="layer").value == 0


def test_attribution_says_what_its_numbers_mean(tiny_model_dir, monkeypatch):
    at = open_app(tiny_model_dir, monkeypatch, stage="attribution", max_len="5", attr="ixg")
    text = "\n".join(m.value for m in at.markdown)
    for name in ("agree", "Spearman ρ", "share from the source", "completeness error"):
        assert f"- **{name}**: " in text, name
    show_stage(at, "ablation")
    assert any("- **head importance**: the mean cross-entropy" in m.value for m in at.markdown)


def test_attribution_beside_attention(tiny_model_dir, monkeypatch):
    at = open_app(tiny_model_dir, monkeypatch, stage="attribution", max_len="5", step="3", attr="ixg", head="mean")
    got = titles(at)
    assert any(t.startswith("Attribution to the source (Input × Gradient)") for t in got)
    assert any(t.startswith("Cross-attention, mean of heads (layer 0)") for t in got)
    table = frame(at, "attribution's top word")
    assert len(table) == 4 and set(table["agree"]) <= {True, False}
    assert any(re.search(r"agree on the most important source token at \d+ of 4 steps", m.value) for m in at.markdown)
    assert any("depends on its baseline" in m.value for m in at.markdown)
    at.selectbox(key="head").set_value(1).run()
    ok(at)
    assert [t.split(" (layer")[0] for t in titles(at) if t.startswith("Cross-attention")] == [
        "Cross-attention, head 1",
        "Cross-attention, mean of heads",
    ]  # the chosen head, and the mean beside it
    assert any("layer 0, head 1" in m.value for m in at.markdown)  # the agreement names what it compares
    src = figure(at, "Attribution to the source")
    attn = figure(at, "Cross-attention, mean")
    assert src["data"][0]["y"] == attn["data"][0]["y"] and src["data"][0]["x"] == attn["data"][0]["x"]  # same axes


def test_attribution_of_a_prefix_is_the_whole_outputs_cut(tiny_model, tiny_tokenizer):
    """The step view attributes the whole output once and cuts it to the shown positions: a position's attribution
    depends only on the tokens up to it, so the cut equals attributing the prefix itself."""
    from dataclasses import replace

    from model.interpret.attribution import attribute
    from views.stages.attribution import _prefix, _refined_note

    src = tiny_tokenizer.encode("I like pizza.") + [tiny_model.cfg.eos_id]
    out = decode(tiny_model, src, DecodeOptions(max_len=6)).ids
    whole = attribute(tiny_model, src, out, method="ixg")
    part = attribute(tiny_model, src, out[:3], method="ixg")
    cut = _prefix(whole, 3)
    for name in ("src", "tgt", "raw_src", "raw_tgt", "target_logit", "baseline_value"):
        np.testing.assert_allclose(getattr(cut, name), getattr(part, name), rtol=1e-4, atol=1e-6, err_msg=name)
    assert cut.refined.shape == (3,) and _refined_note(cut) == ""  # nothing refined: nothing said
    refined = replace(whole, refined=np.arange(len(out)) % 2 == 0)  # positions 0, 2, 4, ...
    assert "At 2 positions" in _refined_note(_prefix(refined, 3))
    assert "At 1 position the" in _refined_note(_prefix(refined, 1))


def test_the_server_loads_the_first_page_s_model_before_any_browser(tiny_model_dir, monkeypatch):
    """``streamlit run app.py`` serves an st.App (its lifespan starts ``warm_start``), and ``warm_start`` fills the
    very cache entry the first page reads: the page finds the model loaded. The garbage collector is off meanwhile
    (its full collections would walk torch's objects again and again) and on again after, those objects frozen."""
    import gc

    from streamlit.web.server.app_discovery import discover_asgi_app

    import app
    import views.common

    assert discover_asgi_app(Path(app.__file__)).is_asgi_app
    assert Path(APP) == app.PAGE
    loads, leans = [], []
    real, real_lean = views.common.load_model_dir, views.common.LeanDecoder
    monkeypatch.setattr(views.common, "load_model_dir", lambda p: loads.append((p, gc.isenabled())) or real(p))
    monkeypatch.setattr(views.common, "LeanDecoder", lambda *a, **k: leans.append(a) or real_lean(*a, **k))
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    views.common._load_model.clear()
    views.common._lean_decoder.clear()
    frozen = gc.get_freeze_count()
    app.warm_start()
    assert loads == [(str(tiny_model_dir), False)] and len(leans) == 1
    assert gc.isenabled() and gc.get_freeze_count() > frozen
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"max_len": "8"})
    at.run()
    ok(at)
    assert len(loads) == 1 and len(leans) == 1  # the page's load and decoder were cache hits


def test_the_served_plotly_bundle_is_plotly_s_own_and_draws_every_trace_the_figures_use():
    """The page draws with the vendored cartesian bundle: it must be the plotly.js version the pinned plotly package
    writes figures for, and hold every trace type that ``viz/`` and the pages build."""
    from plotly.offline import get_plotlyjs_version

    from views.routes import PLOTLY_JS

    bundle = PLOTLY_JS.read_text(encoding="utf-8")
    assert re.search(r"plotly\.js \(cartesian - minified\) v([\d.]+)", bundle[:300]).group(1) == get_plotlyjs_version()
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    root = Path(APP).parents[1]
    sources = [p.read_text() for d in ("viz", "views") for p in sorted((root / d).rglob("*.py"))]
    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseTraceType

    traces = {
        n.lower() for n in dir(go) if isinstance(getattr(go, n), type) and issubclass(getattr(go, n), BaseTraceType)
    }
    # traces built as objects (go.Heatmap(...)) or as dicts (dict(type="heatmap", ...)); shapes' and axes' types
    # ("rect", "category") are not trace types
    named = {n.lower() for text in sources for n in re.findall(r"\bgo\.([A-Z]\w*)\(", text)}
    typed = {n for text in sources for n in re.findall(r"\btype=\"(\w+)\"", text)}
    used = (named | typed) & traces
    assert {"heatmap", "scatter"} <= used <= registered, (used, registered)


@pytest.mark.slow
def test_the_page_script_sends_its_first_elements_before_importing_torch():
    """A fresh server may still be importing torch (~1 s) in its warm start: what the page script imports before its
    first elements (its top, then the "page script" group of ``views.imports``) must not need it, so that those
    elements (the one that loads Plotly among them) go out at once."""
    import ast
    import subprocess
    import sys

    from views.imports import GROUPS

    tree = ast.parse(Path(APP).read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in top if isinstance(n, ast.ImportFrom) and n.module != "__future__"]
    names += GROUPS["page script"]
    assert "views.plot" in names, names
    probe = f"import sys; {'; '.join(f'import {m}' for m in names)}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=Path(APP).parents[1], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "False", (names, out.stdout, out.stderr)


@pytest.mark.slow
def test_the_server_starts_without_the_figure_builders_or_pandas():
    """What ``app.py`` imports is what the server loads before it answers its health check: Streamlit and the served
    files' paths (``views/routes.py``), not the figure builders and pandas (~0.35 s), which the warm start brings."""
    import subprocess
    import sys

    root = Path(APP).parents[1]
    probe = "import sys, app; print(sorted(m for m in ('pandas', 'viz', 'views.plot', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr[-2000:])


# Run in a fresh interpreter: what a first Explore page imports, from the page script's own imports to its run.
FIRST_EXPLORE_IMPORTS = """
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=60)
at.query_params.update({"stage": "self", "max_len": "8"})
at.run()
assert not at.exception, at.exception
assert any("Position 0" in m.value for m in at.markdown), "not the step view"
print(sorted(m for m in ("pandas", "sqlalchemy", "numba") if m in sys.modules))
"""


def _python(code: str, *args: str, env: dict[str, str]) -> str:
    import os
    import subprocess
    import sys

    root = Path(APP).parents[1]
    run = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), **env},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # a fresh Python process
def test_a_first_explore_page_imports_none_of_what_it_does_not_show(tiny_model_dir):
    """pandas (~0.3 s) comes with the first table, SQLAlchemy (~0.4 s) with the first page that keeps a class's
    answers and numba (~0.25 s) with the first compiled decode (a beam search, an untraced one): a fresh server's first
    Explore page, which needs none of them, does not wait for them."""
    assert _python(FIRST_EXPLORE_IMPORTS, APP, env={ENV_MODEL: str(tiny_model_dir)}) == "[]"


AFTER_WARM_START_IMPORTS = """
import json
import sys
import app
from streamlit.testing.v1 import AppTest
app.warm_start()
at = AppTest.from_file(sys.argv[1], default_timeout=60)
at.query_params.update({"stage": "self", "max_len": "8"})
before = set(sys.modules)
at.run()
assert not at.exception, at.exception
ours = ("streamlit", "plotly", "model", "viz")
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ours)))
"""


@pytest.mark.slow  # a fresh Python process
def test_after_the_warm_start_a_first_explore_page_imports_nothing_of_the_model_the_figures_or_streamlit_s_tables(
    tiny_model_dir,
):
    """The warm start imports what the first Explore page's run would otherwise import under a waiting browser: the
    model's and the figures' modules, plotly's, and Streamlit's emoji table that ``st.set_page_config`` checks the
    page's icon against (~35 ms); Streamlit's own small modules of a first run (its material icon names, ~2 ms, and
    what AppTest alone loads) aside."""
    own = {"streamlit.material_icon_names", "streamlit.components.v2.manifest_scanner"}  # ~2 ms; AppTest's own
    new = json.loads(_python(AFTER_WARM_START_IMPORTS, APP, env={ENV_MODEL: str(tiny_model_dir)}))
    assert sorted(set(new) - own) == [], new


def test_plotly_s_bundle_is_compressed_once_per_server_not_per_browser(monkeypatch):
    """Every new visitor loads Plotly's bundle: gzipped once, then the same bytes for each; a browser that takes no
    gzip gets the file itself."""
    import gzip

    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    import app
    from views.routes import PLOTLY_JS, PLOTLY_ROUTE

    calls = []
    real = gzip.compress
    monkeypatch.setattr(gzip, "compress", lambda *a, **k: calls.append(1) or real(*a, **k))
    app.gzipped.cache_clear()
    client = TestClient(Starlette(routes=[Route(PLOTLY_ROUTE, app.plotly_bundle)]))
    raw = PLOTLY_JS.read_bytes()
    for _ in range(3):
        r = client.get(PLOTLY_ROUTE, headers={"Accept-Encoding": "gzip, deflate"})
        assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
        assert r.content == raw  # the client decodes it
        assert int(r.headers["content-length"]) < len(raw) / 2
    assert len(calls) == 1
    plain = client.get(PLOTLY_ROUTE, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == raw
    app.gzipped.cache_clear()
