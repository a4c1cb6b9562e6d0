"""The Compare page: two sentences A and B decoded side by side, a stage of both on one colour scale, activation
patching of A's run against B's (or noisy A's), and "why X rather than Y" at a position."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import streamlit as st

from model.core.constants import PATCH_SUBLAYERS
from model.core.jsonio import dumps
from model.core.positions import POSITION_AXIS, position_labels
from model.decode.decoding import DecodeOptions, DecodeResult
from model.decode.trace import Trace
from model.io.checkpoint import LoadedModel, ModelDirError
from views.plot import ahead
from views.plot import builders as viz  # viz, its figures built on first use (cached)
from viz.common import MIN_WIDTH

from . import session, stages
from .common import cached, get_decode, get_trace, load_model, md, session_cache, show, show_token
from .sidebar import sidebar
from .stages.attribution import METHOD_LABELS
from .state import DEFAULT_STAGE as APP_STAGE
from .state import (
    MAX_CHARS,
    SITE_LABELS,
    SITES,
    Choices,
    Limits,
    View,
    offered_model_dirs,
    prepare_source,
)
from .stepping import stepper

if TYPE_CHECKING:
    from model.interpret.contrast import ContrastAttribution, ContrastToken
    from model.interpret.patching import Patcher, Patching

# minimal pairs that show something with the bundled model (each: label, A, B, a contrast for A's first word)
PRESETS = (
    ("Singular / plural", "The dog runs in the park.", "The dogs run in the park.", "Les"),
    ("Gendered noun", "The boy is reading a book.", "The girl is reading a book.", "La"),
    ("Tense", "I see the dog.", "I saw the dog.", "J'ai"),
)
STAGES = tuple(s.id for s in stages.compared())  # the stages that declare one matrix per run
DEFAULT_STAGE = "cross"
STAGE_CHOSEN = "compare_stage_chosen"  # set once the reader picks a stage here: from then on it stays
PATCH_PAIR = "patching_opened_for"  # the pair whose patching opened: a new pair opens where its outputs part
COLUMN_GAP = 16  # px between Streamlit's columns


def _rows(trace) -> list[str]:
    return position_labels(trace.dec_input_tokens, trace.label_tokens, show_token)


def _chosen_p(trace, n: int) -> np.ndarray:
    """(n,) the probability of the token chosen at each of the run's n positions (a label </s> the decode never
    chose, when it stopped at the length limit, is left out)."""
    labels = trace.arrays.label_ids[:n]
    return trace.arrays.probs[np.arange(n), labels]


def render(lm: LoadedModel, dirs: list[Path], url_msgs: list[str]) -> None:
    limits = session.limits_of(lm.cfg, str(lm.path))
    name = "" if Path(lm.path) == dirs[0] else Path(lm.path).name
    view, msgs = session.load(limits, str(lm.path), name)
    msgs = url_msgs + msgs
    sidebar(lm, view)
    st.title(":material/compare: Compare two sentences")
    st.caption(
        "Decode two English sentences A and B with the same settings (or, from the Corpus page's second run, one "
        "sentence with two beam widths; or one sentence through two models, with Sentence B's model), see where "
        "their stages and outputs differ, and find which parts of the model carry the difference."
    )
    st.markdown("**Minimal pairs**")
    with st.container(horizontal=True, key="presets"):
        for i, (label, a, b, c) in enumerate(PRESETS):
            st.button(f"{label}: {a} / {b}", key=f"preset_{i}", on_click=session.set_pair, args=(a, b, c))
    c1, c2 = st.columns(2)
    with c1:
        st.text_area("Sentence A (clean)", key="source", height=68, on_change=session.pair_typed)
    with c2:
        st.text_area(
            "Sentence B (corrupted)",
            key="source_b",
            height=68,
            placeholder="A minimal variant of A…",
            on_change=session.pair_typed,
        )
    if limits.models:
        st.selectbox(
            "Sentence B's model",
            ["", *limits.models],
            key="model_b",
            format_func=lambda name: name or "A's model",
            help="Put sentence B (or, with B empty, sentence A) through another model directory: one sentence, two "
            "models, every compared stage drawn for both.",
        )
    for m in msgs:
        st.warning(md(m))
    try:
        body(lm, limits, view)
    finally:
        session.sync_url(view)


def model_b(lm: LoadedModel, view: View) -> LoadedModel | None:
    """Sentence B's model: A's, or the other model directory the view names (None, with an error, when it cannot
    be loaded)."""
    if not view.model_b:
        return lm
    path = next(p for p in offered_model_dirs() if p.name == view.model_b)  # clamp_view kept offered names only
    try:
        return load_model(str(path))
    except ModelDirError as e:
        st.error(md(f"Cannot load sentence B's model {view.model_b}: {e}"))
        return None


def body(lm: LoadedModel, limits: Limits, view: View) -> None:
    cfg, tok = lm.cfg, lm.tokenizer
    lm_b = model_b(lm, view)
    if lm_b is None:
        return
    two_models = lm_b is not lm
    # two models: B empty puts A's sentence through the second one
    text_b = view.source_b or (view.source if two_models else "")
    src_a = prepare_source(view.source, tok, cfg)
    src_b = prepare_source(text_b, lm_b.tokenizer, lm_b.cfg)
    if src_a is None:
        st.info("Type sentence A above (or click a minimal pair) to start: the box is empty.")
        return
    for name, src, m in (("A", src_a, lm), ("B", src_b, lm_b)):
        if src is not None and (src.chars_cut or src.truncated):
            st.warning(
                f"Sentence {name} is longer than its model reads ({MAX_CHARS} characters, "
                f"{m.cfg.max_len - 1} tokens); only its beginning is used."
            )
    ch = view.choices(str(lm.path)).unforced()
    ch_b = replace(ch, model_dir=str(lm_b.path), decode=decoding_b(ch.decode, view.beam_b))
    if two_models:  # B's model may read fewer positions than A's
        ch_b = replace(ch_b, decode=replace(ch_b.decode, max_len=min(ch_b.decode.max_len, lm_b.cfg.max_len - 1)))
        st.caption(
            md(
                f"Sentence A is put through {Path(lm.path).name} ({lm.cfg.family}), B through "
                f"{Path(lm_b.path).name} ({lm_b.cfg.family})."
            )
        )
    if ch_b.decode.strategy != ch.decode.strategy or ch_b.decode.beam != ch.decode.beam:
        st.caption(md(f"Sentence B is decoded with {ch_b.describe()}, A with {ch.describe()}."))
        st.button("Decode B as A", key="compare_beam_b_off", on_click=_decode_b_as_a)
    res_a = get_decode(lm, ch, src_a.ids)
    out_a = list(res_a.ids)
    tr_a = get_trace(lm, src_a.ids, [i for i in out_a if i != cfg.eos_id], True)
    same = src_b is not None and src_b.ids == src_a.ids and ch_b == ch
    if src_b is None:
        st.info(
            "Type sentence B (or click a minimal pair) to compare two runs; the patching and the contrast below "
            "then use A with noise."
        )
        tr_b = None
    elif same:
        st.warning("A and B are the same sentence: there is nothing to compare. Change one word of B.")
        tr_b = None
    elif src_b is not None:  # always, past the first branch
        res_b = get_decode(lm_b, replace(ch_b, source=text_b), src_b.ids)
        tr_b = get_trace(lm_b, src_b.ids, [i for i in res_b.ids if i != lm_b.cfg.eos_id], True)
        first = outputs((lm, lm_b), (ch, ch_b), res_a, res_b, tr_a, tr_b)
        view = open_where_they_part(view, src_a.ids, src_b.ids, first)
        stage_pair((lm, lm_b), view, tr_a, tr_b)
    # one sentence decoded two ways: patching from B's run would patch A with itself, so A with noise instead; B
    # through another model is no corruption of A's run in A's model either
    patch_b = None if tr_b is None or src_b is None or src_b.ids == src_a.ids or two_models else src_b.ids
    if two_models and tr_b is not None:
        st.caption("Patching below runs A's model alone: A against A with noise.")
    patching_part(lm, limits, view, PatchRuns(src_a.ids, out_a, patch_b, tr_a))


def decoding_b(decode: DecodeOptions, beam_b: int) -> DecodeOptions:
    """Sentence B's decoding: A's (``beam_b`` 0), or A's with the beam width ``beam_b`` (1: greedy)."""
    if beam_b == 0:
        return decode
    return replace(decode, strategy="beam", beam=beam_b) if beam_b > 1 else replace(decode, strategy="greedy")


