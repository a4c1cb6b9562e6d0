"""Decoder Lens: step through an English→French Transformer decoder and see every stage.

This file only orchestrates: widgets → a frozen ``Choices`` → model / trace → ``viz`` figures.
Run with ``streamlit run app.py``; ``DECODER_LENS_MODEL=/path/to/model_dir`` picks another model.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import viz
from app_support import (
    DEFAULT_STAGE,
    EXAMPLES,
    LRU,
    MAX_BEAM,
    MAX_CHARS,
    MAX_DECODE_LEN,
    MAX_SEED,
    MAX_TEMPERATURE,
    MEAN_HEADS,
    PAGES,
    STAGE_LABELS,
    STAGES,
    STRATEGIES,
    STRATEGY_LABELS,
    Choices,
    chips,
    clamp_choices,
    clamp_step,
    compact_result,
    escape_markdown,
    heads_concat,
    layer_keep,
    live_rows,
    mean_weights,
    model_dirs,
    move,
    npz_bytes,
    parse_query_params,
    path_rows,
    path_tokens,
    prepare_source,
    query_params_for,
    save_to_bytes,
    show_token,
    stack_view,
    summary_dict,
    to_json_bytes,
    token_prob,
)
from model.checkpoint import LoadedModel, ModelDirError, default_model_dir, load_model_dir, set_threads
from model.decoding import decode
from model.lean import LeanDecoder
from model.trace import teacher_forced_trace

ROOT = Path(__file__).resolve().parent
MODELS_ROOT = ROOT / "assets" / "models"
STEP_BUTTONS = (  # key, label, icon (material icons ship with Streamlit; emoji fonts may be missing)
    ("first", "", ":material/skip_previous:", "⏮ first step"),
    ("prev", "", ":material/arrow_left:", "◀ previous step"),
    ("next", "", ":material/arrow_right:", "▶ next step"),
    ("last", "", ":material/skip_next:", "⏭ last step"),
)
TOP_SHOWN = 10  # bars in the next-token chart / alternatives offered in the what-if box
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
PARAM_KEYS = ("strategy", "beam", "length_penalty", "temperature", "top_k", "top_p", "seed", "max_len")
PERSIST_KEYS = (
    "source",
    "reference",
    *PARAM_KEYS,
    "layer",
    "head",
    "all_heads",
    "model_dir",
    "no_mask",
    "step",
    "beam_row",
    "tf_pos",
    "stage",
)
log = logging.getLogger("decoder_lens")

st.set_page_config(page_title="Decoder Lens", page_icon="🔎", layout="wide")


# ---------------------------------------------------------------------------
# Cached resources (shared by every session, never mutated).


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def load_model(path: str, stamp: tuple) -> LoadedModel:
    """``stamp`` (the files' sizes and times) makes a rebuilt model directory load afresh."""
    set_threads()
    return load_model_dir(path)


@st.cache_resource(show_spinner=False, max_entries=4)
def lean_decoder(_lm: LoadedModel, path: str, stamp: tuple) -> LeanDecoder:
    """The loaded model's decoder laid out for step-by-step decoding (~20 ms to build): once per model, shared by
    every session; its steps never modify it."""
    return LeanDecoder(_lm.model, rows=5)


def dir_stamp(path: str) -> tuple:
    out = []
    for name in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"):
        try:
            st_ = (Path(path) / name).stat()
            out.append((name, st_.st_size, st_.st_mtime_ns))
        except OSError:
            out.append((name, None, None))
    return tuple(out)


@st.cache_resource(show_spinner=False)
def get_lesson():
    from model.lesson import build_lesson

    return build_lesson()


# ---------------------------------------------------------------------------
# Small helpers.


def md(text: object) -> str:
    """Markdown that shows ``text`` literally (no HTML, no formatting)."""
    return escape_markdown(str(text))


def show(fig, key: str) -> None:
    cfg = {**PLOTLY_CONFIG, "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": key}}
    st.plotly_chart(fig, key=key, config=cfg, width="stretch")


def fail(message: str, exc: BaseException) -> None:
    log.exception(message)
    st.error(f"{md(message)}: {md(type(exc).__name__)} — {md(exc)}")


def token_texter(lm: LoadedModel):
    def text(i: int) -> str:
        return "∅" if int(i) < 0 else lm.tokenizer.id_to_token(int(i))

    return text


def head_label(head) -> str:
    return "mean of heads" if head == MEAN_HEADS else f"head {head}"


def badges(items: list[tuple[str, str]]) -> str:
    """A line of coloured badges (markdown directives) with every label escaped."""
    return " ".join(f":{color}-badge[{md(label)}]" for label, color in items)


def ss():
    return st.session_state


# ---------------------------------------------------------------------------
# Session state: defaults, persistence and the URL.


def init_state(default_model: str) -> None:
    s = ss()
    for key in PERSIST_KEYS:  # keep widget values while their widgets are not on the page
        if key in s:
            s[key] = s[key]
    defaults = dict(source=EXAMPLES[0], reference="", strategy="greedy", beam=4, length_penalty=1.0,
                    temperature=1.0, top_k=0, top_p=1.0, seed=0, max_len=40, layer=0, head=MEAN_HEADS,
                    all_heads=False, model_dir=default_model, no_mask=False, page=PAGES[0],
                    stage=DEFAULT_STAGE)  # fmt: skip
    if not s.get("qp_loaded"):
        s["qp_loaded"] = True
        url = parse_query_params(st.query_params.to_dict())
        if "step" in url:
            s["pending_step"] = url.pop("step")
        for key, value in url.items():
            s[key] = value
    for key, value in defaults.items():
        s.setdefault(key, value)
    if "decodes" not in s:
        s["decodes"] = LRU(4)
    if "traces" not in s:
        s["traces"] = LRU(4)


def sync_url(qp: dict) -> None:
    try:
        if st.query_params.to_dict() != qp:
            st.query_params.from_dict(qp)
    except Exception:  # the URL is a convenience; never fail the page for it
        log.exception("could not update the query parameters")


# ---------------------------------------------------------------------------
# Model / decode / trace access (per-user caches in session state).


def get_decode(lm: LoadedModel, ch: Choices, src_ids: tuple[int, ...]):
    cache: LRU = ss()["decodes"]
    res = cache.get(ch)
    if res is None:
        with st.spinner("Decoding…"):
            lean = lean_decoder(lm, str(lm.path), dir_stamp(str(lm.path)))
            res = cache.put(ch, compact_result(decode(lm.model, src_ids, ch.options(record=True), lean)))
    return res


def get_trace(lm: LoadedModel, src_ids: tuple[int, ...], target, causal: bool):
    key = (str(lm.path), src_ids, target if isinstance(target, str) else tuple(target), causal)
    cache: LRU = ss()["traces"]
    tr = cache.get(key)
    if tr is None:
        tr = cache.put(key, teacher_forced_trace(lm.model, lm.tokenizer, list(src_ids[:-1]), target, causal=causal))
    return tr


