"""Browser plumbing shared by the browser tests and benchmarks (app_latency.py, soak.py): Streamlit servers on
free ports, the tiny smoke model, process-tree RSS, summary statistics and the in-page "painted" check."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from deploy.serve import terminate
from model.io.checkpoint import ENV_MODEL

ROOT = Path(__file__).resolve().parents[1]

CHROMIUM = "/usr/bin/chromium"
# Streamlit's page, loaded at a page's own path (/explore), first asks for /explore/_stcore/health and
# /explore/_stcore/host-config to find the app's base path; the server answers 404 and the page goes on from the
# root, as it must. Chromium logs each of those 404s as a console error.
BASE_PATH_PROBE = re.compile(r"^/[^/]+/_stcore/(health|host-config)$")
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 1000}
DEFAULT_MODEL = ROOT / "assets" / "models" / "en-fr"
# The script run is over: no "Running…" status, no element left stale by the last run.
IDLE_JS = """() => !document.querySelector('[data-testid="stStatusWidget"]') &&
  !document.querySelector('[data-stale="true"]')"""
TIMEOUT_MS = 300_000  # generous: a loaded 2-core machine can take minutes for a first page

# True once the page is idle and every plot is drawn and shows ``step``. A plot "shows" a position
# through what the user sees: its outlined row(s) (viz.heatmap's "highlight" shapes, on category axes
# row r spans r ± 0.5) and "step N" (1-based) / "position N" in its title. Plots with neither (e.g.
# cross-attention K, V of the source) do not depend on the step; they only have to be drawn. At least
# ``minTracking`` plots must show the step so a change in the app fails here instead of passing
# vacuously; ``layer`` (optional) must be the one named by every "(layer N)" title. A plot whose update
# waits until it scrolls near (``data-deferred``, views/plot.js) must be out of view; it counts towards
# ``minTracking`` when it tracks a position at all; with no plot in view that shows the step, the step's own
# line ("Position N of …") must show it.
# Whether an element is in the window and shown (not in a closed expander).
IN_VIEW_JS = """
el => {
  const r = el.getBoundingClientRect();
  return r.bottom > 0 && r.top < innerHeight && r.width > 0 && el.checkVisibility();
}
"""
# The positions a plot shows: its outlined rows (on category axes row r spans r ± 0.5), "step N" (1-based) and
# "position N" in its title.
SHOWN_JS = """
el => {
  const full = el._fullLayout || {};
  const shown = new Set();
  for (const s of full.shapes || []) if (s.name === 'highlight') shown.add(Math.round(Number(s.y0) + 0.5));
  const title = String((full.title && full.title.text) || '');
  let m = title.match(/\\bstep (\\d+)/i);
  if (m) shown.add(Number(m[1]) - 1);
  m = title.match(/\\bposition (?:is )?(\\d+)/i);
  if (m) shown.add(Number(m[1]));
  return [...shown];
}
"""
PAINTED_JS = (
    """
