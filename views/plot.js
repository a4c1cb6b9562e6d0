// One Plotly figure that stays on the page between reruns: the first render makes the graph, later renders
// update it in place with Plotly.react (a new st.plotly_chart element would be built from scratch each time);
// Streamlit calls it again only for a figure that changed. An update to a figure out of view waits until it
// scrolls near the viewport. The figure's element carries data-deferred="1" while an update waits and
// data-drawing="1" while Plotly draws it. Plotly's bundle is loaded by the element's loader (views/plot.py).
// A figure in view is drawn at once; one only near it once the page's update is over (no figure changed for
// QUIET_MS) and the browser is idle, so that a step paints what the reader sees first, and stepping on and on keeps
// that up to date, while the figures just below are ready before a scroll reaches them.
const NEAR = "600px 0px"; // draw a deferred figure this far before it enters the viewport
const QUIET_MS = 120; // a near figure is drawn once the page has had no figure to update for this long
const NEAR_WAIT_MS = 300; // and then the longest it waits for an idle moment
// A figure never drawn, out of view (another stage's), waits this long after the reader's last click or key: drawing
// one is a long task, and the menu just opened, the option chosen and the run it starts come first (a layer chosen
// right after a stage).
const INPUT_HOLD_MS = 1000;
// A full-width heatmap (matrices, every head side by side) is drawn at least this wide: on a phone it scrolls
// inside its frame rather than squeezing its cells and panel titles together; a tablet's column (~700 px) holds it.
// Bars and curves squeeze well.
const STRETCH_MIN_W = 600;

// Graphs kept off the page, drawn, by figure id (views/plot.py: the figure's digest and its element's key): the
// next figure drawn ahead while the reader reads, and the last ones taken off the page. A figure with a kept id is
// put back, drawn, instead of drawn again. At most KEEP; the oldest is purged.
const KEEP = 4;

function kept() {
  return (window.__decoderLensKept ??= new Map());
}

function keep(id, div) {
  const store = kept();
  store.delete(id);
  store.set(id, div);
  while (store.size > KEEP) {
    const [oldest, gone] = store.entries().next().value;
    store.delete(oldest);
    window.Plotly?.purge(gone);
  }
}

function take(id) {
  const div = kept().get(id) || null;
  kept().delete(id);
  return div;
}

function withSvg(config) {
  // The toolbar saves a figure as PNG (Plotly's camera) and, with this button, as SVG (for a slide or a paper). One
  // button per file name, kept: Plotly.react redraws the whole figure when a button of its config is a new object.
  const filename = config.toImageButtonOptions?.filename || "figure";
  const buttons = (window.__decoderLensSvg ??= new Map());
  if (!buttons.has(filename))
    buttons.set(filename, {
      name: "Download plot as an SVG",
      icon: window.Plotly.Icons.disk,
      click: (gd) => window.Plotly.downloadImage(gd, { format: "svg", filename }),
    });
  return { ...config, modeBarButtonsToAdd: [buttons.get(filename)] };
}

function withPageFont(figure) {
  // The page's own typeface, as Streamlit's charts use, where the figure names none.
  const font = (figure.layout.font = figure.layout.font || {});
  if (!font.family) font.family = window.__decoderLensFont ??= getComputedStyle(document.body).fontFamily;
  return figure;
}

// A stretching figure that would squeeze below STRETCH_MIN_W: heatmaps, and figures that ask for it (layout.meta.min_width:
// bar charts with long row labels, whose bars would vanish beside them on a phone).
function needsMinWidth(figure) {
  return (figure?.data || []).some((t) => t.type === "heatmap") || Boolean(figure?.layout?.meta?.min_width);
}

// A figure's own least width (layout.meta.min_width in px: a beam tree whose labels need a desktop's column), else
// STRETCH_MIN_W.
function minWidth(figure) {
  const own = figure?.layout?.meta?.min_width;
  return typeof own === "number" ? own : STRETCH_MIN_W;
}

// A figure that squeezes to a phone's column carries its title as that column wraps it (viz/common.py's
// layout_defaults: layout.meta.narrow_title); drawn narrower than a desktop's column, it takes that title and grows by
// its extra lines, above the plot. A desktop keeps its title on the lines its own width needs.
const WIDE_W = 860; // viz/common.py's MIN_WIDTH

function fitTitle(figure, width) {
  const narrow = figure?.layout?.meta?.narrow_title;
  if (!narrow || !width || width >= WIDE_W) return figure;
  const layout = figure.layout;
  layout.title = narrow.title;
  if (layout.height) layout.height += narrow.grow;
  layout.margin = { ...layout.margin, t: (layout.margin?.t || 0) + narrow.grow };
  delete layout.meta.narrow_title; // fitted once
  return figure;
}