# ---------------------------------------------------------------------------
# Sidebar.


def sidebar_model(dirs: list[Path]) -> str:
    options = [str(p) for p in dirs]
    if ss().get("model_dir") not in options:
        ss()["model_dir"] = options[0]
    if len(options) > 1:
        st.sidebar.selectbox("Model", options, key="model_dir", format_func=lambda p: Path(p).name)
    return ss()["model_dir"]


def sidebar_decoding(lm: LoadedModel) -> tuple[dict, list[str]]:
    cfg = lm.cfg
    s = ss()
    clean, msgs = clamp_choices({k: s.get(k) for k in PARAM_KEYS}, cfg.vocab_size, cfg.max_len)
    for key, value in clean.items():  # clamp before the widgets exist (URL values may be out of range)
        if s.get(key) != value or type(s.get(key)) is not type(value):
            s[key] = value
    sb = st.sidebar
    sb.subheader("Decoding")
    sb.radio("Strategy", STRATEGIES, key="strategy", format_func=STRATEGY_LABELS.get, horizontal=True)
    if s["strategy"] == "beam":
        sb.slider("Beam width", 1, MAX_BEAM, key="beam")
        sb.number_input("Length penalty", 0.0, 3.0, step=0.1, key="length_penalty",
                        help="score = log p / length^penalty (as in transformers)")  # fmt: skip
    elif s["strategy"] == "sample":
        sb.number_input("Temperature", 0.0, MAX_TEMPERATURE, step=0.1, key="temperature",
                        help="0 = always the most likely token")  # fmt: skip
        sb.number_input("Top-k (0 = off)", 0, cfg.vocab_size, step=1, key="top_k")
        sb.slider("Top-p (1 = off)", 0.0, 1.0, step=0.01, key="top_p")
        sb.number_input("Seed", 0, MAX_SEED, step=1, key="seed")
    cap = max(1, min(MAX_DECODE_LEN, cfg.max_len - 1))
    if cap > 1:
        sb.slider("Max length (new tokens)", 1, cap, key="max_len")
    return {k: s[k] for k in PARAM_KEYS}, msgs


def sidebar_view(lm: LoadedModel) -> tuple[int, object, bool]:
    cfg = lm.cfg
    s = ss()
    layers = list(range(cfg.n_decoder_layers))
    heads = [MEAN_HEADS, *range(cfg.n_heads)]
    if s.get("layer") not in layers:
        s["layer"] = min(max(int(s.get("layer") or 0), 0), layers[-1]) if isinstance(s.get("layer"), int) else 0
    if s.get("head") not in heads:
        s["head"] = MEAN_HEADS
    sb = st.sidebar
    sb.subheader("View")
    sb.selectbox("Decoder layer", layers, key="layer")
    sb.selectbox("Attention head", heads, key="head", format_func=head_label)
    sb.toggle("Show all heads (grid)", key="all_heads")
    return s["layer"], s["head"], s["all_heads"]


# ---------------------------------------------------------------------------
# Stage sections (shared by free-running decoding and teacher forcing).


def formula(latex: str) -> None:
    st.latex(latex)


def shows(stage: str, group: str) -> bool:
    """Whether the stage selector's choice ``stage`` includes the group ``group``."""
    return stage in (group, "all")


