"""Attribution beside attention: how much each source token, and each earlier target token, counted in the
choice of each output token, by gradient methods on the token embeddings (Captum).

What is explained at output position t is the log-probability log p(y_{t+1} | y_{<=t}, x) of the token
chosen there (``out_ids[t]``), in one teacher-forced pass: the quantity greedy and beam decoding rank by.
The inputs are the scaled token embeddings (embedding × √d_model) of the source and of the decoder input
``<s> y1 … y_{T-1}``; the positional encoding is added inside the explained function, so it is part of
both the input and the baseline and never attributed. The baseline is a zero token embedding at every
position (``"zero"``), so x − x′ is the scaled token embedding itself, or, on a model without positional encoding
(T5), whose first norm then reads an all-zero vector, the ``<pad>`` token's embedding at every position (``"pad"``):
from zero the path starts where RMSNorm's x / sqrt(mean(x²) + eps) is steepest, and IG's integral misses
completeness by far even at 512 steps (``baseline_for``).

- Integrated Gradients: (x − x′) × the mean gradient along the straight path from baseline x′ to x.
  Completeness: the attributions sum to f(x) − f(x′), up to the integral's numerical error. The integral is
  Gauss-Legendre's (Captum's); where the path is too steep for it (an attention that flips within a
  millionth of the path, as on a sharp T5), the trapezoid rule on path points placed where they are needed.
- Input × Gradient: (x − x′) × ∂f/∂x at x, one backward pass; no completeness guarantee.

Each explained position t is one example of the batch given to Captum (a copy of the inputs explaining
position t only), so each position has its own attributions and completeness: a sum over positions would
mix them, as the source and earlier target tokens reach every later position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from captum.attr import InputXGradient, IntegratedGradients
from torch import Tensor

from model.core import keys
from model.core.config import ModelConfig
from model.core.constants import ATTRIBUTION_METHODS
from model.core.transformer import Transformer, padding_mask

DEFAULT_IG_STEPS = 16  # first pass; positions short of COMPLETENESS_TOL are redone with more (see attribute)
COMPLETENESS_TOL = 0.05
MAX_IG_STEPS = 512  # bundled model, 8 sentences (105 positions): 256 at most were needed, 16 for half
BATCH = 64  # path points × positions per forward/backward pass: bounds memory; larger is no faster on CPU
HARD_START = 8  # the first output token and </s> start at HARD_START × steps (they needed 128 of 16 most often)
MAX_REFINED_NODES = 4096  # path points of the trapezoid rule per position (the sharp T5 test model: 600 to 1800)
REFINE_START = 33  # evenly spaced path points the trapezoid rule starts from
REFINE_SPLIT = 32  # segments halved per position and round: those whose trapezoid misses their own change most
METHODS = ATTRIBUTION_METHODS
BASELINES = {
    "zero": "zero token embedding, positional encoding kept",
    "pad": "the <pad> token's embedding at every position, positional encoding kept",
}


def baseline_for(cfg: ModelConfig) -> str:
    """The baseline IG integrates from on the model ``cfg`` describes: zero, unless the model adds no positional
    encoding (T5), where the zero baseline is an all-zero input to the first RMSNorm and completeness fails with it
    (tests/model/test_family.py measures it on every family)."""
    return "pad" if cfg.positions == "relative" else "zero"


def baseline_embeddings(model: Transformer, baseline: str, src_tok: Tensor, tgt_tok: Tensor) -> tuple[Tensor, Tensor]:
    """The baseline of the scaled token embeddings ``src_tok``, ``tgt_tok``: zeros, or the <pad> token's (scaled)."""
    if baseline == "zero":
        return torch.zeros_like(src_tok), torch.zeros_like(tgt_tok)
    pad = model.embed.weight.detach()[model.cfg.pad_id] * model.src_embed.scale  # (D,)
    return pad.expand_as(src_tok).contiguous(), pad.expand_as(tgt_tok).contiguous()


