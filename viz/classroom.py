"""The teacher's dashboard: a class's progress, its questions and its checks, legible on a projector (large text,
one bar or row per item, sized from the item count). Pure: lists in, a figure out; user text (nicknames,
options) is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .common import (
    PAD,
    PHONE_WIDTH,
    Figure,
    count_dtick,
    layout_defaults,
    new_figure,
    safe_label,
    title_block,
    unique_labels,
)

BIG = 16  # projector text: axis titles, hovers
TICKS = 14  # tick labels and the numbers on the bars
ROW_PX = 46  # px per bar or per student row: its label on one line, its bar below
BAR_OFFSET, BAR_WIDTH = 0.06, 0.4  # a row's bar, in rows, below the row's line (its label above it)
DOT_OFFSET = 0.28  # a student's dots, in rows, below the row's line
TALL_ROWS = 15  # a per-student figure taller than this many rows has its scores' axis on top
LABEL_CHARS = 34  # a row label is cut beyond this (the hover has it whole)
RIGHT, WRONG, BEFORE, AFTER = "#2b8cbe", "#e4572e", "#9e9e9e", "#2b8cbe"


def _n(values: Sequence, labels: Sequence, what: str) -> None:
    if len(values) != len(labels):
        raise ValueError(f"{len(values)} {what} but {len(labels)} labels were given")


@dataclass(frozen=True)
class CheckScores:
    """Each student's score on the first check and on the final one (None: not taken), out of ``max_score``."""

    nicknames: Sequence[str]
    pre: Sequence[int | None]
    post: Sequence[int | None]
    max_score: int

    def __post_init__(self) -> None:
        _n(self.pre, self.nicknames, "first-check scores")
        _n(self.post, self.nicknames, "final-check scores")


def _layout(
    title: str, rows: int, x_title: str, y_title: str, labels: Sequence[str], legend: bool = False, at=None
) -> dict:
    """A figure of one row per item that squeezes to a phone's column: each row's label written above its bar or
    dots, inside the plot (no left margin to take the column from the bars), the title wrapped to a phone's width."""
    layout = layout_defaults(title, height=0, legend=legend, squeezes=True)
    top, bottom = layout["margin"]["t"], PAD + 2 * BIG + TICKS + (2 * BIG if legend else 0)
    layout.update(
        height=top + max(rows, 2) * ROW_PX + bottom,
        margin=dict(l=PAD + BIG + 8, r=56, t=top, b=bottom),
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
        title=dict(text=y_title, standoff=2),
        type="category",
        autorange="reversed",
        tickfont=dict(size=TICKS),
        showticklabels=False,
        ticks="",
    )
    # each row's label above its bar or dots (BAR_OFFSET, DOT_OFFSET), from the plot's left edge: annotations, not
    # "inside" tick labels (Plotly hides the count axis's tick labels beneath those)
    layout["annotations"] = [
        dict(text=t, x=0, xref="paper", xanchor="left", y=y, yref="y", yanchor="bottom", yshift=-2,
             showarrow=False, font=dict(size=TICKS))
        for t, y in zip(labels, labels if at is None else at)
    ]  # fmt: skip
    return layout


def _labels(labels: Sequence[str]) -> list[str]:
    return unique_labels(labels, index=False, max_len=LABEL_CHARS)


def _bars(x: list, y: list[str], color, text: list[str], hover: str, **more) -> dict:
    """Horizontal bars with their numbers written beside them, in projector-sized text."""
    more = {"offset": BAR_OFFSET, "width": BAR_WIDTH, "constraintext": "none", **more}  # never shrunk to a thin bar
    return dict(type="bar", orientation="h", x=x, y=y, marker=dict(color=color), text=text, textposition="outside",
                cliponaxis=False, textfont=dict(size=TICKS), hovertemplate=hover, **more)  # fmt: skip


def progress_figure(labels: Sequence[str], counts: Sequence[int], *, title: str) -> Figure:
    """Students at each stage of the lesson now (one bar per stage, the lesson's order top to bottom)."""
    _n(counts, labels, "counts")
    y = _labels(labels)
    c = np.asarray(counts, dtype=int)
    bars = _bars(
        c.tolist(), y, RIGHT, [str(v) for v in c.tolist()], "%{customdata}: %{x} students<extra></extra>",
        customdata=[safe_label(t) for t in labels],
    )  # fmt: skip
    layout = _layout(title, len(y), "students there now", "where in the lesson", y)
    top = int(c.max(initial=0))
    layout["xaxis"].update(range=[0, max(top, 1) * 1.15], rangemode="tozero", dtick=count_dtick(top))
    return new_figure([bars], layout)


def first_try_figure(
    labels: Sequence[str], shares: Sequence[float], students: Sequence[int], wrong: Sequence[str], *, title: str
) -> Figure:
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


