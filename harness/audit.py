"""The truth audit: every number the step view shows in two places is the same number.

``audit`` visits seeded random states of the Explore page through AppTest (greedy, beam 3, beam 5, sampling; with
and without a forced token; every stage; first, middle and last positions) and, in each, reads what the page
shows and checks that
- the chips, the header ("position t reads X → predicts Y (p = …)") and the decoder-input table agree on the
  tokens and their probabilities, and with the followed hypothesis named above them;
- the top-k bars and the chosen token's metric give the header's token and p;
- every figure row labelled "reads → predicts" at the position names the header's tokens;
- the beam tables hold the tree's kept nodes (cumulative log-probs) and the tree's x axis ends at the position;
- the downloads (summary JSON, positions NPZ, CSV) hold the page's numbers: p per position, the attention
  weights of the figure (0 on the future, rows summing to 1), the tokens;
- the page's link, opened afresh, shows the same header, chips and figures.
A check that fails is a line of the report; ``benchmarks/truth_audit.py`` prints it, ``tests/views/test_truth_audit.py``
runs it on the tests' tiny model and shows that it fails when one number is broken.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from model.io.checkpoint import LoadedModel

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "views" / "main.py")
SENTENCES = ("The cat is sleeping on the sofa.", "I like pizza.", "Two dogs are playing in the snow.")
STRATEGIES: tuple[tuple[str, dict[str, str]], ...] = (
    ("greedy", {}),
    ("beam 3", {"strategy": "beam", "beam": "3"}),
    ("beam 5", {"strategy": "beam", "beam": "5"}),
    ("sampling", {"strategy": "sample", "seed": "7"}),
)
PLACES = ("first", "middle", "last")
BADGE = re.compile(r":(\w+)-badge\[((?:\\.|[^\]\\])*)\]")
P_TOL = 5e-4  # numbers are shown to 3 decimals


def close(a: float | None, b: float | None) -> bool:
    """Two probabilities shown equal (to the 3 decimals shown); a missing one equals nothing."""
    return a is not None and b is not None and abs(a - b) <= P_TOL


def unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def badges(markdown: str) -> list[tuple[str, str]]:
    return [(colour, unescape(inner)) for colour, inner in BADGE.findall(markdown)]


def plotly_array(z: list | dict) -> np.ndarray:
    """A figure array as sent to the browser: a nested list, or Plotly's base64 typed-array form."""
    if isinstance(z, dict):
        a = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        return a.reshape([int(n) for n in str(z.get("shape", len(a))).split(",")]).astype(float)
    return np.array([[np.nan if x is None else x for x in row] for row in z], dtype=float)


@dataclass
class Report:
    states: int = 0
    checks: int = 0
    problems: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        self.checks += 1
        if not ok:
            self.problems.append(what)


@dataclass(frozen=True)
class Shown:
    """What the step view shows at one position, read back from the page."""

    step: int
    last: int
    reads: str
    predicts: str
    p: float | None
    chips: list[tuple[str, float | None]]
    followed: str | None


def _p(text: str) -> float | None:
    return float(text) if re.fullmatch(r"[0-9.]+", text or "") else None


def groups(pattern: str, text: str) -> tuple[str, ...]:
    """The groups of ``pattern`` matched at the start of ``text``; a page that shows something else is an error."""
    m = re.match(pattern, text)
    if m is None:
        raise ValueError(f"the page shows {text[:80]!r}, which {pattern!r} does not read")
    return m.groups()


def read_step_view(at: Any) -> Shown:
    head = next(m.value for m in at.markdown if m.value.startswith("**Position"))
    t, last = (int(x) for x in groups(r"\*\*Position (\d+)\*\* of 0–(\d+)", head))
    (_, reads), (_, pred) = badges(head)[-2:]
    label, p, _note = groups(r"(.*) \(p = ([0-9.]*)\)(.*)$", pred)
    chip_md = next(m.value for m in at.markdown if m.value.startswith("**Generated so far"))
    chips = []
    for colour, inner in badges(chip_md):
        if colour == "gray":  # the empty state's <s>
            continue
        name, _, num = inner.rpartition(" ")
        chips.append((name, _p(num)) if _p(num) is not None else (inner, None))
    cap = next((c.value for c in at.caption if c.value.startswith("Following")), None)
    followed = unescape(cap).removeprefix("Following: ").split(". It ")[0] if cap else None
    return Shown(t, last, reads, label, _p(p), chips, followed)


