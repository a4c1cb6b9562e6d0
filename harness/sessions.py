"""Browser sessions that use the app as students do, for the multi-session benchmarks (classroom.py, replicas.py).

Each session is its own Playwright context (its own cookies) with its own sentence. ``open_session`` loads the
sentence from the URL, steps to its end and records what the page must show; ``act`` then repeats a random action
(▶, ◀, ⏮ / ⏭, another decoder stage, another decoder layer), timed from the click until the page shows the new
state (``harness.browser.VIEW_PAINTED_JS``), and checks the page for errors and for cross-talk (another session's
sentence, source tokens, output or chips, its URL included). Everything is async (``playwright.async_api``).
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

from harness.browser import PAGE_STATE_JS, TITLES_JS, VIEW_PAINTED_JS, VIEWPORT, base_path_probe
from views.state import DECODER_STAGES, DEFAULT_STAGE, STAGE_LABELS

SENTENCES = (
    "I am a student.",
    "I like pizza.",
    "Hello world.",
    "The cat is sleeping on the sofa.",
    "A man in a blue shirt is standing on a ladder.",
    "We will go to the beach tomorrow if it does not rain.",
    "My sister reads a book in the garden.",
    "Two dogs are running on the beach.",
    "She opened the window.",
    "He drinks coffee every morning.",
    "The children are playing football in the park.",
    "I lost my keys yesterday.",
    "We are waiting for the bus.",
    "The old man is selling fruit at the market.",
    "Where is the station?",
    "A woman is riding a bicycle down the street.",
    "It is cold today.",
    "They live in a small house near the river.",
    "My brother is taller than me.",
    "The train leaves at eight o'clock.",
    "Can you help me, please?",
    "A little girl is eating an apple.",
    "The dog is barking at the mailman.",
    "I have never been to Paris.",
    "The teacher writes on the blackboard.",
    "Three men are working on a roof.",
    "Do you speak French?",
    "The sun is shining over the mountains.",
    "A boy jumps into the swimming pool.",
    "We need more bread and milk.",
    "This book is very interesting.",
    "Two women are talking in a cafe.",
    "The baby is sleeping in her room.",
    "He forgot his umbrella at the office.",
    "A group of people are dancing at a wedding.",
    "I am learning to cook.",
    "The museum opens at nine.",
    "A black dog runs through the snow.",
    "Tom wants to become a doctor.",
    "The flowers in the garden are red and yellow.",
)
ACTIONS = ("next", "prev", "jump", "stage", "layer")
WEIGHTS = (40, 15, 5, 25, 15)
NO_TRACKING = {"ablation"}  # stages with no figure that shows the position
IDLE_PHASE = -1


@dataclass
class Action:
    phase: int
    kind: str  # step | stage | layer
    seconds: float


@dataclass
class Session:
    index: int
    sentence: str
    page: Any = None  # Playwright's Page, once open_session has opened it
    expected: dict = field(default_factory=dict)  # english, french, source, n, chips at the last step
    step: int = 0
    stage: str = DEFAULT_STAGE
    layer: int = 0
    actions: list[Action] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (phase, what)
    crosstalk: list[tuple[int, str]] = field(default_factory=list)
    timeouts: list[int] = field(default_factory=list)  # phases
    sockets: list[tuple[float, str]] = field(default_factory=list)  # (time.monotonic(), "open" | "close")
    last_frame: float = 0.0  # time.monotonic() of the last websocket frame received
    first_paint_s: float | None = None  # from loading the page to its first view painted (open_session)


@dataclass
class Drive:
    """What every session shares: the phase now measured (IDLE_PHASE: not measured) and the settings."""

    n_layers: int
    stages: tuple[str, ...] = DECODER_STAGES
    timeout_ms: float = 30_000
    think: float = 2.0
    seed: int = 0
    phase: int = IDLE_PHASE


def url_view(page: Any) -> dict:
    """The stage and layer the page's URL names."""
    q = parse_qs(urlparse(page.url).query)
    return {
        "src": q.get("src", [None])[0],
        "stage": q.get("stage", [DEFAULT_STAGE])[0],
        "layer": int(q.get("layer", ["0"])[0]),
    }