def checks_figure(checks: CheckScores, *, title: str) -> Figure:
    """Each student's score on the first check (grey) and the final one (blue), joined by a line: one row each."""
    nicknames, pre, post, max_score = checks.nicknames, checks.pre, checks.post, checks.max_score
    y = _labels(nicknames)
    rows = [i + DOT_OFFSET for i in range(len(y))]  # each student's dots below the row's line, the name above it
    a = np.array([np.nan if v is None else v for v in pre], dtype=float)
    b = np.array([np.nan if v is None else v for v in post], dtype=float)
    xs, ys = [], []
    for row, u, v in zip(rows, a, b):
        if np.isfinite(u) and np.isfinite(v):
            xs += [float(u), float(v), None]
            ys += [row, row, None]
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
            y=[r for r, k in zip(rows, keep) if k],
            customdata=[n for n, k in zip(y, keep) if k],
            marker=dict(color=color, size=14, symbol=symbol),
            hovertemplate=f"%{{customdata}}<br>{name}: %{{x}} / {max_score}<extra></extra>",
        )

    traces = [link, dots(a, "first check", BEFORE, "circle"), dots(b, "final check", AFTER, "diamond")]
    layout = _layout(title, len(y), f"score (of {max_score})", "student", y, legend=True, at=list(range(len(y))))
    layout["xaxis"].update(range=[-0.3, max_score + 0.3], dtick=1)
    # one row each, no more: autorange pads for the markers' size, 5 % of the rows (16 empty rows above 300 students)
    layout["yaxis"].update(
        type="linear", tickmode="array", tickvals=list(range(len(y))), ticktext=y, autorange=False,
        range=[len(y) - 0.5, -0.5], showgrid=False, zeroline=False,
    )  # fmt: skip
    if len(y) > TALL_ROWS:  # the scores' axis where the reader starts, not a long scroll below; its room moves too
        layout["xaxis"].update(side="top")
        room = 2 * BIG + TICKS
        layout["margin"].update(t=layout["margin"]["t"] + room, b=layout["margin"]["b"] - room)
    return new_figure(traces, layout)


def concepts_figure(
    labels: Sequence[str], pre: Sequence[float | None], post: Sequence[float | None], *, title: str
) -> Figure:
    """Per idea of the checks: the share right at the first try before the chapters and after them."""
    _n(pre, labels, "first-check shares")
    _n(post, labels, "final-check shares")
    y = _labels(labels)

    def bars(values, name, color, offset):
        v = [None if x is None else float(x) for x in values]
        text = ["–" if x is None else f"{x:.0%}" for x in v]
        hover = f"%{{y}}<br>{name}: %{{x:.0%}} right at the first try<extra></extra>"
        return _bars(v, y, color, text, hover, name=name, offset=offset, width=BAR_WIDTH / 2)

    layout = _layout(title, len(y), "share of students right at their first try", "idea", y, legend=True)
    layout["height"] += len(y) * ROW_PX // 3  # two bars a row
    layout.update(barmode="overlay")  # side by side all the same: each at its own offset below the row's label
    layout["xaxis"].update(range=[0, 1.15], tickformat=".0%", tickvals=[0, 0.25, 0.5, 0.75, 1])
    first = bars(pre, "first check", BEFORE, BAR_OFFSET)
    return new_figure([first, bars(post, "final check", AFTER, BAR_OFFSET + BAR_WIDTH / 2 + 0.02)], layout)


HOVER_NAMES = 8  # nicknames listed in a cell's hover; the rest counted
COLORBAR_PX = 64  # the transitions' colour bar with its ticks and title


def transitions_figure(checks: CheckScores, *, title: str) -> Figure:
    """Where the students who took both checks went: rows their first-check score, columns their final-check score,
    each cell the number of students (their nicknames in the hover). Cells right of the diagonal improved. One cell
    per pair of scores, so a class of any size reads at a glance."""
    nicknames, pre, post, max_score = checks.nicknames, checks.pre, checks.post, checks.max_score
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
    layout = _layout(title, n * 2, f"final-check score (of {max_score})", f"first-check score (of {max_score})", [])
    # a grid of (max_score + 1)² cells drawn a phone's column wide everywhere: a heatmap is never squeezed, and its
    # title is wrapped to that width (no other for the browser to choose)
    layout["title"], top = title_block(title, PHONE_WIDTH)
    layout.get("meta", {}).pop("narrow_title", None)
    m = {**layout["margin"], "t": top, "l": PAD + 2 * BIG + TICKS + 8, "r": 10}
    side = PHONE_WIDTH - m["l"] - m["r"] - COLORBAR_PX  # square cells
    layout.update(width=PHONE_WIDTH, height=m["t"] + side + m["b"], margin=m)
    layout["xaxis"].update(type="linear", dtick=1, range=[-0.5, max_score + 0.5], showgrid=False)
    layout["yaxis"].update(
        type="linear", dtick=1, range=[-0.5, max_score + 0.5], autorange=None, showgrid=False, showticklabels=True,
        ticks="outside",
    )  # fmt: skip
    diagonal = dict(
        type="line", x0=-0.5, y0=-0.5, x1=max_score + 0.5, y1=max_score + 0.5, line=dict(color="#888", dash="dot")
    )
    layout["shapes"] = [diagonal]
    return new_figure([cells], layout)
