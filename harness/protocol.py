"""A student without a browser: the app driven over Streamlit's own WebSocket protocol, for the load benchmark
(``benchmarks/capacity.py``).

A browser talks to the server over one WebSocket, ``/_stcore/stream`` (subprotocol ``streamlit``): it sends a
``BackMsg`` whose ``rerun_script`` (a ``ClientState``) holds the URL's query, the widget states (a button click is
its id with ``trigger_value``) and, for a widget inside an ``st.fragment``, the fragment's id; the server answers
with a stream of ``ForwardMsg`` (``delta.new_element`` per element, ``page_info_changed`` with the new URL query) up
to ``script_finished``. The first request names the page by its URL path (``/explore``); each run's ``navigation``
names the page it shows (its script hash, which the next request sends back, as a browser does; an older link to
the site's root with Explore's parameters switches to Explore once, a run that finishes early for the one that
follows). The protobuf classes ship with streamlit. The time from sending the request to ``script_finished`` is the
server's time for the action (on localhost the network adds well under a millisecond).

``Student`` opens its own sentence from the URL and then acts as a student does (▶ / ◀ / ⏮ / ⏭, another decoder
stage, another decoder layer, a new sentence); after each action it reads what the server sent and checks it
against the reference of its sentence (``reference``, taken from a run of its own): the English text, the source
tokens, the French output, the position and the chips (cross-talk: another session's state in this session's
answer), and that no exception or error box came back. Synchronous sockets (websocket-client), so it runs under
Locust's gevent as well as in a plain thread. The widget states sent are those the student changed (the server
keeps the others in the session, as it does for a browser's).
"""

from __future__ import annotations

import random
import re
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import websocket
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from views.state import DEFAULT_STAGE, STAGE_LABELS

STEP_KEYS = ("first", "prev", "next", "last")
# The mixed class: ▶ / ◀ / ⏮ ⏭ 60 %, another stage or layer 30 %, a new sentence 10 %.
ACTIONS = ("next", "prev", "jump", "stage", "layer", "sentence")
WEIGHTS = (40, 15, 5, 20, 10, 10)
KINDS = {"next": "step", "prev": "step", "jump": "step", "stage": "stage", "layer": "layer", "sentence": "sentence"}
BADGE = re.compile(r":([a-z]+)-badge\[((?:\\.|[^\]\\])*)\]")
POSITION = re.compile(r"Position (\d+)\W+of 0\s*[–-]\s*(\d+)")
TIMEOUT_S = 120.0
PAGE = "explore"  # the page a student opens: its URL path


def badge_labels(body: str) -> list[str]:
    return [m.group(2) for m in BADGE.finditer(body)]


@dataclass
class Run:
    """What one script run sent back."""

    seconds: float  # from the request to script_finished
    elements: dict[tuple[int, ...], tuple[str, Any, str]]  # delta path -> (element type, element, fragment id)
    blocks: dict[str, tuple[int, ...]]  # widget key of a keyed container -> its delta path
    widgets: dict[str, tuple[str, str]]  # widget key -> (widget id, fragment id)
    query: str | None  # the URL's new query, when the server changed it
    exceptions: list[str]
    error_boxes: list[str]
    received_bytes: int

    def markdown(self, prefix: str) -> str | None:
        return next(
            (el.body for kind, el, _ in self.elements.values() if kind == "markdown" and el.body.startswith(prefix)),
            None,
        )

    def text_after(self, heading: str) -> str | None:
        """The st.text element right after the markdown ``heading`` (the English and French columns)."""
        for path, (kind, el, _) in self.elements.items():
            if kind == "markdown" and el.body.startswith(heading):
                nxt = self.elements.get((*path[:-1], path[-1] + 1))
                return nxt[1].body if nxt and nxt[0] == "text" else None
        return None

    def shown(self) -> dict:
        """The session's state as this run shows it (None where the run did not send that element)."""
        pos = self.markdown("**Position ")
        m = POSITION.search(pos) if pos else None
        chips = self.markdown("**Generated so far")
        source = self.markdown("**Source tokens**")
        return {
            "english": self.text_after("**English**"),
            "french": self.text_after("**French**"),
            "source": badge_labels(source) if source is not None else None,
            "step": int(m.group(1)) if m else None,
            "n": int(m.group(2)) + 1 if m else None,
            "chips": badge_labels(chips) if chips is not None else None,
        }


def key_of(widget_id: str) -> str:
    """A keyed widget's id is ``$$ID-<hash>-<key>``."""
    return widget_id.split("-", 2)[-1] if widget_id.startswith("$$ID-") else widget_id