async def wait_view(s: Session, before: str | None, timeout_ms: float) -> None:
    """Until the page shows the session's step, stage and layer, every figure painted (and, with ``before``, other
    figure titles than those)."""
    tracking = 0 if s.stage in NO_TRACKING else 1
    arg = [s.step, tracking, s.layer, s.stage, DEFAULT_STAGE, before]
    await s.page.wait_for_function(VIEW_PAINTED_JS, arg=arg, timeout=timeout_ms)


async def click(page: Any, key: str) -> None:
    await page.locator(f".st-key-{key} button").first.click()


async def open_session(s: Session, browser: Any, url: str, drive: Drive) -> None:
    """Load the session's sentence, step to its end and record what the page shows."""
    s.page = page = await (await browser.new_context(viewport=VIEWPORT)).new_page()
    page.set_default_timeout(drive.timeout_ms * 4)

    def on_console(msg) -> None:
        if msg.type == "error" and not base_path_probe(msg):
            s.errors.append((drive.phase, f"session {s.index} console: {msg.text[:200]}"))

    def on_socket(ws) -> None:
        s.sockets.append((time.monotonic(), "open"))
        ws.on("close", lambda _: s.sockets.append((time.monotonic(), "close")))
        ws.on("framereceived", lambda _: setattr(s, "last_frame", time.monotonic()))

    page.on("console", on_console)
    page.on("pageerror", lambda e: s.errors.append((drive.phase, f"session {s.index} page error: {str(e)[:200]}")))
    page.on("websocket", on_socket)
    t0 = time.perf_counter()
    await page.goto(f"{url}/explore?{urlencode({'src': s.sentence})}")
    await wait_view(s, None, drive.timeout_ms * 4)
    s.first_paint_s = time.perf_counter() - t0
    first = await page.evaluate(PAGE_STATE_JS)
    if first["english"] != s.sentence:
        raise RuntimeError(f"session {s.index} shows {first['english']!r}, not its sentence {s.sentence!r}")
    await click(page, "last")
    s.step = first["n"] - 1
    await wait_view(s, None, drive.timeout_ms * 4)
    last = await page.evaluate(PAGE_STATE_JS)
    s.expected = {k: first[k] for k in ("english", "french", "source", "n")} | {"chips": last["chips"]}


async def check(s: Session, phase: int) -> list[str]:
    """Compare the page with what the session must show; returns (and records) the mismatches."""
    page, e = s.page, s.expected
    shown = await page.evaluate(PAGE_STATE_JS)
    want = {
        **{k: e[k] for k in ("english", "french", "source", "n")},
        "step": s.step,
        "chips": e["chips"][: s.step] or ["<s>"],
    }
    bad = [
        f"session {s.index} {key}: shows {shown[key]!r}, expected {value!r}"
        for key, value in want.items()
        if shown[key] != value
    ]
    view = url_view(page)
    if view["src"] != s.sentence:
        bad.append(f"session {s.index} URL src: {view['src']!r}, expected {s.sentence!r}")
    s.crosstalk += [(phase, b) for b in bad]
    if shown["errors"]:
        s.errors.append((phase, f"session {s.index}: {shown['errors']} error box(es) at step {s.step}"))
    return bad


async def resync(s: Session, drive: Drive) -> None:
    """After a timeout: give the page time to settle, then go on from what it shows."""
    try:
        await s.page.wait_for_function(
            "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=drive.timeout_ms
        )
    except Exception:
        pass
    shown = await s.page.evaluate(PAGE_STATE_JS)
    view = url_view(s.page)
    s.step = shown["step"] if shown["step"] is not None else s.step
    s.stage, s.layer = view["stage"], view["layer"]


