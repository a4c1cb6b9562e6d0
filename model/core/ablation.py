"""Which attention heads to switch off, as a frozen, hashable value (numpy only, no torch).

A head is ``(kind, layer, head)``: kind "self" or "cross" for the decoder's masked self-attention and
cross-attention, "enc" for the encoder's self-attention. Written ``dec.1.cross.2``, ``dec.0.self.5``,
``enc.0.self.3`` on the command line and in URLs. An ablated head's context (α·V, the d_k values it hands
to W_O) is replaced before W_O: by zeros (``mode="zero"``), or by that head's mean context (``mode="mean"``),
the mean over the positions of an unablated teacher-forced pass of the same sentence pair (see
``model.interpret.explain.mean_ablation``); the head still computes its attention, which the record keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from model.core import keys
from model.core.config import ModelConfig

Head = tuple[str, int, int]  # (kind, layer, head)
KINDS = ("self", "cross", "enc")
MODES = ("zero", "mean")
_HEAD = re.compile(r"^(dec)\.(\d+)\.(self|cross)\.(\d+)$|^(enc)\.(\d+)\.self\.(\d+)$")


def head_name(head: Head) -> str:
    kind, layer, h = head
    return keys.head("enc", layer, "self", h) if kind == "enc" else keys.head("dec", layer, kind, h)


def record_prefix(kind: str, layer: int) -> str:
    """The trace prefix of a head's attention block: ``dec.1.cross``, ``enc.0.self``."""
    return keys.enc(layer, "self") if kind == "enc" else keys.dec(layer, kind)


def parse_heads(text: str) -> frozenset[Head]:
    """``dec.1.cross.2,dec.0.self.5`` -> {("cross", 1, 2), ("self", 0, 5)}; blanks and repeats are ignored."""
    heads = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = _HEAD.match(part)
        if not m:
            raise ValueError(
                f"cannot read head {part!r}: write dec.LAYER.self.HEAD, dec.LAYER.cross.HEAD or enc.LAYER.self.HEAD"
            )
        heads.add(("enc", int(m[6]), int(m[7])) if m[5] else (m[3], int(m[2]), int(m[4])))
    return frozenset(heads)


def format_heads(heads: Iterable[Head]) -> str:
    """The inverse of parse_heads, in a stable order (kind, layer, head)."""
    return ",".join(head_name(h) for h in sorted(heads, key=lambda h: (KINDS.index(h[0]), h[1], h[2])))


@dataclass(frozen=True)
class Ablation:
    """Heads switched off for a decode or a teacher-forced pass. ``means`` (mode "mean" only) pairs each head with
    its mean context, d_k floats, so the value stays hashable (an app cache key, a DecodeOptions field)."""

    heads: frozenset[Head] = frozenset()
    mode: str = "zero"
    means: tuple[tuple[Head, tuple[float, ...]], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "heads", frozenset((str(k), int(l_), int(h)) for k, l_, h in self.heads))
        if self.mode not in MODES:
            raise ValueError(f"ablation mode must be zero or mean, not {self.mode!r}")
        bad = sorted(h for h in self.heads if h[0] not in KINDS or h[1] < 0 or h[2] < 0)
        if bad:
            raise ValueError(f"not a head: {bad[0]}")
        if self.mode == "mean":
            missing = self.heads - {h for h, _ in self.means}
            if missing:
                raise ValueError(f"mean ablation without a mean for {format_heads(missing)}")
        elif self.means:
            raise ValueError("zero ablation takes no means")

    def __bool__(self) -> bool:
        return bool(self.heads)

    def __str__(self) -> str:
        return f"{format_heads(self.heads)} ({self.mode})" if self.heads else "no heads"

    def check(self, cfg: ModelConfig) -> None:
        """ValueError (one line) when a head is outside the model ``cfg`` describes, or a mean has the wrong size."""
        for kind, layer, h in sorted(self.heads):
            n = cfg.n_encoder_layers if kind == "enc" else cfg.n_decoder_layers
            if layer >= n or h >= cfg.n_heads:
                part = "encoder" if kind == "enc" else "decoder"
                raise ValueError(
                    f"{head_name((kind, layer, h))} is not in this model ({n} {part} layers of {cfg.n_heads} heads)"
                )
        for head, mean in self.means:
            if len(mean) != cfg.d_k:
                raise ValueError(f"the mean of {head_name(head)} has {len(mean)} values, not d_k={cfg.d_k}")

    def arrays(self, cfg: ModelConfig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per attention block (``dec.1.cross``, ``enc.0.self``) with an ablated head: ``keep`` (1, H, 1, 1), 1 for a
        kept head and 0 for a removed one, and ``fill`` (1, H, 1, d_k), what a removed head hands to W_O instead;
        the block's context becomes context · keep + fill. Blocks with no ablated head are absent."""
        self.check(cfg)
        means = dict(self.means)
        H, out = cfg.n_heads, {}
        for kind, layer, h in sorted(self.heads):
            key = record_prefix(kind, layer)
            if key not in out:
                out[key] = (np.ones((1, H, 1, 1), np.float32), np.zeros((1, H, 1, cfg.d_k), np.float32))
            out[key][0][0, h] = 0.0
            if self.mode == "mean":
                out[key][1][0, h, 0] = means[(kind, layer, h)]
        return out