def _decode_b_as_a() -> None:
    st.session_state["beam_b"] = 0


def open_where_they_part(view: View, src_a: Sequence[int], src_b: Sequence[int], first: int | None) -> View:
    """A pair's patching opens at the position where the outputs first differ (at the same position both runs
    agree and the map shows nothing), unless the link names a position; later the reader's position stays."""
    s = st.session_state
    pair = (tuple(src_a), tuple(src_b))
    if s.get(PATCH_PAIR) == pair:
        return view
    s[PATCH_PAIR] = pair
    if s.pop("step_from_link", False) or first is None:
        return view
    s["step"] = first
    return replace(view, step=first)


@dataclass(frozen=True)
class PatchRuns:
    """What patching measures: A's source, output and trace, and the source that corrupts it (None: noise)."""

    src_a: tuple[int, ...]
    out_a: list[int]
    src_b: tuple[int, ...] | None
    tr_a: Trace


@st.fragment
def patching_part(lm: LoadedModel, limits: Limits, view: View, runs: PatchRuns) -> None:
    """The patching section, a fragment: a step, the map's site, the noise and the contrast rerun it alone (none of
    them changes the decodes or the stage compared above it), and it writes the URL itself then."""
    v = session.fragment_view(view, limits)
    try:
        patching(lm, v, runs)
    finally:
        session.sync_url(v)