async def act(s: Session, drive: Drive, rng: random.Random) -> None:
    """One random action, timed from the click until the page shows its result, then the page checked."""
    page, last, phase = s.page, s.expected["n"] - 1, drive.phase
    choice = rng.choices(ACTIONS, weights=WEIGHTS)[0]
    if choice == "next" and s.step == last or choice == "prev" and s.step == 0:
        choice = "jump"
    if choice == "layer" and drive.n_layers < 2 or choice == "stage" and len(drive.stages) < 2:
        choice = "next" if s.step < last else "prev"
    before = None
    t0 = time.perf_counter()
    if choice in ("next", "prev"):
        s.step += 1 if choice == "next" else -1
        await click(page, choice)
    elif choice == "jump":
        key = "first" if s.step > last / 2 else "last"
        s.step = 0 if key == "first" else last
        await click(page, key)
    elif choice == "stage":
        s.stage = rng.choice([x for x in drive.stages if x != s.stage])
        before = await page.evaluate(TITLES_JS)
        t0 = time.perf_counter()
        label = re.compile(rf"^\s*{re.escape(STAGE_LABELS[s.stage])}\s*$")
        await page.locator(".st-key-stage button").filter(has_text=label).first.click()
    else:
        s.layer = rng.choice([x for x in range(drive.n_layers) if x != s.layer])
        await page.locator(".st-key-layer [role=combobox]").click()
        await page.get_by_role("option", name=str(s.layer), exact=True).click()
    kind = "step" if choice in ("next", "prev", "jump") else choice
    try:
        await wait_view(s, before, drive.timeout_ms)
        ok = True
    except Exception as e:  # a timeout: counted, then the page is checked as it stands
        s.errors.append((phase, f"session {s.index}: {choice} did not paint: {str(e).splitlines()[0][:160]}"))
        s.timeouts.append(phase)
        ok = False
    s.actions.append(Action(phase, kind, time.perf_counter() - t0))
    if not ok:
        await resync(s, drive)
    await check(s, phase)


async def step_once(s: Session, drive: Drive) -> bool:
    """▶ (◀ at the last position), timed and checked as ``act`` does; whether it painted without a mismatch."""
    errors, crosstalk = len(s.errors), len(s.crosstalk)
    key = "next" if s.step < s.expected["n"] - 1 else "prev"
    s.step += 1 if key == "next" else -1
    t0 = time.perf_counter()
    await click(s.page, key)
    try:
        await wait_view(s, None, drive.timeout_ms)
    except Exception as e:
        s.errors.append((drive.phase, f"session {s.index}: {key} did not paint: {str(e).splitlines()[0][:160]}"))
        s.timeouts.append(drive.phase)
        await resync(s, drive)
    s.actions.append(Action(drive.phase, "step", time.perf_counter() - t0))
    await check(s, drive.phase)
    return len(s.errors) == errors and len(s.crosstalk) == crosstalk


async def run_session(s: Session, drive: Drive, deadline: float, stop: Callable[[], bool] | None = None) -> None:
    """Act until ``deadline`` (time.monotonic()) or until ``stop()`` is true, pausing ``drive.think`` seconds on
    average after each paint."""
    rng = random.Random(drive.seed * 100_003 + drive.phase * 1009 + s.index)
    while time.monotonic() < deadline and not (stop and stop()):
        try:
            await act(s, drive, rng)
        except Exception as e:  # a click that could not happen (the page busy past its timeout, or gone): counted
            s.errors.append((drive.phase, f"session {s.index}: {type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            await asyncio.sleep(1.0)
            try:
                await resync(s, drive)
            except Exception:
                pass
            continue
        pause = drive.think * rng.uniform(0.5, 1.5)
        if time.monotonic() + pause >= deadline:
            break
        await asyncio.sleep(pause)