function drawAhead(ahead, column) {
  // In an idle moment, off the page: in a shadow root (no selector of the page sees it) of an element out of view,
  // as wide as it will be drawn in ``column`` (the element's frame); then detached and kept.
  const width = column && Math.max(column.clientWidth, needsMinWidth(ahead?.figure) ? minWidth(ahead?.figure) : 0);
  if (!ahead?.id || kept().has(ahead.id) || !width) return;
  const run = () => {
    if (kept().has(ahead.id)) return;
    const host = document.createElement("div");
    host.style.cssText = `position:fixed;left:-100000px;top:0;width:${width}px;visibility:hidden;pointer-events:none`;
    const div = document.createElement("div");
    div.className = "decoder-lens-plot";
    const figure = fitTitle(withPageFont(ahead.figure), width);
    div.style.width = figure.layout.width ? figure.layout.width + "px" : width + "px";
    host.attachShadow({ mode: "open" }).appendChild(div);
    document.body.appendChild(host);
    const config = { ...ahead.config, responsive: !figure.layout.width };
    window.__decoderLensPlotly
      .then((Plotly) => Plotly.newPlot(div, figure.data, figure.layout, withSvg(config)))
      .then(() => {
        div.remove();
        keep(ahead.id, div);
      })
      .catch((err) => console.error("Decoder Lens figure drawn ahead:", err))
      .finally(() => host.remove());
  };
  (window.requestIdleCallback || ((f) => setTimeout(f, 50)))(run, { timeout: 2000 });
}

function describe(div) {
  // A heatmap's one-line text alternative (views/plot.py) on the drawing itself, Plotly's first SVG layer, read by
  // screen readers instead of its pieces; the other layers (hover labels) are hidden from them. Not on the graph's
  // element: that holds the toolbar's buttons, and an image has no buttons inside.
  const [drawing, ...layers] = div.querySelectorAll(":scope > .plot-container > .svg-container > svg.main-svg");
  if (!drawing) return;
  if (div.__alt) {
    drawing.setAttribute("role", "img");
    drawing.setAttribute("aria-label", div.__alt);
    drawing.removeAttribute("aria-hidden");
  } else {
    drawing.removeAttribute("role");
    drawing.removeAttribute("aria-label");
    drawing.setAttribute("aria-hidden", "true");
  }
  for (const layer of layers) layer.setAttribute("aria-hidden", "true");
  // The keyboard's stops: the toolbar's downloads (its zoom and pan are the mouse's), and the figure's frame only
  // when it scrolls sideways. A chapter's question is a few Tab stops from its top.
  for (const b of div.querySelectorAll(".modebar-btn"))
    if (!/^Download/.test(b.getAttribute("data-title") || "")) b.tabIndex = -1;
  const frame = div.parentElement;
  if (frame) frame.tabIndex = frame.scrollWidth > frame.clientWidth + 1 ? 0 : -1;
}

function frame(el, figure) {
  // A figure wider than the column (square cells on a phone) scrolls inside its own frame, not the page; the frame
  // is reached by the keyboard (Tab, then the arrow keys scroll it) and named after its figure's title.
  const html = String(figure.layout.title?.text ?? figure.layout.title ?? "").replace(/<br\s*\/?>/gi, " ");
  if (el.__titleHtml === html) return; // framed already, under this title
  el.__titleHtml = html;
  // Text, never markup: parsed into an inert template (no script runs, nothing loads), far cheaper than a document.
  const parser = (window.__decoderLensTitleParser ??= document.createElement("template"));
  parser.innerHTML = html;
  const title = parser.content.textContent.trim();
  el.style.maxWidth = "100%";
  el.style.overflowX = "auto";
  el.style.overflowY = "hidden"; // never the scroller that scroller() looks for: that is the page's
  el.style.scrollbarColor = "#8a8a8a #ececec"; // a visible scrollbar says there is more to the right (a phone)
  el.tabIndex = 0;
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", title ? `Figure: ${title}` : "Figure");
}

function draw(div) {
  const job = div.__job;
  if (!job) return;
  div.__job = null;
  const seq = (div.__seq = (div.__seq || 0) + 1);
  div.removeAttribute("data-deferred");
  div.setAttribute("data-drawing", "1");
  div.__drawing = (div.__drawing || Promise.resolve())
    .then(() => window.__decoderLensPlotly)
    .then((Plotly) => Plotly.react(div, job.figure.data, job.figure.layout, withSvg(job.config)))
    .then(() => {
      bindPick(div);
      describe(div);
    })
    .catch((err) => console.error("Decoder Lens figure:", err))
    .finally(() => {
      if (div.__seq === seq && job.at != null) div.setAttribute("data-at", job.at); // drawn: of this position now
      else if (div.__seq === seq) div.removeAttribute("data-at");
      if (div.__seq === seq) div.removeAttribute("data-drawing");
      if (div.__seq === seq && job.ahead) drawAhead(job.ahead, div.parentElement);
    });
}