def model_name(lm: LoadedModel) -> str:
    return md(Path(lm.path).name)


def outputs(
    lms: tuple[LoadedModel, LoadedModel],
    chs: tuple[Choices, Choices],
    res_a: DecodeResult,
    res_b: DecodeResult,
    tr_a: Trace,
    tr_b: Trace,
) -> int | None:
    """Both translations (each with its model, ``lms``, and its decoding, ``chs``) and their tokens side by side;
    returns the first position where they differ (None: the same translation)."""
    c1, c2 = st.columns(2)
    for col, name, res, ch, lm in ((c1, "A", res_a, chs[0], lms[0]), (c2, "B", res_b, chs[1], lms[1])):
        with col:
            by = f"{model_name(lm)}, " if lms[0] is not lms[1] else ""
            st.markdown(f"**French {name}** ({by}{md(ch.describe())})")
            st.text(lm.tokenizer.decode(res.ids) or "(empty)")
    la, lb = res_a.ids, res_b.ids
    pa, pb = _chosen_p(tr_a, len(la)), _chosen_p(tr_b, len(lb))
    n = max(len(la), len(lb))
    differ = [i for i in range(n) if i >= len(la) or i >= len(lb) or la[i] != lb[i]]
    table = token_table((la, tr_a.label_tokens, pa), (lb, tr_b.label_tokens, pb))
    if differ:
        st.markdown(f"**The outputs first differ at position {differ[0]}.**")
    else:
        st.markdown("**The outputs are the same token for token.**")
    st.dataframe(table, hide_index=True, key="compare_table", width="stretch")
    st.caption("p: the model's probability of the token each run chose there, teacher-forced on that run's output.")
    return differ[0] if differ else None


ENDED = "(ended)"  # a run's token column past its last token; its probability's cell is left empty


def token_table(a: tuple, b: tuple) -> pd.DataFrame:
    """Each run's chosen tokens side by side, position by position (``a``, ``b``: a run's token ids, their labels
    and their probabilities); past a run's last token its columns say that it ended, with no number."""
    (ia, ta, pa), (ib, tb, pb) = a, b
    n = max(len(ia), len(ib))

    def chooses(ids, tokens, i: int) -> str:
        return show_token(tokens[i]) if i < len(ids) else ENDED

    def prob(ids, p, i: int) -> str:
        return f"{float(p[i]):.3f}" if i < len(ids) else ""

    return pd.DataFrame(
        {
            "position": range(n),
            "A chooses": [chooses(ia, ta, i) for i in range(n)],
            "p (A)": [prob(ia, pa, i) for i in range(n)],
            "B chooses": [chooses(ib, tb, i) for i in range(n)],
            "p (B)": [prob(ib, pb, i) for i in range(n)],
            "same": [i < len(ia) and i < len(ib) and ia[i] == ib[i] for i in range(n)],
        }
    )


def _stage_chosen() -> None:
    st.session_state[STAGE_CHOSEN] = True


