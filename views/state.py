"""What the user chose, in one frozen object, and its round trip through the URL. No streamlit in here.

Every choice that changes what is shown is a field of ``View`` and a query parameter, so a copied link
reopens the same chips, step and figures. Decoding defaults come from ``DecodeOptions`` (one source).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from model.ablation import MODES, format_heads, parse_heads
from model.checkpoint import ENV_MODEL, default_model_dir
from model.constants import ATTRIBUTION_METHODS as METHODS
from model.decoding import DecodeOptions, prepare_ids

DEFAULTS = DecodeOptions()
STRATEGIES = ("greedy", "beam", "sample")
STRATEGY_LABELS = {"greedy": "Greedy", "beam": "Beam search", "sample": "Sampling"}
EXAMPLES = (  # each translated correctly by the bundled model (tests/test_examples.py holds the references)
    "I am a student.",
    "I like pizza.",
    "Where is the station?",
    "She is drinking coffee.",
    "The cat is sleeping on the sofa.",
    "Two dogs are playing in the snow.",
    "A man in a blue shirt is standing on a ladder.",
    "The little girl is reading a book in the garden.",
)
MAX_CHARS = 2000  # characters kept from the text box / URL before tokenizing
MAX_BEAM = 8
MAX_LENGTH_PENALTY = 3.0
MAX_TEMPERATURE = 5.0
MAX_SEED = 2**31 - 1
PAGES = ("Learn", "Explore", "Compare", "About")  # the first is where a link without parameters lands
PAGE_ALIASES = {"Lesson": "Learn"}  # older links
TABS = ("step", "tf")
TAB_LABELS = {"step": "Step-by-step decoding", "tf": "Teacher forcing (reference)"}
# Decoder stages the step views can show, in data-flow order, then the explanations. A step redraws only the
# chosen group's figures (every Plotly figure costs the browser tens of ms to redraw); "all" draws every stage of
# the decoder at once (the explanations, which compute more, stay on their own).
DECODER_STAGES = ("inputs", "qkv", "scores", "self", "self_out", "cross", "ffn", "output")
EXPLAIN_STAGES = ("lens", "ablation", "attribution")
STAGES = (*DECODER_STAGES, *EXPLAIN_STAGES, "all")
STAGE_LABELS = {
    "inputs": "Inputs & embeddings",
    "qkv": "Q · K · V",
    "scores": "Scores → causal mask",
    "self": "Masked self-attention",
    "self_out": "α·V → Add & Norm 1",
    "cross": "Cross-attention → Add & Norm 2",
    "ffn": "FFN → Add & Norm 3",
    "output": "Output & beam",
    "lens": "Logit lens",
    "ablation": "Head ablation",
    "attribution": "Attribution vs attention",
    "all": "All stages",
}
DEFAULT_STAGE = "self"
# the Compare page's activation-patching map shown: decoder residual sites, encoder outputs, heads
SITES = ("dec", "enc", "heads")
SITE_LABELS = {"dec": "Decoder layer × position", "enc": "Encoder layer × source token", "heads": "Decoder heads"}
MAX_CONTRAST_CHARS = 100
MEAN_HEADS = "mean"  # the head choice that averages the heads


@dataclass(frozen=True)
class Choices:
    """Everything that determines one decode (and so one cache entry)."""

    model_dir: str
    source: str
    strategy: str = DEFAULTS.strategy
    beam: int = DEFAULTS.beam
    length_penalty: float = DEFAULTS.length_penalty
    temperature: float = DEFAULTS.temperature
    top_k: int = DEFAULTS.top_k
    top_p: float = DEFAULTS.top_p
    seed: int = DEFAULTS.seed
    max_len: int = DEFAULTS.max_len
    prefix: tuple[int, ...] = ()

    def options(self, record: bool = True) -> DecodeOptions:
        return DecodeOptions(
            strategy=self.strategy,
            beam=self.beam if self.strategy == "beam" else 1,
            length_penalty=self.length_penalty,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
            max_len=self.max_len,
            prefix=self.prefix,
            record=record,
        )

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


@dataclass(frozen=True)
class View:
    """Every choice that changes what the Explore page shows; ``to_query`` / ``from_query`` round-trip it."""

    source: str = EXAMPLES[0]
    reference: str = ""
    model: str = ""  # the model directory's name ("" = the default one)
    strategy: str = DEFAULTS.strategy
    beam: int = DEFAULTS.beam
    length_penalty: float = DEFAULTS.length_penalty
    temperature: float = DEFAULTS.temperature
    top_k: int = DEFAULTS.top_k
    top_p: float = DEFAULTS.top_p
    seed: int = DEFAULTS.seed
    max_len: int = DEFAULTS.max_len
    forced: tuple[int, ...] = ()  # the forced prefix of the decode
    user_forced: frozenset[int] = field(default_factory=frozenset)  # positions in it the user picked
    tab: str = TABS[0]
    stage: str = DEFAULT_STAGE
    layer: int = 0
    head: int | str = MEAN_HEADS
    grid: bool = False
    no_mask: bool = False
    follow: tuple[int, ...] = ()  # beam search: the followed hypothesis' tokens
    ablate: str = ""  # heads switched off in the ablation stage, as "dec.1.cross.2,dec.0.self.5"
    ablate_mode: str = "zero"
    attribution: str = "ig"  # the attribution method: "ig" (Integrated Gradients) or "ixg" (Input × Gradient)
    step: int = 0
    source_b: str = ""  # the Compare page's second sentence (B)
    contrast: str = ""  # the alternative token Y of "why X rather than Y" (a word or a token)
    site: str = SITES[0]  # the patching map shown
    noise: bool = False  # corrupt A with noise instead of reading B

    def choices(self, model_dir: str) -> Choices:
        return Choices(
            model_dir=model_dir,
            source=self.source,
            strategy=self.strategy,
            beam=self.beam,
            length_penalty=self.length_penalty,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
            max_len=self.max_len,
            prefix=self.forced,
        )


VIEW_FIELDS = tuple(f.name for f in fields(View))
# query parameter -> View field; every field has one
QUERY_KEYS = {
    "src": "source",
    "ref": "reference",
    "model": "model",
    "strategy": "strategy",
    "beam": "beam",
    "lp": "length_penalty",
    "temp": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "seed": "seed",
    "max_len": "max_len",
    "forced": "forced",
    "tab": "tab",
    "stage": "stage",
    "layer": "layer",
    "head": "head",
    "grid": "grid",
    "nomask": "no_mask",
    "follow": "follow",
    "ablate": "ablate",
    "amode": "ablate_mode",
    "attr": "attribution",
    "step": "step",
    "srcb": "source_b",
    "contrast": "contrast",
    "site": "site",
    "noise": "noise",
}
FIELD_KEYS = {v: k for k, v in QUERY_KEYS.items()}


def _first(v):
    if isinstance(v, list | tuple):
        return v[-1] if v else None
    return v


def number(value, kind: Callable, default):
    """A number from a widget or URL value, and whether it was one; ``default`` if it is not (or not finite)."""
    value = _first(value)
    try:
        out = kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError, OverflowError):
        return default, False
    if isinstance(out, float) and not math.isfinite(out):
        return default, False
    return out, True


def encode_ids(ids, marked: frozenset[int] = frozenset()) -> str:
    """Token ids as "5.17.!22": dot-separated, "!" before the ids at the ``marked`` positions."""
    return ".".join(("!" if i in marked else "") + str(int(t)) for i, t in enumerate(ids))


def decode_ids(text) -> tuple[tuple[int, ...], frozenset[int]] | None:
    """The inverse of ``encode_ids``; None if the text is not such a list."""
    text = str(_first(text) or "")
    if not text:
        return (), frozenset()
    ids, marked = [], set()
    for i, part in enumerate(text.split(".")):
        if part.startswith("!"):
            marked.add(i)
            part = part[1:]
        if not part.isdigit() or len(part) > 9:
            return None
        ids.append(int(part))
    return tuple(ids), frozenset(marked)


def to_query(view: View, keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The URL of a view: strings only, fields at their default left out (``from_query`` restores them) except the
    ``keep`` fields (a default chosen on purpose, which the link must say)."""
    base = View()
    out: dict[str, str] = {}
    for name in VIEW_FIELDS:
        value = getattr(view, name)
        if name == "user_forced" or (value == getattr(base, name) and name not in ("source", *keep)):
            continue
        if name == "forced":
            text = encode_ids(value, view.user_forced)
        elif name == "follow":
            text = encode_ids(value)
        elif isinstance(value, bool):
            text = "1"
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = str(value)
        out[FIELD_KEYS[name]] = text
    return out


