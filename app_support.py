"""Pure-python helpers for app.py: the frozen choices, parameter clamping, query parameters,
step navigation and the per-step views of a recorded decode. No streamlit in here."""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

ENV_MODEL = "DECODER_LENS_MODEL"
STRATEGIES = ("greedy", "beam", "sample")
STRATEGY_LABELS = {"greedy": "Greedy", "beam": "Beam search", "sample": "Sampling"}
EXAMPLES = (
    "I am a student.",
    "I like pizza.",
    "Hello world.",
    "My name is Vikas. I love cricket, finance, and AI.",
    "A man in a blue shirt is standing on a ladder.",
    "The cat is sleeping on the sofa.",
    "We will go to the beach tomorrow if it does not rain.",
)
MAX_CHARS = 2000  # characters kept from the text box / URL before tokenizing
MAX_BEAM = 8
MAX_TEMPERATURE = 5.0
MAX_SEED = 2**31 - 1
MAX_DECODE_LEN = 128
DEFAULT_MAX_LEN = 40
PAGES = ("Explore", "Lesson", "About")
# Decoder stages the step view can show, in data-flow order. Each ▶ step redraws only the chosen group's
# figures (every Plotly figure costs the browser tens of ms to redraw); "all" draws every stage at once.
STAGES = ("inputs", "qkv", "scores", "self", "self_out", "cross", "ffn", "output", "all")
STAGE_LABELS = {
    "inputs": "Inputs & embeddings",
    "qkv": "Q · K · V",
    "scores": "Scores → causal mask",
    "self": "Masked self-attention",
    "self_out": "α·V → Add & Norm 1",
    "cross": "Cross-attention → Add & Norm 2",
    "ffn": "FFN → Add & Norm 3",
    "output": "Output & beam",
    "all": "All stages",
}
DEFAULT_STAGE = "self"
MEAN_HEADS = "mean of heads"


# ---------------------------------------------------------------------------
# Model directories.


def model_dirs(root: Path, env: Mapping[str, str] | None = None, default: Path | None = None) -> list[Path]:
    """Model directories to offer: $DECODER_LENS_MODEL first (if set), then every assets/models/*/
    holding a config.json, then the default directory (even if missing, so its error shows)."""
    env = os.environ if env is None else env
    out: list[Path] = []
    if env.get(ENV_MODEL):
        out.append(Path(env[ENV_MODEL]))
    if root.is_dir():
        out += sorted(p for p in root.iterdir() if p.is_dir() and (p / "config.json").is_file())
    if not out and default is not None:
        out.append(default)
    seen, unique = set(), []
    for p in out:
        key = str(p.resolve()) if p.exists() else str(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


# ---------------------------------------------------------------------------
# Choices.


@dataclass(frozen=True)
class Choices:
    """Everything that determines one decode (and so one cache entry)."""

    model_dir: str
    source: str
    strategy: str = "greedy"
    beam: int = 4
    length_penalty: float = 1.0
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_len: int = DEFAULT_MAX_LEN
    prefix: tuple[int, ...] = ()

    def options(self, record: bool = True):
        from model.decoding import DecodeOptions

        return DecodeOptions(
            strategy=self.strategy, beam=self.beam if self.strategy == "beam" else 1,
            length_penalty=self.length_penalty, temperature=self.temperature, top_k=self.top_k,
            top_p=self.top_p, seed=self.seed, max_len=self.max_len, prefix=self.prefix, record=record,
        )  # fmt: skip

    def describe(self) -> str:
        if self.strategy == "beam":
            return f"beam search (width {self.beam}, length penalty {self.length_penalty:g})"
        if self.strategy == "sample":
            extra = [f"temperature {self.temperature:g}"]
            if self.top_k:
                extra.append(f"top-k {self.top_k}")
            if self.top_p < 1:
                extra.append(f"top-p {self.top_p:g}")
            return f"sampling ({', '.join(extra)}, seed {self.seed})"
        return "greedy decoding"


def _num(value, kind: Callable, default):
    """A number from a widget or URL value; ``default`` if it is not one (or not finite)."""
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    try:
        out = kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError, OverflowError):
        return default, False
    if isinstance(out, float) and not math.isfinite(out):
        return default, False
    return out, True