def stage_pair(lms: tuple[LoadedModel, LoadedModel], view: View, tr_a: Trace, tr_b: Trace) -> None:
    """The chosen stage of both runs side by side (``lms``: A's and B's models, the same one or two), at the view's
    layer and head, each within its model's."""
    lm, lm_b = lms
    s = st.session_state
    # the Explore page's stages without one matrix per run, or the app's default stage nobody chose: the page opens
    # where two sentences differ most visibly, the bridge to each English sentence
    unchosen = view.stage == APP_STAGE and "stage" not in st.query_params and not s.get(STAGE_CHOSEN)
    if view.stage not in STAGES or unchosen:
        s["stage"] = DEFAULT_STAGE
    stage = st.selectbox(
        "Stage to compare",
        STAGES,
        key="stage",
        format_func=stages.labels(lm.cfg).__getitem__,
        on_change=_stage_chosen,
    )
    st.caption(md("Not compared here: " + "; ".join(f"{s.label} ({s.not_compared})" for s in stages.left_out()) + "."))
    a, b = (stages.by_id(stage).run_matrix(tr, *_within(m.cfg, view)) for tr, m in ((tr_a, lm), (tr_b, lm_b)))
    titles = [f"{stages.labels(m.cfg)[stage]}{r.where}" for m, r in ((lm, a), (lm_b, b))]
    fa, fb, fd = viz.pair_figures(
        a.values,
        b.values,
        _rows(tr_a),
        a.columns,
        _rows(tr_b),
        b.columns,
        viz.PairOptions(a.x_title, POSITION_AXIS, a.value_name, signed=a.signed, col_index=a.tokens, title_b=titles[1]),
        title=titles[0],
    )
    half = (MIN_WIDTH - COLUMN_GAP) / 2
    if all(f.layout.get("width") is not None and f.layout["width"] <= half for f in (fa, fb)):
        c1, c2 = st.columns(2)
        with c1:
            show(fa, "compare_a")
        with c2:
            show(fb, "compare_b")
    else:  # too wide for half the narrowest page: one above the other, still on one colour scale
        show(fa, "compare_a")
        show(fb, "compare_b")
    _, note = viz.aligned_difference(a.values, b.values)
    st.markdown("**Difference A − B** on a scale centred on 0" + (f". {md(note)}" if note else "."))
    show(fd, "compare_diff")
    st.caption(
        "Both runs are drawn on one colour scale, so equal colours are equal numbers. A difference shows "
        "where the numbers part, not why: each run reads its own output, so after the first differing "
        "position the two decoders read different tokens."
    )


def _within(cfg, view: View) -> tuple[int, int | str]:
    """The view's decoder layer and head within the model ``cfg`` describes (B's model may have fewer)."""
    head = view.head if isinstance(view.head, str) else min(view.head, cfg.n_heads - 1)
    return min(view.layer, cfg.n_decoder_layers - 1), head


def _patch(lm, src_a, out_a, src_b, position: int, contrast_id):
    from model.interpret.patching import Patcher

    p = Patcher(lm.model, list(src_a), out_a, None if src_b is None else list(src_b))
    return p, p.map(position, contrast_id)


def _patcher(lm, src_a, out_a, src_b, position: int, contrast_id):
    """The patcher and its map at ``position``, from the session's cache; the map of the next position is then
    computed off the page's run (▶ most likely asks for it next, and it costs a run over every site)."""

    def key(t: int) -> tuple:
        return (str(lm.path), tuple(src_a), tuple(out_a), None if src_b is None else tuple(src_b), t, contrast_id)

    pending = st.session_state.setdefault("patching_ahead", {})
    job = pending.pop(key(position), None)
    if job is not None:
        job.exception()  # computed into the cache, or failed: then the page computes it and shows the error
    value = cached("patching", key(position), lambda: _patch(lm, src_a, out_a, src_b, position, contrast_id))
    nxt, cache = position + 1, session_cache()
    if nxt < len(out_a) and key(nxt) not in pending and cache.get("patching", key(nxt)) is None:
        pending.clear()  # a position the reader moved away from is not waited for
        pending[key(nxt)] = ahead(_patch_into, cache, key(nxt), lm, src_a, out_a, src_b, nxt, contrast_id)
    return value


def _patch_into(cache, key, lm, src_a, out_a, src_b, position: int, contrast_id) -> None:
    if cache.get("patching", key) is None:
        cache.put("patching", key, _patch(lm, src_a, out_a, src_b, position, contrast_id))


