"""Figures and tables for the output side: next-token probabilities, the loss, beam search."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from . import common
from .heatmap import AXIS_TITLE, colorbar_dict, colorbar_px

if TYPE_CHECKING:
    import pandas as pd

STATUS_STYLE = {
    # status: marker symbol, size, outline colour, outline width
    "kept": ("circle", 11, "#222", 1.0),
    "finished": ("star", 16, "#000", 1.5),
    "pruned": ("x-thin-open", 8, None, 2.0),
}
OTHER_STYLE = ("square", 9, "#222", 1.0)
START_COLOR = "#888888"
LEGEND_COLOR = "#9a9a9a"  # legend swatches: the node colours themselves are cumulative log-probs
TREE_ROW_PX = 18  # px between two hypotheses of one step: room for an 11 px label
MAX_PRUNED = 3  # pruned candidates drawn per node of the beam tree (the best ones)
MIN_COLUMN_PX = 40  # px between two positions of the beam tree
LABEL_GAP_PX = 26  # a node's marker, the gap before its label, and the gap after it
MARKER_GAP_PX = 14  # a node's marker and the gap before its label (a cut label ends at the next column)
# the paths drawn over the beam tree's edges: colour, width, dash
PATH_STYLES = (("#2ca02c", 5.0, "solid"), (common.HIGHLIGHT_COLOR, 3.0, "dash"))
LEGEND_ROW = 26
X_TITLE = "position that predicted the token (numbered as in the step view)"  # the beam tree's x axis
BAR_PX = 26  # px per bar of the top-k chart


class HypothesisLike(Protocol):
    """What the figures read of a beam hypothesis (``model.decode.decoding.Hypothesis``; viz imports no model)."""

    @property
    def ids(self) -> Sequence[int]: ...
    @property
    def logprob(self) -> float: ...
    @property
    def score(self) -> float: ...
    @property
    def parent(self) -> int: ...


class ExpansionLike(Protocol):
    """A live hypothesis' continuation and its fate (``model.decode.decoding.Expansion``)."""

    @property
    def parent(self) -> int: ...
    @property
    def token(self) -> int: ...
    @property
    def token_logprob(self) -> float: ...
    @property
    def cum_logprob(self) -> float: ...
    @property
    def status(self) -> str: ...


class BeamStepLike(Protocol):
    """One step of beam search (``model.decode.decoding.BeamStep``)."""

    @property
    def live(self) -> Sequence[HypothesisLike]: ...
    @property
    def expansions(self) -> Sequence[ExpansionLike]: ...


def _probs(probs: object, name: str = "probs") -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    return p


def entropy(probs: Sequence[float] | np.ndarray) -> float:
    """Shannon entropy -sum p log p in nats (zeros contribute nothing; no renormalisation)."""
    p = _probs(np.ravel(np.asarray(probs, dtype=np.float64)))
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def topk_figure(
    tokens: Sequence[str],
    probs: Sequence[float] | np.ndarray,
    chosen: int | None,
    *,
    title: str,
    color: str = "#9ecae1",
    chosen_color: str = common.HIGHLIGHT_COLOR,
) -> common.Figure:
    """Horizontal bars of next-token probabilities (first token on top); bar ``chosen`` is highlighted."""
    tokens = common.as_tokens(tokens)
    p = _probs(probs)
    if p.shape[0] != len(tokens):
        raise ValueError(f"{p.shape[0]} probabilities but {len(tokens)} tokens were given")
    if chosen is not None:
        if isinstance(chosen, bool) or not isinstance(chosen, int | np.integer) or not 0 <= chosen < len(tokens):
            raise ValueError(f"chosen must be an index into the {len(tokens)} tokens or None, not {chosen!r}")
        chosen = int(chosen)
    labels = common.unique_labels(tokens, index=False)
    colors = [chosen_color if i == chosen else color for i in range(len(tokens))]
    widths = [2.0 if i == chosen else 0.0 for i in range(len(tokens))]
    with np.errstate(divide="ignore"):
        logp = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), -np.inf)
    bars = dict(
        type="bar",
        x=common.round_sig(p),
        y=labels,
        orientation="h",
        marker=dict(color=colors, line=dict(color="#222", width=widths)),
        customdata=[["chosen" if i == chosen else "", f"{lp:.3f}"] for i, lp in enumerate(logp)],
        # the percent from the exact p, not from x rounded to 4 digits: 0.81854 sent as 0.8185 read "81.8%"
        # beside a chip's 0.819
        text=[f"{v:.1%}" for v in p],
        texttemplate="%{text}",
        textposition="outside",
        cliponaxis=False,
        textfont=dict(size=common.TICK_FONT),
        hovertemplate="token: %{y}<br>p = %{x:.4g}<br>log p = %{customdata[1]}<br>%{customdata[0]}<extra></extra>",
    )
    xmax = float(p.max()) if p.size else 1.0
    layout = common.layout_defaults(title, height=0, squeezes=True)
    top, bottom = layout["margin"]["t"], common.PAD + AXIS_TITLE + int(common.FONT * 1.6)
    layout.update(
        height=top + max(len(tokens), 2) * BAR_PX + bottom,
        margin=dict(
            l=common.PAD + AXIS_TITLE + 16 + int(max(map(common.text_px, labels), default=0)), r=40, t=top, b=bottom
        ),
    )
    layout["xaxis"] = dict(
        title=dict(text="probability", standoff=8),
        range=[0, min(1.0, xmax * 1.25) or 1.0],
        showgrid=True,
        gridcolor="#eee",
        tickformat=".0%",
        tickfont=dict(size=common.TICK_FONT),
    )
    layout["yaxis"] = dict(
        title=dict(text="next token", standoff=8),
        type="category",
        autorange="reversed",
        automargin=True,
        tickmode="array",
        tickvals=labels,
        ticktext=labels,
        tickfont=dict(size=common.TICK_FONT),
    )
    return common.new_figure([bars], layout)


