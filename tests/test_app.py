"""The Streamlit app, driven headlessly with AppTest against the tiny random model, plus its pure helpers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app_support import (
    DEFAULT_STAGE,
    ENV_MODEL,
    MEAN_HEADS,
    STAGE_LABELS,
    STAGES,
    Choices,
    clamp_choices,
    compact_result,
    escape_markdown,
    live_rows,
    model_dirs,
    move,
    parse_query_params,
    path_rows,
    prepare_source,
    query_params_for,
    stack_view,
)
from model.checkpoint import load_model_dir
from model.decoding import DecodeOptions, decode
from model.trace import teacher_forced_trace

APP = str(Path(__file__).resolve().parent.parent / "app.py")
XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture
def app(tiny_model_dir, monkeypatch) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["max_len"] = "8"  # short decodes keep the suite fast
    at.run()
    ok(at)
    return at


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def n_chips(at: AppTest) -> int:
    body = next(m.value for m in at.markdown if m.value.startswith("**Generated so far"))
    n = int(re.search(r"\((\d+) tokens?\)", body).group(1))
    assert body.count("-badge[") == max(n, 1)  # the empty state shows one <s> badge
    return n


def frame(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def plots(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def titles(at: AppTest) -> list[str]:
    """The titles of the Plotly figures on the page, in page order."""
    return [json.loads(c.proto.spec)["layout"].get("title", {}).get("text") or "" for c in at.get("plotly_chart")]


def show_stage(at: AppTest, stage: str) -> AppTest:
    at.segmented_control(key="stage").set_value(stage).run()
    ok(at)
    return at


ENCODER = ("Encoder self-attention", "Encoder output")  # outside the step view: shown whatever the stage
# Figures (title starts) each stage draws in the step view, and the section headers it shows.
STAGE_FIGURES = {
    "inputs": ("Token embeddings", "Positional encoding PE", "Sum X", "The model's positional encoding"),
    "qkv": ("Q (", "K (", "V ("),
    "scores": ("Raw scores", "Causal mask M", "Masked scores"),
    "self": ("Attention weights α",),
    "self_out": ("α·V", "Output after W_O", "Add &amp; Norm 1"),
    "cross": ("Alignment, head", "Alignment, mean", "Cross Q", "Cross K", "Cross V", "Add &amp; Norm 2"),
    "ffn": ("FFN hidden activations", "Add &amp; Norm 3"),
    "output": ("Top 10 next tokens", "Step "),
}
STAGE_HEADERS = {
    "inputs": ("1 · Decoder inputs", "2 · Token embeddings"),
    "qkv": ("3 · Masked self-attention",),
    "scores": ("3 · Masked self-attention",),
    "self": ("3 · Masked self-attention",),
    "self_out": ("3 · Masked self-attention", "4 · Add & Norm 1"),
    "cross": ("5 · Cross-attention", "Add & Norm 2"),
    "ffn": ("6 · Feed-forward", "Add & Norm 3"),
    "output": ("7 · Output", "9 · What the KV cache holds"),
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
    headers = [h.value for h in app.subheader]
    order = ["1 · Decoder inputs", "2 · Token embeddings", "3 · Masked self-attention", "4 · Add & Norm 1",
             "5 · Cross-attention", "Add & Norm 2", "6 · Feed-forward", "Add & Norm 3", "7 · Output",
             "9 · What the KV cache holds", "What if?", "Export"]  # fmt: skip
    pos = [next(i for i, h in enumerate(headers) if h.startswith(o)) for o in order]
    assert pos == sorted(pos), headers
    assert plots(app) >= 20
    assert len(app.get("latex")) >= 10  # the formulas beside the panels
    assert frame(app, "decoder input")["decoder input"].tolist() == ["<s>"]


def test_step_forward_and_back(app):
    show_stage(app, "inputs")  # the shifted-inputs table
    app.button(key="next").click().run()
    app.button(key="next").click().run()
    ok(app)
    assert app.session_state["step"] == 2 and n_chips(app) == 2
    assert len(frame(app, "decoder input")) == 3
    app.button(key="prev").click().run()
    ok(app)
    assert app.session_state["step"] == 1 and n_chips(app) == 1
    app.button(key="last").click().run()
    last = app.session_state["step"]
    assert last == app.slider(key="step").max > 1 and n_chips(app) == last
    app.button(key="next").click().run()  # past the end: stays on the last step
    assert app.session_state["step"] == last
    app.button(key="first").click().run()
    assert app.session_state["step"] == 0 and n_chips(app) == 0
    app.slider(key="step").set_value(4).run()
    ok(app)
    assert n_chips(app) == 4
    assert app.query_params["step"] == ["4"] or app.query_params["step"] == "4"


def test_layer_head_and_all_heads(app):
    show_stage(app, "all")
    app.selectbox(key="layer").set_value(1).run()
    app.selectbox(key="head").set_value(2).run()
    ok(app)
    headers = [h.value for h in app.subheader]
    assert any(h.startswith("3 · Masked self-attention — layer 1, head 2") for h in headers)
    n = plots(app)
    app.toggle(key="all_heads").set_value(True).run()
    ok(app)
    assert plots(app) == n + 2  # self- and cross-attention grids
    app.selectbox(key="head").set_value(MEAN_HEADS).run()
    ok(app)
    assert any("mean of heads" in h for h in (h.value for h in app.subheader))


def test_stage_selector_shows_each_group_and_every_stage_is_reachable(app):
    app.button(key="next").click().run()
    assert app.segmented_control(key="stage").options == [STAGE_LABELS[s] for s in STAGES]
    seen: dict[str, list[str]] = {}
    for stage in STAGES:
        show_stage(app, stage)
        assert app.segmented_control(key="stage").value == stage
        qp = app.query_params["stage"]
        assert qp in (stage, [stage])  # the URL keeps the stage
        assert all(any(t.startswith(e) for t in titles(app)) for e in ENCODER)
        seen[stage] = step_figures(app)
        assert app.session_state["step"] == 1 and n_chips(app) == 1  # changing the stage keeps the step
        headers = [h.value for h in app.subheader]
        for want in STAGE_HEADERS.get(stage, ()):
            assert any(h.startswith(want) for h in headers), (stage, want, headers)
    for stage, want in STAGE_FIGURES.items():
        got = seen[stage]
        assert len(got) == len(want) and all(t.startswith(w) for t, w in zip(got, want)), (stage, got)
        others = [t for s, figs in seen.items() if s not in (stage, "all") for t in figs]
        assert not set(got) & set(others), stage  # each figure belongs to one stage
    # "All stages" shows every stage's figures, in data-flow order
    assert seen["all"] == [t for s in STAGES if s != "all" for t in seen[s]]
    assert any(h.startswith("1 · Decoder inputs") for h in (h.value for h in show_stage(app, "all").subheader))
    # the stepper keeps the chosen stage; a step redraws only that stage's figures
    show_stage(app, "ffn")
    app.button(key="next").click().run()
    ok(app)
    assert app.session_state["step"] == 2 and app.segmented_control(key="stage").value == "ffn"
    figs = step_figures(app)
    assert len(figs) == 2 and all(t.startswith(("FFN hidden", "Add &amp; Norm 3")) for t in figs), figs


def test_stage_from_the_url_and_in_teacher_forcing(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(src="Hello world.", stage="cross", max_len="6", ref="Bonjour le monde.")
    at.run()
    ok(at)
    assert at.segmented_control(key="stage").value == "cross"
    figs = step_figures(at)  # both tabs: decoding and teacher forcing, cross-attention only
    assert len(figs) == 2 * len(STAGE_FIGURES["cross"])
    assert all(t.startswith(STAGE_FIGURES["cross"]) for t in figs), figs
    show_stage(at, "output")
    assert any(t.startswith("Top 10 at position") for t in titles(at))
    assert frame(at, "p(label)") is not None  # the loss table of teacher forcing shows whatever the stage
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(src="Hello world.", stage="nonsense", max_len="6")
    at.run()
    ok(at)
    assert at.segmented_control(key="stage").value == DEFAULT_STAGE


def test_beam_search_and_following_a_hypothesis(app):
    show_stage(app, "output")  # beam search is part of the output stage
    app.radio(key="strategy").set_value("beam").run()
    app.slider(key="beam").set_value(3).run()
    ok(app)
    assert any(h.value == "8 · Beam search" for h in app.subheader)
    for _ in range(3):
        app.button(key="next").click().run()
    ok(app)
    rows = app.selectbox(key="beam_row").options
    assert len(rows) == 3
    app.selectbox(key="beam_row").select_index(2).run()
    ok(app)
    live = frame(app, "length-normalized score")
    assert len(live) == 3
    assert n_chips(app) == 3


def test_sampling_with_parameters(app):
    app.radio(key="strategy").set_value("sample").run()
    app.number_input(key="temperature").set_value(0.7).run()
    app.number_input(key="top_k").set_value(5).run()
    app.slider(key="top_p").set_value(0.9).run()
    app.number_input(key="seed").set_value(7).run()
    ok(app)
    want = escape_markdown("sampling (temperature 0.7, top-k 5, top-p 0.9, seed 7)")
    assert any(want in m.value for m in app.markdown)


def test_force_a_token_keeps_the_prefix(app):
    show_stage(app, "inputs")  # the shifted-inputs table
    app.button(key="next").click().run()
    app.button(key="next").click().run()
    before = frame(app, "decoder input")["decoder input"].tolist()  # <s> y1 y2
    pick = app.selectbox(key="whatif_pick")
    alt = pick.options[3]  # labels; pick the 4th most likely token
    app.selectbox(key="whatif_pick").select_index(3).run()
    app.button(key="whatif_go").click().run()
    ok(app)
    forced = app.session_state["forced"]["prefix"]
    assert len(forced) == 3
    assert app.session_state["step"] == 3
    after = frame(app, "decoder input")
    assert after["decoder input"].tolist()[:3] == before  # the tokens so far are kept
    assert alt.startswith("4. ") and alt[3:].split("  (p")[0].replace("␣", "▁") == after["decoder input"].tolist()[3]
    assert after["forced"].tolist()[:3] == [True, True, True]
    assert any(m.value.startswith("**Forced prefix:**") for m in app.markdown)
    # typing a token forces it too, after the current step
    app.text_input(key="whatif_text").input("pizza").run()
    app.button(key="whatif_typed_go").click().run()
    ok(app)
    assert len(app.session_state["forced"]["prefix"]) > 3
    assert app.session_state["forced"]["prefix"][:3] == forced
    app.button(key="clear_forced").click().run()
    ok(app)
    assert "forced" not in app.session_state


def test_teacher_forcing_and_the_mask_toggle(app):
    app.text_input(key="reference").input("Je suis étudiant.").run()
    ok(app)
    assert [t.label for t in app.tabs] == ["Step-by-step decoding", "Teacher forcing (reference)"]
    table = frame(app, "p(label)")
    assert table["decoder input"].iloc[0] == "<s>" and table["expected output (label)"].iloc[-1] == "</s>"
    labels = [m.label for m in app.metric]
    assert "Mean loss (cross-entropy per token)" in labels
    app.toggle(key="no_mask").set_value(True).run()
    ok(app)
    metrics = {m.label: m.value for m in app.metric}
    masked, unmasked = float(metrics["Mean loss with the mask"]), float(metrics["Mean loss without the mask"])
    assert masked != unmasked
    assert float(metrics["Attention on future tokens"].rstrip("%")) > 0
    cmp = frame(app, "loss, no mask")
    assert np.isfinite(cmp["loss, no mask"]).all()
    app.slider(key="tf_pos").set_value(1).run()
    ok(app)


def test_lesson_and_about_pages(app):
    app.radio(key="page").set_value("Lesson").run()
    ok(app)
    assert app.title[0].value.startswith("Lesson")
    assert any(h.value.startswith("Discrepancies") for h in app.subheader)
    app.segmented_control(key="lesson_mode").set_value("All panels").run()
    ok(app)
    assert len(app.dataframe) >= 20  # seed beside ours, panel by panel
    app.radio(key="page").set_value("About").run()
    ok(app)
    assert any("Tiny test model" in m.value for m in app.markdown)
    assert any("import-marian" in c.value for c in app.code)
    app.radio(key="page").set_value("Explore").run()
    ok(app)
    assert app.text_area(key="source").value == "I am a student."  # kept while away


def test_example_buttons(app):
    app.button(key="example_5").click().run()
    ok(app)
    assert app.text_area(key="source").value == "The cat is sleeping on the sofa."
    assert any(t.value == "The cat is sleeping on the sofa." for t in app.text)


def test_xss_is_shown_as_plain_text(app):
    app.text_area(key="source").input(XSS).run()
    ok(app)
    assert any(t.value == XSS for t in app.text)
    for m in app.markdown:  # user text reaches markdown only escaped: every "<" is "\\<"
        assert not re.search(r"(?<!\\)<", m.value), m.value
    app.text_input(key="reference").input(XSS).run()
    ok(app)


def test_empty_long_and_odd_input(app):
    app.text_area(key="source").input("   \n  ").run()
    assert not app.exception and not app.error
    assert any("empty" in i.value for i in app.info)
    app.text_area(key="source").input(" ".join(["the cat is sleeping on the sofa"] * 40)).run()
    ok(app)
    assert any("only the first" in w.value for w in app.warning)
    app.text_area(key="source").input("I love 🍕 and 日本語 — ça va?").run()
    ok(app)
    assert plots(app) > 0


def test_url_reopens_the_view_and_bad_params_are_clamped(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(src="Hello world.", strategy="beam", beam="3", step="2", layer="1", head="0", max_len="6")
    at.run()
    ok(at)
    assert at.text_area(key="source").value == "Hello world."
    assert at.radio(key="strategy").value == "beam" and at.slider(key="beam").value == 3
    assert at.session_state["step"] == 2 and at.selectbox(key="layer").value == 1
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(src=XSS, strategy="evil", beam="-4", temp="nan", max_len="99999", step="abc",
                           layer="77", head="x", top_p="7")  # fmt: skip
    at.run()
    ok(at)
    assert at.radio(key="strategy").value == "greedy"
    assert at.slider(key="max_len").value == at.slider(key="max_len").max
    assert at.selectbox(key="layer").value == 1  # clamped to the last layer


def test_missing_model_is_a_clean_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tmp_path / "nope"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)
    at.radio(key="page").set_value("Lesson").run()
    assert not at.exception and not at.error


# ---------------------------------------------------------------------------
# Pure helpers.


def test_clamp_choices_and_query_params():
    clean, msgs = clamp_choices({"strategy": "x", "beam": "99", "temperature": "inf", "top_k": -3, "top_p": 2,
                                 "seed": "1e40", "max_len": 0}, vocab_size=100, model_max_len=64)  # fmt: skip
    assert clean == dict(strategy="greedy", beam=8, length_penalty=1.0, temperature=1.0, top_k=0, top_p=1.0,
                         seed=2**31 - 1, max_len=1)  # fmt: skip
    assert len(msgs) == 7
    DecodeOptions(**{k: v for k, v in clean.items()})  # always valid
    qp = parse_query_params({"src": ["a", "b"], "beam": "3", "step": "x", "head": "mean", "page": "Lesson",
                             "evil": "1"})  # fmt: skip
    assert qp == {"source": "b", "beam": 3, "head": MEAN_HEADS, "page": "Lesson"}
    ch = Choices(model_dir="m", source="Hi", strategy="sample", temperature=0.5)
    url = query_params_for(ch, "", 3, 1, MEAN_HEADS, "Explore", "cross")
    back = parse_query_params(url)
    assert back["source"] == "Hi" and back["strategy"] == "sample" and back["temperature"] == 0.5
    assert back["step"] == 3 and back["head"] == MEAN_HEADS and back["stage"] == "cross"
    assert query_params_for(ch, "", 3, 1, MEAN_HEADS, "Explore")["stage"] == DEFAULT_STAGE
    assert "stage" not in parse_query_params({"stage": "evil"})
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
    assert prepare_source("  \t ", lm.tokenizer, 2, 64) is None
    src = prepare_source("the cat " * 100, lm.tokenizer, 2, 64)
    assert src.truncated and len(src.ids) == 64 and src.ids[-1] == 2


def test_stepwise_view_matches_the_parallel_trace(tiny_model_dir):
    """Rows stacked from the KV-cached steps equal the teacher-forced pass over the same tokens."""
    lm = load_model_dir(tiny_model_dir)
    src = lm.tokenizer.encode("I like pizza.") + [lm.cfg.eos_id]
    res = decode(lm.model, src, DecodeOptions(max_len=6, record=True))
    step = len(res.steps) - 1
    view = stack_view(res.steps, path_rows(res, step), step)
    tr = teacher_forced_trace(lm.model, lm.tokenizer, src[:-1], [i for i in res.ids if i != lm.cfg.eos_id])
    T = step + 1
    lower = np.tril(np.ones((T, T), bool))
    for key, arr in view.items():
        ref = tr.arrays[key]
        leaf = key.split(".")[-1]
        if key.endswith(("cross.K", "cross.V")):
            pass
        elif ".self." in key and leaf in ("scores", "mask", "masked_scores", "weights"):
            ref = ref[:, :T, :T]
            assert (np.isfinite(arr) == lower).all(), key  # the future was never computed
        elif ref.ndim == 3:
            ref = ref[:, :T]
        else:
            ref = ref[:T]
        assert arr.shape == ref.shape, (key, arr.shape, ref.shape)
        fin = np.isfinite(arr)
        np.testing.assert_allclose(arr[fin], ref[fin], atol=2e-4, rtol=1e-3, err_msg=key)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_compact_records_give_the_same_view(tiny_model_dir, strategy):
    """Keeping only each step's new K/V row (and cross K/V once) loses nothing along any hypothesis."""
    lm = load_model_dir(tiny_model_dir)
    src = lm.tokenizer.encode("The cat is sleeping on the sofa.") + [lm.cfg.eos_id]
    res = decode(lm.model, src, DecodeOptions(strategy=strategy, beam=3, max_len=6, record=True))
    small = compact_result(res)
    assert sum(v.nbytes for s in small.steps for v in s.arrays.values()) < sum(
        v.nbytes for s in res.steps for v in s.arrays.values()
    )
    for step in range(len(res.steps)):
        for row in live_rows(res, step):
            rows = path_rows(res, step, row)
            full, compact = stack_view(res.steps, rows, step), stack_view(small.steps, rows, step)
            assert full.keys() == compact.keys()
            for key in full:
                np.testing.assert_array_equal(full[key], compact[key], err_msg=f"{key} step {step} row {row}")