def render_stages(
    lm: LoadedModel,
    a: dict,
    tokens: list[str],
    src_tokens: list[str],
    hl: int,
    layer: int,
    head,
    all_heads: bool,
    prefix: str,
    incremental: bool,
    stage: str = "all",
) -> None:
    """Sections 2-6 in data-flow order for arrays shaped like ``Trace.arrays`` (positions 0..T-1).

    Only the groups the stage selector's ``stage`` includes are built and sent (``shows``).
    """
    cfg = lm.cfg
    L = f"dec.{layer}"
    hname = head_label(head)
    T = len(tokens)
    qkv_title = "all heads side by side" if head == MEAN_HEADS else hname

    # 2. Embeddings and positional encoding.
    if shows(stage, "inputs"):
        st.subheader("2 · Token embeddings + positional encoding")
        formula(r"X = E[y]\,\sqrt{d_{\text{model}}} + PE"
                if cfg.scale_embedding else r"X = E[y] + PE")  # fmt: skip
        c1, c2, c3 = st.columns(3)
        with c1:
            show(viz.matrix_figure(a["dec.embed"], tokens, title="Token embeddings E[y]·√d", highlight_row=hl),
                 f"{prefix}_embed")  # fmt: skip
        with c2:
            show(viz.matrix_figure(a["dec.pe"], tokens, title="Positional encoding PE", highlight_row=hl),
                 f"{prefix}_pe")  # fmt: skip
        with c3:
            show(viz.matrix_figure(a["dec.input"], tokens, title="Sum X = embedding + PE", highlight_row=hl),
                 f"{prefix}_input")  # fmt: skip
        pe_table = lm.model.tgt_embed.pe.detach().cpu().numpy()
        n_pos = int(min(pe_table.shape[0], max(50, T)))
        D = pe_table.shape[1]
        dims = sorted({0, 1, 6, 7, D // 2, D // 2 + 1} & set(range(D)))
        layout = "sin/cos interleaved" if cfg.pe_layout == "interleaved" else "sin | cos halves"
        formula(r"PE_{(pos,2i)} = \sin\!\left(pos / 10000^{2i/d_{\text{model}}}\right),\quad "
                r"PE_{(pos,2i+1)} = \cos\!\left(pos / 10000^{2i/d_{\text{model}}}\right)")  # fmt: skip
        show(viz.positional_curves(pe_table[:n_pos], dims, title=f"The model's positional encoding ({layout}) "
                                   f"over positions 0–{n_pos - 1}; the current position is {hl % T}"),
             f"{prefix}_pe_curves")  # fmt: skip

    # 3. Masked self-attention: Q, K, V | raw scores, mask | masked scores, softmax | α·V, W_O.
    if any(shows(stage, g) for g in ("qkv", "scores", "self", "self_out")):
        st.subheader(f"3 · Masked self-attention — layer {layer}, {hname}")
        if incremental and any(shows(stage, g) for g in ("qkv", "scores", "self")):
            st.caption("With the KV cache, each step computes only the newest query row (outlined). Earlier "
                       "rows were computed at earlier steps; cells right of the diagonal were never computed "
                       "(grey).")  # fmt: skip
    if shows(stage, "qkv"):
        cols = st.columns(3)
        for col, name, tex in zip(cols, "QKV", (r"Q = X W_Q", r"K = X W_K", r"V = X W_V")):
            with col:
                formula(tex)
                arr = a[f"{L}.self.{name}"]
                vals = heads_concat(arr) if head == MEAN_HEADS else arr[int(head)]
                dim = "head·d_k" if head == MEAN_HEADS else "d_k"
                show(viz.matrix_figure(vals, tokens, title=f"{name} ({qkv_title})", dim_label=dim,
                                       highlight_row=hl if name == "Q" else None), f"{prefix}_self_{name}")  # fmt: skip

    def attn(key: str):
        arr = a[f"{L}.self.{key}"]
        if key == "weights":  # weights of masked cells are exactly 0: draw them as masked (grey)
            arr = np.where(np.isfinite(a[f"{L}.self.mask"]), arr, -np.inf)
        return mean_weights(arr) if head == MEAN_HEADS else arr[int(head)]

    panels = {  # trace key → (formula, title, figure key suffix), in data-flow order
        "scores": (r"\text{scores} = \frac{Q K^{\top}}{\sqrt{d_k}}", f"Raw scores QKᵀ/√d_k, {hname} (layer {layer})",
                   "scores"),
        "mask": (r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}", "Causal mask M", "mask"),
        "masked_scores": (r"\text{masked} = \frac{Q K^{\top}}{\sqrt{d_k}} + M",
                          f"Masked scores, {hname} (layer {layer})", "masked"),
        "weights": (r"\alpha = \operatorname{softmax}\!\left(\frac{Q K^{\top}}{\sqrt{d_k}} + M\right)",
                    f"Attention weights α, {hname} (layer {layer})", "weights"),
    }  # fmt: skip
    for group, keys_ in (("scores", ("scores", "mask", "masked_scores")), ("self", ("weights",))):
        if not shows(stage, group):
            continue
        cols = st.columns(max(len(keys_), 2))
        if len(keys_) == 1:
            with cols[1]:
                st.markdown("Row *i* is how position *i* spreads its attention over positions 0…*i* (each row "
                            "sums to 1); the grey cells on the right are the future, masked to −∞ before the "
                            "softmax. The scores, the mask and the masked scores are in the stage *Scores → "
                            "causal mask*.")  # fmt: skip
        for col, key in zip(cols, keys_):
            tex, title, suffix = panels[key]
            with col:
                formula(tex)
                show(viz.attention_figure(attn(key), tokens, tokens, title=title, highlight_row=hl, kind=key),
                     f"{prefix}_{suffix}")  # fmt: skip
    if shows(stage, "self") and all_heads:
        grid = np.where(np.isfinite(a[f"{L}.self.mask"]), a[f"{L}.self.weights"], -np.inf)
        show(viz.heads_grid(grid, tokens, tokens, title=f"Self-attention weights, every head (layer {layer})",
                            highlight_row=hl), f"{prefix}_self_grid")  # fmt: skip
    if shows(stage, "self_out"):
        c1, c2 = st.columns(2)
        with c1:
            formula(r"\text{head}_h = \alpha_h V_h")
            ctx = a[f"{L}.self.context"]
            vals = heads_concat(ctx) if head == MEAN_HEADS else ctx[int(head)]
            show(viz.matrix_figure(vals, tokens, title=f"α·V ({qkv_title})", dim_label="d_k", highlight_row=hl),
                 f"{prefix}_context")  # fmt: skip
        with c2:
            formula(r"\text{MultiHead} = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h)\, W_O")
            show(viz.matrix_figure(a[f"{L}.self.out"], tokens, title="Output after W_O", highlight_row=hl),
                 f"{prefix}_self_out")  # fmt: skip

    def addnorm(n: int, what: str) -> None:
        st.subheader(f"{'4 · ' if n == 1 else ''}Add & Norm {n} — after {what}")
        formula(r"\operatorname{LayerNorm}(x + \text{Sublayer}(x)) = \gamma \odot "
                r"\frac{x + \text{Sublayer}(x) - \mu}{\sigma} + \beta")  # fmt: skip
        k = f"{L}.norm{n}"
        fig = viz.addnorm_figure(a[f"{k}.residual"], a[f"{k}.mean"], a[f"{k}.std"], a[f"{k}.out"], tokens,
                                 highlight_row=hl, title=f"Add & Norm {n} (layer {layer})")  # fmt: skip
        show(fig, f"{prefix}_norm{n}")

    # 4. Add & Norm.
    if shows(stage, "self_out"):
        addnorm(1, "self-attention")

    # 5. Cross-attention.
    if shows(stage, "cross"):
        st.subheader(f"5 · Cross-attention to the source — layer {layer}")
        formula(r"\operatorname{Attention}(Q_{\text{dec}}, K_{\text{enc}}, V_{\text{enc}}) = "
                r"\operatorname{softmax}\!\left(\frac{Q_{\text{dec}} K_{\text{enc}}^{\top}}{\sqrt{d_k}}\right)"
                r" V_{\text{enc}}")  # fmt: skip
        cw = a[f"{L}.cross.weights"]
        c1, c2 = st.columns(2)
        with c1:
            h0 = 0 if head == MEAN_HEADS else int(head)
            show(viz.alignment_figure(cw[h0], tokens, src_tokens, title=f"Alignment, head {h0}", highlight_row=hl),
                 f"{prefix}_align_head")  # fmt: skip
        with c2:
            show(viz.alignment_figure(mean_weights(cw), tokens, src_tokens, title="Alignment, mean of heads",
                                      highlight_row=hl), f"{prefix}_align_mean")  # fmt: skip
        if all_heads:
            show(viz.heads_grid(cw, tokens, src_tokens, title=f"Cross-attention weights, every head (layer {layer})",
                                highlight_row=hl), f"{prefix}_cross_grid")  # fmt: skip
        cols = st.columns(3)
        for col, name, who, labels in zip(cols, "QKV", ("decoder", "encoder", "encoder"),
                                          (tokens, src_tokens, src_tokens)):  # fmt: skip
            with col:
                arr = a[f"{L}.cross.{name}"]
                vals = heads_concat(arr) if head == MEAN_HEADS else arr[int(head)]
                show(viz.matrix_figure(vals, labels, title=f"Cross {name} ({who}, {qkv_title})",
                                       dim_label="head·d_k" if head == MEAN_HEADS else "d_k",
                                       highlight_row=hl if name == "Q" else None,
                                       token_label="target token" if name == "Q" else "source token"),
                     f"{prefix}_cross_{name}")  # fmt: skip
        addnorm(2, "cross-attention")

    # 6. FFN.
    if shows(stage, "ffn"):
        st.subheader(f"6 · Feed-forward network — layer {layer}")
        act = {"relu": r"\max(0,\, x W_1 + b_1)", "gelu": r"\operatorname{GELU}(x W_1 + b_1)"}.get(
            cfg.activation, r"\operatorname{swish}(x W_1 + b_1)"
        )
        formula(r"\operatorname{FFN}(x) = " + act + r"\, W_2 + b_2")
        hidden = a[f"{L}.ffn.hidden"]
        sp = viz.ffn_sparsity(hidden)
        row = viz.ffn_sparsity(hidden[hl])
        m1, m2, m3 = st.columns(3)
        m1.metric("Exact zeros (all rows)", f"{sp['zero']:.1%}")
        m2.metric("Exact zeros (newest row)", f"{row['zero']:.1%}")
        m3.metric("Negative activations", f"{sp['negative']:.1%}", help=f"activation: {cfg.activation}")
        show(viz.ffn_figure(hidden, tokens, title=f"FFN hidden activations ({cfg.activation})", highlight_row=hl),
             f"{prefix}_ffn")  # fmt: skip
        addnorm(3, "the feed-forward network")


def topk_section(tok_text, ids, logprobs, chosen_id: int | None, title: str, key: str) -> None:
    ids = [int(i) for i in ids[:TOP_SHOWN]]
    probs = np.exp(np.asarray(logprobs[:TOP_SHOWN], dtype=np.float64))
    chosen = ids.index(chosen_id) if chosen_id is not None and chosen_id in ids else None
    show(viz.topk_figure([tok_text(i) for i in ids], probs, chosen, title=title), key)


# ---------------------------------------------------------------------------
# Free-running decoding view (the stepping part reruns alone).


def _step_move(action: str, n: int) -> None:
    ss()["step"] = move(clamp_step(ss().get("step", 0), n), action, n)


def _clear_forced() -> None:
    ss().pop("forced", None)


@st.fragment
def decoding_view(lm: LoadedModel, ch: Choices, base: Choices, src_tokens: list[str], layer, head, all_heads,
                  reference: str, stage: str) -> None:  # fmt: skip
    try:
        _decoding_view(lm, ch, base, src_tokens, layer, head, all_heads, reference, stage)
    except Exception as e:
        fail("Could not show this step", e)


def _decoding_view(lm, ch, base, src_tokens, layer, head, all_heads, reference, stage) -> None:
    s = ss()
    tok_text = token_texter(lm)
    res = get_decode(lm, ch, ch_src_ids(lm, ch))
    n = len(res.steps)
    if s.get("step_for") != ch:
        s["step_for"] = ch
        s["step"] = clamp_step(s.pop("pending_step", 0), n)
        s.pop("beam_row", None)
    s["step"] = clamp_step(s.get("step", 0), n)

    # Controls.
    st.subheader("Step through the decoder")
    with st.container(horizontal=True, key="stepper", vertical_alignment="bottom"):
        for key, label, icon, tip in STEP_BUTTONS:
            st.button(label, key=key, icon=icon, on_click=_step_move, args=(key, n), help=tip)
        if n > 1:
            st.slider("Position (step − 1)", 0, n - 1, key="step", width=420,
                      help="Position 0 feeds <s>; position t feeds the token chosen at position t − 1.")  # fmt: skip
    step = s["step"]

    row = 0
    if res.beam_steps is not None:
        live = live_rows(res, step)
        if s.get("beam_row") not in live:
            s["beam_row"] = live[0]
        beam = res.beam_steps[step].live

        def hyp_label(r: int) -> str:
            h = beam[r]
            text = " ".join(tok_text(i) for i in h.ids) or "<s>"
            return f"row {r}: {text[:60]}  (log p {h.logprob:.2f})"

        st.selectbox("Follow hypothesis (beam row at this step)", live, key="beam_row", format_func=hyp_label,
                     help="The internals below follow this hypothesis back to the start.")  # fmt: skip
        row = s["beam_row"]
    rows = path_rows(res, step, row)
    inputs, chosen = path_tokens(res, rows, step)
    dec_tokens = [tok_text(i) for i in inputs]
    cur = res.steps[step]
    r_now = rows[step]
    next_id = int(cur.chosen[r_now])
    p_next = token_prob(cur, r_now, next_id) if next_id >= 0 else None
    sync_url(query_params_for(ch, reference, step, layer, head, s.get("page", PAGES[0]), stage))

    # Chips.
    cs = chips(res, rows, step, tok_text)
    items = [(f"{show_token(c.token)} {'' if c.prob is None else f'{c.prob:.2f}'}".strip(),
              "orange" if c.forced else "blue") for c in cs]  # fmt: skip
    with st.container(key="chips"):
        head_md = f"**Generated so far ({len(cs)} token{'s' if len(cs) != 1 else ''}):** "
        empty = "_nothing yet — the decoder has only seen_ " + badges([("<s>", "gray")])
        st.markdown(head_md + (badges(items) if items else empty))
    nxt = "∅ (this hypothesis was dropped)" if next_id < 0 else show_token(tok_text(next_id))
    pn = "" if p_next is None else f" (p = {p_next:.3f})"
    forced = " — forced by you" if cur.forced else ""
    with st.container(key="next_chip"):
        feeds = badges([(show_token(dec_tokens[-1]), "gray")])
        st.markdown(f"Step **{step + 1} of {n}** · position {step} feeds {feeds}"
                    f" → next token {badges([(nxt + pn + forced, 'green')])}")  # fmt: skip

    # 1. Shifted inputs (the table is also exported, whatever the stage).
    table = pd.DataFrame({
        "position": np.arange(step + 1),
        "decoder input": dec_tokens,
        "output (chosen next token)": [tok_text(i) for i in chosen],
        "p(output)": [token_prob(res.steps[i], rows[i], chosen[i]) if chosen[i] >= 0 else None
                      for i in range(step + 1)],
        "entropy (nats)": [float(res.steps[i].entropy[rows[i]]) for i in range(step + 1)],
        "forced": [bool(res.steps[i].forced) for i in range(step + 1)],
    })  # fmt: skip
    if shows(stage, "inputs"):
        st.subheader("1 · Decoder inputs (the output shifted right)")
        st.caption("Each position's input is the previous position's output; position 0 starts from <s>.")
        st.dataframe(table, hide_index=True, key="shifted_table")

    view = stack_view(res.steps, rows, step, stack_rows=viz.steps_to_matrix, keep=layer_keep(layer))  # the shown layer
    render_stages(lm, view, dec_tokens, src_tokens, -1, layer, head, all_heads, "dec", incremental=True,
                  stage=stage)  # fmt: skip

    if shows(stage, "output"):
        # 7. Output.
        st.subheader("7 · Output: next-token distribution")
        formula(r"p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}(h_t W_E^{\top}),\qquad "
                r"H = -\sum_v p_v \log p_v")  # fmt: skip
        c1, c2 = st.columns([3, 1])
        with c1:
            topk_section(tok_text, cur.top_ids[r_now], cur.top_logprobs[r_now], next_id if next_id >= 0 else None,
                         f"Top {TOP_SHOWN} next tokens at step {step + 1}", "dec_topk")  # fmt: skip
        with c2:
            st.metric("Entropy", f"{float(cur.entropy[r_now]):.3f} nats")
            st.metric("Chosen token", md(nxt))
            st.metric("p(chosen)", "—" if p_next is None else f"{p_next:.3f}")

        # 8. Beam search.
        if res.beam_steps is not None:
            beam_section(res, step, tok_text)

        # 9. KV cache.
        kv_section(lm, dec_tokens, step)

    # What-if.
    whatif_section(lm, ch, base, cur, r_now, inputs, step, tok_text)

    # Export.
    export_section(lm, ch, res, rows, step, dec_tokens, src_tokens, table, tok_text)


def ch_src_ids(lm: LoadedModel, ch: Choices) -> tuple[int, ...]:
    src = prepare_source(ch.source, lm.tokenizer, lm.cfg.eos_id, lm.cfg.max_len)
    return src.ids if src else (lm.cfg.eos_id,)


def _pick_beam(key: str, rows: list[int]) -> None:
    picked = ss()[key].selection.rows
    if picked:
        ss()["beam_row"] = int(rows[picked[0]])


def beam_section(res, step: int, tok_text) -> None:
    st.subheader("8 · Beam search")
    formula(r"\text{score}(y) = \frac{\log p(y \mid x)}{|y|^{\,\text{length penalty}}}")
    show(viz.beam_tree_figure(res.beam_steps[: step + 1], token_text=tok_text,
                              title=f"Hypothesis tree up to step {step + 1}"), "beam_tree")  # fmt: skip
    bs = res.beam_steps[step]
    c1, c2 = st.columns(2)
    with c1:
        st.markdown(f"**Live beams at step {step + 1}** (expanded at this step)")
        live = viz.beam_table(bs.live, tok_text)
        st.dataframe(live, hide_index=True, key=f"beam_live_{step}", on_select=partial(_pick_beam, f"beam_live_{step}",
                     live["row"].tolist()), selection_mode="single-row")  # fmt: skip
        st.caption("Select a row to follow that hypothesis.")
    with c2:
        st.markdown("**Finished hypotheses so far** (the n-best pool)")
        st.dataframe(viz.beam_table(bs.finished, tok_text), hide_index=True, key="beam_finished")


def kv_section(lm: LoadedModel, dec_tokens: list[str], step: int) -> None:
    cfg = lm.cfg
    st.subheader("9 · What the KV cache holds")
    show(viz.kv_cache_figure(step, 1, dec_tokens, title=f"Step {step + 1}: K, V rows reused vs computed now"),
         "kv_cache")  # fmt: skip
    per = 2 * cfg.n_decoder_layers * cfg.n_heads * cfg.d_k
    st.markdown(
        f"At this step the decoder computes Q, K and V for **1 new position** in each of the "
        f"{cfg.n_decoder_layers} layers and reuses the cached K and V of **{step} earlier position"
        f"{'s' if step != 1 else ''}** ({step * per:,} cached numbers; {per:,} per position). "
        f"Cross-attention K and V come from the encoder output and are computed once per sentence."
    )


def whatif_section(lm, ch: Choices, base: Choices, cur, r_now: int, inputs: list[int], step: int, tok_text) -> None:
    st.subheader("What if? Force another token here")
    so_far = [int(i) for i in inputs[1:]]
    alts = [int(i) for i in cur.top_ids[r_now][:TOP_SHOWN]]
    probs = np.exp(cur.top_logprobs[r_now][:TOP_SHOWN])
    by_label = {f"{k + 1}. {show_token(tok_text(i))}  (p = {p:.3f})": i for k, (i, p) in enumerate(zip(alts, probs))}
    options = list(by_label)
    if ss().get("whatif_pick") not in by_label:
        ss()["whatif_pick"] = options[1] if len(options) > 1 else options[0]
    c1, c2 = st.columns(2)
    with c1:
        pick = by_label.get(st.selectbox(f"Alternative next token at step {step + 1}", options, key="whatif_pick"))
        go_pick = st.button("Re-decode with this token", key="whatif_go")
    with c2:
        typed = st.text_input("…or type a token / word", key="whatif_text", max_chars=100)
        go_typed = st.button("Re-decode with the typed token", key="whatif_typed_go")
    forced_ids: list[int] | None = None
    if go_pick and pick is not None:
        forced_ids = [int(pick)]
    elif go_typed:
        text = (typed or "").strip()
        tid = lm.tokenizer.token_to_id(text) if text else None
        if tid is None and text:
            tid = lm.tokenizer.token_to_id("▁" + text)
        ids = [tid] if tid is not None else (lm.tokenizer.encode(text) if text else [])
        if not ids:
            st.warning("Type a token or a word first.")
        else:
            forced_ids = [int(i) for i in ids]
    if forced_ids is not None:
        prefix = tuple(so_far + forced_ids)[: ch.max_len]
        ss()["forced"] = {"base": base, "prefix": prefix}
        ss()["pending_step"] = min(step + len(forced_ids), ch.max_len - 1)
        st.rerun()


def export_section(lm, ch: Choices, res, rows, step: int, dec_tokens, src_tokens, table, tok_text) -> None:
    st.subheader("Export")

    def summary() -> bytes:
        return to_json_bytes(summary_dict(ch, res, tok_text, src_tokens, step,
                                          extra={"followed_rows": list(rows)}))  # fmt: skip

    def record_npz() -> bytes:
        arrays = stack_view(res.steps, rows, step, stack_rows=viz.steps_to_matrix)  # every layer, on click
        arrays.update({k: v[0] if v.ndim >= 3 and v.shape[0] == 1 else v for k, v in res.encoder.items()})
        arrays["tokens.dec_input"] = np.array(dec_tokens)
        arrays["tokens.src"] = np.array(src_tokens)
        return npz_bytes(arrays)

    def full_trace() -> bytes:
        out = [i for i in res.ids if i != lm.cfg.eos_id]
        tr = teacher_forced_trace(lm.model, lm.tokenizer, list(res.src_ids[:-1]), out, causal=True)
        return save_to_bytes(tr.save_npz)

    with st.container(horizontal=True):
        st.download_button("Summary (JSON)", summary, file_name="decoder_lens_summary.json",
                           mime="application/json", on_click="ignore", key="dl_json")  # fmt: skip
        st.download_button("Steps 0…current (NPZ)", record_npz, file_name=f"decoder_lens_step{step + 1}.npz",
                            mime="application/octet-stream", on_click="ignore", key="dl_steps")  # fmt: skip
        st.download_button("Full trace of the output (NPZ)", full_trace, file_name="decoder_lens_trace.npz",
                           mime="application/octet-stream", on_click="ignore", key="dl_trace")  # fmt: skip
        st.download_button("Decoder-input table (CSV)", lambda: table.to_csv(index=False),
                           file_name="decoder_inputs.csv", mime="text/csv", on_click="ignore",
                           key="dl_csv")  # fmt: skip
        if res.beam_steps is not None:
            live = res.beam_steps[step].live
            st.download_button("Live beams (CSV)", lambda: viz.beam_table(live, tok_text).to_csv(index=False),
                               file_name="beams.csv", mime="text/csv",
                               on_click="ignore", key="dl_beams")  # fmt: skip
    st.caption("Every figure has a camera button (top right, on hover) that saves it as a PNG. "
               "The URL holds the sentence, strategy and step, so a link reopens this view.")  # fmt: skip


# ---------------------------------------------------------------------------
# Teacher forcing.


@st.fragment
def teacher_forcing_view(lm: LoadedModel, src_ids: tuple[int, ...], src_tokens, reference: str, layer, head,
                         all_heads, stage: str) -> None:  # fmt: skip
    try:
        _teacher_forcing_view(lm, src_ids, src_tokens, reference, layer, head, all_heads, stage)
    except Exception as e:
        fail("Could not show the teacher-forcing view", e)


def _teacher_forcing_view(lm, src_ids, src_tokens, reference, layer, head, all_heads, stage) -> None:
    s = ss()
    tr = get_trace(lm, src_ids, reference, causal=True)
    T = len(tr.dec_input_tokens)
    st.subheader("Teacher forcing: the whole reference in one parallel pass")
    st.caption("Training feeds the reference shifted right and predicts every position at once; the causal mask "
               "stops position i from seeing positions after i.")  # fmt: skip
    if tr.truncated:
        st.warning(f"The reference was cut to the model's limit of {lm.cfg.max_len - 1} tokens.")
    if T > 1:
        s["tf_pos"] = min(max(int(s.get("tf_pos", T - 1)), 0), T - 1)
        st.slider("Query position", 0, T - 1, key="tf_pos")
    pos = int(s.get("tf_pos", 0)) if T > 1 else 0
    no_mask = st.toggle("Remove the causal mask (let the decoder look at future tokens — “cheating”)", key="no_mask")

    label_ids = tr.arrays["label_ids"]
    probs = tr.arrays["probs"]
    lp = probs[np.arange(T), label_ids]
    table = viz.loss_table(tr.dec_input_tokens, tr.label_tokens, lp, tr.arrays["loss"])
    mean_loss = float(tr.arrays["loss"].mean())
    L = f"dec.{layer}"
    hname = head_label(head)

    def w_of(trace):
        arr = np.where(np.isfinite(trace.arrays[f"{L}.self.mask"]), trace.arrays[f"{L}.self.weights"], -np.inf)
        return mean_weights(arr) if head == MEAN_HEADS else arr[int(head)]

    shown = tr
    if no_mask:
        nc = get_trace(lm, src_ids, reference, causal=False)
        shown = nc
        nc_loss = float(nc.arrays["loss"].mean())
        w = w_of(nc)
        leak = float(np.triu(np.where(np.isfinite(w), w, 0), k=1).sum(axis=1).mean())
        m1, m2, m3 = st.columns(3)
        m1.metric("Mean loss with the mask", f"{mean_loss:.3f}")
        m2.metric("Mean loss without the mask", f"{nc_loss:.3f}", delta=f"{nc_loss - mean_loss:+.3f}",
                  delta_color="inverse")  # fmt: skip
        m3.metric("Attention on future tokens", f"{leak:.1%}", help=f"layer {layer}, {hname}, mean over positions")
        c1, c2 = st.columns(2)
        with c1:
            show(viz.attention_figure(w_of(tr), tr.dec_input_tokens, tr.dec_input_tokens,
                                      title=f"With the causal mask ({hname})", highlight_row=pos),
                 "tf_cmp_masked")  # fmt: skip
        with c2:
            show(viz.attention_figure(w, nc.dec_input_tokens, nc.dec_input_tokens,
                                      title=f"Without the mask: attention leaks to the future ({hname})",
                                      highlight_row=pos), "tf_cmp_unmasked")  # fmt: skip
        cmp = table.rename(columns={"p(label)": "p(label), masked", "loss": "loss, masked"})
        cmp["p(label), no mask"] = nc.arrays["probs"][np.arange(T), label_ids]
        cmp["loss, no mask"] = nc.arrays["loss"]
        st.markdown("**Loss per position, with and without the mask**")
        st.dataframe(cmp, hide_index=True, key="tf_cmp_table")
        st.info("Without the mask, position i can see token i+1 — the very label it must predict. A model trained "
                "that way learns to copy it: its training loss collapses while it learns nothing usable at inference, "
                "where the future does not exist. This model was trained with the mask, so it was never taught to "
                "copy: removing the mask here shows where its attention leaks (right of the diagonal) and how much "
                "the loss moves (it can go either way).")  # fmt: skip
    else:
        st.metric("Mean loss (cross-entropy per token)", f"{mean_loss:.3f}",
                  help=f"perplexity {np.exp(mean_loss):.2f}")  # fmt: skip

    st.subheader("1 · Shifted inputs, labels and the loss")
    formula(r"\mathcal{L} = -\frac{1}{T}\sum_{t} \log p(y_t \mid y_{<t}, x)")
    st.dataframe(table, hide_index=True, key="tf_table")
    render_stages(lm, shown.arrays, shown.dec_input_tokens, src_tokens, pos, layer, head, all_heads, "tf",
                  incremental=False, stage=stage)  # fmt: skip

    if shows(stage, "output"):
        st.subheader("7 · Output at the chosen position")
        order = np.argsort(-shown.arrays["probs"][pos])[:TOP_SHOWN]
        ids = [int(i) for i in order]
        pr = shown.arrays["probs"][pos][order]
        label = int(label_ids[pos])
        tok_text = token_texter(lm)
        c1, c2 = st.columns([3, 1])
        with c1:
            title = f"Top {TOP_SHOWN} at position {pos}; the label is outlined if it is among them"
            topk_section(tok_text, ids, np.log(np.maximum(pr, 1e-30)), label, title, "tf_topk")
        with c2:
            st.metric("Entropy", f"{viz.entropy(shown.arrays['probs'][pos]):.3f} nats")
            st.metric("Label", md(show_token(tok_text(label))))
            st.metric("p(label)", f"{float(shown.arrays['probs'][pos][label]):.3f}")

    st.subheader("Export")
    with st.container(horizontal=True):
        st.download_button("Trace (NPZ)", lambda: save_to_bytes(shown.save_npz), file_name="teacher_forced_trace.npz",
                           mime="application/octet-stream", on_click="ignore", key="dl_tf_npz")  # fmt: skip
        st.download_button("Loss table (CSV)", lambda: table.to_csv(index=False), file_name="teacher_forcing_loss.csv",
                           mime="text/csv", on_click="ignore", key="dl_tf_csv")  # fmt: skip


# ---------------------------------------------------------------------------
# Pages.


def _set_source(text: str) -> None:
    ss()["source"] = text


def _keep_stage() -> None:
    """Clicking the selected stage again would deselect it: keep the last one instead."""
    s = ss()
    if s.get("stage") in STAGES:
        s["stage_last"] = s["stage"]
    else:
        s["stage"] = s.get("stage_last", DEFAULT_STAGE)


def stage_selector() -> str:
    """Which decoder stage(s) the step views draw: one group keeps a step quick; "All stages" draws everything."""
    s = ss()
    if s.get("stage") not in STAGES:
        s["stage"] = s.get("stage_last", DEFAULT_STAGE)
    st.segmented_control("Decoder stage to show", STAGES, key="stage", format_func=STAGE_LABELS.get,
                         on_change=_keep_stage, help="Each step redraws only the figures of the chosen stage; "
                         "All stages shows every figure at once (slower to redraw).")  # fmt: skip
    stage = s.get("stage") if s.get("stage") in STAGES else DEFAULT_STAGE
    s["stage_last"] = stage
    return stage


def explore_page(lm: LoadedModel, msgs: list[str], params: dict, layer, head, all_heads) -> None:
    s = ss()
    st.title(":material/frame_inspect: Decoder Lens")
    st.caption("Type an English sentence, then step through an English→French Transformer decoder one token at a "
               "time and see every stage on the real numbers.")  # fmt: skip
    st.markdown("**Examples**")
    with st.container(horizontal=True, key="examples"):
        for i, ex in enumerate(EXAMPLES):
            st.button(ex, key=f"example_{i}", on_click=_set_source, args=(ex,))
    st.text_area("English sentence", key="source", height=80, placeholder="Type an English sentence…")
    st.text_input("Reference French translation (optional — turns on the teacher-forcing view)", key="reference",
                  placeholder="e.g. Je suis étudiant.")  # fmt: skip
    for m in msgs:
        st.warning(md(m))

    cfg = lm.cfg
    src = prepare_source(s.get("source"), lm.tokenizer, cfg.eos_id, cfg.max_len)
    if src is None:
        st.info("Type a sentence above (or click an example) to start: the box is empty.")
        sync_url(query_params_for(None, "", None, layer, head, s.get("page", PAGES[0])))
        return
    if src.chars_cut:
        st.warning(f"The text is longer than {MAX_CHARS} characters; only the first {MAX_CHARS} are used.")
    if src.truncated:
        st.warning(f"The sentence has {src.n_tokens} tokens but this model reads at most {cfg.max_len - 1}; "
                   f"only the first {cfg.max_len - 1} are used.")  # fmt: skip
    src_tokens = lm.tokenizer.tokens(src.ids)
    n_unk = sum(1 for i in src.ids if i == cfg.unk_id)

    base = Choices(model_dir=str(lm.path), source=src.text, **params)
    forced = s.get("forced")
    prefix = forced["prefix"] if forced and forced.get("base") == base else ()
    if forced and not prefix:
        s.pop("forced", None)
    ch = replace(base, prefix=tuple(prefix))
    try:
        ch.options()
    except ValueError as e:  # parameters are clamped already; keep a clear message just in case
        st.error(f"Invalid decoding parameters: {md(e)}")
        return
    res = get_decode(lm, ch, src.ids)

    st.markdown("**Source tokens** " + badges([(show_token(t), "gray") for t in src_tokens]))
    if n_unk:
        st.caption(f"{n_unk} source token(s) are unknown to the model (<unk>): characters outside its vocabulary."
                   .replace("<", "\\<"))  # fmt: skip
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**English** (as read by the model)")
        st.text(src.text)
    with c2:
        st.markdown(f"**French** ({md(ch.describe())})")
        st.text(lm.tokenizer.decode(res.ids) or "(empty)")
    if len(res.n_best) > 1:
        with st.expander(f"All {len(res.n_best)} beam candidates"):
            st.dataframe(viz.beam_table(res.n_best, token_texter(lm)), hide_index=True, key="nbest")
    if ch.prefix:
        c1, c2 = st.columns([4, 1])
        c1.markdown("**Forced prefix:** " + badges([(show_token(lm.tokenizer.id_to_token(i)), "orange")
                                                     for i in ch.prefix]))  # fmt: skip
        c2.button("Clear forced tokens", key="clear_forced", on_click=_clear_forced)

    reference = (s.get("reference") or "").strip()[:MAX_CHARS]
    stage = stage_selector()
    if reference:
        t1, t2 = st.tabs(["Step-by-step decoding", "Teacher forcing (reference)"])
        with t1:
            decoding_view(lm, ch, base, src_tokens, layer, head, all_heads, reference, stage)
        with t2:
            teacher_forcing_view(lm, src.ids, src_tokens, reference, layer, head, all_heads, stage)
    else:
        decoding_view(lm, ch, base, src_tokens, layer, head, all_heads, reference, stage)

    with st.expander("Encoder (computed once per sentence)"):
        enc_layer = min(layer, cfg.n_encoder_layers - 1)
        w = res.encoder.get(f"enc.{enc_layer}.self.weights")
        mem = res.encoder.get("memory")
        if w is not None:
            w = w[0]
            show(viz.attention_figure(mean_weights(w) if head == MEAN_HEADS else w[int(head)], src_tokens, src_tokens,
                                      title=f"Encoder self-attention, layer {enc_layer}, {head_label(head)}"),
                 "enc_self")  # fmt: skip
        if mem is not None:
            show(viz.matrix_figure(mem[0], src_tokens, title="Encoder output (memory) read by cross-attention"),
                 "enc_memory")  # fmt: skip


def _fmt_cell(x: float, decimals: int) -> str:
    if np.isnan(x):
        return "…"
    if np.isinf(x):
        return "−∞" if x < 0 else "∞"
    return f"{x:.{max(decimals, 2)}f}"


def _lesson_frame(arr, rows, cols, decimals: int) -> pd.DataFrame:
    a = np.atleast_2d(np.asarray(arr, dtype=float))
    return pd.DataFrame([[_fmt_cell(x, decimals) for x in r] for r in a], index=rows[: a.shape[0]],
                        columns=cols[: a.shape[1]])  # fmt: skip


def lesson_page() -> None:
    from model.lesson import SEED_TOKENS, seed_example

    st.title("Lesson: the seed's worked example")
    st.caption("A 3-dimensional, one-head masked self-attention example, recomputed from its inputs and checked "
               "cell by cell against the numbers it prints (to the printed precision).")  # fmt: skip
    lesson = get_lesson()
    seed = seed_example()
    st.markdown("**Shifted target sequence:** " + badges([(t, "gray") for t in SEED_TOKENS]))
    n_ok = sum(1 for s_ in lesson.stages if s_.matches)
    n_checked = sum(1 for s_ in lesson.stages if s_.matches is not None)
    st.metric("Computed stages that match the printed numbers", f"{n_ok} / {n_checked}")
    panels = [s_.title for s_ in lesson.stages]
    mode = st.segmented_control("Show", ["Panel by panel", "All panels"], default="Panel by panel",
                                key="lesson_mode")  # fmt: skip
    if mode == "All panels":
        chosen = list(range(len(panels)))
    else:
        idx = st.select_slider("Panel", options=list(range(len(panels))), format_func=lambda i: panels[i],
                               key="lesson_panel")  # fmt: skip
        chosen = [idx]
    for i in chosen:
        stage = lesson.stages[i]
        with st.container(border=True):
            st.markdown(f"**{i + 1}. {md(stage.title)}**")
            st.latex(stage.formula)
            ours = np.atleast_2d(stage.ours)
            n_rows = ours.shape[0]
            rows = [f"{r}:{SEED_TOKENS[r]}" if r < len(SEED_TOKENS) else str(r) for r in range(n_rows)]
            square = ours.shape[0] == ours.shape[1] and ours.shape[0] > 3
            cols = rows if square else [f"d{j}" for j in range(ours.shape[1])]
            if stage.key.startswith("W_"):
                rows = cols = [f"d{j}" for j in range(ours.shape[1])]
            dec = seed.decimals.get(stage.key, 4)
            c1, c2 = st.columns(2)
            with c1:
                st.markdown("Seed's printed numbers (… = hidden by an ellipsis)")
                if stage.seed is not None:
                    st.dataframe(_lesson_frame(stage.seed, rows, cols, dec), key=f"lesson_seed_{i}")
            with c2:
                st.markdown("Ours (recomputed)")
                st.dataframe(_lesson_frame(stage.ours, rows, cols, 4), key=f"lesson_ours_{i}")
            if len(chosen) == 1:
                lesson_heatmaps(stage, rows, cols, i)
            if stage.matches is None:
                st.caption("Given input (nothing to check).")
            elif stage.matches:
                st.success(f"Matches the seed to its printed precision (largest difference "
                           f"{stage.max_abs_diff or 0:.4g}).")  # fmt: skip
            else:
                st.warning(md(stage.note or "Does not match the printed numbers."))
    st.subheader("Discrepancies in the seed, explained")
    if lesson.discrepancies:
        for d in lesson.discrepancies:
            st.markdown("- " + md(d))
    else:
        st.success("None: every printed number follows from the formulas.")
    st.caption(md(f"Positional encoding used by the seed: {lesson.pe_formula}"))


def lesson_heatmaps(stage, rows: list[str], cols: list[str], i: int) -> None:
    """The seed's printed matrix beside ours as heatmaps on one shared scale (hidden cells grey)."""
    ours = np.atleast_2d(np.asarray(stage.ours, dtype=float))
    seed = None if stage.seed is None else np.atleast_2d(np.asarray(stage.seed, dtype=float))
    finite = ours[np.isfinite(ours)]
    if seed is not None:
        finite = np.concatenate([finite, seed[np.isfinite(seed)]])
    m = float(np.abs(finite).max()) if finite.size else 1.0
    m = m or 1.0
    kw = dict(x_title="dimension" if cols and cols[0] == "d0" else "key token", y_title="row", colorscale="RdBu_r",
              zmin=-m, zmax=m, show_values=True, row_index=False, col_index=False)  # fmt: skip
    c1, c2 = st.columns(2)
    with c1:
        if seed is not None:
            show(viz.heatmap(seed, rows, cols, title=f"Seed: {stage.title}", masked_hover="not printed (… or −∞)",
                             **kw), f"lesson_seed_fig_{i}")  # fmt: skip
    with c2:
        show(viz.heatmap(ours, rows, cols, title=f"Ours: {stage.title}", masked_hover="−∞ (masked)", **kw),
             f"lesson_ours_fig_{i}")  # fmt: skip


def about_page(lm: LoadedModel | None, error: str | None) -> None:
    st.title("About Decoder Lens")
    st.markdown(
        "Decoder Lens shows every stage of an encoder-decoder Transformer's **decoder** on real numbers: embeddings "
        "and positional encoding, masked self-attention (Q, K, V, scores, mask, softmax, α·V, W_O), Add & Norm, "
        "cross-attention to the source, the feed-forward network, the output distribution and beam search — one "
        "token at a time with a KV cache, or the whole reference at once with teacher forcing."
    )
    st.subheader("Model card")
    if error:
        st.error(md(error))
    elif lm is not None and lm.card.strip():
        st.caption(md(f"Model directory: {lm.path}"))
        with st.container(border=True, key="model_card"):
            st.markdown(lm.card)  # our own file, not user text
    else:
        st.info("This model directory has no MODEL_CARD.md.")
    if lm is not None:
        with st.expander("Configuration"):
            st.dataframe(pd.DataFrame({"value": {k: str(v) for k, v in asdict(lm.cfg).items()}}), key="cfg_table")
    st.subheader("Load another Marian checkpoint")
    st.markdown("Convert a Hugging Face `MarianMTModel` directory (for example a downloaded "
                "`Helsinki-NLP/opus-mt-en-fr`) into a Decoder Lens model directory, then point the app "
                "at it:")  # fmt: skip
    st.code("python -m model import-marian HF_DIR assets/models/opus-mt-en-fr\n"
            "# every directory under assets/models/ appears in the sidebar's model selector, or:\n"
            "DECODER_LENS_MODEL=assets/models/opus-mt-en-fr streamlit run app.py", language="bash")  # fmt: skip


# ---------------------------------------------------------------------------
# Main.


def main() -> None:
    dirs = model_dirs(MODELS_ROOT, default=default_model_dir())
    init_state(str(dirs[0]))
    page = st.sidebar.radio("Page", PAGES, key="page", horizontal=True)
    if page == "Lesson":
        sync_url({"page": page})
        lesson_page()
        return
    model_dir = sidebar_model(dirs)
    lm, error = None, None
    try:
        lm = load_model(model_dir, dir_stamp(model_dir))
    except ModelDirError as e:
        error = f"Cannot load the model: {e}"
    if page == "About":
        sync_url({"page": page})
        about_page(lm, error)
        return
    if lm is None:
        st.title(":material/frame_inspect: Decoder Lens")
        st.error(md(error))
        st.info("Set DECODER_LENS_MODEL to a model directory, or build the bundled model (see the README).")
        return
    params, msgs = sidebar_decoding(lm)
    layer, head, all_heads = sidebar_view(lm)
    explore_page(lm, msgs, params, layer, head, all_heads)


try:
    main()
except Exception as exc:  # never a traceback in the page
    fail("Something went wrong", exc)