def route_cookie(base_url: str, query: str, path: str = PAGE, timeout: float = 30.0) -> str:
    """Load the page as a browser does first and return its cookies as one Cookie header (behind nginx: the sticky
    route cookie, so the websocket goes to the replica that served the page)."""
    with urllib.request.urlopen(f"{base_url}/{path}?{query}", timeout=timeout) as r:
        r.read()
        cookies = r.headers.get_all("Set-Cookie") or []
    return "; ".join(c.split(";", 1)[0] for c in cookies)


class Connection:
    """One WebSocket session with the server."""

    def __init__(self, base_url: str, query: str, cookie: str = "", timeout: float = TIMEOUT_S, path: str = PAGE):
        ws_url = base_url.replace("http://", "ws://", 1).replace("https://", "wss://", 1) + "/_stcore/stream"
        header = [f"Cookie: {cookie}"] if cookie else None
        self.ws = websocket.create_connection(
            ws_url,
            subprotocols=["streamlit"],
            origin=base_url,
            header=header,
            timeout=timeout,
            enable_multithread=False,
        )
        self.query = query
        self.path = path  # the page the URL names, until the server names the page it ran
        self.page = ""  # the page the server last ran (its script hash), as a browser sends it back; "" at first
        self.widgets: dict[str, tuple[str, str]] = {}

    def run(self, changed: Sequence[WidgetState] = (), fragment: str = "") -> Run:
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string, rerun.page_script_hash, rerun.fragment_id = self.query, self.page, fragment
        if not self.page:
            rerun.page_name = self.path
        rerun.widget_states.widgets.extend(changed)
        elements: dict[tuple[int, ...], tuple[str, Any, str]] = {}
        blocks: dict[str, tuple[int, ...]] = {}
        widgets: dict[str, tuple[str, str]] = {}
        exceptions: list[str] = []
        errors: list[str] = []
        query, received = None, 0
        t0 = time.perf_counter()
        self.ws.send_binary(msg.SerializeToString())
        while True:
            data = self.ws.recv()
            if isinstance(data, str):
                raise RuntimeError(f"the server sent text, not a ForwardMsg: {data[:200]!r}")
            received += len(data)
            fm = ForwardMsg()
            fm.ParseFromString(data)
            kind = fm.WhichOneof("type")
            if kind == "script_finished":
                if fm.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:  # a page switch: its run follows
                    continue
                seconds = time.perf_counter() - t0
                break
            if kind == "navigation":  # the page this run shows (an older link's first run switches page once)
                self.page = fm.navigation.page_script_hash
            elif kind == "page_info_changed":
                query = fm.page_info_changed.query_string
            elif kind == "delta":
                d, path = fm.delta, tuple(fm.metadata.delta_path)
                if d.WhichOneof("type") == "add_block" and d.add_block.id:
                    blocks[key_of(d.add_block.id)] = path
                elif d.WhichOneof("type") == "new_element":
                    ek = d.new_element.WhichOneof("type")
                    if ek is None:
                        continue
                    el = getattr(d.new_element, ek)
                    elements[path] = (ek, el, d.fragment_id)
                    if ek == "exception":
                        exceptions.append(f"{el.type}: {el.message[:160]}")
                    elif ek == "alert" and el.format == Alert.ERROR:
                        errors.append(el.body[:160])
                    wid = getattr(el, "id", "")
                    if isinstance(wid, str) and wid.startswith("$$ID-"):
                        widgets[key_of(wid)] = (wid, d.fragment_id)
        if query is not None:
            self.query = query
        self.widgets.update(widgets)
        return Run(seconds, elements, blocks, widgets, query, exceptions, errors, received)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass


def reference(base_url: str, sentence: str) -> dict:
    """What a session with ``sentence`` must show, from a run of its own: English, French, source tokens, the
    number of positions, the chips at position 0 and at the last position (the chips of position k are the last
    position's first k)."""
    query = urlencode({"src": sentence})
    conn = Connection(base_url, query, route_cookie(base_url, query))
    try:
        first = conn.run()
        s0 = first.shown()
        wid, frag = conn.widgets["last"]
        last = conn.run([WidgetState(id=wid, trigger_value=True)], frag).shown()
    finally:
        conn.close()
    if s0["english"] != sentence or None in s0.values() or last["chips"] is None:
        raise RuntimeError(f"the page for {sentence!r} does not show what a session checks: {s0}")
    return {
        "english": s0["english"],
        "french": s0["french"],
        "source": s0["source"],
        "n": s0["n"],
        "chips0": s0["chips"],
        "chips": last["chips"],
    }