function bindPick(div) {
  // A figure whose points can be picked (views/plot.py's pick): a click hands the point's first custom value to the
  // server as the element's "picked" state. Bound once per graph; it calls the element's latest setter.
  if (!div.__pick || div.__pickBound) return;
  div.__pickBound = true;
  div.on("plotly_click", (e) => {
    const value = e.points?.[0]?.customdata;
    if (value != null && div.__pick) div.__pick("picked", Array.isArray(value) ? value[0] : value);
  });
}

function resizer() {
  // A graph drawn while its container was hidden (a closed expander) or that changed width follows it.
  if (!window.__decoderLensResizer) {
    window.__decoderLensResizer = new ResizeObserver((entries) => {
      for (const e of entries) {
        const div = e.target;
        if (div._fullLayout && !div.__fixed && e.contentRect.width > 0 && Math.abs(div._fullLayout.width - e.contentRect.width) > 1)
          window.Plotly.Plots.resize(div);
      }
    });
  }
  return window.__decoderLensResizer;
}

function scroller(el) {
  // The page scrolls inside Streamlit's main container, which clips its content: the observer's root must be that
  // container for NEAR to reach beyond what is visible. Found once per page: each look reads computed styles and
  // sizes, which makes the browser lay the page out again, once per figure after every step otherwise.
  if (window.__decoderLensScroller?.isConnected) return window.__decoderLensScroller;
  for (let p = el.parentElement; p; p = p.parentElement) {
    const y = getComputedStyle(p).overflowY;
    if ((y === "auto" || y === "scroll") && p.scrollHeight > p.clientHeight) return (window.__decoderLensScroller = p);
  }
  return null; // not scrolling yet (a short page): look again at the next render
}

function soon(div) {
  // Drawn once no figure of the page has changed for QUIET_MS (the step's last elements have arrived), in the
  // browser's next idle moment then (or after NEAR_WAIT_MS at the latest), unless drawn before.
  (window.__decoderLensSoon ??= new Set()).add(div);
  settle();
}

function first(div) {
  // A figure never drawn, out of view when it arrives (another stage's figures below the stage buttons): drawn once
  // the page's update is over, one per idle moment in page order, so that what the reader sees is drawn first and
  // the page still ends with every figure drawn (one in view is drawn as soon as it is reported so).
  (window.__decoderLensFirst ??= new Set()).add(div);
  settle();
}

function lastInput() {
  // when the reader last clicked or pressed a key (listened to once per page)
  if (window.__decoderLensInput === undefined) {
    window.__decoderLensInput = -Infinity;
    const seen = () => (window.__decoderLensInput = performance.now());
    for (const type of ["pointerdown", "keydown"]) document.addEventListener(type, seen, { capture: true, passive: true });
  }
  return window.__decoderLensInput;
}

function idle(f) {
  (window.requestIdleCallback || ((g) => setTimeout(g, 0)))(f, { timeout: NEAR_WAIT_MS });
}

function held(f) {
  // in an idle moment at least INPUT_HOLD_MS after the reader's last click or key
  const wait = lastInput() + INPUT_HOLD_MS - performance.now();
  if (wait > 0) setTimeout(() => held(f), wait);
  else idle(f);
}

function drawFirst() {
  const queue = window.__decoderLensFirst;
  if (!queue?.size) return;
  const [div] = queue;
  queue.delete(div);
  // nothing to do once drawn; one drawn before whose update waits is brought up to date when it scrolls near
  if (div.isConnected && !div._fullLayout && !div.closest("details:not([open])")) draw(div);
  if (queue.size) held(drawFirst);
}

function settle() {
  // Another figure changed: the page's update is not over, and figures waiting to be drawn near the view wait on.
  clearTimeout(window.__decoderLensQuiet);
  if (!window.__decoderLensSoon?.size && !window.__decoderLensFirst?.size) return;
  window.__decoderLensQuiet = setTimeout(
    () =>
      idle(() => {
        const waiting = [...(window.__decoderLensSoon || [])];
        window.__decoderLensSoon?.clear();
        for (const div of waiting) if (div.isConnected && div.__near) draw(div);
        drawFirst();
      }),
    QUIET_MS,
  );
}