def loss_table(
    dec_input_tokens: Sequence[str],
    label_tokens: Sequence[str],
    label_probs: Sequence[float] | np.ndarray | None = None,
    losses: Sequence[float] | np.ndarray | None = None,
) -> pd.DataFrame:
    """Teacher forcing, one row per position: decoder input, expected output (label), p(label), loss.

    With only ``label_probs`` the loss is -log p; with only ``losses``, p = exp(-loss). Text is kept
    raw (tables are not rendered as HTML).
    """
    import pandas as pd  # imported by the first table, not with the figures: a page without one never waits for it

    inp, lab = common.as_tokens(dec_input_tokens, "dec_input_tokens"), common.as_tokens(label_tokens, "label_tokens")
    if len(inp) != len(lab):
        raise ValueError(f"{len(inp)} decoder inputs but {len(lab)} labels: they must align position by position")
    T = len(inp)
    df = pd.DataFrame({"position": np.arange(T), "decoder input": inp, "expected output (label)": lab})
    p = loss = None
    if label_probs is not None:
        p = np.asarray(label_probs, dtype=np.float64).ravel()
        if p.shape[0] != T:
            raise ValueError(f"{p.shape[0]} label probabilities for {T} positions")
    if losses is not None:
        loss = np.asarray(losses, dtype=np.float64).ravel()
        if loss.shape[0] != T:
            raise ValueError(f"{loss.shape[0]} losses for {T} positions")
    with np.errstate(divide="ignore"):
        if p is not None and loss is None:
            loss = -np.log(p)
        elif loss is not None and p is None:
            p = np.exp(-loss)
    if p is not None:
        df["p(label)"] = p
        df["loss"] = loss
    return df


def _node_text(ids: Sequence[int], token_text: Callable[[int], str]) -> str:
    return " ".join(token_text(int(i)) for i in ids)


@dataclass(frozen=True)
class TreeOptions:
    """How ``beam_tree_figure`` draws a tree: the start's label ``start_text``; log-probs at or below
    ``impossible`` (the decoder's placeholder score) left out of the colour range; at most ``max_pruned`` pruned
    candidates per node; ``x_title`` names the x axis; ``whole``: every position in view (for a short tree),
    else the latest ones when they do not all fit."""

    start_text: str = "<s>"
    impossible: float = -math.inf
    max_pruned: int = MAX_PRUNED
    x_title: str = X_TITLE
    whole: bool = False