def patching(lm: LoadedModel, view: View, runs: PatchRuns) -> None:
    from model.interpret.contrast import contrast_token

    src_a, out_a, src_b, tr_a = runs.src_a, runs.out_a, runs.src_b, runs.tr_a
    tok = lm.tokenizer
    st.header("Activation patching — where does the model decide?")
    rows = _rows(tr_a)[: len(out_a)]
    if not rows:
        st.info("A's output is empty: there is no position to measure.")
        return
    t = session.at_position(view.step, len(rows))
    stepper(len(rows), help="The position of A's output whose token the maps measure (step with ← / → too).")
    c2, c3 = st.columns(2)
    with c2:
        st.toggle("Corrupt A with noise instead of B", key="noise", disabled=src_b is None)
    with c3:
        st.text_input("Why A's token rather than … (contrast)", key="contrast", max_chars=100, placeholder="e.g. la")
    st.radio("Map", SITES, key="site", format_func=SITE_LABELS.get, horizontal=True)
    noise = view.noise or src_b is None
    if not noise and src_b is not None and len(src_b) != len(src_a):  # not noise: src_b is given
        st.warning(
            f"A and B have {len(src_a) - 1} and {len(src_b) - 1} tokens: position-wise patching needs the "
            "same token length, so switch on noise corruption (or make B as long as A)."
        )
        return
    x_tok = show_token(tr_a.label_tokens[t])
    contrast = None
    if view.contrast.strip():
        try:
            contrast = contrast_token(tok, view.contrast)
        except ValueError as e:
            st.warning(md(str(e)[:1].upper() + str(e)[1:] + "."))
        if contrast is not None and contrast.note:
            st.caption(md(contrast.note[:1].upper() + contrast.note[1:] + "."))
        if contrast is not None and contrast.id == int(out_a[t]):
            st.warning(
                f"The contrast {md(show_token(contrast.token))} is the token A chooses at position {t}: "
                "there is nothing to compare. Type another word."
            )
            contrast = None
    with st.spinner("Restoring each site in turn…"):
        p, r = _patcher(lm, src_a, out_a, None if noise else src_b, t, None if contrast is None else contrast.id)
    what = f"p({x_tok})"
    st.markdown(
        f"Measured: **{md(what)}** at position {t} ({md(rows[t])}), teacher-forced on A's output. Clean "
        f"run (A): **{r.prob.clean:.3f}**; corrupted run ({md(r.corruption.describe())}): "
        f"**{r.prob.corrupted:.3f}**. Each cell: that value with one site restored from the clean "
        "run."
    )
    _map(view.site, r.prob, tr_a, t, what, "patch")
    st.caption(
        "Patching shows that restoring a site is *sufficient* to bring the value back in this corrupted run, "
        "not that the model has no other route: information reaching the output by several paths can "
        "make each one look unimportant. The corruption sets the map: another sentence B, or noise of "
        "another size, moves it."
    )
    if contrast is not None:
        explain_contrast(lm, src_a, out_a, t, contrast, r, tr_a, view)
    downloads(lm, p, r)


def _map(site: str, m, tr_a, t: int, what: str, key: str) -> None:
    lo, hi = viz.shared_range(m.enc, m.dec, m.heads, np.array([m.clean, m.corrupted]))
    scale = viz.PatchScale(what, lo, hi)
    if site == "dec":
        rows = _rows(tr_a)[: t + 1]
        title = f"{what} with one decoder site restored"
        show(viz.patch_decoder_figure(m.dec, rows, scale, sublayers=PATCH_SUBLAYERS, title=title), f"{key}_dec")
    elif site == "enc":
        src = [show_token(x) for x in tr_a.src_tokens]
        show(
            viz.patch_encoder_figure(m.enc, src, scale, title=f"{what} with one encoder output restored"), f"{key}_enc"
        )
    else:
        title = f"{what} with one head's output restored (every position)"
        show(viz.patch_heads_figure(m.heads, scale, title=title), f"{key}_heads")


def _ig_caption(at: ContrastAttribution) -> str:
    """What Integrated Gradients integrated with, and how near completeness it came."""
    how = (
        f"{at.steps} path points placed where the prediction flips (the trapezoid rule: the path is too steep "
        "for evenly weighted steps)"
        if at.refined
        else f"{at.steps} steps"
    )
    return (
        f"Integrated Gradients with {how}: the attributions add up to the difference's change "
        f"from the baseline within {at.completeness:.1%} (completeness)."
    )