@dataclass
class Outcome:
    kind: str  # open | step | stage | layer | sentence
    seconds: float
    stage: str  # the stage shown after the action
    problems: list[str] = field(default_factory=list)  # errors
    crosstalk: list[str] = field(default_factory=list)
    received_bytes: int = 0


class Student:
    """One simulated student: its own sentence, stage, layer and position, its own websocket."""

    def __init__(
        self,
        index: int,
        base_url: str,
        sentence: str,
        references: dict,
        n_layers: int,
        stages: tuple[str, ...],
        rng: random.Random,
    ):
        self.index, self.base_url, self.sentence = index, base_url, sentence
        self.references, self.n_layers, self.stages, self.rng = references, n_layers, stages, rng
        self.step, self.stage, self.layer = 0, DEFAULT_STAGE, 0
        self.conn: Connection | None = None

    @property
    def ref(self) -> dict:
        return self.references[self.sentence]

    @property
    def connection(self) -> Connection:
        if self.conn is None:
            raise RuntimeError(f"student {self.index} has not opened the page")
        return self.conn

    def open(self) -> Outcome:
        query = urlencode({"src": self.sentence})
        self.conn = Connection(self.base_url, query, route_cookie(self.base_url, query))
        return self._checked("open", self.conn.run(), full=True)

    def close(self) -> None:
        if self.conn:
            self.conn.close()

    def act(self, choice: str | None = None, stage: str | None = None) -> Outcome:
        """One action, timed and checked: ``choice`` (one of ACTIONS; ``stage``: the stage a stage switch goes to),
        or a random one of the mixed class."""
        rng, last = self.rng, self.ref["n"] - 1
        choice = choice or rng.choices(ACTIONS, weights=WEIGHTS)[0]
        if choice == "next" and self.step == last or choice == "prev" and self.step == 0:
            choice = "jump"
        if choice == "layer" and self.n_layers < 2 or choice == "stage" and len(self.stages) < 2:
            choice = "next" if self.step < last else "prev"
        if choice == "sentence" and len(self.references) < 2:
            choice = "jump"
        w = self.connection.widgets
        if choice in ("next", "prev", "jump"):
            key = choice if choice != "jump" else ("first" if self.step > last / 2 else "last")
            self.step = {"first": 0, "last": last, "next": self.step + 1, "prev": self.step - 1}[key]
            wid, frag = w[key]
            return self._checked(KINDS[choice], self.connection.run([WidgetState(id=wid, trigger_value=True)], frag))
        if choice == "stage":  # the selector is in the step view's fragment: that part of the page reruns alone
            self.stage = stage or rng.choice([x for x in self.stages if x != self.stage])
            wid, frag = w["stage"]
            state = WidgetState(id=wid)
            state.string_array_value.data.append(STAGE_LABELS[self.stage])
            return self._checked(choice, self.connection.run([state], frag), full=not frag)
        if choice == "layer":
            self.layer = rng.choice([x for x in range(self.n_layers) if x != self.layer])
            state = WidgetState(id=w["layer"][0], string_value=str(self.layer))
        else:
            self.sentence = rng.choice([x for x in self.references if x != self.sentence])
            self.step = 0
            state = WidgetState(id=w["source"][0], string_value=self.sentence)
        return self._checked(choice, self.connection.run([state]), full=True)

    def _checked(self, kind: str, run: Run, full: bool = False) -> Outcome:
        out = Outcome(kind, run.seconds, self.stage, received_bytes=run.received_bytes)
        who = f"student {self.index} ({kind})"
        out.problems += [f"{who}: exception {e}" for e in run.exceptions]
        out.problems += [f"{who}: error box {e}" for e in run.error_boxes]
        ref, shown = self.ref, run.shown()
        chips = ref["chips"][: self.step] if self.step else ref["chips0"]
        want = {"step": self.step, "n": ref["n"], "chips": chips}
        if full:
            want |= {"english": self.sentence, "french": ref["french"], "source": ref["source"]}
        for key, value in want.items():
            if shown[key] is None:
                out.problems.append(f"{who}: the answer has no {key}")
            elif shown[key] != value:
                out.crosstalk.append(f"{who} {key}: shows {str(shown[key])[:80]!r}, expected {str(value)[:80]!r}")
        if full and parse_qs(self.connection.query).get("src") != [self.sentence]:
            out.crosstalk.append(f"{who}: URL query {self.connection.query[:80]!r} does not name its sentence")
        if shown["step"] is not None:
            self.step = shown["step"]  # go on from what the page shows
        return out
