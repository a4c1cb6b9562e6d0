// Page-wide behaviour, installed once per page (views/page.py): the step buttons get names a screen reader can
// say, and ← / → press them from anywhere on the page except where the arrow keys already mean something
// (typing in a text box, a slider, a menu, a radio group, a table); a new Learn chapter is scrolled into view
// from its top (its buttons are at its bottom); a wide equation's, code block's or table's frame is reached by the
// keyboard.
const NAMES = { first: "First position", prev: "Previous position", next: "Next position", last: "Last position" };
// the stepper's keys (a view may prefix them); Learn's Previous / Next keep the names they show
const STEP_KEY = /^st-key-(?!learn_)(?:[a-z0-9]+_)?(first|prev|next|last)$/;
const CHAPTER_KEY = /^st-key-learn_chapter_(\d+)$/; // the top of the Learn chapter shown (views/learn.py)
const KEYS = { ArrowLeft: "Previous position", ArrowRight: "Next position" };
const BUSY = [
  "input", "textarea", "select", "[contenteditable]:not([contenteditable=false])", "[role=slider]",
  "[role=textbox]", "[role=combobox]", "[role=spinbutton]", "[role=listbox]", "[role=option]", "[role=radio]",
  "[role=radiogroup]", "[role=tab]", "[role=menu]", "[role=menuitem]", "[role=grid]", "[role=gridcell]",
].join(",");

// The page's elements with a key are Streamlit's element and block containers: looked for by their class first, a
// whole page's SVG nodes (every figure's) never read as text.
const KEYED = '.stElementContainer[class*="st-key-"]';
const CHAPTERS = '.stVerticalBlock[class*="st-key-learn_chapter_"]';

function name(root) {
  for (const el of root.querySelectorAll(KEYED)) {
    for (const c of el.classList) {
      const m = c.match(STEP_KEY);
      if (!m) continue;
      for (const button of el.querySelectorAll("button"))
        if (button.getAttribute("aria-label") !== NAMES[m[1]]) button.setAttribute("aria-label", NAMES[m[1]]);
    }
  }
}

let chapterShown = null;

function toChapter(root) {
  // the first chapter a page shows stays where the browser put it; a chapter that replaces it starts at its top
  for (const el of root.querySelectorAll(CHAPTERS)) {
    const m = [...el.classList].map((c) => c.match(CHAPTER_KEY)).find(Boolean);
    if (!m || m[1] === chapterShown) continue;
    if (chapterShown !== null) {
      el.scrollIntoView({ block: "start" });
      // the keyboard starts at the chapter's top too: Enter on Next, pressed again, never skips a chapter unseen
      el.tabIndex = -1;
      el.focus({ preventScroll: true });
    }
    chapterShown = m[1];
  }
}

// A column can change width without the window's (the page laid out, a sidebar, a scrollbar), and a frame its size
// without a mutation (an equation laid out again in its font): each equation's column and each frame that may
// scroll is watched, and the math laid out again when one changes.
let sizes = null;
const watched = new WeakSet();

function watchSize(el) {
  sizes ??= new ResizeObserver(() => layoutMath(document));
  if (watched.has(el)) return;
  watched.add(el);
  sizes.observe(el);
}

function scrolls(el) {
  // overflow in a direction whose style lets it scroll (by a pixel even), as axe-core reads a scrollable region
  const style = getComputedStyle(el);
  const can = (overflow) => overflow === "auto" || overflow === "scroll";
  return (
    (el.scrollWidth > el.clientWidth && can(style.overflowX)) ||
    (el.scrollHeight > el.clientHeight && can(style.overflowY))
  );
}

function reachable(root) {
  // A displayed equation, a block of code or a table wider than the column scrolls in its own frame: the keyboard
  // reaches it, and only a frame that scrolls is a stop.
  for (const selector of [".katex-display", "pre", '[data-testid="stTable"] > div'])
    for (const el of root.querySelectorAll(selector)) {
      watchSize(el);
      const stop = scrolls(el) ? 0 : -1;
      if (el.tabIndex !== stop) el.tabIndex = stop;
    }
}

// A figure whose drawing is of the run before (its element not yet sent again: Streamlit marks it stale) or whose
// new data waits to be drawn (views/plot.js: data-drawing, data-deferred) shows the previous position's numbers:
// faded at once and busy for a screen reader until drawn, never read beside the new position's line.
// The beam's tables (views/stages/beam.py) likewise: each carries its position in its key.
const TABLE_AT = /^st-key-beam_(?:live|finished)_(\d+)$/;
const TABLES = '.stVerticalBlock:is([class*="st-key-beam_live_"], [class*="st-key-beam_finished_"])';
const FADED = "{ opacity: 0.12 !important; transition: none !important; }";
const REDRAWN = `:is(.decoder-lens-plot, ${TABLES})[aria-busy="true"] ${FADED}`;

// The step view's position line (views/stepping.py): a figure drawn for another position (plot.js: data-at) is too.
const LINE = ".st-key-next_chip p";
const LINE_AT = /^Position (\d+) of/;

function linePosition(root) {
  for (const p of root.querySelectorAll(LINE)) {
    const m = p.textContent.match(LINE_AT);
    if (m) return m[1];
  }
  return null;
}

