"""What the user chose, in one frozen object, and its round trip through the URL. No streamlit in here.

Every choice that changes what is shown is a line of ``CHOICES`` (its query parameter, widget key, default, bounds
and help) and a field of ``View``, so a copied link reopens the same chips, step and figures. The decoding choices
are the model's ``DecodeOptions`` itself, held by the ``View`` (one source for their defaults and their check).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model.core.ablation import MODES, format_heads, parse_heads
from model.core.config import ModelConfig
from model.core.constants import ATTRIBUTION_METHODS as METHODS
from model.core.constants import MAX_BEAM
from model.core.tokenizer import Tokenizer
from model.decode.decoding import DecodeOptions, read_source
from model.io.checkpoint import ENV_MODEL, default_model_dir

from .stages import ALL, REGISTRY

STRATEGIES = ("greedy", "beam", "sample")
STRATEGY_LABELS = {"greedy": "Greedy", "beam": "Beam search", "sample": "Sampling"}
EXAMPLES = (  # each translated correctly by the bundled model (tests/views/test_examples.py holds the references)
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
MAX_LENGTH_PENALTY = 3.0
MAX_TEMPERATURE = 5.0
MAX_SEED = 2**31 - 1
TABS = ("step", "tf")
TAB_LABELS = {"step": "Step-by-step decoding", "tf": "Teacher forcing (reference)"}
# The stages the step views can show (``views.stages.REGISTRY``), then "all": every decoder stage at once. A step
# redraws only the chosen stage's figures (every Plotly figure costs the browser tens of ms to redraw).
DECODER_STAGES = tuple(s.id for s in REGISTRY if s.decoder)
EXPLAIN_STAGES = tuple(s.id for s in REGISTRY if not s.decoder)
STAGES = (*DECODER_STAGES, *EXPLAIN_STAGES, ALL)
STAGE_LABELS = {**{s.id: s.label for s in REGISTRY}, ALL: "All stages"}
DEFAULT_STAGE = "self"
# the Compare page's activation-patching map shown: decoder residual sites, encoder outputs, heads
SITES = ("dec", "enc", "heads")
SITE_LABELS = {"dec": "Decoder layer × position", "enc": "Encoder layer × source token", "heads": "Decoder heads"}
MAX_CONTRAST_CHARS = 100
MEAN_HEADS = "mean"  # the head choice that averages the heads


@dataclass(frozen=True)
class Limits:
    """What the loaded model allows."""

    vocab_size: int
    max_len: int  # the model's positions: sources and outputs get at most max_len - 1 tokens
    n_layers: int
    n_heads: int
    models: tuple[str, ...] = ()  # the names of the other model directories the server offers (Compare's B)

    @property
    def max_new(self) -> int:
        return max(1, self.max_len - 1)


@dataclass(frozen=True)
class Choice:
    """One choice of the pages: the ``View`` field (or ``DecodeOptions`` field) it sets, its URL parameter, its
    default, its bounds (numbers: ``lo``..``hi``, ``hi`` may depend on the model; names: ``options``) and the words
    the sidebar and the messages use. A widget keyed by ``name`` holds it when ``has_widget``."""

    name: str
    query: str
    default: object
    label: str = ""
    lo: float | None = None
    hi: float | Callable[[Limits], float] | None = None
    options: tuple = ()
    shown: str = ""  # the widget's label, when it says more than ``label``
    unknown: str = ""  # "Unknown {unknown} …; {fallback}." for a name outside ``options``
    fallback: str = ""
    help: str | None = None
    has_widget: bool = True

    def high(self, limits: Limits) -> Any:
        return self.hi(limits) if callable(self.hi) else self.hi

    def widget(self, limits: Limits) -> dict:
        """The keyword arguments of its widget: label, bounds, key, help."""
        bounds = {} if self.lo is None else {"min_value": self.lo, "max_value": self.high(limits)}
        return {"label": self.shown or self.label, **bounds, "key": self.name, "help": self.help}


DEFAULTS = DecodeOptions()
# Every choice, in the URL's order. ``QUERY_KEYS``, the widgets' keys and bounds, the defaults and ``to_query``
# derive from it; a new choice is one line here and one field of ``View`` (or of ``DecodeOptions``).
CHOICES = (
    Choice("source", "src", EXAMPLES[0], "English sentence"),
    Choice("reference", "ref", "", "Reference French translation"),
    Choice("model", "model", "", has_widget=False),  # the model directory's name ("" = the default one)
    Choice(
        "strategy",
        "strategy",
        DEFAULTS.strategy,
        "Strategy",
        options=STRATEGIES,
        unknown="strategy",
        fallback="using greedy",
    ),
    Choice("beam", "beam", DEFAULTS.beam, "Beam width", 1, MAX_BEAM),
    Choice(
        "length_penalty",
        "lp",
        DEFAULTS.length_penalty,
        "Length penalty",
        0.0,
        MAX_LENGTH_PENALTY,
        help="score = log p / length^penalty (as in transformers)",
    ),
    Choice(
        "temperature",
        "temp",
        DEFAULTS.temperature,
        "Temperature",
        0.0,
        MAX_TEMPERATURE,
        help="0 = always the most likely token",
    ),
    Choice("top_k", "top_k", DEFAULTS.top_k, "Top-k", 0, lambda lim: max(lim.vocab_size, 1), shown="Top-k (0 = off)"),
    Choice("top_p", "top_p", DEFAULTS.top_p, "Top-p", 0.0, 1.0, shown="Top-p (1 = off)"),
    Choice("seed", "seed", DEFAULTS.seed, "Seed", 0, MAX_SEED),
    Choice(
        "max_len",
        "max_len",
        DEFAULTS.max_len,
        "Max length",
        1,
        lambda lim: lim.max_new,
        shown="Max length (new tokens)",
    ),
    Choice("forced", "forced", (), has_widget=False),  # the forced prefix; "!" marks the ids the user forced
    Choice("tab", "tab", TABS[0], options=TABS, unknown="tab", fallback="showing step-by-step decoding"),
    Choice(
        "stage",
        "stage",
        DEFAULT_STAGE,
        options=STAGES,
        unknown="stage",
        fallback=f"showing {STAGE_LABELS[DEFAULT_STAGE]}",
    ),
    Choice("layer", "layer", 0, "Layer", 0, lambda lim: lim.n_layers - 1, shown="Decoder layer"),
    Choice("head", "head", MEAN_HEADS, "Head", 0, lambda lim: lim.n_heads - 1, shown="Attention head"),  # or mean
    Choice("grid", "grid", False),
    Choice("no_mask", "nomask", False),
    Choice("follow", "follow", (), has_widget=False),  # beam search: the followed hypothesis' tokens
    Choice("ablate", "ablate", "", has_widget=False),  # heads switched off, as "dec.1.cross.2,dec.0.self.5"
    Choice("ablate_mode", "amode", "zero", options=MODES, unknown="ablation mode", fallback="using zero"),
    Choice(
        "attribution",
        "attr",
        "ig",
        options=METHODS,
        unknown="attribution method",
        fallback="using Integrated Gradients",
    ),
    Choice("step", "step", 0, "Position"),  # the decode's length bounds it (``clamp_step``)
    Choice("source_b", "srcb", ""),  # the Compare page's second sentence (B)
    # the Compare page's B decoded with a beam width of its own (1: greedy; 0: with A's decoding), as the Corpus page's
    # second run links it: one sentence, two decodings
    Choice("beam_b", "beamb", 0, "Sentence B's beam width", 0, MAX_BEAM, has_widget=False),
    # the Compare page's B put through another model directory (its name; "" = A's model): one sentence, two models
    Choice("model_b", "modelb", "", "Sentence B's model"),
    Choice("contrast", "contrast", ""),  # the alternative token Y of "why X rather than Y"
    Choice(
        "site", "site", SITES[0], options=SITES, unknown="patching map", fallback=f"showing {SITE_LABELS[SITES[0]]}"
    ),
    Choice("noise", "noise", False),  # corrupt A with noise instead of reading B
)
CHOICE = {c.name: c for c in CHOICES}
QUERY_KEYS = {c.query: c.name for c in CHOICES}  # query parameter -> field; every choice has one
FIELD_KEYS = {c.name: c.query for c in CHOICES}
WIDGETS = tuple(c.name for c in CHOICES if c.has_widget)  # the widgets' keys: each holds the choice of its name
TEXTS = ("source", "reference", "model", "ablate", "source_b", "model_b", "contrast")
DECODING = ("strategy", "beam", "length_penalty", "temperature", "top_k", "top_p", "seed", "max_len")
ALIASES = {"forced": "prefix"}  # a View's forced tokens are its decode's prefix


def choice(view: View, name: str) -> Any:
    """A choice of ``view`` by its name in ``CHOICES``: a decoding choice is read from its ``DecodeOptions``
    (``forced`` is the decode's prefix)."""
    if name in DECODING:
        return getattr(view.decode, name)
    return view.decode.prefix if name == "forced" else getattr(view, name)


def with_choices(view: View, **changes: Any) -> View:
    """``view`` with choices changed by name, the decoding ones (and ``forced``) in its ``DecodeOptions``."""
    decoding = {ALIASES.get(k, k): changes.pop(k) for k in (*DECODING, *ALIASES) if k in changes}
    return replace(view, decode=replace(view.decode, **decoding), **changes) if decoding else replace(view, **changes)


@dataclass(frozen=True)
class Choices:
    """Everything that determines one decode (and so one cache entry)."""

    model_dir: str
    source: str
    decode: DecodeOptions = DEFAULTS

    @property
    def prefix(self) -> tuple[int, ...]:
        return self.decode.prefix

    def options(self, record: bool = True) -> DecodeOptions:
        return replace(self.decode, record=record)

    def unforced(self) -> Choices:
        """The same choices without a forced prefix: the decode the forced tokens replace."""
        return replace(self, decode=replace(self.decode, prefix=()))

    def describe(self) -> str:
        d = self.decode
        if d.strategy == "beam":
            return f"beam search (width {d.beam}, length penalty {d.length_penalty:g})"
        if d.strategy == "sample":
            extra = [f"temperature {d.temperature:g}"]
            if d.top_k:
                extra.append(f"top-k {d.top_k}")
            if d.top_p < 1:
                extra.append(f"top-p {d.top_p:g}")
            return f"sampling ({', '.join(extra)}, seed {d.seed})"
        return "greedy decoding"


def _default(name: str):
    return field(default=CHOICE[name].default)


@dataclass(frozen=True)
class View:
    """Every choice that changes what a page shows; ``to_query`` / ``from_query`` round-trip it. The decoding
    choices are the model's own ``DecodeOptions`` (``decode``; its prefix is the forced tokens)."""

    source: str = _default("source")
    reference: str = _default("reference")
    model: str = _default("model")
    decode: DecodeOptions = DEFAULTS
    user_forced: frozenset[int] = field(default_factory=frozenset)  # positions of the forced prefix the user picked
    tab: str = _default("tab")
    stage: str = _default("stage")
    layer: int = _default("layer")
    head: int | str = _default("head")
    grid: bool = _default("grid")
    no_mask: bool = _default("no_mask")
    follow: tuple[int, ...] = _default("follow")
    ablate: str = _default("ablate")
    ablate_mode: str = _default("ablate_mode")
    attribution: str = _default("attribution")
    step: int = _default("step")
    source_b: str = _default("source_b")
    beam_b: int = _default("beam_b")
    model_b: str = _default("model_b")
    contrast: str = _default("contrast")
    site: str = _default("site")
    noise: bool = _default("noise")

    def choices(self, model_dir: str) -> Choices:
        return Choices(model_dir=model_dir, source=self.source, decode=self.decode)


VIEW_FIELDS = (*(c.name for c in CHOICES), "user_forced")  # every choice, read by name from a View


def _first(v):
    if isinstance(v, list | tuple):
        return v[-1] if v else None
    return v


def number(value: Any, kind: Callable, default: Any) -> tuple[Any, bool]:
    """A number from a widget or URL value, and whether it was one; ``default`` if it is not (or not finite)."""
    value = _first(value)
    try:
        out = kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError, OverflowError):
        return default, False
    if isinstance(out, float) and not math.isfinite(out):
        return default, False
    return out, True