def beam_tree_figure(
    beam_steps: Sequence[BeamStepLike],
    options: TreeOptions = TreeOptions(),
    *,
    token_text: Callable[[int], str],
    title: str = "Beam search",
    paths: Mapping[str, Sequence[int]] | None = None,
) -> common.Figure:
    """The tree of beam hypotheses: x = the position that predicted a node's token (numbered as the step view
    numbers positions; the start, <s>, is left of position 0), one node per kept or finished candidate and per
    pruned one among the ``options.max_pruned`` best of its parent (the others are counted in the parent's hover).

    ``beam_steps`` are objects with ``position``, ``live`` (hypotheses with ``ids``, ``logprob``,
    ``parent``) and ``expansions`` (with ``parent`` row, ``token``, ``token_logprob``, ``cum_logprob``,
    ``status`` kept/finished/pruned). The node of live row r at step t is the expansion of step t - 1 with
    parent ``live[r].parent`` and token ``live[r].ids[-1]``; the start is the root.
    Node colour = cumulative log-prob (one colour bar), symbol = status; edges join parent to child; every kept
    and finished node is labelled with its token. ``paths`` (name -> token ids, at most two) are drawn over the
    edges they take, each in its own style, named in the legend. The rest as ``options`` (``TreeOptions``) says.
    """
    nodes: list[dict] = []  # x, y, status, cum, token, hover, ids
    edges: list[tuple[int, int]] = []  # (parent node index, child node index)
    prev: list[dict] = []  # expansions (with node index) of the previous step
    for si, bs in enumerate(beam_steps):
        pos = int(getattr(bs, "position", si))
        live = list(bs.live)
        expansions = list(bs.expansions)
        row_node: dict[int, int] = {}  # node of each live row that an expansion extends
        for r in sorted({int(e.parent) for e in expansions}):
            if not 0 <= r < len(live):
                raise ValueError(f"step {pos}: an expansion has parent row {r} but there are {len(live)} live rows")
            row_node[r] = _parent_node(nodes, prev, si, pos, r, live[r], options.start_text, token_text)
        drawn = _drawn(expansions, options.max_pruned)
        for r, node in row_node.items():
            hidden = sum(1 for i, e in enumerate(expansions) if int(e.parent) == r and i not in drawn)
            if hidden:
                nodes[node]["hover"] += f"<br>{hidden} more pruned candidate{'s' * (hidden > 1)} not drawn"
        # this step's drawn expansions, ordered under their parents, then by cumulative log-prob
        order = sorted(
            drawn, key=lambda i: (nodes[row_node[int(expansions[i].parent)]]["y"], -float(expansions[i].cum_logprob))
        )
        n = len(order)
        cur = []
        for rank, i in enumerate(order):
            e = expansions[i]
            r = int(e.parent)
            ids = tuple(int(t) for t in live[r].ids) + (int(e.token),)
            tok = token_text(int(e.token))
            status = str(e.status)
            idx = len(nodes)
            hover = (
                f"position {pos} · {common.safe_label(status)}<br>token: {common.safe_label(tok)}<br>"
                f"hypothesis: {common.safe_label(_node_text(ids, token_text))}<br>"
                f"token log p: {float(e.token_logprob):.4g}<br>cumulative log p: {float(e.cum_logprob):.4g}"
            )
            nodes.append(
                dict(
                    x=pos,
                    y=rank - (n - 1) / 2,
                    status=status,
                    cum=float(e.cum_logprob),
                    token=tok,
                    hover=hover,
                    ids=ids,
                )
            )
            edges.append((row_node[r], idx))
            cur.append(dict(parent=r, token=int(e.token), status=status, node=idx))
        prev = cur
    return _tree_figure(nodes, edges, options, title=title, paths=paths or {})


def _parent_node(nodes: list[dict], prev: list[dict], si: int, pos: int, r: int, h, start_text, token_text) -> int:
    """The node that live row ``r`` (hypothesis ``h``) of step ``si`` stands for: the previous step's expansion
    that made it, or the start (a root, added to ``nodes`` once per prefix, found there again by its prefix), or
    for inconsistent input the row itself, added so that every edge has a parent."""
    ids = tuple(int(i) for i in h.ids)
    found = None
    if si > 0 and ids:
        cands = [p for p in prev if p["parent"] == int(h.parent) and p["token"] == ids[-1]]
        cands.sort(key=lambda p: p["status"] != "kept")
        found = cands[0]["node"] if cands else None
    if found is None and (si == 0 or not ids):
        found = next((i for i, n in enumerate(nodes) if n["status"] == "start" and n["ids"] == ids), None)
        if found is None:
            found = len(nodes)
            label = start_text + (" " + _node_text(ids, token_text) if ids else "")
            nodes.append(
                dict(
                    x=pos - 1,
                    y=0.0,
                    status="start",
                    cum=float(h.logprob),
                    token=label,
                    hover=f"start: {common.safe_label(label)}",
                    ids=ids,
                )
            )
    if found is None:  # inconsistent input: draw the live row itself so every edge has a parent
        found = len(nodes)
        text = _node_text(ids, token_text)
        nodes.append(
            dict(
                x=pos - 1,
                y=0.0,
                status="live",
                cum=float(h.logprob),
                token=token_text(ids[-1]),
                hover=f"live row {r}: {common.safe_label(text)}",
                ids=ids,
            )
        )
    return found