def from_query(qp: Mapping) -> tuple[dict, list[str]]:
    """The view fields a URL sets, as raw values (``clamp_view`` bounds them), and a message per value it could not
    read. Unknown parameters are ignored."""
    raw: dict = {}
    msgs: list[str] = []
    base = View()
    for key, name in QUERY_KEYS.items():
        if key not in qp:
            continue
        value = _first(qp[key])
        if value is None:
            continue
        default = getattr(base, name)
        if name in ("source", "reference", "model", "ablate", "source_b", "contrast"):
            raw[name] = str(value)  # prepare_source cuts the text to MAX_CHARS and says so
        elif name in ("forced", "follow"):
            parsed = decode_ids(value)
            if parsed is None:
                msgs.append(f"The link's {key}={str(value)[:40]!r} is not a list of token ids; it was ignored.")
            elif name == "forced":
                raw["forced"], raw["user_forced"] = parsed
            else:
                raw["follow"] = parsed[0]
        elif isinstance(default, bool):
            raw[name] = str(value) in ("1", "true", "True")
        elif name == "head":
            raw[name] = MEAN_HEADS if str(value) == MEAN_HEADS else str(value)[:40]
        elif isinstance(default, int | float):
            raw[name] = str(value)[:40]  # numbers are read (and bounded, with a message) by clamp_view
        else:
            raw[name] = str(value)[:40]
    return raw, msgs