def explain_contrast(
    lm: LoadedModel,
    src_a: tuple[int, ...],
    out_a: list[int],
    t: int,
    contrast: ContrastToken,
    r: Patching,
    tr_a: Trace,
    view: View,
) -> None:
    from model.interpret.attribution import BASELINES, baseline_for
    from model.interpret.contrast import contrast_attribution, lens_difference

    x_tok, y_tok = show_token(tr_a.label_tokens[t]), show_token(contrast.token)
    st.header(f"Why {x_tok} rather than {y_tok}?")
    method = view.attribution
    st.radio(
        "Attribution method", list(METHOD_LABELS), key="attribution", format_func=METHOD_LABELS.get, horizontal=True
    )
    key = (str(lm.path), tuple(src_a), tuple(out_a), t, contrast.id)
    with st.spinner("Attributing…"):
        at = cached(
            "contrast_attr",
            (*key, method),
            lambda: contrast_attribution(lm.model, list(src_a), out_a, t, contrast.id, method),
        )
        lens = cached("contrast_lens", key, lambda: lens_difference(lm.model, list(src_a), out_a, t, contrast.id))
    st.markdown(
        f"Logit difference **{md(x_tok)} − {md(y_tok)} = {at.value:+.3f}** at position {t}: positive "
        f"means the model prefers {md(x_tok)}: p({md(x_tok)}) / p({md(y_tok)}) = e^{at.value:.2f} ≈ "
        f"{np.exp(at.value):.3g}."
    )
    st.dataframe(
        pd.DataFrame(
            {
                "decoder layer": range(len(lens.diff)),
                f"logit {x_tok} − logit {y_tok}": lens.diff,
                f"p({x_tok})": lens.p_x,
                f"p({y_tok})": lens.p_y,
            }
        ),
        hide_index=True,
        key="contrast_lens",
        width="stretch",
    )
    st.caption(
        "The logit lens of the difference: each decoder layer's output read by the output head; the last "
        "layer's is the model's own."
    )
    src_tokens = [show_token(x) for x in tr_a.src_tokens]
    reads = [show_token(x) for x in tr_a.dec_input_tokens[: t + 1]]
    table = pd.DataFrame(
        {
            "input": [f"source {i}: {x}" for i, x in enumerate(src_tokens)]
            + [f"target {i}: {x}" for i, x in enumerate(reads)],
            f"toward {x_tok} (+) or {y_tok} (−)": np.concatenate([at.raw_src, at.raw_tgt]),
            "share": np.concatenate([at.src, at.tgt]),
        }
    ).sort_values("share", ascending=False)
    st.dataframe(
        table,
        hide_index=True,
        key="contrast_attr",
        width="stretch",
        column_config={"share": st.column_config.NumberColumn(format="percent")},
    )
    if method == "ig":
        st.caption(_ig_caption(at))
    st.caption(
        "Attribution credits each input token with a share of the logit difference by its gradient; it "
        f"depends on the baseline (the {BASELINES[baseline_for(lm.cfg)]} here) and is not a causal test, which the "
        "patching map below is."
    )
    what = f"logit {x_tok} − logit {y_tok}"
    assert r.diff is not None  # a map with a contrast has its difference
    st.markdown(f"**Patching on the difference**: clean {r.diff.clean:+.3f}, corrupted {r.diff.corrupted:+.3f}.")
    _map(view.site, r.diff, tr_a, t, what, "patch_diff")


def downloads(lm: LoadedModel, p: Patcher, r: Patching) -> None:
    """The maps as files, each built when its button is clicked (not on every step)."""
    from model.interpret.patching import report, site_rows

    def csv() -> str:
        return pd.DataFrame(site_rows(report(lm.tokenizer, p, r))).to_csv(index=False)

    def json_text() -> str:
        return dumps(report(lm.tokenizer, p, r))

    def npz() -> bytes:
        out = io.BytesIO()
        # numpy's stub lets the ** fill allow_pickle (a bool), so it types the arrays as one
        np.savez_compressed(out, **report(lm.tokenizer, p, r))  # type: ignore[arg-type]
        return out.getvalue()

    c1, c2, c3 = st.columns(3)
    c1.download_button("Maps (CSV)", csv, "patching.csv", "text/csv", on_click="ignore", key="dl_csv")
    c2.download_button("Maps (JSON)", json_text, "patching.json", "application/json", on_click="ignore", key="dl_json")
    c3.download_button("Maps (NPZ)", npz, "patching.npz", "application/octet-stream", on_click="ignore", key="dl_npz")