function mark(root) {
  const at = linePosition(root);
  for (const div of root.querySelectorAll(".decoder-lens-plot")) {
    const other = at !== null && div.hasAttribute("data-at") && div.getAttribute("data-at") !== at;
    const busy =
      other ||
      div.hasAttribute("data-drawing") ||
      div.hasAttribute("data-deferred") ||
      Boolean(div.closest('[data-stale="true"]'));
    setBusy(div, busy);
  }
  for (const el of root.querySelectorAll(TABLES)) {
    const m = [...el.classList].map((c) => c.match(TABLE_AT)).find(Boolean);
    setBusy(el, (at !== null && m && m[1] !== at) || Boolean(el.closest('[data-stale="true"]')));
  }
}

function setBusy(el, busy) {
  if (busy === (el.getAttribute("aria-busy") === "true")) return;
  if (busy) el.setAttribute("aria-busy", "true");
  else el.removeAttribute("aria-busy");
}

// A displayed equation wider than the column (a phone) breaks between its terms (page.css); one still wider (a term
// alone wider than the column) is drawn smaller to fit, down to MIN_EQUATION_EM; wider still, it scrolls in its
// frame. Measured once per column width.
const MIN_EQUATION_EM = 0.6;

function fitEquations(root) {
  for (const frame of root.querySelectorAll(".katex-display")) {
    // Streamlit centres an equation in a box as wide as the equation: the width it may take is its column's
    const column = frame.closest(".stMarkdown") ?? frame;
    watchSize(column);
    const math = frame.querySelector(":scope > .katex");
    const width = column.clientWidth;
    if (!math || !width || frame.dataset.fitFor === String(width)) continue;
    frame.dataset.fitFor = String(width);
    math.style.fontSize = "";
    // a pixel over is over: the frame would scroll by it, and be a stop for the keyboard
    const natural = frame.scrollWidth;
    if (natural > width) math.style.fontSize = `${Math.max(MIN_EQUATION_EM, (width - 1) / natural)}em`;
  }
}

// Fitted first, then made reachable: an equation still too wide once drawn at its smallest scrolls in its frame.
function layoutMath(root) {
  fitEquations(root);
  reachable(root);
}

// KaTeX's fonts may arrive after an equation was first measured (narrower in a fallback font): measure again.
function refitAfterFonts() {
  for (const frame of document.querySelectorAll(".katex-display")) delete frame.dataset.fitFor;
  layoutMath(document);
}

function shown(el) {
  return el.checkVisibility() && el.getBoundingClientRect().width > 0;
}

// The sentence boxes (Explore's, Compare's A and B) take one sentence: Enter uses it, as in Learn's one-line box,
// rather than starting a second line that the link would carry as %0A (Streamlit's text area applies on Ctrl+Enter).
const SENTENCE_BOX = ".st-key-source textarea, .st-key-source_b textarea";

function onEnter(e) {
  if (e.key !== "Enter" || e.shiftKey || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return false;
  const box = e.target instanceof Element && e.target.closest(SENTENCE_BOX);
  if (!box) return false;
  e.preventDefault();
  box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", code: "Enter", ctrlKey: true, bubbles: true }));
  return true;
}

// The pages' menu on a phone (views/main.py): opened, the keyboard moves to its first link; Escape closes it and
// goes back to its button (Streamlit's popover leaves the keyboard behind it, on the page under the menu).
const MENU_BUTTON = ".st-key-phone_pages button";
const MENU_BODY = '[data-testid="stPopoverBody"]';

function onMenuOpened(e) {
  if (!(e.target instanceof Element) || !e.target.closest(MENU_BUTTON)) return;
  let frames = 30;
  const toFirstLink = () => {
    const link = document.querySelector(`${MENU_BODY} a`);
    if (link) link.focus();
    else if (--frames > 0) requestAnimationFrame(toFirstLink);
  };
  requestAnimationFrame(toFirstLink);
}

function onMenuEscape(e) {
  if (e.key !== "Escape" || !(e.target instanceof Element) || !e.target.closest(MENU_BODY)) return false;
  const button = document.querySelector(MENU_BUTTON);
  if (!button) return false;
  button.click();
  button.focus();
  return true;
}

function onKey(e) {
  if (onEnter(e) || onMenuEscape(e)) return;
  const label = KEYS[e.key];
  if (!label || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.defaultPrevented) return;
  const t = e.target;
  if (t instanceof Element && t.closest(BUSY)) return;
  name(document);
  const button = [...document.querySelectorAll(`button[aria-label="${label}"]`)].find(shown);
  if (!button || button.disabled) return;
  e.preventDefault();
  button.click();
}

export default function () {
  if (window.__decoderLensPage) return;
  window.__decoderLensPage = true;
  document.addEventListener("keydown", onKey);
  document.addEventListener("click", onMenuOpened);
  document.head.appendChild(Object.assign(document.createElement("style"), { textContent: REDRAWN }));
  let queued = false;
  new MutationObserver(() => {
    mark(document); // before the browser paints the change: never a frame with old numbers unmarked
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      name(document);
      toChapter(document);
      layoutMath(document);
    });
  }).observe(document.body, {
    childList: true,
    subtree: true,
    attributes: true,
    attributeFilter: ["data-stale", "data-drawing", "data-deferred", "data-at"],
    characterData: true,
  });
  window.addEventListener("resize", () => layoutMath(document));
  document.fonts.addEventListener("loadingdone", refitAfterFonts);
  name(document);
  toChapter(document);
  layoutMath(document);
}