def encode_ids(ids: Sequence[int], marked: frozenset[int] = frozenset()) -> str:
    """Token ids as "5.17.!22": dot-separated, "!" before the ids at the ``marked`` positions."""
    return ".".join(("!" if i in marked else "") + str(int(t)) for i, t in enumerate(ids))


def decode_ids(text: object) -> tuple[tuple[int, ...], frozenset[int]] | None:
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
    """The URL of a view: strings only, choices at their default left out (``from_query`` restores them) except the
    ``keep`` ones (a default chosen on purpose, which the link must say)."""
    out: dict[str, str] = {}
    for c in CHOICES:
        value = choice(view, c.name)
        if value == c.default and c.name not in ("source", *keep):
            continue
        if c.name == "forced":
            text = encode_ids(value, view.user_forced)
        elif c.name == "follow":
            text = encode_ids(value)
        elif isinstance(value, bool):
            text = "1"
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = str(value)
        out[c.query] = text
    return out


def from_query(qp: Mapping) -> tuple[dict, list[str]]:
    """The choices a URL sets, as raw values (``clamp_view`` bounds them), and a message per value it could not
    read. Unknown parameters are ignored."""
    raw: dict = {}
    msgs: list[str] = []
    for c in CHOICES:
        value = _first(qp[c.query]) if c.query in qp else None
        if value is None:
            continue
        if c.name in ("forced", "follow"):
            parsed = decode_ids(value)
            if parsed is None:
                msgs.append(f"The link's {c.query}={str(value)[:40]!r} is not a list of token ids; it was ignored.")
            elif c.name == "forced":
                raw["forced"], raw["user_forced"] = parsed
            else:
                raw["follow"] = parsed[0]
        elif isinstance(c.default, bool):
            raw[c.name] = str(value) in ("1", "true", "True")
        elif c.name in TEXTS:
            raw[c.name] = str(value)  # texts: prepare_source cuts them to MAX_CHARS and says so
        else:
            raw[c.name] = str(value)[:40]  # names and numbers: bounded, with a message, by clamp_view
    return raw, msgs