@dataclass(frozen=True)
class Limits:
    """What the loaded model allows."""

    vocab_size: int
    max_len: int  # the model's positions: sources and outputs get at most max_len - 1 tokens
    n_layers: int
    n_heads: int

    @property
    def max_new(self) -> int:
        return max(1, self.max_len - 1)


def _clamp(label: str, value, lo, hi, kind: Callable, default, msgs: list[str]):
    out, ok = number(value, kind, default)
    if not ok:
        msgs.append(f"{label} {str(_first(value))[:40]!r} is not a number; using {default}.")
        return default
    if out < lo or out > hi:
        fixed = kind(min(max(out, lo), hi))
        msgs.append(f"{label} must be between {lo} and {hi}; using {fixed}.")
        return fixed
    return out


def clamp_view(raw: Mapping, limits: Limits, base: View = View()) -> tuple[View, list[str]]:
    """A valid ``View`` from raw values (widgets or a URL), and one message per value that had to change."""
    msgs: list[str] = []
    v = {name: raw.get(name, getattr(base, name)) for name in VIEW_FIELDS}
    out: dict = {
        "source": str(v["source"] or ""),
        "reference": str(v["reference"] or ""),
        "model": str(v["model"] or ""),
        "source_b": str(v["source_b"] or ""),
        "contrast": str(v["contrast"] or "")[:MAX_CONTRAST_CHARS],
        "noise": bool(v["noise"]),
    }
    out["site"] = v["site"] if v["site"] in SITES else SITES[0]
    if v["site"] not in SITES:
        msgs.append(f"Unknown patching map {str(v['site'])[:40]!r}; showing {SITE_LABELS[SITES[0]]}.")
    strategy = str(v["strategy"])
    if strategy not in STRATEGIES:
        msgs.append(f"Unknown strategy {strategy[:40]!r}; using greedy.")
        strategy = "greedy"
    out["strategy"] = strategy
    out["beam"] = _clamp("Beam width", v["beam"], 1, MAX_BEAM, int, DEFAULTS.beam, msgs)
    out["length_penalty"] = _clamp(
        "Length penalty", v["length_penalty"], 0.0, MAX_LENGTH_PENALTY, float, DEFAULTS.length_penalty, msgs
    )
    out["temperature"] = _clamp(
        "Temperature", v["temperature"], 0.0, MAX_TEMPERATURE, float, DEFAULTS.temperature, msgs
    )
    if strategy == "sample" and out["temperature"] == 0:
        msgs.append("Temperature 0 makes sampling greedy (always the most likely token).")
    out["top_k"] = _clamp("Top-k", v["top_k"], 0, max(limits.vocab_size, 1), int, DEFAULTS.top_k, msgs)
    out["top_p"] = _clamp("Top-p", v["top_p"], 0.0, 1.0, float, DEFAULTS.top_p, msgs)
    out["seed"] = _clamp("Seed", v["seed"], 0, MAX_SEED, int, DEFAULTS.seed, msgs)
    max_len = min(DEFAULTS.max_len, limits.max_new)
    if v["max_len"] == DEFAULTS.max_len:  # the default is "as long as the model allows": no message
        v["max_len"] = max_len
    out["max_len"] = _clamp("Max length", v["max_len"], 1, limits.max_new, int, max_len, msgs)
    forced = tuple(int(i) for i in (v["forced"] or ()))
    bad = [i for i in forced if not 0 <= i < limits.vocab_size]
    if bad:
        msgs.append(f"Forced token ids {bad[:5]} are not in this model's vocabulary; the forced tokens were dropped.")
        forced = ()
    if len(forced) > out["max_len"]:
        msgs.append(f"Only the first {out['max_len']} forced tokens fit in the maximum length.")
        forced = forced[: out["max_len"]]
    out["forced"] = forced
    out["user_forced"] = frozenset(i for i in (v["user_forced"] or ()) if 0 <= int(i) < len(forced))
    out["tab"] = v["tab"] if v["tab"] in TABS else TABS[0]
    if v["tab"] not in TABS:
        msgs.append(f"Unknown tab {str(v['tab'])[:40]!r}; showing step-by-step decoding.")
    out["stage"] = v["stage"] if v["stage"] in STAGES else DEFAULT_STAGE
    if v["stage"] not in STAGES:
        msgs.append(f"Unknown stage {str(v['stage'])[:40]!r}; showing {STAGE_LABELS[DEFAULT_STAGE]}.")
    out["layer"] = _clamp("Layer", v["layer"], 0, limits.n_layers - 1, int, 0, msgs)
    head = v["head"]
    if head != MEAN_HEADS:
        head = _clamp("Head", head, 0, limits.n_heads - 1, int, 0, msgs)
    out["head"] = head
    out["grid"] = bool(v["grid"])
    out["no_mask"] = bool(v["no_mask"])
    out["follow"] = tuple(int(i) for i in (v["follow"] or ()))
    out["ablate"] = ""
    try:
        heads = parse_heads(str(v["ablate"] or ""))
        bad = [h for h in heads if h[0] == "enc" or h[1] >= limits.n_layers or h[2] >= limits.n_heads]
        if bad:
            msgs.append(f"Head {format_heads(bad[:1])} is not in this model's decoder; no head is switched off.")
        else:
            out["ablate"] = format_heads(heads)
    except ValueError as e:
        msgs.append(f"{e}; no head is switched off.")
    out["ablate_mode"] = v["ablate_mode"] if v["ablate_mode"] in MODES else "zero"
    if v["ablate_mode"] not in MODES:
        msgs.append(f"Unknown ablation mode {str(v['ablate_mode'])[:40]!r}; using zero.")
    out["attribution"] = v["attribution"] if v["attribution"] in METHODS else "ig"
    if v["attribution"] not in METHODS:
        msgs.append(f"Unknown attribution method {str(v['attribution'])[:40]!r}; using Integrated Gradients.")
    step, ok = number(v["step"], int, 0)
    if not ok:
        msgs.append(f"Position {str(_first(v['step']))[:40]!r} is not a number; showing position 0.")
    out["step"] = max(int(step), 0)  # the decode's length bounds it (``clamp_step``)
    return View(**out), msgs