function watcher(root) {
  // Two observers of each figure: one reports whether it is in view (drawn at once), one whether it is near.
  const watchers = (window.__decoderLensWatchers = window.__decoderLensWatchers || new Map());
  if (!watchers.has(root)) {
    const near = new IntersectionObserver(
      (entries) => {
        for (const e of entries) {
          e.target.__near = e.isIntersecting;
          if (e.isIntersecting) soon(e.target);
        }
      },
      { root, rootMargin: NEAR },
    );
    const seen = new IntersectionObserver(
      (entries) => {
        for (const e of entries) {
          e.target.__seen = e.isIntersecting;
          if (e.isIntersecting) draw(e.target);
        }
      },
      { root },
    );
    watchers.set(root, {
      observe: (div) => (near.observe(div), seen.observe(div)),
      unobserve: (div) => (near.unobserve(div), seen.unobserve(div)),
    });
  }
  return watchers.get(root);
}

export default function ({ data: bytes, parentElement, setStateValue }) {
  lastInput(); // listening from the page's first figure
  const text = typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes);
  let div = parentElement.querySelector("div.decoder-lens-plot");
  const cleanup = () => {
    if (!div) return;
    div.__watcher.unobserve(div);
    resizer().unobserve(div);
    // Streamlit may call this before the next render of the same element: only a removed graph is kept (drawn, with
    // an id and nothing waiting to be drawn) or purged.
    setTimeout(() => {
      if (div.isConnected || !window.Plotly) return;
      if (div.__id && div._fullLayout && !div.__job && !div.hasAttribute("data-drawing")) keep(div.__id, div);
      else window.Plotly.purge(div);
    }, 0);
  };
  const data = JSON.parse(text);
  if (data.preload) return; // its loader has started loading Plotly
  // The position a figure is of (views/plot.py's tagged) comes last: a figure that only changed position is not
  // drawn again, its drawing is of the new position as it is.
  const cut = data.at == null ? -1 : text.lastIndexOf(', "at": ');
  const same = cut >= 0 && div && div.__text === text.slice(0, cut) && !div.__job && !div.hasAttribute("data-drawing");
  if (same) {
    div.setAttribute("data-at", data.at);
    return cleanup;
  }
  settle();
  const figure = fitTitle(withPageFont(data.figure), parentElement.clientWidth);
  const adopted = !div && data.id ? take(data.id) : null; // this very figure, kept drawn: put back, not drawn
  if (!div) {
    div =
      adopted ||
      Object.assign(document.createElement("div"), { className: "decoder-lens-plot", __near: false, __seen: false });
    parentElement.appendChild(div);
  }
  div.__alt = data.alt || null;
  div.__pick = data.pick ? setStateValue : null;
  frame(parentElement, figure);
  const height = figure.layout.height || 450; // Plotly's default
  div.style.minHeight = height + "px"; // the space the new figure takes, drawn or waiting
  // Out of view, the browser neither lays out nor paints the graph (hundreds of SVG nodes): each step's updates to
  // the page above would otherwise lay out every figure of All stages again. It keeps its place and height.
  div.style.contentVisibility = "auto";
  div.style.containIntrinsicSize = `auto ${height}px`;
  div.__fixed = Boolean(figure.layout.width);
  div.style.width = div.__fixed ? figure.layout.width + "px" : "100%";
  div.style.minWidth = !div.__fixed && needsMinWidth(figure) ? minWidth(figure) + "px" : "";
  const job = { figure, config: { ...data.config, responsive: !figure.layout.width }, ahead: data.ahead, at: data.at };
  div.__text = cut >= 0 ? text.slice(0, cut) : null;
  div.__id = data.id;
  div.__job = adopted ? null : job;
  if (div.__watcher) div.__watcher.unobserve(div);
  div.__watcher = watcher(scroller(div));
  div.__watcher.observe(div); // its first report says whether the figure is near now
  resizer().observe(div);
  if (adopted) {
    bindPick(div);
    describe(div);
    div.removeAttribute("data-deferred");
    drawAhead(data.ahead, parentElement);
  }
  // Drawn now: in view (a new element is, once its observer first reports it in view). Never drawn and laid out,
  // not in a closed expander (its content keeps a layout in Chromium: opening it brings the figure into view, and
  // draws it): once the page's update is over, after those near the view (``first``). Near the view: once the
  // page's update is over.
  else if (div.__seen) draw(div);
  else {
    div.setAttribute("data-deferred", "1");
    if (div.__near) soon(div);
    if (!div._fullLayout && div.offsetWidth > 0 && !div.closest("details:not([open])")) first(div);
  }
  return cleanup;
}
