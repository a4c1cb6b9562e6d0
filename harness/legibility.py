"""Is every Plotly figure on a page legible? Measured in the browser, from the DOM each figure draws.

``violations(page)`` runs ``LEGIBILITY_JS`` on a Playwright page and returns one readable line per
problem (empty list = legible): heatmap cells too small or not square, tick labels of one axis
overlapping, colour bars on plots / titles / labels / legends, the modebar over a title, text under
11 px, text cut off at the figure's edge, node labels of a scatter overlapping. ``figures_page``
renders figures into a standalone HTML page without Streamlit, for tests.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from viz.common import Figure

MIN_FONT_PX = 11

# One pass over every `.js-plotly-plot`: boxes are client rects; `tol` px of overlap is forgiven.
LEGIBILITY_JS = """
({tol = 1, minFont = 11, squareMin = 22, windowMin = 10, rowMin = 16, windowTokens = 20} = {}) => {
  const out = [];
  const R = el => el.getBoundingClientRect();
  const visible = el => {
    const r = R(el);
    if (r.width <= 0 || r.height <= 0) return false;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden') return false;
    }
    return true;
  };
  const hit = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > tol &&
                        Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > tol;
  const txt = el => (el.textContent || '').trim();
  const short = s => { s = String(s).replace(/\\s+/g, ' ').trim(); return s.length > 40 ? s.slice(0, 39) + '…' : s; };
  const texts = (root, sel) => [...root.querySelectorAll(sel)].filter(e => txt(e) && visible(e));
  const pairs = (items, what, name) => {
    for (let i = 0; i < items.length; i++)
      for (let j = i + 1; j < items.length; j++)
        if (hit(items[i].r, items[j].r))
          out.push(`${name}: ${what} '${short(items[i].label)}' overlaps '${short(items[j].label)}'`);
  };
  const boxes = (els, kind) => els.map(e => ({r: R(e), label: kind ? `${kind} '${txt(e)}'` : txt(e), el: e}));
  document.querySelectorAll('.js-plotly-plot').forEach((gd, fi) => {
    const full = gd._fullLayout;
    if (!full) { out.push(`figure ${fi}: not drawn`); return; }
    const title = String((full.title && full.title.text) || '').replace(/<[^>]*>/g, ' ');
    const name = `figure ${fi} '${short(title) || 'untitled'}'`;
    const svg = gd.querySelector('.main-svg');
    const page = R(svg);
    // plot areas, one per subplot
    const plots = [...gd.querySelectorAll('.nsewdrag')].map(e => ({r: R(e), label: `plot ${e.dataset.subplot}`,
                                                                  sub: e.dataset.subplot}));
    pairs(plots, 'plot area', name);
    // heatmap cells from the data shape and the visible axis ranges
    const cells = full.meta && full.meta.cells;
    const seen = new Set();
    for (const t of gd._fullData || []) {
      if (t.type !== 'heatmap' || t.visible !== true || !t.z || !t.z.length || !cells) continue;
      if (seen.has(t.xaxis + t.yaxis)) continue;  // the masked overlay shares its subplot's cells
      seen.add(t.xaxis + t.yaxis);
      const xa = full[t.xaxis.replace('x', 'xaxis')], ya = full[t.yaxis.replace('y', 'yaxis')];
      const area = plots.find(p => p.sub === t.xaxis + t.yaxis);
      if (!xa || !ya || !area) continue;
      const nR = t.z.length, nC = t.z[0].length || 0;
      const spanX = Math.abs(xa.range[1] - xa.range[0]), spanY = Math.abs(ya.range[1] - ya.range[0]);
      const cw = area.r.width / spanX, ch = area.r.height / spanY;
      const visX = Math.min(nC, Math.round(spanX)), visY = Math.min(nR, Math.round(spanY));
      const at = `${name} ${area.label} (${nR}x${nC}, ${visY}x${visX} visible)`;
      if (cells === 'square') {
        const need = visX <= windowTokens && visY <= windowTokens ? squareMin : windowMin;
        if (Math.min(cw, ch) < need - 0.01)
          out.push(`${at}: cells ${cw.toFixed(1)}x${ch.toFixed(1)} px, need >= ${need} px`);
        if (Math.abs(cw - ch) > tol) out.push(`${at}: cells not square (${cw.toFixed(1)}x${ch.toFixed(1)} px)`);
      } else if (cells === 'rows' && ch < rowMin - 0.01) {
        out.push(`${at}: rows ${ch.toFixed(1)} px high, need >= ${rowMin} px`);
      }
    }
    // tick labels, per axis: each subplot's x and y layers, each colour bar
    const axes = [];
    gd.querySelectorAll('.subplot').forEach(sp => {
      const id = [...sp.classList].find(c => c !== 'subplot') || '';
      for (const [sel, lab] of [['.xtick text', 'x'], ['.ytick text', 'y']]) {
        const items = boxes(texts(sp, sel), `${lab} tick (${id})`);
        if (items.length) axes.push(items);
      }
    });
    const bars = [...gd.querySelectorAll('.colorbar')].filter(visible);
    bars.forEach((cb, i) => { const items = boxes(texts(cb, '.cbaxis text'), `colour-bar ${i} tick`);
                              if (items.length) axes.push(items); });
    for (const items of axes) pairs(items, 'tick label', name);
    const ticks = axes.flat();
    // colour bars against everything they could land on
    const gtitle = boxes(texts(gd, '.gtitle'), 'title');
    const axTitles = boxes(texts(gd, '.g-xtitle text, .g-ytitle text, [class^="g-x"][class$="title"] text, ' +
                                     '[class^="g-y"][class$="title"] text'), 'axis title');
    const legends = [...gd.querySelectorAll('.legend')].filter(visible).map(e => ({r: R(e), label: 'legend'}));
    const annots = boxes(texts(gd, '.annotation'), 'annotation');
    // a colour bar's drawn parts: its background rect also spans the empty pad beside the plot
    const barBox = cb => {
      const parts = [...cb.querySelectorAll('.cbfills, .cbfill, .cboutline, .cbaxis text, .cbtitle text')]
        .filter(visible).map(R);
      if (!parts.length) return R(cb);
      return {left: Math.min(...parts.map(r => r.left)), right: Math.max(...parts.map(r => r.right)),
              top: Math.min(...parts.map(r => r.top)), bottom: Math.max(...parts.map(r => r.bottom))};
    };
    bars.forEach((cb, i) => {
      const box = {r: barBox(cb), label: `colour bar ${i}`};
      const own = new Set(cb.querySelectorAll('text'));
      for (const o of [...plots, ...gtitle, ...axTitles, ...legends, ...annots,
                       ...ticks.filter(t => !own.has(t.el))])
        if (hit(box.r, o.r)) out.push(`${name}: colour bar ${i} overlaps ${o.label}`);
      bars.forEach((other, j) => { if (j > i && hit(box.r, barBox(other)))
                                     out.push(`${name}: colour bar ${i} overlaps colour bar ${j}`); });
    });
    // legends against plot areas and titles
    for (const lg of legends)
      for (const o of [...plots, ...gtitle, ...axTitles])
        if (hit(lg.r, o.r)) out.push(`${name}: legend overlaps ${o.label}`);
    // the modebar (present, if hidden, in the DOM) against the title and titles in the top margin
    const top = plots.length ? Math.min(...plots.map(p => p.r.top)) : page.bottom;
    for (const mb of gd.querySelectorAll('.modebar')) {
      const r = R(mb);
      if (r.width <= 0 || r.height <= 0) continue;
      for (const o of [...gtitle, ...annots.filter(a => a.r.bottom <= top + tol)])
        if (hit(r, o.r)) out.push(`${name}: the modebar covers ${o.label}`);
    }
    // titles, annotations (subplot titles, group labels) and axis titles among themselves and against tick labels
    pairs([...annots, ...gtitle, ...axTitles], 'label', name);
    for (const a of [...annots, ...gtitle, ...axTitles])
      for (const t of ticks) if (hit(a.r, t.r)) out.push(`${name}: ${a.label} overlaps ${t.label}`);
    // scatter text (e.g. tree node labels) must not collide
    pairs(boxes(texts(gd, '.textpoint text'), 'point label'), 'point label', name);
    // every visible text: at least minFont px, inside the figure
    for (const t of texts(gd, 'svg text')) {
      const size = parseFloat(getComputedStyle(t).fontSize);
      if (size < minFont - 1e-6) out.push(`${name}: text '${short(txt(t))}' is ${size} px, need >= ${minFont} px`);
      const r = R(t);
      if (r.left < page.left - tol || r.right > page.right + tol || r.top < page.top - tol ||
          r.bottom > page.bottom + tol) out.push(`${name}: text '${short(txt(t))}' is cut off at the figure edge`);
    }
  });
  return out;
}
"""


def violations(page: Any, **limits: float) -> list[str]:
    """Every legibility problem of the Plotly figures on a Playwright ``page`` (empty list = legible).

    ``limits`` override the JS defaults: tol, minFont, squareMin, windowMin, rowMin, windowTokens.
    """
    return list(page.evaluate(LEGIBILITY_JS, dict(limits)))


def figures_page(figures: Sequence[Figure | go.Figure], width: int, *, include_plotlyjs: bool | str = True) -> str:
    """A standalone HTML page showing ``figures`` one under the other in a ``width`` px wide column.

    Figures with ``layout.width`` keep it (Streamlit's ``width="content"``); the others fill the column
    (``width="stretch"``). plotly.js comes from the installed plotly package, inlined once by default.
    """
    parts = []
    for i, fig in enumerate(figures):
        parts.append(
            (fig.plotly() if isinstance(fig, Figure) else fig).to_html(
                full_html=False,
                include_plotlyjs=include_plotlyjs if i == 0 else False,
                default_width="100%",
                config={"responsive": True},
            )
        )
    body = "\n".join(f'<div class="cell" style="margin:0 0 24px 0">{p}</div>' for p in parts)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>figures</title>"
        "<style>body{margin:8px;font-family:sans-serif}</style></head>"
        f"<body><div id='column' style='width:{int(width)}px'>{body}</div>"
        f"<!-- {html.escape(str(len(figures)))} figures --></body></html>"
    )


def show_figures(page: Any, figures: Sequence[Figure | go.Figure], width: int, *, timeout_ms: int = 60_000) -> None:
    """Load ``figures_page(figures, width)`` into a Playwright ``page`` and wait until every figure is drawn."""
    page.set_content(figures_page(figures, width), wait_until="load", timeout=timeout_ms)
    page.wait_for_function(
        """n => { const plots = [...document.querySelectorAll('.js-plotly-plot')];
                  return plots.length === n && plots.every(p => p._fullLayout && p.querySelector('.main-svg')); }""",
        arg=len(figures),
        timeout=timeout_ms,
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def figures_violations(browser: Any, figures: Sequence[Figure | go.Figure], width: int) -> list[str]:
    """Every legibility problem of ``figures`` drawn in a ``width`` px container of a fresh page of ``browser`` (a
    launched Chromium: the tests' one, as a process runs one Playwright at a time)."""
    page = browser.new_page(viewport={"width": width + 40, "height": 900})
    try:
        show_figures(page, figures, width)
        return violations(page)
    finally:
        page.close()