def clamp(name: str, value, lo, hi, kind: Callable, default, messages: list[str]):
    """Clamp one parameter into [lo, hi]; say so in ``messages`` when it had to change."""
    out, ok = _num(value, kind, default)
    if not ok:
        messages.append(f"{name} {str(value)[:40]!r} is not a number; using {default}.")
        return default
    if out < lo or out > hi:
        fixed = min(max(out, lo), hi)
        messages.append(f"{name} must be between {lo} and {hi}; using {fixed}.")
        return kind(fixed)
    return out


def clamp_choices(raw: Mapping, vocab_size: int, model_max_len: int) -> tuple[dict, list[str]]:
    """Validate decoding parameters (from widgets or a URL); returns clean values and messages."""
    msgs: list[str] = []
    strategy = str(raw.get("strategy", "greedy"))
    if strategy not in STRATEGIES:
        msgs.append(f"unknown strategy {strategy[:40]!r}; using greedy.")
        strategy = "greedy"
    cap = max(1, min(MAX_DECODE_LEN, model_max_len - 1))
    out = dict(
        strategy=strategy,
        beam=clamp("beam width", raw.get("beam", 4), 1, MAX_BEAM, int, 4, msgs),
        length_penalty=clamp("length penalty", raw.get("length_penalty", 1.0), 0.0, 3.0, float, 1.0, msgs),
        temperature=clamp("temperature", raw.get("temperature", 1.0), 0.0, MAX_TEMPERATURE, float, 1.0, msgs),
        top_k=clamp("top-k", raw.get("top_k", 0), 0, max(vocab_size, 1), int, 0, msgs),
        top_p=clamp("top-p", raw.get("top_p", 1.0), 0.0, 1.0, float, 1.0, msgs),
        seed=clamp("seed", raw.get("seed", 0), 0, MAX_SEED, int, 0, msgs),
        max_len=clamp("max length", raw.get("max_len", min(DEFAULT_MAX_LEN, cap)), 1, cap, int,
                      min(DEFAULT_MAX_LEN, cap), msgs),
    )  # fmt: skip
    if out["strategy"] == "sample" and out["temperature"] == 0:
        msgs.append("temperature 0 makes sampling greedy (always the most likely token).")
    return out, msgs


# ---------------------------------------------------------------------------
# Source text.


@dataclass(frozen=True)
class Source:
    text: str  # what was tokenized (stripped, capped at MAX_CHARS)
    ids: tuple[int, ...]  # body + </s>
    n_tokens: int  # body tokens before truncation
    truncated: bool
    chars_cut: bool


def prepare_source(text: str | None, tokenizer, eos_id: int, model_max_len: int) -> Source | None:
    """Tokenize the source; None for empty/whitespace text. Truncates to the model's limit."""
    text = (text or "").strip()
    if not text:
        return None
    chars_cut = len(text) > MAX_CHARS
    text = text[:MAX_CHARS]
    body = tokenizer.encode(text)
    if not body:
        return None
    limit = max(1, model_max_len - 1)
    return Source(text, tuple(body[:limit]) + (eos_id,), len(body), len(body) > limit, chars_cut)


# ---------------------------------------------------------------------------
# Query parameters.

QP_KEYS = ("src", "ref", "strategy", "beam", "temp", "top_k", "top_p", "seed", "max_len", "step", "layer",
           "head", "page", "stage")  # fmt: skip


def _first(v):
    if isinstance(v, (list, tuple)):
        return v[-1] if v else None
    return v