def shares(raw_src: np.ndarray, raw_tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|raw| over the sum of |raw| across the source and decoder inputs of each row (..., S), (..., P): non-negative,
    a row's shares summing to 1 (a row of zeros stays zeros)."""
    magnitude = np.abs(raw_src).sum(-1) + np.abs(raw_tgt).sum(-1)  # (...,)
    norm = np.where(magnitude > 0, magnitude, 1.0)[..., None]
    return np.abs(raw_src) / norm, np.abs(raw_tgt) / norm


def completeness_error(total: np.ndarray | float, gap: np.ndarray | float) -> np.ndarray:
    """IG's completeness error: |sum of the attributions − (value − baseline value)| / |value − baseline value|."""
    return np.abs(total - gap) / np.maximum(np.abs(gap), 1e-12)


def attributed(raw_src: np.ndarray, raw_tgt: np.ndarray, gap: np.ndarray | float) -> dict[str, Any]:
    """The fields every attribution result holds, from its signed attributions (..., S), (..., P) and the explained
    quantity's change from the baseline ``gap`` (...,): the shares, the raw values and the completeness error (a
    plain float for one explained quantity)."""
    share_src, share_tgt = shares(raw_src, raw_tgt)
    error = completeness_error(raw_src.sum(-1) + raw_tgt.sum(-1), gap)
    return dict(
        src=share_src,
        tgt=share_tgt,
        raw_src=raw_src,
        raw_tgt=raw_tgt,
        completeness=error if np.ndim(error) else float(error),
    )


@dataclass(frozen=True)
class Attribution:
    """Attributions of T output tokens to S source tokens and T decoder inputs (``<s> y1 … y_{T-1}``).

    Shares are |raw| / (sum of |raw| over the source and decoder inputs of that row): non-negative,
    ``src[t].sum() + tgt[t].sum() == 1``. The sign (pushes the token up or down) stays in ``raw_*``.
    """

    src: np.ndarray  # (T, S) share of each source token (</s> included; padding is 0)
    tgt: np.ndarray  # (T, T) share of each decoder input j <= t; 0 above the diagonal (the future)
    raw_src: np.ndarray  # (T, S) signed attribution summed over the embedding dimension
    raw_tgt: np.ndarray  # (T, T)
    target_logit: np.ndarray  # (T,) log-probability of out_ids[t] at position t (the explained quantity)
    baseline_value: np.ndarray  # (T,) the same log-probability at the baseline
    completeness: np.ndarray  # (T,) |sum(raw) - (target - baseline)| / |target - baseline|
    method: str  # "ig" | "ixg"
    steps: int  # IG steps: the most any position took (0 for ixg)
    baseline: str  # the baseline, in words
    position_steps: np.ndarray  # (T,) IG steps (path points) each position took (0 for ixg)
    refined: np.ndarray  # (T,) bool: integrated by the trapezoid rule on refined path points, not Gauss-Legendre


def as_ids(
    ids: Sequence[int] | np.ndarray | Tensor, name: str, vocab_size: int, device: torch.device | str | None = None
) -> Tensor:
    """Token ids as a 1-d int64 tensor on ``device`` (the model's), refused (ValueError naming ``name``) when empty or
    outside the vocabulary."""
    t = torch.as_tensor(np.asarray(ids, dtype=np.int64).reshape(-1), device=device)
    if t.numel() == 0:
        raise ValueError(f"{name} is empty")
    if int(t.min()) < 0 or int(t.max()) >= vocab_size:
        raise ValueError(f"{name} holds ids outside the vocabulary (0..{vocab_size - 1})")
    return t


def explained_logprob(
    model: Transformer, src: Tensor, dec_in: Tensor, out: Tensor, contrast: Tensor | None = None
) -> Callable[..., Tensor]:
    """f(src_tok (N, S, D), tgt_tok (N, T, D), pos (N,)) -> (N,) log p(out[pos] at pos): the model's encode
    and decode (Transformer.encode / decode) from token embeddings instead of ids. With ``contrast`` (T,): the
    logit difference out[pos] − contrast[pos] instead (the softmax's normaliser cancels in it)."""
    src_mask = padding_mask(src[None], model.cfg.pad_id)  # (1, 1, 1, S) or None, from the real source
    S, T = src.numel(), dec_in.numel()

    def forward(src_tok: Tensor, tgt_tok: Tensor, pos: Tensor) -> Tensor:
        N = src_tok.shape[0]
        x, _, _ = model.encode(src[None].expand(N, S), tok=src_tok)  # (N, S, D)
        y, _, _ = model.decode_states(dec_in[None].expand(N, T), x, src_mask, tok=tgt_tok)  # (N, T, D)
        # (N, D): only the explained position goes through the output layer
        h = y[torch.arange(len(pos), device=pos.device), pos]
        z = model.logits(h[:, None])[:, 0]  # (N, V)
        if contrast is not None:
            return z.gather(1, out[pos][:, None])[:, 0] - z.gather(1, contrast[pos][:, None])[:, 0]  # (N,)
        return z.log_softmax(-1).gather(1, out[pos][:, None])[:, 0]  # (N,)

    return forward


@dataclass(frozen=True)
class Explained:
    """What Integrated Gradients integrates along the path from ``baseline`` (a key of BASELINES) for one source and
    decoder input: log p(out[pos]) at output position pos, or with ``contrast`` (T,) the logit difference
    out[pos] − contrast[pos] (``explained_logprob``)."""

    model: Transformer
    src: Tensor  # (S,)
    dec_in: Tensor  # (T,) <s> y1 … y_{T-1}
    out: Tensor  # (T,)
    baseline: str
    contrast: Tensor | None = None  # (T,)

    def forward(self, upto: int | None = None) -> Callable[..., Tensor]:
        """``explained_logprob`` on the first ``upto`` decoder inputs (all by default): later ones cannot reach the
        positions before them."""
        L = self.dec_in.numel() if upto is None else upto
        contrast = None if self.contrast is None else self.contrast[:L]
        return explained_logprob(self.model, self.src, self.dec_in[:L], self.out[:L], contrast)


def integrated(q: Explained, positions: Tensor, steps: int) -> tuple[Tensor, Tensor]:
    """Integrated Gradients of the given output positions, one Captum call: raw (n, S), (n, T) summed over D."""
    L = int(positions.max()) + 1  # later decoder inputs cannot reach these positions: leave them out
    src_tok, tgt_tok = scaled_embeddings(q.model, q.src, q.dec_in[:L], len(positions))
    attr = IntegratedGradients(q.forward(L)).attribute(
        (src_tok, tgt_tok),
        baselines=baseline_embeddings(q.model, q.baseline, src_tok, tgt_tok),
        additional_forward_args=(positions,),
        n_steps=steps,
        internal_batch_size=max(BATCH, len(positions)),
    )
    raw_src, raw_tgt = (a.detach().sum(-1).double() for a in attr)  # (n, S), (n, L)
    return raw_src, F.pad(raw_tgt, (0, q.dec_in.numel() - L))


def scaled_embeddings(model: Transformer, src: Tensor, dec_in: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """The scaled token embeddings, one copy per explained position: (n, S, D), (n, T, D)."""
    embed = model.embed.weight.detach() * model.src_embed.scale  # (V, D): attributions go to inputs, not weights
    return embed[src].expand(n, -1, -1).contiguous(), embed[dec_in].expand(n, -1, -1).contiguous()


def _path_points(q: Explained, pos: Tensor, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """f and its derivative along the straight path, per input token: (n,) and (n, S + T) at the path points
    ``alpha`` (n,) of the positions ``pos`` (n,), the integrand of IG's trapezoid rule."""
    src_tok, tgt_tok = scaled_embeddings(q.model, q.src, q.dec_in, 1)  # (1, S, D), (1, T, D)
    base_src, base_tgt = baseline_embeddings(q.model, q.baseline, src_tok, tgt_tok)
    d_src, d_tgt = src_tok - base_src, tgt_tok - base_tgt  # x − x′
    forward = q.forward()
    a_all = torch.as_tensor(alpha, dtype=src_tok.dtype, device=q.src.device)
    values, slopes = [], []
    for p, a in zip(pos.split(BATCH), a_all.split(BATCH), strict=True):
        x_src = (base_src + a[:, None, None] * d_src).requires_grad_()  # (n, S, D)
        x_tgt = (base_tgt + a[:, None, None] * d_tgt).requires_grad_()  # (n, T, D)
        f = forward(x_src, x_tgt, p)  # (n,): the copies are independent, so one backward gives each its gradient
        g_src, g_tgt = torch.autograd.grad(f.sum(), (x_src, x_tgt))
        values.append(f.detach())
        slopes.append(torch.cat([(g_src * d_src).sum(-1), (g_tgt * d_tgt).sum(-1)], 1))  # (n, S + T)
    return torch.cat(values).double().cpu().numpy(), torch.cat(slopes).double().cpu().numpy()


def _refined_ig(q: Explained, positions: np.ndarray, gap: np.ndarray, tolerance: float):
    """IG of the output positions ``positions`` (n,), whose f changes by ``gap`` (n,) along the path, by the trapezoid
    rule on path points placed where the path is steep: from REFINE_START even points, each round halves the
    REFINE_SPLIT segments whose trapezoid misses the change of f across them most (known exactly: f is evaluated at
    both ends), until completeness is within ``tolerance``, MAX_REFINED_NODES points, or no segment float32 can
    halve. Raw (n, S + T) and the points each row took (n,)."""
    grid = np.linspace(0.0, 1.0, REFINE_START).astype(np.float32).astype(np.float64)  # points float32 can place
    pos = torch.from_numpy(np.repeat(positions, len(grid))).to(q.src.device)
    f, d = _path_points(q, pos, np.tile(grid, len(positions)))
    n = len(grid)
    path = [(grid, f[i * n : (i + 1) * n], d[i * n : (i + 1) * n]) for i in range(len(positions))]
    raw, pending = [np.zeros(0)] * len(positions), list(range(len(positions)))
    while pending:
        new_rows, new_alpha = [], []
        for i in pending:
            a, f_i, d_i = path[i]
            parts = np.diff(a)[:, None] / 2 * (d_i[:-1] + d_i[1:])  # (K, S + T): each segment's trapezoid
            raw[i] = parts.sum(0)
            miss = np.abs(parts.sum(1) - np.diff(f_i))  # (K,) each segment's own completeness error
            mid = ((a[:-1] + a[1:]) / 2).astype(np.float32).astype(np.float64)
            miss[(mid <= a[:-1]) | (mid >= a[1:])] = 0  # too short for float32 to halve
            if abs(raw[i].sum() - gap[i]) <= tolerance * abs(gap[i]) or len(a) >= MAX_REFINED_NODES or not miss.any():
                continue
            split = np.argsort(-miss)[:REFINE_SPLIT]
            split = split[miss[split] > 0]
            new_rows += [i] * len(split)
            new_alpha.append(mid[split])
        pending = sorted(set(new_rows))
        if not pending:
            break
        alpha, rows = np.concatenate(new_alpha), np.asarray(new_rows)
        f, d = _path_points(q, torch.from_numpy(positions[rows]).to(q.src.device), alpha)
        for i in pending:
            at = np.flatnonzero(rows == i)
            a, f_i, d_i = (np.concatenate(pair) for pair in zip(path[i], (alpha[at], f[at], d[at]), strict=True))
            order = np.argsort(a, kind="stable")
            path[i] = (a[order], f_i[order], d_i[order])
    S = q.src.numel()
    stacked = np.stack(raw)  # (n, S + T)
    return stacked[:, :S], stacked[:, S:], np.array([len(a) for a, _, _ in path])


def refine_short(
    q: Explained, positions: np.ndarray, raw_src: Tensor, raw_tgt: Tensor, gap: np.ndarray, tolerance: float
) -> tuple[np.ndarray, np.ndarray]:
    """Where Gauss-Legendre's attributions ``raw_src`` (n, S) and ``raw_tgt`` (n, T) of the output positions
    ``positions`` (n,) still miss completeness (the change ``gap`` (n,)) by more than ``tolerance``, the path is too
    steep for evenly spread nodes: those rows are integrated again by the trapezoid rule on refined path points
    (``_refined_ig``), and replaced where that comes nearer. In place; returns which rows were replaced (n,) and
    the path points each of them took (0 elsewhere)."""
    err = completeness_error((raw_src.sum(1) + raw_tgt.sum(1)).cpu().numpy(), gap)
    rows = np.flatnonzero(err > tolerance)
    refined, nodes = np.zeros(len(positions), dtype=bool), np.zeros(len(positions), dtype=np.int64)
    if rows.size:
        r_src, r_tgt, points = _refined_ig(q, positions[rows], gap[rows], tolerance)
        better = np.abs(r_src.sum(1) + r_tgt.sum(1) - gap[rows]) < err[rows] * np.abs(gap[rows])
        rows, t = rows[better], torch.from_numpy(rows[better]).to(raw_src.device)
        raw_src[t] = torch.from_numpy(r_src[better]).to(raw_src)
        raw_tgt[t] = torch.from_numpy(r_tgt[better]).to(raw_tgt)
        refined[rows], nodes[rows] = True, points[better]
    return refined, nodes


def _adaptive_ig(q: Explained, gap: Tensor, steps: int, tolerance: float | None):
    """Integrated Gradients of every position with ``steps`` nodes, done again with more where completeness misses
    ``tolerance`` (see ``attribute``): the raw attributions (T, S) and (T, T), the steps each position took, and
    which positions the trapezoid rule on refined path points took over."""
    S, T = q.src.numel(), q.out.numel()
    position_steps = np.zeros(T, dtype=np.int64)
    raw_src, raw_tgt = (torch.zeros(T, n, dtype=torch.float64, device=q.src.device) for n in (S, T))
    want = np.full(T, steps, dtype=np.int64)  # steps of each position's next pass; 0: done
    if tolerance is not None and T > 2:  # the first token and the last (</s>) need the most: start them high
        want[[0, T - 1]] = min(HARD_START * steps, max(MAX_IG_STEPS, steps))
    while want.any():
        for k in np.unique(want[want > 0]):
            rows_k = torch.from_numpy(np.flatnonzero(want == k)).to(q.src.device)
            # one call per ~BATCH rows: the decoder runs only up to each call's last position
            for group in rows_k.split(max(1, BATCH // int(k))):
                raw_src[group], raw_tgt[group] = integrated(q, group, int(k))
        todo = np.flatnonzero(want)
        position_steps[todo], want[:] = want[todo], 0
        if tolerance is None:
            break
        t = torch.from_numpy(todo).to(q.src.device)
        err = completeness_error((raw_src[t].sum(1) + raw_tgt[t].sum(1)).cpu().numpy(), gap[t].cpu().numpy())
        redo = (err > tolerance) & (position_steps[todo] < MAX_IG_STEPS)
        # Gauss-Legendre error falls ~2-4x per doubling here: jump further when far above tolerance
        factor = np.where(err > 16 * tolerance, 8, np.where(err > 4 * tolerance, 4, 2))
        want[todo[redo]] = np.minimum(position_steps[todo[redo]] * factor[redo], MAX_IG_STEPS)
    if tolerance is None:
        return raw_src, raw_tgt, position_steps, np.zeros(T, dtype=bool)
    refined, nodes = refine_short(q, np.arange(T), raw_src, raw_tgt, gap.cpu().numpy(), tolerance)
    position_steps[refined] = nodes[refined]
    return raw_src, raw_tgt, position_steps, refined


@torch.inference_mode(False)  # callers may be inside inference mode (the app's views): gradients are needed here
@torch.enable_grad()
def attribute(
    model: Transformer,
    src_ids: Sequence[int],
    out_ids: Sequence[int],
    method: str = "ig",
    steps: int | None = None,
    baseline: str | None = None,
    tolerance: float | None = COMPLETENESS_TOL,
) -> Attribution:
    """Explain each output token ``out_ids[t]`` (y1 … yT, ``</s>`` included when it ended) of the source
    ``src_ids`` (``</s>`` included; padding allowed and never credited).

    ``"ig"``: Integrated Gradients with ``steps`` Gauss-Legendre nodes (DEFAULT_IG_STEPS by default); the
    positions whose completeness is worse than ``tolerance`` are done again with 2×, 4× or 8× the steps
    (more the further they were from it), up to MAX_IG_STEPS (``tolerance=None``: exactly ``steps``
    everywhere). Most positions need few steps, but where the prediction flips sharply somewhere along the
    path (often the first token and ``</s>``) a fixed count meeting 5 % everywhere would cost every position
    256 steps on the bundled model; with ``tolerance`` set, the first and the last position (of more than
    two) start at HARD_START × ``steps``. A position still short of ``tolerance`` at MAX_IG_STEPS, whose path is
    too steep for Gauss-Legendre, is integrated again by the trapezoid rule on path points placed where the path
    is steep (``_refined_ig``), kept if nearer completeness; ``refined`` marks it and ``position_steps`` counts its
    points.
    ``"ixg"``: Input × Gradient, one forward and backward pass. ``baseline``: a key of BASELINES (default: the
    model's, ``baseline_for``).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    cfg = model.cfg
    baseline = baseline_for(cfg) if baseline is None else baseline
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {tuple(BASELINES)}, not {baseline!r}")
    steps = (DEFAULT_IG_STEPS if steps is None else int(steps)) if method == "ig" else 0
    if method == "ig" and steps < 1:
        raise ValueError("steps must be at least 1")
    src = as_ids(src_ids, keys.SRC_IDS, cfg.vocab_size, model.device)  # (S,)
    out = as_ids(out_ids, "out_ids", cfg.vocab_size, model.device)  # (T,)
    dec_in = torch.cat([out.new_tensor([cfg.decoder_start_id]), out[:-1]])  # (T,) <s> y1 … y_{T-1}
    S, T = src.numel(), out.numel()
    if max(S, T) > cfg.max_len:
        raise ValueError(f"source ({S}) or output ({T}) longer than the model's max_len={cfg.max_len}")
    if model.training:
        raise ValueError("model is in training mode (dropout would make attributions random): call model.eval()")

    everywhere = torch.arange(T, device=src.device)  # copy t explains position t
    position_steps, refined = np.zeros(T, dtype=np.int64), np.zeros(T, dtype=bool)
    forward = explained_logprob(model, src, dec_in, out)
    src_tok, tgt_tok = scaled_embeddings(model, src, dec_in, T)
    with torch.no_grad():
        value = forward(src_tok, tgt_tok, everywhere).double()  # (T,)
        gap = value - forward(*baseline_embeddings(model, baseline, src_tok, tgt_tok), everywhere).double()
    if method == "ixg":
        attr = InputXGradient(forward).attribute(
            (src_tok.requires_grad_(), tgt_tok.requires_grad_()), additional_forward_args=(everywhere,)
        )
        raw_src, raw_tgt = (a.detach().sum(-1).double() for a in attr)  # (T, S), (T, T)
    else:
        ig = _adaptive_ig(Explained(model, src, dec_in, out, baseline), gap, steps, tolerance)
        raw_src, raw_tgt, position_steps, refined = ig
    a_src, a_tgt, v, g = raw_src.cpu().numpy(), raw_tgt.cpu().numpy(), value.cpu().numpy(), gap.cpu().numpy()
    return Attribution(
        **attributed(a_src, a_tgt, g),
        target_logit=v,
        baseline_value=v - g,
        method=method,
        steps=int(position_steps.max()),
        baseline=BASELINES[baseline],
        position_steps=position_steps,
        refined=refined,
    )


@dataclass(frozen=True)
class Agreement:
    """Attribution against attention over the source, per output position."""

    top1: np.ndarray  # (T,) bool: both put the same source token first
    spearman: np.ndarray  # (T,) rank correlation over source tokens (nan where either row is constant)
    summary: str  # one sentence for the page


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of a 1-D array, ties sharing their average rank (as scipy.stats.rankdata)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # rank of the last copy of each distinct value
    return (last - (counts - 1) / 2)[inverse]


def agreement(attr_src: np.ndarray, cross_weights: np.ndarray, ignore_eos: bool = True) -> Agreement:
    """Compare attribution shares (T, S) with cross-attention weights (T, S), e.g. one layer's averaged over
    heads. ``ignore_eos`` drops the last source column (``</s>`` when the source is not padded), where heads
    park weight when nothing else fits, so that both are compared over the tokens that carry the sentence."""
    a, w = np.asarray(attr_src, dtype=np.float64), np.asarray(cross_weights, dtype=np.float64)
    if a.ndim != 2 or a.shape != w.shape:
        raise ValueError(f"attr_src and cross_weights must be (T, S) arrays of one shape, not {a.shape} and {w.shape}")
    if ignore_eos:
        a, w = a[:, :-1], w[:, :-1]
    if a.shape[1] == 0:
        raise ValueError("no source token left to compare")
    top1 = a.argmax(1) == w.argmax(1)  # (T,)
    ra, rw = (np.array([average_ranks(row) for row in m]).reshape(m.shape) for m in (a, w))  # (T, S)
    ra, rw = ra - ra.mean(1, keepdims=True), rw - rw.mean(1, keepdims=True)
    denom = np.sqrt((ra**2).sum(1) * (rw**2).sum(1))  # (T,)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(denom > 0, (ra * rw).sum(1) / denom, np.nan)
    finite = rho[np.isfinite(rho)]
    mean_rho = f"mean Spearman ρ {finite.mean():.2f}" if finite.size else "no Spearman ρ (constant rows)"
    summary = f"attention and attribution agree on the most important source token at {int(top1.sum())} of {len(top1)}"
    return Agreement(top1=top1, spearman=rho, summary=f"{summary} steps; {mean_rho}")


@dataclass(frozen=True)
class BestHead:
    """The cross-attention head whose weights agree best with an attribution (``best_agreeing_head``)."""

    layer: int
    head: int
    agreement: Agreement  # of that head, per position
    top1: int  # positions where both put the same source word first
    mean_rho: float  # mean Spearman ρ over the positions where it is defined (nan: none)
    heads: int  # heads compared (L × H)


def best_agreeing_head(attr_src: np.ndarray, cross_weights: np.ndarray) -> BestHead:
    """Of every decoder layer's every cross-attention head, the one whose weights (L, H, T, S) agree best with the
    attribution shares (T, S) over the T positions, as ``agreement`` measures it: the most positions where both
    put the same source word first, ties broken by the larger mean Spearman ρ, then by the first (layer, head)."""
    w = np.asarray(cross_weights, dtype=np.float64)
    if w.ndim != 4 or w.shape[2:] != np.shape(attr_src):
        raise ValueError(f"cross_weights must be (L, H, T, S) with (T, S) = {np.shape(attr_src)}, not {w.shape}")
    L, H = w.shape[:2]
    best, key = None, None
    for layer in range(L):
        for head in range(H):
            ag = agreement(attr_src, w[layer, head])
            rho = ag.spearman[np.isfinite(ag.spearman)]
            mean_rho = float(rho.mean()) if rho.size else float("nan")
            k = (int(ag.top1.sum()), mean_rho if rho.size else -np.inf)
            if key is None or k > key:
                best, key = BestHead(layer, head, ag, k[0], mean_rho, L * H), k
    if best is None:
        raise ValueError("cross_weights hold no head")
    return best
