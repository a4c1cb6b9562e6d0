"""Why X rather than Y: the logit difference of the chosen token X and an alternative Y at one output position.

The difference logit X − logit Y is what decides between the two (the softmax's normaliser cancels in it), so it
is the explained quantity throughout, teacher-forced on the output (``out_ids``, X = ``out_ids[t]``):

- attribution to the source tokens and the earlier decoder inputs ``<s> y1 … y_t``, by Integrated Gradients and
  Input × Gradient (Captum, on the scaled token embeddings, from the model's baseline: as
  ``model.interpret.attribution``, a zero embedding, or <pad>'s on T5);
- the logit lens of the difference: each decoder layer's output read by the output head (as
``model.interpret.explain``);
- the activation-patching maps measured on the difference (``model.interpret.patching``).

Everything is a returned value; nothing is kept on the modules. Shapes: S source tokens, P = t + 1 decoder inputs,
L decoder layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from captum.attr import InputXGradient
from torch import Tensor

from model.core import keys
from model.core.keys import Records
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer
from model.interpret.attribution import (
    COMPLETENESS_TOL,
    MAX_IG_STEPS,
    METHODS,
    Explained,
    as_ids,
    attributed,
    baseline_embeddings,
    baseline_for,
    completeness_error,
    integrated,
    refine_short,
    scaled_embeddings,
)

CONTRAST_IG_STEPS = 32  # first pass; doubled until within COMPLETENESS_TOL (one position: cheap)
MARKER = "▁"  # SentencePiece's word start, shown as ␣ in the app
SHOWN_MARKER = "␣"


@dataclass(frozen=True)
class ContrastToken:
    id: int
    token: str
    pieces: tuple[str, ...]  # the pieces the vocabulary splits the text into (the first is used)
    note: str | None  # one sentence when the text is more than one piece


def contrast_token(tokenizer: Tokenizer, text: str) -> ContrastToken:
    """The token a typed alternative stands for: a vocabulary token written as such (``▁la``, ``␣la``, a byte
    ``<0xC3>``), else the text as a word (``la`` -> ``▁la``); a word the vocabulary splits uses its first piece and
    says so."""
    raw = (text or "").strip().replace(SHOWN_MARKER, MARKER)
    if not raw:
        raise ValueError("the contrast token is empty: type the word the model might have chosen instead")
    written_as_token = raw.startswith(MARKER) or (raw.startswith("<") and raw.endswith(">"))  # ▁la, <0xC3>, </s>
    if written_as_token and (tid := tokenizer.token_to_id(raw)) is not None:
        return ContrastToken(int(tid), raw, (raw,), None)
    ids = tokenizer.encode(raw)
    if not ids:
        raise ValueError(f"the contrast {text!r} has no token")
    pieces = tuple(tokenizer.id_to_token(i) for i in ids)
    note = None
    if len(ids) > 1:
        note = (
            f"the vocabulary splits {raw!r} into {len(ids)} pieces ({' + '.join(pieces)}); the first, "
            f"{pieces[0]!r}, is the contrast"
        )
    return ContrastToken(int(ids[0]), pieces[0], pieces, note)


@dataclass(frozen=True)
class ContrastAttribution:
    """Attribution of logit X − logit Y at one position. Shares are |raw| / (sum of |raw| over the inputs)."""

    src: np.ndarray  # (S,) share of each source token
    tgt: np.ndarray  # (P,) share of each decoder input <s> y1 … y_t
    raw_src: np.ndarray  # (S,) signed, summed over the embedding dimension
    raw_tgt: np.ndarray  # (P,)
    value: float  # logit X − logit Y
    baseline_value: float  # the same at the baseline (attribution.baseline_for)
    completeness: float  # |sum(raw) − (value − baseline)| / |value − baseline|
    method: str  # "ig" | "ixg"
    steps: int  # IG steps used, or path points where ``refined`` (0 for ixg)
    refined: bool = False  # integrated by the trapezoid rule on refined path points, not Gauss-Legendre


def _check(model: Transformer, src_ids, out_ids, position: int, contrast_id: int):
    cfg = model.cfg
    src = as_ids(src_ids, keys.SRC_IDS, cfg.vocab_size, model.device)
    out = as_ids(out_ids, "out_ids", cfg.vocab_size, model.device)
    if not 0 <= position < out.numel():
        raise ValueError(f"position {position} is beyond the output: it has positions 0 to {out.numel() - 1}")
    if not 0 <= int(contrast_id) < cfg.vocab_size:
        raise ValueError(f"contrast id {contrast_id} is outside the vocabulary")
    if int(out[position]) == int(contrast_id):
        raise ValueError("the contrast token is the chosen token itself: there is nothing to compare")
    dec_in = torch.cat([out.new_tensor([cfg.decoder_start_id]), out[:position]])  # (P,)
    return src, out[: position + 1], dec_in


def _contrast_ig(q: Explained, gap: float, steps: int, tolerance: float | None) -> tuple[Tensor, Tensor, int, bool]:
    """Integrated Gradients of the last position of ``q``: Gauss-Legendre's ``steps`` nodes doubled until completeness
    (the change ``gap``) is within ``tolerance`` or MAX_IG_STEPS, then, still short of it, the trapezoid rule on
    refined path points where that comes nearer (``attribution.refine_short``, as every output token's IG). Raw
    (1, S), (1, P) summed over D, the steps or path points taken, and whether the trapezoid rule took over."""
    P = q.dec_in.numel()
    pos = torch.tensor([P - 1], device=q.src.device)
    n = steps
    while True:
        raw_src, raw_tgt = integrated(q, pos, n)  # (1, S), (1, P)
        total = float(raw_src.sum() + raw_tgt.sum())
        if tolerance is None or completeness_error(total, gap) <= tolerance or n >= MAX_IG_STEPS:
            break
        n = min(2 * n, MAX_IG_STEPS)
    if tolerance is None:
        return raw_src, raw_tgt, n, False
    refined, nodes = refine_short(q, np.array([P - 1]), raw_src, raw_tgt, np.array([gap]), tolerance)
    return raw_src, raw_tgt, int(nodes[0]) if refined[0] else n, bool(refined[0])


@torch.inference_mode(False)  # callers may be inside inference mode (the app's views): gradients are needed here
@torch.enable_grad()
def contrast_attribution(
    model: Transformer,
    src_ids: Sequence[int],
    out_ids: Sequence[int],
    position: int,
    contrast_id: int,
    method: str = "ig",
    steps: int | None = None,
    tolerance: float | None = COMPLETENESS_TOL,
) -> ContrastAttribution:
    """``"ig"``: Integrated Gradients from ``steps`` (CONTRAST_IG_STEPS) Gauss-Legendre nodes, doubled until the
    completeness error is within ``tolerance`` or MAX_IG_STEPS (``tolerance=None``: exactly ``steps``); still short of
    it there, the trapezoid rule on path points placed where the path is steep, as ``attribution.attribute`` does
    (``refined``). ``"ixg"``: Input × Gradient."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if model.training:
        raise ValueError("model is in training mode (dropout would make attributions random): call model.eval()")
    src, out, dec_in = _check(model, src_ids, out_ids, position, contrast_id)
    P = dec_in.numel()
    pos = torch.tensor([P - 1], device=src.device)
    q = Explained(
        model, src, dec_in, out, baseline_for(model.cfg), torch.full((P,), int(contrast_id), device=src.device)
    )
    forward = q.forward()
    src_tok, tgt_tok = scaled_embeddings(model, src, dec_in, 1)  # (1, S, D), (1, P, D)
    with torch.no_grad():
        value = float(forward(src_tok, tgt_tok, pos))
        baseline = float(forward(*baseline_embeddings(model, q.baseline, src_tok, tgt_tok), pos))  # zero, or <pad>'s
    gap = value - baseline
    refined = False
    if method == "ixg":
        attr = InputXGradient(forward).attribute(
            (src_tok.requires_grad_(), tgt_tok.requires_grad_()), additional_forward_args=(pos,)
        )
        r_src, r_tgt = (a.detach().double().sum(-1) for a in attr)  # (1, S), (1, P)
        n = 0
    else:
        n = CONTRAST_IG_STEPS if steps is None else int(steps)
        if n < 1:
            raise ValueError("steps must be at least 1")
        r_src, r_tgt, n, refined = _contrast_ig(q, gap, n, tolerance)
    raw_src, raw_tgt = r_src[0].cpu().numpy(), r_tgt[0].cpu().numpy()  # (S,), (P,)
    return ContrastAttribution(
        **attributed(raw_src, raw_tgt, gap),
        value=value,
        baseline_value=baseline,
        method=method,
        steps=n,
        refined=refined,
    )


@dataclass(frozen=True)
class LensDifference:
    diff: np.ndarray  # (L,) logit X − logit Y read from each decoder layer's output at the position
    p_x: np.ndarray  # (L,) p(X) at that layer
    p_y: np.ndarray  # (L,) p(Y)


@torch.inference_mode()
def lens_difference(
    model: Transformer,
    src_ids: Sequence[int] | np.ndarray,
    out_ids: Sequence[int] | np.ndarray,
    position: int,
    contrast_id: int,
) -> LensDifference:
    """The logit lens of the difference: each decoder layer's output (``keys.layer_output``) at ``position`` through
    the output head (post-norm: no extra norm, see ``model.interpret.explain``); the last layer's is the model's own."""
    src, out, dec_in = _check(model, src_ids, out_ids, position, contrast_id)
    memory, src_mask, _ = model.encode(src[None])
    rec = Records(model.decode(dec_in[None], memory, src_mask, record=True)[2])
    h = torch.stack([rec.layer_output(i)[0, -1] for i in range(model.cfg.n_decoder_layers)])  # (L, D)
    z = model.logits(h[None])[0].double()  # (L, V)
    x, y = int(out[-1]), int(contrast_id)
    p = z.softmax(-1)
    return LensDifference((z[:, x] - z[:, y]).cpu().numpy(), p[:, x].cpu().numpy(), p[:, y].cpu().numpy())


@torch.inference_mode()
def closest_position(
    model: Transformer, src_ids: Sequence[int] | np.ndarray, out_ids: Sequence[int] | np.ndarray, contrast_id: int
) -> int:
    """The position where Y comes closest to the chosen token (the smallest logit X − logit Y, teacher-forced),
    leaving out positions where Y is the chosen token."""
    cfg = model.cfg
    src = as_ids(src_ids, keys.SRC_IDS, cfg.vocab_size, model.device)
    out = as_ids(out_ids, "out_ids", cfg.vocab_size, model.device)
    dec_in = torch.cat([out.new_tensor([cfg.decoder_start_id]), out[:-1]])
    z = model(src[None], dec_in[None])[0]  # (T, V)
    margin = (z.gather(1, out[:, None])[:, 0] - z[:, int(contrast_id)]).cpu().numpy()
    margin[out.cpu().numpy() == int(contrast_id)] = np.inf
    if not np.isfinite(margin).any():
        raise ValueError("the contrast token is the chosen token at every position: there is nothing to compare")
    return int(np.argmin(margin))


def report(
    model: Transformer,
    tokenizer: Tokenizer,
    src_ids: Sequence[int],
    out_ids: Sequence[int],
    contrast: ContrastToken,
    position: int | None = None,
    steps: int | None = None,
) -> dict[str, np.ndarray]:
    """Why X rather than Y as named arrays (docs/cli.md lists the keys): both attributions, the lens of the
    difference, and the patching maps measured on it (A corrupted by noise)."""
    from model.interpret.patching import activation_patching

    t = closest_position(model, src_ids, out_ids, contrast.id) if position is None else int(position)
    src, out, dec_in = _check(model, src_ids, out_ids, t, contrast.id)
    x = int(out[-1])
    ig = contrast_attribution(model, src_ids, out_ids, t, contrast.id, "ig", steps)
    ixg = contrast_attribution(model, src_ids, out_ids, t, contrast.id, "ixg")
    lens = lens_difference(model, src_ids, out_ids, t, contrast.id)
    patch = activation_patching(model, src_ids, out_ids, position=t, contrast_id=contrast.id)
    diff = patch.diff
    if diff is None:
        raise ValueError("patching measured no difference: it was given no contrast token")
    r = {
        keys.TOKENS_SRC: np.array(tokenizer.tokens(src.tolist())),
        keys.TOKENS_DEC_INPUT: np.array(tokenizer.tokens(dec_in.tolist())),
        keys.SRC_IDS: src.cpu().numpy(),
        "out_ids": np.asarray(out_ids, np.int64),
        "contrast.position": np.array(t),
        "contrast.chosen": np.array(tokenizer.id_to_token(x)),
        "contrast.chosen_id": np.array(x),
        "contrast.alternative": np.array(contrast.token),
        "contrast.alternative_id": np.array(contrast.id),
        "contrast.pieces": np.array(contrast.pieces),
        "contrast.logit_diff": np.array(ig.value),
        "lens.diff": lens.diff,
        "lens.p_chosen": lens.p_x,
        "lens.p_alternative": lens.p_y,
        "patching.corruption": np.array(patch.corruption.describe()),
        "patching.enc": diff.enc,
        "patching.dec": diff.dec,
        "patching.heads": diff.heads,
        "patching.clean": np.array(diff.clean),
        "patching.corrupted": np.array(diff.corrupted),
    }
    if contrast.note:
        r["contrast.note"] = np.array(contrast.note)
    for a in (ig, ixg):
        r.update(
            {
                f"attribution.{a.method}.src": a.src,
                f"attribution.{a.method}.tgt": a.tgt,
                f"attribution.{a.method}.raw_src": a.raw_src,
                f"attribution.{a.method}.raw_tgt": a.raw_tgt,
                f"attribution.{a.method}.completeness": np.array(a.completeness),
                f"attribution.{a.method}.steps": np.array(a.steps),
                f"attribution.{a.method}.refined": np.array(a.refined),
            }
        )
    return r