def _drawn(expansions: Sequence[ExpansionLike], max_pruned: int) -> set[int]:
    """Indices of the expansions to draw: every kept or finished one, and each parent's best pruned ones."""
    out: set[int] = set()
    pruned: dict[int, int] = {}
    for i in sorted(range(len(expansions)), key=lambda i: -float(expansions[i].cum_logprob)):
        e = expansions[i]
        if e.status != "pruned":
            out.add(i)
        elif pruned.get(int(e.parent), 0) < max_pruned:
            pruned[int(e.parent)] = pruned.get(int(e.parent), 0) + 1
            out.add(i)
    return out


def _colour_range(nodes: list[dict], impossible: float) -> tuple[float, float]:
    """The colour axis' range: the nodes' cumulative log-probs (the start and impossible scores left out)."""
    cums = [
        nd["cum"]
        for nd in nodes
        if nd["status"] not in ("start",) and math.isfinite(nd["cum"]) and nd["cum"] > impossible
    ]
    cmin, cmax = (min(cums), max(cums)) if cums else (-1.0, 0.0)
    if cmin == cmax:
        cmin -= 1.0
    return cmin, cmax


def _tree_figure(
    nodes: list[dict], edges: list[tuple[int, int]], options: TreeOptions, *, title: str, paths: Mapping
) -> common.Figure:
    """Draw the nodes and edges of a beam tree: ``TREE_ROW_PX`` per hypothesis row; columns wide enough for their
    labels, the latest positions in view when they do not all fit (the earlier ones by panning, read on hover)."""
    if len(paths) > len(PATH_STYLES):
        raise ValueError(f"at most {len(PATH_STYLES)} paths can be drawn, got {len(paths)}")
    traces = _edge_traces(nodes, edges) + _path_traces(nodes, paths)
    cmin, cmax = _colour_range(nodes, options.impossible)
    labelled = [i for i, nd in enumerate(nodes) if nd["status"] != "pruned"]
    xs = [nd["x"] for nd in nodes] or [0]
    widest_label = max(
        [common.text_px(common.safe_label(nodes[i]["token"]), common.TICK_FONT) for i in labelled] or [0]
    )
    col_px = max(MIN_COLUMN_PX, widest_label + LABEL_GAP_PX)  # a node, its label, then room before the next column
    widest = max([sum(1 for nd in nodes if nd["x"] == x) for x in set(xs)] or [1])
    y_half = (widest - 1) / 2 + 0.7
    plot_h = int(2 * y_half * TREE_ROW_PX)
    margin = dict(
        l=common.PAD + AXIS_TITLE, r=colorbar_px(None, "cum. log p"), b=common.PAD + AXIS_TITLE + int(common.FONT * 1.6)
    )
    plot_w = common.MIN_WIDTH - margin["l"] - margin["r"]
    x_min, x_max = min(xs), max(xs)
    columns = max(int(plot_w // col_px), 1)  # columns in view at the narrowest width
    x_hi = x_max + 1.0  # room right of the last column for its labels
    # from half a column before the first one in view: no node's marker is cut in half at the left edge
    x_lo = max(x_min - 0.5, math.floor(x_hi - columns) + 0.5)
    label_px = None
    if (
        options.whole
    ):  # every column in a desktop's column, its answer and colour bar in view; a label cut to its column
        x_lo = x_min - 0.5
        label_px = max(plot_w / (x_hi - x_lo) - MARKER_GAP_PX, 0.0)
    statuses = list(STATUS_STYLE) + sorted({nd["status"] for nd in nodes} - set(STATUS_STYLE) - {"start"})
    traces += _node_traces(nodes, statuses, cmin, x_lo, label_px)
    shown = x_hi - x_lo
    dtick = _nice_step(shown / max(plot_w / 48, 1))
    ticks = [x for x in range(int(math.ceil(x_min)), int(x_max) + 1) if x < 0 or x % dtick == 0]
    xaxis = dict(
        title=dict(text=common.safe_label(options.x_title), standoff=8),
        showgrid=True,
        gridcolor="#eee",
        zeroline=False,
        range=[x_lo, x_hi],
        tickmode="array",
        tickvals=ticks,
        ticktext=[start_label(x) for x in ticks],
        tickfont=dict(size=common.TICK_FONT),
    )
    yaxis = dict(
        title=dict(text="hypotheses", standoff=8),
        showticklabels=False,
        showgrid=False,
        zeroline=False,
        range=[y_half, -y_half],
        autorange=False,
        fixedrange=True,
    )
    layout = common.layout_defaults(title, height=0, legend=True)
    top = layout["margin"]["t"] + LEGEND_ROW
    margin.update(t=top)
    # The columns in view are those a desktop's column holds (plot_w): a phone scrolls the figure in its frame at that
    # width (plot.js) rather than squeezing them until their labels overlap.
    layout["meta"] = {"min_width": common.MIN_WIDTH}
    layout.update(
        height=top + plot_h + margin["b"],
        margin=margin,
        dragmode="pan",
        legend=dict(orientation="h", x=0, xanchor="left", y=1, yanchor="bottom", font=dict(size=common.FONT)),
    )
    colorbar = colorbar_dict(None, "cum. log p", length=max(min(plot_h, 300), 100))
    layout.update(
        coloraxis=dict(colorscale="Viridis", cmin=cmin, cmax=cmax, colorbar=colorbar), xaxis=xaxis, yaxis=yaxis
    )
    return common.new_figure(traces, layout)


def _edge_traces(nodes: list[dict], edges: list[tuple[int, int]]) -> list[dict]:
    """The tree's edges as two line traces: to pruned candidates (dotted, light) and to the others."""
    traces: list[dict] = []
    if edges:
        for kept_edges, color, width, dash in ((False, "#c8c8c8", 1.0, "dot"), (True, "#555", 1.5, "solid")):
            ex, ey = [], []
            for a, b in edges:
                if (nodes[b]["status"] != "pruned") == kept_edges:
                    ex += [nodes[a]["x"], nodes[b]["x"], None]
                    ey += [nodes[a]["y"], nodes[b]["y"], None]
            if ex:
                name = "edges" + (" (kept)" if kept_edges else " (pruned)")
                traces.append(
                    dict(
                        type="scatter",
                        x=ex,
                        y=ey,
                        mode="lines",
                        hoverinfo="skip",
                        name=name,
                        line=dict(color=color, width=width, dash=dash),
                        showlegend=False,
                    )
                )
    return traces


def _path_traces(nodes: list[dict], paths: Mapping) -> list[dict]:
    """Each named path (token ids) over the nodes it goes through, in its own style, named in the legend."""
    traces: list[dict] = []
    by_ids = {nd["ids"]: i for i, nd in enumerate(nodes) if nd["status"] != "live"}
    for (name, ids), (color, width, dash) in zip(paths.items(), PATH_STYLES):
        on = [by_ids[p] for p in (tuple(int(t) for t in ids[:j]) for j in range(len(ids) + 1)) if p in by_ids]
        px = [nodes[i]["x"] for i in on]
        py = [nodes[i]["y"] for i in on]
        traces.append(
            dict(
                type="scatter",
                x=px,
                y=py,
                mode="lines",
                line=dict(color=color, width=width, dash=dash),
                hoverinfo="skip",
                name=common.safe_label(name),
                showlegend=True,
                meta=dict(path=name),
            )
        )
    return traces


def fit_label(text: str, px: float | None) -> str:
    """``text`` as a safe label at most ``px`` wide: cut with "…" when it is wider (the hover holds it whole)."""
    cut = text
    while cut and px is not None and common.text_px(common.safe_label(cut if cut == text else cut + "…")) > px:
        cut = cut[:-1]
    return common.safe_label(cut if cut == text else cut + "…") if cut else ""


def _node_traces(
    nodes: list[dict], statuses: list[str], cmin: float, x_lo: float, label_px: float | None = None
) -> list[dict]:
    """The nodes, one trace per status (its symbol; coloured by cumulative log-prob on the colour axis, labelled
    with their tokens where in view, each cut to ``label_px``), then a plain legend swatch per status."""
    traces: list[dict] = []
    legend = []
    for status in ["start", *statuses]:
        idx = [i for i, nd in enumerate(nodes) if nd["status"] == status]
        if not idx:
            continue
        sel = [nodes[i] for i in idx]
        if status == "start":
            marker = dict(symbol="square", size=12, color=START_COLOR, line=dict(color="#222", width=1))
            swatch = marker
        else:
            symbol, size, outline, width = STATUS_STYLE.get(status, OTHER_STYLE)
            # numbers on the colour axis; an open symbol is drawn in its (valid) line colour
            line = dict(color=outline, width=width) if outline else dict(width=width)
            colors = [max(nd["cum"], cmin) if math.isfinite(nd["cum"]) else cmin for nd in sel]
            marker = dict(symbol=symbol, size=size, color=colors, coloraxis="coloraxis", line=line)
            swatch = dict(
                symbol=symbol, size=size, color=LEGEND_COLOR, line=dict(color=outline or LEGEND_COLOR, width=width)
            )
        # labels of the positions in view (a panned-in node is read on hover: Plotly clips text, not its box)
        labels = ["" if status == "pruned" or nd["x"] < x_lo + 0.25 else fit_label(nd["token"], label_px) for nd in sel]
        traces.append(
            dict(
                type="scatter",
                x=[nd["x"] for nd in sel],
                y=[nd["y"] for nd in sel],
                mode="markers+text" if any(labels) else "markers",
                marker=marker,
                name=common.safe_label(status),
                text=labels if any(labels) else None,
                textposition="middle right",
                textfont=dict(size=common.TICK_FONT, color="#222"),
                hovertext=[nd["hover"] for nd in sel],
                hovertemplate="%{hovertext}<extra></extra>",
                meta=dict(status=status),
                showlegend=False,
                cliponaxis=True,
            )
        )
        # the legend shows a plain swatch: a marker coloured through a colour axis has no single legend colour
        legend.append(
            dict(
                type="scatter",
                x=[None],
                y=[None],
                mode="markers",
                marker=swatch,
                name=common.safe_label(status),
                showlegend=True,
                hoverinfo="skip",
            )
        )
    return traces + legend


def start_label(x: int) -> str:
    """Tick text of the tree's x axis: positions, and the start left of position 0."""
    return "start" if x < 0 else str(x)


def _nice_step(raw: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, ... at least ``raw``: integer step ticks that do not crowd."""
    step = 1
    while step < raw:
        step = step * 5 // 2 if str(step).startswith("2") else step * 2
    return step


def beam_table(
    live_hypotheses: Sequence[HypothesisLike],
    stream_text: Callable[[Sequence[int]], Sequence[str]],
    *,
    sep: str = " ",
    impossible: float = -math.inf,
) -> pd.DataFrame:
    """The hypotheses ranked by length-normalised score: rank, tokens, cumulative log-prob, score, finished.

    ``stream_text`` labels a hypothesis's ids as one stream (one label per id), so that byte pieces can be named
    by the character they spell together.

    Placeholder rows of beam search (log-prob at or below ``impossible``, the decoder's placeholder score) are
    dropped.
    """
    import pandas as pd  # as in loss_table

    rows: list[dict[str, Any]] = []
    for row, h in enumerate(live_hypotheses):
        lp, score = float(h.logprob), float(h.score)
        if lp <= impossible:
            continue
        labels = list(stream_text([int(i) for i in h.ids]))
        if len(labels) != len(h.ids):
            raise ValueError(f"stream_text gave {len(labels)} labels for {len(h.ids)} tokens")
        rows.append(
            {
                "row": row,
                "tokens": sep.join(labels),
                "cumulative log-prob": lp,
                "length-normalized score": score if math.isfinite(score) else float("nan"),
                "finished": bool(getattr(h, "finished", False)),
            }
        )
    rows.sort(key=lambda d: -d["length-normalized score"] if math.isfinite(d["length-normalized score"]) else math.inf)
    df = pd.DataFrame(rows, columns=["row", "tokens", "cumulative log-prob", "length-normalized score", "finished"])
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df
