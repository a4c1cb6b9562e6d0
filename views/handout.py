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
import threading
from collections.abc import Callable
from pathlib import Path

from viz.handout import HandoutFigure, HandoutPosition, handout_html

from . import stages
from .common import show_token
from .plot import figure_item
from .routes import PLOTLY_JS
from .stages import ALL, by_id
from .stages.context import StageContext
from .streamlit_private import SCRIPT_RUN_CONTEXT_LOGGER

THREAD = "handout-figures"
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
        self.positions: list[tuple[StageContext, list[tuple[str, str, str | None]]]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for step in range(self.n):
                ctx, self.figures = self.context(step), []
                stages.render(ctx, self.chosen)
                self.positions.append((ctx, [(key, *figure_item(fig)) for key, fig in self.figures]))
        except BaseException as e:  # raised again in the page's thread, which shows it
            self.error = e


def _title(figure: str) -> str:
    title = json.loads(figure).get("layout", {}).get("title") or ""
    title = title.get("text", "") if isinstance(title, dict) else title
    return html.unescape(str(title).replace("<br>", " ")).strip()


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
    for ctx, figures in job.positions:
        t = ctx.current
        shown = []
        for key, figure, alt in figures:
            ref = hashlib.blake2b(figure.encode(), digest_size=8).hexdigest()
            table.setdefault(ref, figure)
            shown.append(HandoutFigure(ref, alt or _title(figure) or key, f"position{t}_{key}"))
        reads, predicts = show_token(ctx.reads[t]), show_token(ctx.predicts[t])
        heading = f"Position {t}: reads {reads} → predicts {predicts} (p = {probs[t]:.3f})"
        positions.append(HandoutPosition(heading, tuple(shown)))
    stage = "All stages" if job.chosen == ALL else by_id(job.chosen).label
    return handout_html(
        "Decoder Lens handout",
        (*lines, ("Stages", stage)),
        tuple(positions),
        table,
        Path(PLOTLY_JS).read_text(),
        "Made with Decoder Lens: every figure is the model's own numbers at that position of the line.",
    )