def figures(at: Any) -> list[dict]:
    """The page's figures as sent to the browser (each a ``views.plot`` component's data), in page order, each
    checked against Plotly's schema: the builders skip that check to be fast (``viz.common.new_figure``), so every
    figure a test sees is checked here (a misspelt property raises ``ValueError``)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    from views.plot import payload

    sent = [payload(c.proto.bytes) for c in at.get("bidi_component")]
    out = [p["figure"] for p in sent if "figure" in p]
    for fig in out:
        checked = go.Figure(fig)  # validates every property, raising on one Plotly does not know
        if (fig["layout"].get("template") or {}).get("layout"):  # Plotly's default theme, merged in unchecked
            raise ValueError(f"figure {title(fig)!r} carries a themed template instead of the plain one")
        again = json.loads(pio.to_json(checked, validate=False))
        if _filled(again) != _filled(fig):  # e.g. a colour-scale name the checks expand and plotly.js may not know
            raise ValueError(f"figure {title(fig)!r} changes when Plotly checks it")
    return out


def _filled(obj):
    """``obj`` without its empty lists and dicts (Plotly's checks drop them)."""
    if isinstance(obj, dict):
        return {k: _filled(v) for k, v in obj.items() if v != [] and v != {}}
    if isinstance(obj, list):
        return [_filled(v) for v in obj]
    return obj


def title(fig: dict) -> str:
    return (fig["layout"].get("title", {}) or {}).get("text") or ""


def frame(at: Any, column: str) -> pd.DataFrame | None:
    return next((d.value for d in at.dataframe if column in d.value.columns), None)


def check_position_table(at: Any, s: Shown, rep: Report, at_: str) -> None:
    """The decoder-input table: one row per position, its last row the header, each row its chip."""
    table = frame(at, "p(predicted)")
    if table is not None:
        rep.check(len(table) == s.step + 1, f"{at_}: the table has {len(table)} rows")
        rep.check(table["predicts (chosen next token)"].iloc[-1] == s.predicts, f"{at_}: table/header token")
        rep.check(close(float(table["p(predicted)"].iloc[-1]), s.p), f"{at_}: table p / header p")
        for i, (name, p) in enumerate(s.chips):
            rep.check(table["predicts (chosen next token)"].iloc[i] == name, f"{at_}: chip {i} / table token")
            rep.check(
                p is not None and abs(float(table["p(predicted)"].iloc[i]) - p) <= P_TOL,
                f"{at_}: chip {i} p {p} / table {table['p(predicted)'].iloc[i]}",
            )


def check_beam_tree(at: Any, figs: list, s: Shown, rep: Report, at_: str) -> None:
    """Beam: the hypothesis tree's kept nodes at this position carry the live table's cumulative log-probs."""
    tree = next((f for f in figs if title(f).startswith("Hypothesis tree")), None)
    live = next((d.value for d in at.dataframe if getattr(d, "key", None) == f"beam_live_{s.step}"), None)
    if tree is not None and live is not None:
        nodes = [t for t in tree["data"] if (t.get("meta") or {}).get("status") in ("kept", "start")]
        cums = []
        for t in nodes:
            xs = t["x"] if not isinstance(t["x"], dict) else plotly_array(t["x"]).ravel().tolist()
            if t["meta"]["status"] == "start":
                cums += [0.0] if s.step == 0 else []
                continue
            cs = (
                plotly_array(t["marker"]["color"]).ravel()
                if isinstance(t["marker"]["color"], dict)
                else t["marker"]["color"]
            )
            cums += [c for x, c in zip(xs, cs) if x == s.step - 1]
        table_cums = sorted(round(float(c), 3) for c in live["cumulative log-prob"])
        rep.check(
            sorted(round(float(c), 3) for c in cums) == table_cums,
            f"{at_}: tree nodes {sorted(cums)} / live table {table_cums}",
        )
        rep.check(tree["layout"]["xaxis"]["tickvals"][-1] <= s.step, f"{at_}: tree axis past the position")


def audit_page(at: Any, lm: LoadedModel, rep: Report, where: str) -> Shown:
    """Check one state of the step view; returns what it shows."""
    from model.core import keys
    from model.core.keys import Records
    from model.decode.decoding import decode
    from model.decode.steps import follow_line
    from views import export
    from views.common import path_labels, show_token, token_texter
    from views.stepping import position_table, src_ids

    s = read_step_view(at)
    at_ = f"{where} position {s.step}"
    # the followed line, recomputed from the session's choices: the header, the chips and the caption name it
    view = at.session_state["step_for"]
    res = decode(lm.model, src_ids(lm, view), view.options())
    line = follow_line(res, lm.cfg.eos_id, at.session_state["follow"])
    labels = path_labels(lm, [*line.inputs[: s.step + 1], line.predicts[s.step]])
    reads, predicts = labels[:-1], labels[1:]
    rep.check(s.last == line.end, f"{at_}: the page ends at {s.last}, the followed line at {line.end}")
    want = (show_token(reads[-1]), show_token(predicts[-1]))
    rep.check((s.reads, s.predicts) == want, f"{at_}: header reads {s.reads!r} → {s.predicts!r}, the line {want}")
    rep.check([c for c, _ in s.chips] == [show_token(t) for t in reads[1:]], f"{at_}: chips / the line's tokens")
    if s.followed is not None:
        whole = " ".join(show_token(t) for t in path_labels(lm, line.ids)) or "<s>"
        rep.check(s.followed == whole, f"{at_}: the caption follows {s.followed!r}, the line is {whole!r}")
        rep.check(all(close(p, q) for (_, p), q in zip(s.chips, line.probs)), f"{at_}: chips p / line")
    rep.check(s.p is not None, f"{at_}: the header shows no p")
    check_position_table(at, s, rep, at_)
    # the output stage: bars and metrics
    metrics = {m.label: m.value for m in at.metric}
    if "p(chosen token)" in metrics:
        rep.check(close(float(metrics["p(chosen token)"]), s.p), f"{at_}: metric p / header p")
        rep.check(unescape(metrics["Chosen token"]) == s.predicts, f"{at_}: metric token / header token")
    figs = figures(at)
    for fig in figs:
        if title(fig).startswith("Top 10 next tokens"):
            bar = fig["data"][0]
            xs = plotly_array(bar["x"]).ravel() if isinstance(bar["x"], dict) else np.asarray(bar["x"], float)
            named = [i for i, y in enumerate(bar["y"]) if y == s.predicts]
            if named:
                rep.check(close(float(xs[named[0]]), s.p), f"{at_}: bar {xs[named[0]]:.4f} / header p {s.p}")
        rows = [html.unescape(str(r)) for r in (fig["layout"].get("yaxis") or {}).get("ticktext") or []]
        if rows and " → " in str(rows[0]) and len(rows) > s.step:
            row = f"{s.reads} → {s.predicts}"
            rep.check(str(rows[s.step]).endswith(row), f"{at_}: figure {title(fig)!r} row {rows[s.step]!r}")
    check_beam_tree(at, figs, s, rep, at_)
    # the downloads, built as the page builds them
    user = at.session_state["user_forced"]
    tab = position_table(res, line, s.step, reads, predicts, user)
    src_tokens = lm.tokenizer.tokens(src_ids(lm, view))
    summary = json.loads(
        export.summary_bytes(view, res, list(line.rows[: s.step + 1]), s.step, src_tokens, token_texter(lm), tab)
    )
    rep.check(os.sep not in summary["choices"]["model_dir"], f"{at_}: the summary holds a path")
    js = summary["followed_positions"]
    rep.check(close(js[-1]["p(predicted)"], s.p), f"{at_}: summary p {js[-1]['p(predicted)']} / header")
    for i, (_, p) in enumerate(s.chips):
        rep.check(p is not None and abs(js[i]["p(predicted)"] - p) <= P_TOL, f"{at_}: summary / chip {i}")
    csv = pd.read_csv(io.StringIO(tab.to_csv(index=False)))
    rep.check(close(float(csv["p(predicted)"].iloc[-1]), s.p), f"{at_}: CSV p / header p")
    npz = np.load(io.BytesIO(export.record_bytes(lm, res, list(line.rows[: s.step + 1]), s.step, reads, src_tokens)))
    rep.check(list(npz[keys.TOKENS_DEC_INPUT]) == reads, f"{at_}: NPZ tokens / the page's")
    rep.check(show_token(str(npz[keys.TOKENS_DEC_INPUT][-1])) == s.reads, f"{at_}: NPZ last input / header reads")
    layer = at.session_state["layer"]
    w = Records(npz).self_weights(layer)  # (H, T, T)
    rep.check(bool(np.isfinite(w).all()) and np.allclose(w.sum(-1), 1, atol=1e-4), f"{at_}: NPZ weights rows")
    rep.check(float(np.abs(np.triu(w, 1)).max(initial=0)) == 0.0, f"{at_}: NPZ weights on the future")
    for fig in figs:
        if title(fig).startswith("Attention weights α"):
            z = plotly_array(fig["data"][0]["z"])
            head = at.session_state["head"]
            want = w.mean(0) if head == "mean" else w[int(head)]
            past = np.tril(np.ones_like(want, dtype=bool))
            got = z[: want.shape[0], : want.shape[1]]
            rep.check(bool(np.allclose(got[past], want[past], atol=2e-3)), f"{at_}: weights figure / NPZ")
    return s


def open_page(model_dir: str | Path, query: dict) -> Any:
    from streamlit.testing.v1 import AppTest

    os.environ["DECODER_LENS_MODEL"] = str(model_dir)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query)
    at.run()
    return at


