"""The teacher's dashboard: a class's progress, its questions and its checks, legible on a projector (large text,
one bar or row per item, sized from the item count). Pure: lists in, ``go.Figure`` out; user text (nicknames,
options) is escaped."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .common import PAD, layout_defaults, new_figure, safe_label, unique_labels

BIG = 16  # projector text: axis titles, hovers
TICKS = 14  # tick labels and the numbers on the bars
ROW_PX = 30  # px per bar or per student row
TALL_ROWS = 15  # a per-student figure taller than this many rows has its scores' axis on top
LABEL_CHARS = 34  # a row label is cut beyond this (the hover has it whole)
# a generous width of a row label's character, in font sizes (capitals and wide letters, the rest): the left margin
CHAR_EM = {"wide": 0.72, "other": 0.52}
RIGHT, WRONG, BEFORE, AFTER = "#2b8cbe", "#e4572e", "#9e9e9e", "#2b8cbe"


def _n(values: Sequence, labels: Sequence, what: str) -> None:
    if len(values) != len(labels):
        raise ValueError(f"{len(values)} {what} but {len(labels)} labels were given")


def _layout(title: str, rows: int, x_title: str, y_title: str, labels: Sequence[str], legend: bool = False) -> dict:
    layout = layout_defaults(title, height=0, legend=legend)
    layout["meta"] = {"min_width": True}  # plot.js: never squeezed below 600 px (a phone scrolls it in its frame)
    top, bottom = layout["margin"]["t"], PAD + 2 * BIG + TICKS + (2 * BIG if legend else 0)
    layout.update(
        height=top + max(rows, 2) * ROW_PX + bottom,
        margin=dict(l=_left_margin(labels), r=48, t=top, b=bottom),
        font=dict(size=BIG),
        hoverlabel=dict(namelength=-1, font=dict(size=BIG)),
    )
    if legend:
        layout["legend"] = dict(orientation="h", x=0, y=0, yanchor="bottom", yref="container", font=dict(size=TICKS))
    layout["xaxis"] = dict(
        title=dict(text=x_title, standoff=6),
        showgrid=True,
        gridcolor="#e6e6e6",
        zeroline=False,
        tickfont=dict(size=TICKS),
    )
    layout["yaxis"] = dict(
        title=dict(text=y_title, standoff=6),
        type="category",
        autorange="reversed",
        tickfont=dict(size=TICKS),
    )
    return layout


def _left_margin(labels: Sequence[str]) -> int:
    """Room for the row labels (escaped text, measured as shown) and the axis title beside them. Set, not Plotly's
    automargin: that lays every figure out twice, half the dashboard's drawing time on its first paint."""
    widest = max((_ems(html.unescape(str(t))) for t in labels), default=1.0)
    return PAD + 2 * BIG + math.ceil(widest * TICKS) + 8


def _ems(text: str) -> float:
    return sum(CHAR_EM["wide" if c.isupper() or c in "mwMW@%&" or ord(c) > 0x2E7F else "other"] for c in text)


def _labels(labels: Sequence[str]) -> list[str]:
    return unique_labels(labels, index=False, max_len=LABEL_CHARS)


def _bars(x: list, y: list[str], color, text: list[str], hover: str, **more) -> dict:
    """Horizontal bars with their numbers written beside them, in projector-sized text."""
    return dict(type="bar", orientation="h", x=x, y=y, marker=dict(color=color), text=text, textposition="outside",
                cliponaxis=False, textfont=dict(size=TICKS), hovertemplate=hover, **more)  # fmt: skip


def progress_figure(labels: Sequence[str], counts: Sequence[int], *, title: str) -> go.Figure:
    """Students at each stage of the lesson now (one bar per stage, the lesson's order top to bottom)."""
    _n(counts, labels, "counts")
    y = _labels(labels)
    c = np.asarray(counts, dtype=int)
    bars = _bars(
        c.tolist(), y, RIGHT, [str(v) for v in c.tolist()], "%{customdata}: %{x} students<extra></extra>",
        customdata=[safe_label(t) for t in labels],
    )  # fmt: skip
    layout = _layout(title, len(y), "students there now", "where in the lesson", y)
    layout["xaxis"].update(range=[0, max(int(c.max(initial=0)), 1) * 1.15], rangemode="tozero", dtick=_dtick(c))
    return new_figure([bars], layout)


