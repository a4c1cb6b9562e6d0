"""The Lesson page: the seed's 3-dimensional worked example, recomputed and checked cell by cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import viz
from model.lesson import SEED_TOKENS, build_lesson, seed_example

from .common import badges, md, show

SIDE_BY_SIDE_COLS = 4  # matrices up to this many columns are shown seed beside ours


@st.cache_resource(show_spinner=False)
def build():
    return build_lesson()


def _fmt_cell(x: float, decimals: int) -> str:
    if np.isnan(x):
        return "…"
    if np.isinf(x):
        return "−∞" if x < 0 else "∞"
    return f"{x:.{max(decimals, 2)}f}"


def _lesson_frame(arr, rows, cols, decimals: int) -> pd.DataFrame:
    a = np.atleast_2d(np.asarray(arr, dtype=float))
    return pd.DataFrame(
        [[_fmt_cell(x, decimals) for x in r] for r in a], index=rows[: a.shape[0]], columns=cols[: a.shape[1]]
    )


def render() -> None:
    st.title("Lesson: the seed's worked example")
    st.caption(
        "A 3-dimensional, one-head masked self-attention example, recomputed from its inputs and checked "
        "cell by cell against the numbers it prints (to the printed precision)."
    )
    lesson = build()
    seed = seed_example()
    st.markdown("**Shifted target sequence:** " + badges([(t, "gray") for t in SEED_TOKENS]))
    n_ok = sum(1 for s_ in lesson.stages if s_.matches)
    n_checked = sum(1 for s_ in lesson.stages if s_.matches is not None)
    st.metric("Computed stages that match the printed numbers", f"{n_ok} / {n_checked}")
    panels = [s_.title for s_ in lesson.stages]
    mode = st.segmented_control("Show", ["Panel by panel", "All panels"], default="Panel by panel", key="lesson_mode")
    if mode == "All panels":
        chosen = list(range(len(panels)))
    else:
        idx = st.select_slider(
            "Panel", options=list(range(len(panels))), format_func=lambda i: panels[i], key="lesson_panel"
        )
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
            c1, c2 = _pair(len(cols))
            with c1:
                st.markdown("Seed's printed numbers (… = hidden by an ellipsis)")
                if stage.seed is not None:
                    st.dataframe(_lesson_frame(stage.seed, rows, cols, dec), key=f"lesson_seed_{i}", width="stretch")
            with c2:
                st.markdown("Ours (recomputed)")
                st.dataframe(_lesson_frame(stage.ours, rows, cols, 4), key=f"lesson_ours_{i}", width="stretch")
            if len(chosen) == 1:
                lesson_heatmaps(stage, rows, cols, i)
            if stage.matches is None:
                st.caption("Given input (nothing to check).")
            elif stage.matches:
                st.success(
                    f"Matches the seed to its printed precision (largest difference {stage.max_abs_diff or 0:.4g})."
                )
            else:
                st.warning(md(stage.note or "Does not match the printed numbers."))
    st.subheader("Discrepancies in the seed, explained")
    if lesson.discrepancies:
        for d in lesson.discrepancies:
            st.markdown("- " + md(d))
    else:
        st.success("None: every printed number follows from the formulas.")
    st.caption(md(f"Positional encoding used by the seed: {lesson.pe_formula}"))


def _pair(n_cols: int):
    """Two places for the seed's matrix and ours: side by side when it has a few columns, else one under the
    other at full width (a 10-column table or heatmap does not fit half the page)."""
    if n_cols <= SIDE_BY_SIDE_COLS:
        return st.columns(2)
    return st.container(), st.container()


def lesson_heatmaps(stage, rows: list[str], cols: list[str], i: int) -> None:
    """The seed's printed matrix and ours as heatmaps on one shared scale (hidden cells grey): side by side when
    narrow, else one under the other; values printed in the cells when they fit."""
    ours = np.atleast_2d(np.asarray(stage.ours, dtype=float))
    seed = None if stage.seed is None else np.atleast_2d(np.asarray(stage.seed, dtype=float))
    finite = ours[np.isfinite(ours)]
    if seed is not None:
        finite = np.concatenate([finite, seed[np.isfinite(seed)]])
    m = float(np.abs(finite).max()) if finite.size else 1.0
    m = m or 1.0
    kw = dict(
        x_title="dimension" if cols and cols[0] == "d0" else "key token",
        y_title="row",
        colorscale="RdBu_r",
        zmin=-m,
        zmax=m,
        show_values=True,
        row_index=False,
        col_index=False,
    )
    c1, c2 = _pair(len(cols))
    with c1:
        if seed is not None:
            show(
                viz.heatmap(seed, rows, cols, title=f"Seed: {stage.title}", masked_hover="not printed (… or −∞)", **kw),
                f"lesson_seed_fig_{i}",
            )
    with c2:
        show(
            viz.heatmap(ours, rows, cols, title=f"Ours: {stage.title}", masked_hover="−∞ (masked)", **kw),
            f"lesson_ours_fig_{i}",
        )