def clamp_step(step, n_steps: int) -> int:
    val, ok = number(step, int, 0)
    return int(min(max(val if ok else 0, 0), max(n_steps - 1, 0)))


def move(step: int, action: str, n_steps: int) -> int:
    """⏮ first, ◀ prev, ▶ next, ⏭ last."""
    target = {"first": 0, "prev": step - 1, "next": step + 1, "last": n_steps - 1}.get(action, step)
    return clamp_step(target, n_steps)


# ---------------------------------------------------------------------------
# Model directories and the source text.


MODELS_ROOT = Path(__file__).resolve().parents[1] / "assets" / "models"  # every model directory here is offered


def offered_model_dirs() -> list[Path]:
    """The model directories the app offers, the one it opens first at the head (the server's warm start loads it)."""
    return model_dirs(MODELS_ROOT, default=default_model_dir())


def model_dirs(root: Path, env: Mapping[str, str] | None = None, default: Path | None = None) -> list[Path]:
    """Model directories to offer: $DECODER_LENS_MODEL first (if set), then every ``root/*/`` holding a
    config.json, then the default directory (even if missing, so its error shows)."""
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
    ids = prepare_ids(body, eos_id, model_max_len)
    return Source(text, tuple(ids), len(body), len(ids) <= len(body), chars_cut)