def parse_query_params(qp: Mapping) -> dict:
    """The subset of widget state a URL may set, as raw values (clamped later). Unknown keys ignored."""
    out: dict = {}
    get = {k: _first(qp[k]) for k in QP_KEYS if k in qp}
    if "src" in get and get["src"] is not None:
        out["source"] = str(get["src"])[:MAX_CHARS]
    if "ref" in get and get["ref"] is not None:
        out["reference"] = str(get["ref"])[:MAX_CHARS]
    if get.get("strategy") in STRATEGIES:
        out["strategy"] = get["strategy"]
    for key, name, kind in (("beam", "beam", int), ("temp", "temperature", float), ("top_k", "top_k", int),
                            ("top_p", "top_p", float), ("seed", "seed", int), ("max_len", "max_len", int),
                            ("step", "step", int), ("layer", "layer", int)):  # fmt: skip
        if key in get:
            val, ok = _num(get[key], kind, None)
            if ok:
                out[name] = val
            elif name not in ("step", "layer") and get[key] is not None:
                out[name] = str(get[key])[:40]  # kept raw so clamp_choices says it is not a number
    if "head" in get and get["head"] is not None:
        head = str(get["head"])
        if head == "mean":
            out["head"] = MEAN_HEADS
        else:
            val, ok = _num(head, int, None)
            if ok:
                out["head"] = val
    if get.get("page") in PAGES:
        out["page"] = get["page"]
    if get.get("stage") in STAGES:
        out["stage"] = get["stage"]
    return out


def query_params_for(ch: Choices | None, reference: str, step: int | None, layer: int, head, page: str,
                     stage: str = DEFAULT_STAGE) -> dict:  # fmt: skip
    """What the URL should hold for the current view (strings only)."""
    qp: dict[str, str] = {"page": page}
    if ch is None:
        return qp
    qp.update(src=ch.source, strategy=ch.strategy, max_len=str(ch.max_len), layer=str(layer),
              head="mean" if head == MEAN_HEADS else str(head), stage=stage)  # fmt: skip
    if reference:
        qp["ref"] = reference
    if ch.strategy == "beam":
        qp["beam"] = str(ch.beam)
    if ch.strategy == "sample":
        qp.update(temp=f"{ch.temperature:g}", top_k=str(ch.top_k), top_p=f"{ch.top_p:g}", seed=str(ch.seed))
    if step is not None:
        qp["step"] = str(step)
    return qp


# ---------------------------------------------------------------------------
# Stepping.


def clamp_step(step, n_steps: int) -> int:
    val, ok = _num(step, int, 0)
    if not ok:
        val = 0
    return int(min(max(val, 0), max(n_steps - 1, 0)))


def move(step: int, action: str, n_steps: int) -> int:
    """⏮ first, ◀ prev, ▶ next, ⏭ last."""
    last = max(n_steps - 1, 0)
    target = {"first": 0, "prev": step - 1, "next": step + 1, "last": last}.get(action, step)
    return clamp_step(target, n_steps)


# ---------------------------------------------------------------------------
# Views of a recorded decode.


def beam_path(beam_steps, step: int, row: int) -> list[int]:
    """Rows of one hypothesis at steps 0..step (row ``row`` at ``step``), following parents back."""
    rows = [0] * (step + 1)
    rows[step] = row
    for t in range(step, 0, -1):
        parent = beam_steps[t].live[rows[t]].parent
        rows[t - 1] = parent if parent >= 0 else 0
    return rows


def path_rows(result, step: int, row: int = 0) -> list[int]:
    if result.beam_steps is None:
        return [0] * (step + 1)
    return beam_path(result.beam_steps, step, row)


def live_rows(result, step: int) -> list[int]:
    """Rows that hold a real hypothesis at this step (beam search starts with one)."""
    if result.beam_steps is None:
        return [0]
    return [r for r, h in enumerate(result.beam_steps[step].live) if h.logprob > -1e8]