def _clamp(c: Choice, value, limits: Limits, msgs: list[str], default=None):
    """A number within the choice's bounds (its default, or ``default``, if it is not one)."""
    if c.lo is None:
        raise ValueError(f"{c.name} is not a number choice")
    kind = type(c.lo)
    default = c.default if default is None else default
    lo, hi = c.lo, c.high(limits)
    out, ok = number(value, kind, default)
    if not ok:
        msgs.append(f"{c.label} {str(_first(value))[:40]!r} is not a number; using {default}.")
        return default
    if out < lo or out > hi:
        fixed = kind(min(max(out, lo), hi))
        msgs.append(f"{c.label} must be between {lo} and {hi}; using {fixed}.")
        return fixed
    return out


def _named(c: Choice, value, msgs: list[str]):
    if value in c.options:
        return value
    msgs.append(f"Unknown {c.unknown} {str(value)[:40]!r}; {c.fallback}.")
    return c.default


def clamp_view(raw: Mapping, limits: Limits) -> tuple[View, list[str]]:
    """A valid ``View`` from raw values (widgets or a URL), and one message per value that had to change. The one
    place a choice is bounded; ``DecodeOptions`` checks the decoding choices once more as the model's contract."""
    msgs: list[str] = []
    v = {name: raw.get(name, CHOICE[name].default) for name in WIDGETS}
    v.update({name: raw.get(name) for name in ("forced", "user_forced", "follow", "ablate", "model")})
    out: dict = {name: str(v[name] or "") for name in ("source", "reference", "model", "source_b")}
    out["contrast"] = str(v["contrast"] or "")[:MAX_CONTRAST_CHARS]
    for name in ("grid", "no_mask", "noise"):
        out[name] = bool(v[name])
    for name in ("site", "strategy", "tab", "stage", "ablate_mode", "attribution"):
        out[name] = _named(CHOICE[name], v[name], msgs)
    for name in ("beam", "length_penalty", "temperature"):
        out[name] = _clamp(CHOICE[name], v[name], limits, msgs)
    if out["strategy"] == "sample" and out["temperature"] == 0:
        msgs.append("Temperature 0 makes sampling greedy (always the most likely token).")
    for name in ("top_k", "top_p", "seed"):
        out[name] = _clamp(CHOICE[name], v[name], limits, msgs)
    max_len = min(DEFAULTS.max_len, limits.max_new)
    if v["max_len"] == DEFAULTS.max_len:  # the default is "as long as the model allows": no message
        v["max_len"] = max_len
    out["max_len"] = _clamp(CHOICE["max_len"], v["max_len"], limits, msgs, default=max_len)
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
    out["beam_b"] = _clamp(CHOICE["beam_b"], raw.get("beam_b", 0), limits, msgs)
    out["model_b"] = str(v["model_b"] or "")
    if out["model_b"] and out["model_b"] not in limits.models:
        msgs.append(
            f"Sentence B's model {out['model_b'][:40]!r} is not another model this server offers; B is put through "
            "A's model."
        )
        out["model_b"] = ""
    out["layer"] = _clamp(CHOICE["layer"], v["layer"], limits, msgs)
    out["head"] = v["head"] if v["head"] == MEAN_HEADS else _clamp(CHOICE["head"], v["head"], limits, msgs, default=0)
    out["follow"] = tuple(int(i) for i in (v["follow"] or ()))
    out["ablate"] = ""
    try:
        heads = parse_heads(str(v["ablate"] or ""))
        outside = [h for h in heads if h[0] == "enc" or h[1] >= limits.n_layers or h[2] >= limits.n_heads]
        if outside:
            msgs.append(f"Head {format_heads(outside[:1])} is not in this model's decoder; no head is switched off.")
        else:
            out["ablate"] = format_heads(heads)
    except ValueError as e:
        msgs.append(f"{e}; no head is switched off.")
    step, ok = number(v["step"], int, 0)
    if not ok:
        msgs.append(f"Position {str(_first(v['step']))[:40]!r} is not a number; showing position 0.")
    out["step"] = max(int(step), 0)  # the decode's length bounds it (``clamp_step``)
    decode = DecodeOptions(**{name: out.pop(name) for name in DECODING}, prefix=out.pop("forced"))
    return View(decode=decode, **out), msgs


def clamp_step(step: object, n_steps: int) -> int:
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


def prepare_source(text: str | None, tokenizer: Tokenizer, cfg: ModelConfig) -> Source | None:
    """Tokenize the source; None for empty/whitespace text. Read as the model reads it (``read_source``: its
    language code first where it has one), truncated to the model's limit."""
    text = (text or "").strip()
    if not text:
        return None
    chars_cut = len(text) > MAX_CHARS
    text = text[:MAX_CHARS]
    body = tokenizer.encode(text)
    if not body:
        return None
    ids, cut = read_source(body, cfg)
    return Source(text, tuple(ids), len(body), cut, chars_cut)