([step, minTracking, layer]) => {
  const inView = """
    + IN_VIEW_JS.strip()
    + """;
  const positions = """
    + SHOWN_JS.strip()
    + """;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  if (document.querySelector('[data-drawing]')) return false;
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  let tracking = 0, deferred = 0, layered = 0;
  for (const el of plots) {
    const full = el._fullLayout;
    if (!full || !el.querySelector('.main-svg')) return false;
    const heat = (el._fullData || []).filter(t => t.type === 'heatmap').length;
    if (heat && el.querySelectorAll('.hm image').length === 0) return false;
    const shown = new Set(positions(el));
    const title = String((full.title && full.title.text) || '');
    if (el.hasAttribute('data-deferred')) {  // its update waits until it scrolls near: it must be out of view
      if (inView(el)) return false;
      if (shown.size) deferred += 1;
      continue;
    }
    if (shown.size) {
      if (shown.size !== 1 || !shown.has(step)) return false;
      tracking += 1;
    }
    const m = title.match(/\\(layer (\\d+)\\)/);
    if (layer !== null && m) {
      if (Number(m[1]) !== layer) return false;
      layered += 1;
    }
  }
  // With no figure in view, the step's own line must say the new position (the page got the step).
  const line = document.querySelector('.st-key-next_chip');
  const at = line && line.innerText.match(/Position (\\d+) of/);
  if (!tracking && minTracking && !(at && Number(at[1]) === step)) return false;
  return tracking + deferred >= minTracking && (layer === null || layered > 0);
}
"""
)

# True once the page is idle, shows at least ``minPlots`` plots and every plot is drawn (heatmaps as images), those
# new to the page below the window too (views/plot.js draws them once the page's update is over, in idle moments);
# unlike PAINTED_JS it asks nothing of what the plots show.
DRAWN_JS = """
(minPlots) => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  if (document.querySelector('[data-drawing]')) return false;
  for (const el of document.querySelectorAll('.decoder-lens-plot:not(.js-plotly-plot)'))
    if (el.offsetWidth > 0 && !el.closest('details:not([open])')) return false;
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  for (const el of plots) {
    if (!el._fullLayout || !el.querySelector('.main-svg')) return false;
    const heat = (el._fullData || []).filter(t => t.type === 'heatmap').length;
    if (heat && el.querySelectorAll('.hm image').length === 0) return false;
  }
  return plots.length >= minPlots;
}
"""

# True once no figure is being drawn and none in view waits for its update (views/plot.js): what a reader
# scrolled to is up to date.
SCROLLED_JS = f"""
() => {{
  if (document.querySelector('[data-drawing]')) return false;
  return ![...document.querySelectorAll('[data-deferred]')].some({IN_VIEW_JS.strip()});
}}
"""

# Figures of the page: how many show a position (as above) and the largest heatmap (rows, cols).
FIGURES_JS = f"""
() => {{
  const positions = {SHOWN_JS.strip()};
  let tracking = 0, best = [0, 0];
  for (const el of document.querySelectorAll('.js-plotly-plot')) {{
    if (positions(el).length) tracking += 1;
    for (const t of el._fullData || []) {{  // decoded: el.data holds base64 typed arrays
      if (t.type !== 'heatmap' || !t.z || !t.z.length) continue;
      const r = t.z.length, c = t.z[0].length || 0;
      if (r * c > best[0] * best[1]) best = [r, c];
    }}
  }}
  return {{plots: document.querySelectorAll('.js-plotly-plot').length, tracking, largest: best}};
}}
"""

# What the page shows: the position (0-based, from "Position N of 0–M"; n = M + 1 positions), the English text
# echoed back, the French output, badges.
PAGE_STATE_JS = """
() => {
  const text = s => (document.querySelector(s) || {}).innerText || '';
  const m = text('.st-key-next_chip').match(/Position (\\d+) of 0\\s*[–-]\\s*(\\d+)/);
  const texts = [...document.querySelectorAll('[data-testid="stText"]')].map(e => e.innerText.trim());
  const badges = s => [...document.querySelectorAll(s + ' .stMarkdownBadge')].map(e => e.innerText.trim());
  const src = [...document.querySelectorAll('[data-testid="stMarkdown"]')]
    .find(e => e.innerText.trim().startsWith('Source tokens'));
  return {
    step: m ? Number(m[1]) : null, n: m ? Number(m[2]) + 1 : null, english: texts[0] ?? null,
    french: texts[1] ?? null, chips: badges('.st-key-chips'),
    source: src ? [...src.querySelectorAll('.stMarkdownBadge')].map(e => e.innerText.trim()) : [],
    errors: document.querySelectorAll('[data-testid="stException"], [data-testid="stAlertContentError"]').length,
  };
}
"""


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_smoke_model(out: Path) -> Path:
    """The tests' tiny seeded random model (2+2 layers, d_model 32), saved as a model directory."""
    from model.testing import build_tiny_model_dir

    return build_tiny_model_dir(out, card="# Tiny smoke model\nRandom weights.\n")


def benchmark_model(smoke: bool, model: Path, tmp: Path, ap: argparse.ArgumentParser) -> tuple[Path, int]:
    """The model directory a benchmark runs, and its number of decoder layers: with ``smoke`` the tests' tiny one
    (built under ``tmp``), else ``model``, refused in one line (``ap.error``) when it is not a model directory."""
    path = build_smoke_model(tmp / "tiny") if smoke else model
    config = path / "config.json"
    if not config.is_file():
        ap.error(f"{path} is not a model directory (no config.json)")
    return path, int(json.loads(config.read_text())["n_decoder_layers"])