def pad_rows(rows: Sequence[np.ndarray], fill: float = -np.inf) -> np.ndarray:
    """Stack rows of growing length into (T, T), ``fill`` on the future."""
    T = len(rows)
    out = np.full((T, max((len(r) for r in rows), default=0)), fill, dtype=np.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


_GROWING = ("scores", "mask", "masked_scores", "weights")


def _kv_kind(key: str) -> str | None:
    """ "self" / "cross" for attention K and V records, else None."""
    parts = key.split(".")
    if len(parts) >= 4 and parts[2] in ("self", "cross") and parts[-1] in ("K", "V"):
        return parts[2]
    return None


def compact_result(result):
    """A copy of a recorded decode that keeps O(T) instead of O(T²) K/V records.

    Self-attention K, V at step t hold the whole cache (t + 1 rows); only the row added at that
    step is kept (the cache of a hypothesis is the rows its ancestors added, see ``stack_view``).
    Cross-attention K, V are the same at every step and for every beam row: kept once, at step 0.
    """
    steps = []
    for i, s in enumerate(result.steps):
        arrays = {}
        for key, v in s.arrays.items():
            kind = _kv_kind(key)
            if kind == "self":
                arrays[key] = np.ascontiguousarray(v[..., -1:, :])
            elif kind == "cross":
                if i == 0:
                    arrays[key] = np.ascontiguousarray(v[:1])
            else:
                arrays[key] = v
        steps.append(replace(s, arrays=arrays))
    return replace(result, steps=steps)


def stack_view(steps, rows: Sequence[int], step: int, stack_rows: Callable | None = None,
               keep: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Per-step records of positions 0..step along ``rows`` → arrays shaped like Trace.arrays.

    ``keep`` (optional) picks the keys to build (e.g. one layer's): the others are left out.

    Q, context, embeddings, norms, FFN: one new row per step, stacked. Self-attention K, V: the
    KV cache at ``step`` (all positions: the rows each step along the path appended). Self-attention
    maps: rows of growing length, −inf on the future (never computed with a KV cache). Cross-attention
    K, V: the projections of the encoder output (the same at every step). Works on full records and
    on ``compact_result`` ones.
    """
    stack_rows = stack_rows or pad_rows
    recs = [steps[i].arrays for i in range(step + 1)]
    last, r_last = recs[-1], rows[step]
    out: dict[str, np.ndarray] = {}
    for key in recs[0]:
        if keep is not None and not keep(key):
            continue
        parts = key.split(".")
        leaf = parts[-1]
        kind = _kv_kind(key)
        if key == "dec.pe":
            out[key] = np.concatenate([np.asarray(r[key]).reshape(1, -1) for r in recs])
        elif kind == "cross":
            src = last if key in last else recs[0]
            out[key] = src[key][r_last if src is last else 0]  # (H, S, d_k)
        elif kind == "self" and last[key].shape[-2] == step + 1:
            out[key] = last[key][r_last]  # a full record: the cache itself, (H, t+1, d_k)
        elif kind == "self":
            out[key] = np.concatenate([r[key][row][:, -1:] for r, row in zip(recs, rows)], axis=1)
        elif len(parts) >= 4 and parts[2] == "self" and leaf in _GROWING:
            per = [r[key][row][:, 0, :] for r, row in zip(recs, rows)]  # each (H, i+1)
            H = per[0].shape[0]
            out[key] = np.stack([np.asarray(stack_rows([p[h] for p in per])) for h in range(H)])
        else:
            x = [r[key][row] for r, row in zip(recs, rows)]  # (H, 1, d) | (1, D) | (1,)
            axis = 1 if x[0].ndim == 3 else 0
            out[key] = np.concatenate(x, axis=axis)
    return out


def layer_keep(layer: int) -> Callable[[str], bool]:
    """For ``stack_view``'s ``keep``: the keys of decoder layer ``layer`` and those of no layer (embeddings, PE)."""

    def keep(key: str) -> bool:
        parts = key.split(".")
        return not (len(parts) > 2 and parts[1].isdigit()) or parts[1] == str(layer)

    return keep


def head_slice(arr: np.ndarray, head) -> np.ndarray:
    """(H, T, X) → (T, X) for one head or the mean of heads."""
    return arr.mean(axis=0) if head == MEAN_HEADS else arr[int(head)]


def heads_concat(arr: np.ndarray) -> np.ndarray:
    """(H, T, d_k) → (T, H·d_k): every head side by side (the matrix before the head split)."""
    H, T, d = arr.shape
    return arr.transpose(1, 0, 2).reshape(T, H * d)


def mean_weights(arr: np.ndarray) -> np.ndarray:
    """Mean over heads of attention weights, keeping −inf (future) cells as −inf."""
    finite = np.isfinite(arr).all(axis=0)
    m = np.where(np.isfinite(arr), arr, 0).mean(axis=0)
    return np.where(finite, m, -np.inf).astype(np.float32)


def token_prob(step, row: int, token: int) -> float | None:
    """Probability of ``token`` at one step/row, if it is among the recorded top alternatives."""
    hits = np.nonzero(step.top_ids[row] == token)[0]
    return float(np.exp(step.top_logprobs[row][hits[0]])) if len(hits) else None


@dataclass(frozen=True)
class Chip:
    position: int
    token: str
    prob: float | None
    forced: bool = False


def path_tokens(result, rows: Sequence[int], step: int) -> tuple[list[int], list[int]]:
    """(decoder input ids 0..step, ids chosen at 0..step) along a path; chosen may be -1 (beam: died)."""
    inputs = [int(result.steps[i].input_ids[rows[i]]) for i in range(step + 1)]
    chosen = [int(result.steps[i].chosen[rows[i]]) for i in range(step + 1)]
    return inputs, chosen


def chips(result, rows: Sequence[int], step: int, token_text: Callable[[int], str]) -> list[Chip]:
    """Tokens generated before this step along the path (= decoder inputs after <s>), with probabilities."""
    inputs, _ = path_tokens(result, rows, step)
    out = []
    for i in range(1, step + 1):
        tok = inputs[i]
        prev = result.steps[i - 1]
        out.append(Chip(i, token_text(tok), token_prob(prev, rows[i - 1], tok), prev.forced))
    return out


MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&\"'=^%@/;,?])")


def escape_markdown(s: str) -> str:
    """Backslash-escape every markdown/HTML-significant ASCII character; newlines become spaces."""
    return MD_SPECIAL.sub(r"\\\1", str(s).replace("\r", " ").replace("\n", " "))


def show_token(tok: str) -> str:
    """Readable subword: SentencePiece's ▁ shown as a visible space marker."""
    return tok.replace("▁", "␣") if tok else "∅"


# ---------------------------------------------------------------------------
# Export.


def summary_dict(ch: Choices, result, token_text: Callable[[int], str], src_tokens: Sequence[str], step: int,
                 extra: Mapping | None = None) -> dict:  # fmt: skip
    """A JSON-able summary of one decode."""
    steps = []
    for s in result.steps:
        steps.append({
            "position": s.position,
            "forced": bool(s.forced),
            "rows": [{
                "input": token_text(int(s.input_ids[r])),
                "chosen": token_text(int(s.chosen[r])) if int(s.chosen[r]) >= 0 else None,
                "entropy": round(float(s.entropy[r]), 6),
                "top": [[token_text(int(i)), round(float(lp), 6)] for i, lp in zip(s.top_ids[r][:5],
                                                                                   s.top_logprobs[r][:5])],
            } for r in range(len(s.input_ids))],
        })  # fmt: skip
    return {
        "choices": {**asdict(ch), "prefix": list(ch.prefix)},
        "source_tokens": list(src_tokens),
        "output_tokens": [token_text(i) for i in result.ids],
        "n_best": [
            {"tokens": [token_text(i) for i in h.ids], "logprob": h.logprob, "score": h.score, "finished": h.finished}
            for h in result.n_best
        ],  # fmt: skip
        "current_step": step,
        "steps": steps,
        **(dict(extra) if extra else {}),
    }


def to_json_bytes(d: Mapping) -> bytes:
    """Strict JSON (non-finite numbers as null): model.jsonio."""
    from model.jsonio import dump_bytes

    return dump_bytes(d)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def save_to_bytes(save: Callable[[io.BytesIO], None]) -> bytes:
    buf = io.BytesIO()
    save(buf)
    return buf.getvalue()


@dataclass
class LRU:
    """A tiny bounded dict for per-session caches (lives in st.session_state, one per user)."""

    size: int = 6
    data: dict = field(default_factory=dict)

    def get(self, key):
        if key in self.data:
            self.data[key] = self.data.pop(key)
            return self.data[key]
        return None

    def put(self, key, value):
        self.data.pop(key, None)
        self.data[key] = value
        while len(self.data) > self.size:
            self.data.pop(next(iter(self.data)))
        return value


def with_prefix(ch: Choices, prefix: Sequence[int]) -> Choices:
    return replace(ch, prefix=tuple(int(i) for i in prefix))