def page_ok(at: Any) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


def states(n: int, seed: int = 0) -> list[dict]:
    """``n`` seeded states: every strategy, with and without a forced token, every stage, each place."""
    from views.state import STAGES

    rng = random.Random(seed)
    out = []
    for i in range(n):
        name, strategy = STRATEGIES[i % len(STRATEGIES)]
        stage = STAGES[(i + i // len(STRATEGIES)) % len(STAGES)]
        query = {
            "src": rng.choice(SENTENCES),
            "max_len": "8",
            **strategy,
            "stage": stage,
            "layer": str(rng.randrange(2)),
            "head": rng.choice(["mean", "0", "1"]),
        }
        place = PLACES[(i // len(STRATEGIES)) % len(PLACES)]
        out.append(dict(name=name, query=query, forced=i % 3 == 1, place=place))
    return out


def audit(model_dir: str | Path, n: int = 30, seed: int = 0) -> Report:
    """Visit ``n`` states and check each; then reopen each state's link and compare."""
    from model.io.checkpoint import load_model_dir

    lm = load_model_dir(model_dir)
    rep = Report()
    for st_ in states(n, seed):
        query = dict(st_["query"])
        if st_["forced"]:  # the second most likely first token, as What if? would force it
            from model.decode.decoding import DecodeOptions, decode

            src = [*lm.tokenizer.encode(query["src"]), lm.cfg.eos_id]
            first = decode(lm.model, src, DecodeOptions(max_len=1, record=True)).steps[0]
            query["forced"] = f"!{int(first.top_ids[0][1])}"
        at = open_page(model_dir, query)
        where = f"[{st_['name']}, {query['stage']}, forced={st_['forced']}, {st_['place']}]"
        bad = page_ok(at)
        rep.check(not bad, f"{where}: the page failed: {bad}")
        if bad:
            continue
        last = read_step_view(at).last
        pos = {"first": 0, "middle": last // 2, "last": last}[st_["place"]]
        if pos and last:
            at.slider(key="step").set_value(pos).run()
        rep.states += 1
        shown = audit_page(at, lm, rep, where)
        again = open_page(model_dir, {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()})
        rep.check(read_step_view(again) == shown, f"{where}: the link reopens {read_step_view(again)} not {shown}")
        rep.check([title(f) for f in figures(again)] == [title(f) for f in figures(at)], f"{where}: link figures")
    return rep