class Server:
    """``streamlit run SCRIPT`` on a free localhost port; ``started`` is the launch time (perf_counter)."""

    def __init__(self, script: Path, log: Path, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(script),
            "--server.headless",
            "true",
            "--server.port",
            str(self.port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ]
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_healthy(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {self.proc.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"streamlit did not answer on {self.url} within {timeout:.0f} s")

    def tracebacks(self) -> int:
        return self.log.read_text(errors="replace").count("Traceback")

    def stop(self) -> None:
        terminate(self.proc)
        self._log.close()


def base_path_probe(msg: Any) -> bool:
    """Whether a console message is Chromium's note of one of Streamlit's base-path probes (``BASE_PATH_PROBE``)."""
    url = (msg.location or {}).get("url", "")
    return msg.text.startswith("Failed to load resource") and bool(BASE_PATH_PROBE.match(urlsplit(url).path))


@contextmanager
def serve(script: Path, log: Path, env: dict | None = None) -> Iterator[Server]:
    server = Server(script, log, env)
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def app_env(model_dir: Path) -> dict:
    return {ENV_MODEL: str(model_dir)}


def tree_rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and all its descendants, in KiB (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(p.name))
    total, todo = 0, [pid]
    while todo:
        q = todo.pop()
        todo += children.get(q, [])
        try:
            for line in Path(f"/proc/{q}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def finite(x: Any) -> Any:
    """JSON-safe: NaN and infinities become null, floats are rounded."""
    if isinstance(x, float):
        return round(x, 3) if x == x and abs(x) != float("inf") else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x


def ms(x: float) -> str:
    """Milliseconds for a table cell ("-" for NaN)."""
    return "-" if x != x else f"{x:.0f}"


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def p95(xs: list[float]) -> float:
    """Nearest-rank 95th percentile (with 30 samples: the second largest)."""
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def session_counts(text: str, most: int | None = None) -> tuple[int, ...]:
    """``--sessions``: comma-separated class sizes, distinct and ascending, each from 1 (to ``most``, if given)."""
    try:
        counts = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of session counts: {text!r}") from None
    if not counts or counts[0] < 1 or (most is not None and counts[-1] > most):
        raise argparse.ArgumentTypeError(
            "session counts must be positive" if most is None else f"session counts must be between 1 and {most}"
        )
    return counts


def row(cells: list[object], widths: list[int], left: int = 1) -> str:
    """One table row: the first ``left`` cells left-aligned, the rest right-aligned."""
    return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))


# PAINTED_JS, and the page shows the view asked for: "Position N" in the stepper, the URL's ``stage`` and ``layer``
# (absent: the default stage, layer 0), and, where ``before`` is a string, plot titles other than ``before`` (a stage
# switch draws other figures). ``layer`` is checked against every "(layer N)" title of a figure drawn (not waiting
# to scroll near), and stages without such titles (the output stage) pass on the URL alone; ``minTracking`` plots
# must show the step, as in PAINTED_JS.
VIEW_PAINTED_JS = f"""
([step, minTracking, layer, stage, defaultStage, before]) => {{
  if (!({PAINTED_JS})([step, minTracking, null])) return false;
  const chip = (document.querySelector('.st-key-next_chip') || {{}}).innerText || '';
  const m = chip.match(/Position (\\d+) of/);
  if (!m || Number(m[1]) !== step) return false;
  const q = new URLSearchParams(location.search);
  if ((q.get('stage') || defaultStage) !== stage || Number(q.get('layer') || 0) !== layer) return false;
  const title = el => String((el._fullLayout && el._fullLayout.title && el._fullLayout.title.text) || '');
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  for (const el of plots) {{
    if (el.hasAttribute('data-deferred')) continue;  // out of view (PAINTED_JS checks): redrawn when near
    const lm = title(el).match(/\\(layer (\\d+)\\)/);
    if (lm && Number(lm[1]) !== layer) return false;
  }}
  return before === null || plots.map(title).join('\\n') !== before;
}}
"""

# The plot titles of the page, one per line (``before`` of VIEW_PAINTED_JS).
TITLES_JS = """
() => [...document.querySelectorAll('.js-plotly-plot')]
  .map(el => String((el._fullLayout && el._fullLayout.title && el._fullLayout.title.text) || '')).join('\\n')
"""

# Scroll the page to where the step buttons are at the top of the window, the first stages below them: from the top,
# since the stepper sticks to the window while the page scrolls (scrolling to it from below would not move).
TO_STEPPER_JS = """
() => {
  document.querySelector('[data-testid="stMain"]').scrollTop = 0;
  document.querySelector('.st-key-next').scrollIntoView({block: 'start'});
}
"""

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_table() -> dict[int, tuple[int, str, float]]:
    """Every process: pid -> (parent pid, command name, CPU seconds it used, its reaped children's included)."""
    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            text = (p / "stat").read_text()
        except OSError:
            continue
        head, tail = text.rsplit(")", 1)
        fields = tail.split()  # fields[0] is the state (field 3 of proc(5))
        cpu = sum(int(x) for x in fields[11:15]) / CLOCK_TICKS  # utime, stime, cutime, cstime
        out[int(p.name)] = (int(fields[1]), head.split("(", 1)[1], cpu)
    return out


def descendants(pid: int, table: dict | None = None) -> list[int]:
    """``pid`` and every process below it."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for q, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(q)
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        todo += children.get(q, [])
    return out


def tree_cpu_seconds(pid: int, name_prefix: str = "", table: dict | None = None) -> float:
    """CPU seconds used by ``pid`` and its descendants (only those whose command name starts with ``name_prefix``)."""
    table = process_table() if table is None else table
    return sum(table[q][2] for q in descendants(pid, table) if q in table and table[q][1].startswith(name_prefix))


def machine_cpu_seconds() -> tuple[float, float]:
    """CPU seconds of the whole machine since boot, (busy, all), summed over its cores (/proc/stat)."""
    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user time
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS
