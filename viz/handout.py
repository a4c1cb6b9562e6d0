"""The handout: one self-contained HTML page of a followed line (the sentence, its translation, and for every position
each stage under its heading with its equations and what the step view says of it, then its figures, each with its
one-line description) that opens offline, can be put on a course site and prints as lecture notes (a page per
position, every figure drawn as an image for the print).

Plotly's bundle is inlined once; each distinct figure's JSON once (a figure that does not change from one position to
the next is written once and drawn wherever it appears). The page draws a figure when it scrolls near, offers each
figure as PNG (Plotly's camera) and SVG (a button of its toolbar), and each position's figures together as a ZIP of
both (``handout.js``). Nothing is fetched: no font, no script, no image from elsewhere. User text is escaped.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

HANDOUT_JS = Path(__file__).with_name("handout.js")
CSS = """
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2230; margin: 0 auto;
       max-width: 1100px; padding: 1rem; }
h1 { font-size: 1.8rem; margin: 0.5rem 0; } h2 { font-size: 1.3rem; margin-top: 2.5rem; }
.meta, figcaption { color: #4a4d59; } figure { margin: 1.5rem 0; }
.frame, .eq { overflow-x: auto; max-width: 100%; } .plot { min-height: 120px; }
button { font: inherit; padding: 0.3rem 0.8rem; cursor: pointer; }
h3 { font-size: 1.1rem; margin: 2rem 0 0.5rem; } .stage math { font-size: 1.15rem; margin: 0.6rem 0; }
.stage pre { white-space: pre-wrap; } img.print-figure { display: none; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  section { break-before: page; } section:first-of-type { break-before: auto; }
  h2, h3 { break-after: avoid; } figure { break-inside: avoid; margin: 0.8rem 0; }
  button, .screen-only, .print-state { display: none; }
  .frame { display: none; } img.print-figure { display: block; width: 100%; height: auto; }
}
"""


@dataclass(frozen=True)
class HandoutFigure:
    ref: str  # the key of its JSON in the page's figure table (one per distinct figure)
    description: str  # one line: the heatmap's text alternative, or the figure's title
    name: str  # its file name's stem in the downloads


@dataclass(frozen=True)
class HandoutSection:
    """One stage at one position, as lecture notes: its heading, its equations (MathML, or LaTeX as text), the
    sentences the step view says of it, then its figures."""

    title: str
    equations: tuple[str, ...]
    notes: tuple[str, ...]
    figures: tuple[HandoutFigure, ...]


@dataclass(frozen=True)
class HandoutPosition:
    heading: str  # "Position 3: reads … → predicts …"
    figures: tuple[HandoutFigure, ...]  # every figure of the position, in order
    sections: tuple[HandoutSection, ...] = ()  # the same figures under their stages' headings (when given)


def _figure(f: HandoutFigure) -> str:
    e = html.escape
    return (
        f'<figure><div class="frame" tabindex="0" role="group" aria-label="{e(f.description, quote=True)}">'
        f'<div class="plot" data-ref="{e(f.ref, quote=True)}" data-name="{e(f.name, quote=True)}"></div></div>'
        f"<figcaption>{e(f.description)}</figcaption></figure>"
    )


def handout_html(
    title: str,
    lines: tuple[tuple[str, str], ...],
    positions: tuple[HandoutPosition, ...],
    figures: dict[str, str],
    plotly_js: str,
    credit: str = "",
) -> str:
    """The page. ``lines``: (label, text) shown under the title (the sentence, its translation, the settings);
    ``figures``: each ``ref``'s figure JSON (as ``viz.common.figure_json`` writes it); ``plotly_js``: Plotly's
    bundle, inlined."""
    refs = {f.ref for p in positions for f in p.figures}
    if missing := refs - figures.keys():
        raise ValueError(f"handout figures missing from the table: {sorted(missing)[:3]}")
    if "</script" in plotly_js.lower():
        raise ValueError("Plotly's bundle cannot be inlined: it holds a closing script tag")
    e = html.escape
    body = [f"<h1>{e(title)}</h1>"]
    body += [f'<p class="meta"><strong>{e(label)}:</strong> {e(text)}</p>' for label, text in lines]
    body.append(
        '<p class="meta screen-only">Each figure\'s toolbar (top right, on hover) saves it as PNG (camera) or SVG; '
        "each position's button saves all its figures, both ways, as one ZIP file. To print, use the button "
        "below: it waits until every figure is drawn for the page (each position starts a new page).</p>"
        '<p><button type="button" class="print">Print these notes (every figure drawn first)</button> '
        '<span class="print-state" role="status"></span></p>'
    )
    for k, p in enumerate(positions):
        body.append(f'<section aria-labelledby="p{k}"><h2 id="p{k}">{e(p.heading)}</h2>')
        body.append(
            f'<button type="button" class="zip" data-position="{k}">Download all figures of this position '
            f"(ZIP: SVG and PNG)</button>"
        )
        for s in p.sections or (HandoutSection("", (), (), p.figures),):
            body.append('<div class="stage">')
            if s.title:
                body.append(f"<h3>{e(s.title)}</h3>")
            # MathML made from the stage's own LaTeX (views/handout.py), each in a frame that scrolls on a phone
            # rather than widening the page
            body += [f'<div class="eq">{q}</div>' for q in s.equations]
            body += [f"<p>{e(n)}</p>" for n in s.notes]
            body += [_figure(f) for f in s.figures]
            body.append("</div>")
        body.append("</section>")
    if credit:
        body.append(f'<p class="meta">{e(credit)}</p>')
    # each figure's JSON as it is (not re-encoded as a string), "<" escaped where it can only be inside a string
    table = "{" + ",".join(f"{json.dumps(ref)}:{fig}" for ref, fig in figures.items()).replace("<", "\\u003c") + "}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{CSS}</style>"
        f"<script>{plotly_js}</script></head><body><main>{''.join(body)}</main>"
        f'<script type="application/json" id="figures">{table}</script>'
        f"<script>{HANDOUT_JS.read_text()}</script></body></html>\n"
    )
