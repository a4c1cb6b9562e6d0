"""The handout of a followed line (``viz.handout``'s page): at every position, the figures the chosen stages draw.

The stages draw through Streamlit; here they run in a thread of their own, where Streamlit's calls draw nothing
(there is no page run to draw into) and ``views.common.show`` adds each figure to the thread's ``figures`` instead of
sending it. So the handout holds exactly the figures, titles and text alternatives the step view shows.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path

from viz.handout import HandoutFigure, HandoutPosition, HandoutSection, handout_html

from . import stages
from .common import EQUATION, HEADING, NOTE, show_token
from .plot import figure_item
from .routes import PLOTLY_JS
from .stages import ALL, by_id
from .stages.context import StageContext
from .streamlit_private import SCRIPT_RUN_CONTEXT_LOGGER

THREAD = "handout-figures"
TEXT = (HEADING, EQUATION, NOTE)  # what the collecting thread holds beside the figures' keys
MIME = "text/html"


class _NoContextWarnings(logging.Filter):
    """Streamlit warns at each of its calls made outside a page run; in the handout's thread that is the point."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD


@functools.cache  # once per process
def _quiet() -> None:
    logging.getLogger(SCRIPT_RUN_CONTEXT_LOGGER).addFilter(_NoContextWarnings())


def handout_stage(chosen: str) -> str:
    """The stages a handout draws: the chosen decoder stage, or all of them (an explanation stage computes more than
    a figure per position, and All stages leaves them out too)."""
    return chosen if chosen == ALL or by_id(chosen).decoder else ALL


class _Collector(threading.Thread):
    def __init__(self, context: Callable[[int], StageContext], n: int, chosen: str):
        super().__init__(name=THREAD, daemon=True)
        self.context, self.n, self.chosen = context, n, chosen
        self.figures: list = []  # (key, figure) of the position being drawn, as ``views.common.show`` adds them
        self.positions: list[tuple[StageContext, list[tuple]]] = []  # (context, its items: text or figure)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for step in range(self.n):
                ctx, self.figures = self.context(step), []
                stages.render(ctx, self.chosen)
                items = [(key, x) if key in TEXT else (key, *figure_item(x)) for key, x in self.figures]
                self.positions.append((ctx, items))
        except BaseException as e:  # raised again in the page's thread, which shows it
            self.error = e


def _title(figure: str) -> str:
    title = json.loads(figure).get("layout", {}).get("title") or ""
    title = title.get("text", "") if isinstance(title, dict) else title
    return html.unescape(str(title).replace("<br>", " ")).strip()


def _sections(items: list, t: int, table: dict[str, str]) -> tuple[HandoutSection, ...]:
    """A position's stages as lecture notes: each heading the stages drew opens a section holding the equations,
    sentences and figures that follow it (figures go into ``table`` once, by their digest)."""
    out: list[dict] = []

    def current() -> dict:
        if not out:
            out.append({"title": "", "equations": [], "notes": [], "figures": []})
        return out[-1]

    for key, *rest in items:
        if key == HEADING:
            title, tex = rest[0]
            out.append({"title": title, "equations": [mathml(tex)] if tex else [], "notes": [], "figures": []})
        elif key == EQUATION:
            current()["equations"].append(mathml(rest[0]))
        elif key == NOTE:
            current()["notes"].append(re.sub(r"\\(.)", r"\1", rest[0]))  # as written for Markdown: unescaped
        else:
            figure, alt = rest
            ref = hashlib.blake2b(figure.encode(), digest_size=8).hexdigest()
            table.setdefault(ref, figure)
            current()["figures"].append(HandoutFigure(ref, alt or _title(figure) or key, f"position{t}_{key}"))
    return tuple(HandoutSection(d["title"], tuple(d["equations"]), tuple(d["notes"]), tuple(d["figures"])) for d in out)


@functools.cache
def mathml(tex: str) -> str:
    """A displayed equation as MathML (the browser draws it, offline and in print), or its LaTeX as text when the
    converter cannot read it."""
    from latex2mathml.converter import convert

    try:
        return convert(tex, display="block")
    except Exception:  # an equation the converter does not know: its source, still readable
        return f"<pre>{html.escape(tex)}</pre>"


def page(
    context: Callable[[int], StageContext],
    n: int,
    chosen: str,
    probs: tuple[float, ...],
    lines: tuple[tuple[str, str], ...],
) -> str:
    """The handout's HTML: positions 0 … n − 1 (``context(step)``: what the stages draw there; ``probs``: the
    chosen token's probability at each), the chosen stages' figures at each, ``lines`` under the title."""
    _quiet()
    job = _Collector(context, n, handout_stage(chosen))
    job.start()
    job.join()
    if job.error is not None:
        raise job.error
    table: dict[str, str] = {}
    positions = []
    for ctx, items in job.positions:
        t = ctx.current
        sections = _sections(items, t, table)
        reads, predicts = show_token(ctx.reads[t]), show_token(ctx.predicts[t])
        heading = f"Position {t}: reads {reads} → predicts {predicts} (p = {probs[t]:.3f})"
        shown = tuple(f for sec in sections for f in sec.figures)
        positions.append(HandoutPosition(heading, shown, sections))
    stage = "All stages" if job.chosen == ALL else by_id(job.chosen).label
    return handout_html(
        "Decoder Lens handout",
        (*lines, ("Stages", stage)),
        tuple(positions),
        table,
        Path(PLOTLY_JS).read_text(),
        "Made with Decoder Lens: every figure is the model's own numbers at that position of the line.",
    )