def _dtick(c: np.ndarray) -> int:
    """A round step (1, 2 or 5 times a power of ten) giving at most 8 intervals up to the largest count."""
    raw = max(int(c.max(initial=0)), 1) / 8
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    return int(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def first_try_figure(
    labels: Sequence[str], shares: Sequence[float], students: Sequence[int], wrong: Sequence[str], *, title: str
) -> go.Figure:
    """Each question's share of students right at their first try (bars from 0 to 100 %), the most common wrong
    option in the hover."""
    for v, what in ((shares, "shares"), (students, "student counts"), (wrong, "wrong options")):
        _n(v, labels, what)
    y = _labels(labels)
    s = np.asarray(shares, dtype=float)
    bars = _bars(
        s.tolist(),
        y,
        [RIGHT if v >= 0.5 else WRONG for v in s],
        [f"{v:.0%} of {n}" for v, n in zip(s, students)],
        "%{customdata[0]}<br>right at the first try: %{x:.0%} of %{customdata[1]} students"
        "<br>most common wrong option: %{customdata[2]}<extra></extra>",
        customdata=[[safe_label(t), int(n), safe_label(w) or "none"] for t, n, w in zip(labels, students, wrong)],
    )
    layout = _layout(title, len(y), "share of students right at their first try", "question", y)
    layout["xaxis"].update(range=[0, 1.18], tickformat=".0%", tickvals=[0, 0.25, 0.5, 0.75, 1])
    return new_figure([bars], layout)


def checks_figure(
    nicknames: Sequence[str],
    pre: Sequence[int | None],
    post: Sequence[int | None],
    *,
    max_score: int,
    title: str,
) -> go.Figure:
    """Each student's score on the first check (grey) and the final one (blue), joined by a line: one row each."""
    _n(pre, nicknames, "first-check scores")
    _n(post, nicknames, "final-check scores")
    y = _labels(nicknames)
    a = np.array([np.nan if v is None else v for v in pre], dtype=float)
    b = np.array([np.nan if v is None else v for v in post], dtype=float)
    xs, ys = [], []
    for name, u, v in zip(y, a, b):
        if np.isfinite(u) and np.isfinite(v):
            xs += [float(u), float(v), None]
            ys += [name, name, None]
    link = dict(
        type="scatter",
        mode="lines",
        x=xs,
        y=ys,
        line=dict(color="#bbbbbb", width=3),
        hoverinfo="skip",
        showlegend=False,
    )

    def dots(values, name, color, symbol):
        keep = np.isfinite(values)
        return dict(
            type="scatter",
            mode="markers",
            name=name,
            x=values[keep].tolist(),
            y=[n for n, k in zip(y, keep) if k],
            marker=dict(color=color, size=14, symbol=symbol),
            hovertemplate=f"%{{y}}<br>{name}: %{{x}} / {max_score}<extra></extra>",
        )

    traces = [link, dots(a, "first check", BEFORE, "circle"), dots(b, "final check", AFTER, "diamond")]
    layout = _layout(title, len(y), f"score (of {max_score})", "student", y, legend=True)
    layout["xaxis"].update(range=[-0.3, max_score + 0.3], dtick=1)
    # one row each, no more: autorange pads for the markers' size, 5 % of the rows (16 empty rows above 300 students)
    layout["yaxis"].update(tickmode="array", tickvals=y, ticktext=y, autorange=False, range=[len(y) - 0.5, -0.5])
    if len(y) > TALL_ROWS:  # the scores' axis where the reader starts, not a long scroll below; its room moves too
        layout["xaxis"].update(side="top")
        room = 2 * BIG + TICKS
        layout["margin"].update(t=layout["margin"]["t"] + room, b=layout["margin"]["b"] - room)
    return new_figure(traces, layout)


def concepts_figure(
    labels: Sequence[str], pre: Sequence[float | None], post: Sequence[float | None], *, title: str
) -> go.Figure:
    """Per idea of the checks: the share right at the first try before the chapters and after them."""
    _n(pre, labels, "first-check shares")
    _n(post, labels, "final-check shares")
    y = _labels(labels)

    def bars(values, name, color):
        v = [None if x is None else float(x) for x in values]
        text = ["–" if x is None else f"{x:.0%}" for x in v]
        return _bars(
            v, y, color, text, f"%{{y}}<br>{name}: %{{x:.0%}} right at the first try<extra></extra>", name=name
        )

    layout = _layout(title, 2 * len(y), "share of students right at their first try", "idea", y, legend=True)
    layout.update(barmode="group")
    layout["xaxis"].update(range=[0, 1.15], tickformat=".0%", tickvals=[0, 0.25, 0.5, 0.75, 1])
    return new_figure([bars(pre, "first check", BEFORE), bars(post, "final check", AFTER)], layout)


HOVER_NAMES = 8  # nicknames listed in a cell's hover; the rest counted


def transitions_figure(
    nicknames: Sequence[str],
    pre: Sequence[int | None],
    post: Sequence[int | None],
    *,
    max_score: int,
    title: str,
) -> go.Figure:
    """Where the students who took both checks went: rows their first-check score, columns their final-check score,
    each cell the number of students (their nicknames in the hover). Cells right of the diagonal improved. One cell
    per pair of scores, so a class of any size reads at a glance."""
    _n(pre, nicknames, "first-check scores")
    _n(post, nicknames, "final-check scores")
    n = max_score + 1
    names: list[list[list[str]]] = [[[] for _ in range(n)] for _ in range(n)]
    for name, u, v in zip(nicknames, pre, post):
        if u is None or v is None:
            continue
        if not (0 <= u <= max_score and 0 <= v <= max_score):
            raise ValueError(f"a score of {u} or {v} is outside 0–{max_score}")
        names[u][v].append(name)
    counts = np.array([[len(c) for c in row] for row in names])
    hover = [
        [
            safe_label(
                ", ".join(c[:HOVER_NAMES]) + (f" and {len(c) - HOVER_NAMES} more" if len(c) > HOVER_NAMES else "")
            )
            or "nobody"
            for c in row
        ]
        for row in names
    ]
    scores = list(range(n))
    cells = dict(
        type="heatmap",
        z=counts.tolist(),
        x=scores,
        y=scores,
        customdata=hover,
        colorscale=[[0, "#ffffff"], [1, AFTER]],
        zmin=0,
        zmax=max(int(counts.max(initial=0)), 1),
        xgap=2,
        ygap=2,
        colorbar=dict(title=dict(text="students", side="right"), thickness=14),
        text=[[str(v) if v else "" for v in row] for row in counts.tolist()],
        texttemplate="%{text}",
        textfont=dict(size=BIG),
        hovertemplate=f"first check %{{y}} / {max_score} → final check %{{x}} / {max_score}: %{{z}} students"
        "<br>%{customdata}<extra></extra>",
    )
    layout = _layout(
        title, n * 2, f"final-check score (of {max_score})", f"first-check score (of {max_score})", [str(max_score)]
    )
    layout["xaxis"].update(type="linear", dtick=1, range=[-0.5, max_score + 0.5], showgrid=False)
    layout["yaxis"].update(type="linear", dtick=1, range=[-0.5, max_score + 0.5], autorange=None, showgrid=False)
    diagonal = dict(
        type="line", x0=-0.5, y0=-0.5, x1=max_score + 0.5, y1=max_score + 0.5, line=dict(color="#888", dash="dot")
    )
    layout["shapes"] = [diagonal]
    return new_figure([cells], layout)
