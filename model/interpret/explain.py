"""Why the decoder chose what it chose: the logit lens per decoder layer and attention-head ablation.

Everything here is a returned value computed from the model's own weights and a trace (or a recorded decode):
no hooks, nothing kept on the modules. Shapes: L decoder layers, H heads, T target positions (the decoder
inputs ``<s> y1 … yn``, each predicting the next token), S source tokens, D d_model, V vocab, k top tokens.

The lens sends each decoder layer's output ``dec.{l}.norm3.out`` through the output head (the tied embedding or
``out_proj``, plus ``final_logits_bias`` when the config has one), exactly as the last layer's output is sent.
In the post-norm Transformer of the paper each layer ends with a LayerNorm and nothing comes between the last one
and the output head, so every layer's output is on the scale the head reads; the last layer's lens *is* the
model's distribution. A pre-norm model (mBART, M2M100, NLLB, T5) hands on unnormalised residuals and reads the last
one through a final norm (and T5's output scale): the lens reads every layer's the same way, as if decoding stopped
there (``Transformer.logits``), as the logit lens reads GPT-2. ``lens_problem`` says when a configuration has no
lens (pre-norm without a final norm, or no decoder layer).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from model.core import keys
from model.core.ablation import Ablation, Head, format_heads, parse_heads, record_prefix
from model.core.config import ModelConfig
from model.core.keys import Records
from model.core.tokenizer import Tokenizer
from model.core.transformer import HeadMask, Transformer, head_masks
from model.decode.decoding import DecodeOptions, DecodeResult, ModuleDecoder, decode, forbidden_ids
from model.decode.lean import LeanDecoder
from model.decode.steps import OutputRecord

# rows of one batched teacher-forced pass are cut so that its logits stay under this many floats (~200 MB)
MAX_LOGITS = 50_000_000


def lens_problem(cfg: ModelConfig) -> str | None:
    """One sentence saying why the logit lens would misread this configuration, or None when it reads it right.

    A post-norm model's layer output is normalised as the output head reads it; a pre-norm one (``norm_position``
    "pre"; ``normalize_before``, fairseq's name) hands on an unnormalised residual that the final norm scales for
    the head (``lens_reads_final_norm``). A pre-norm configuration without that final norm, and one without a
    decoder layer, have nothing the head reads: both are refused.
    """
    pre = getattr(cfg, "normalize_before", False) or getattr(cfg, "norm_position", "post") == "pre"
    if pre and not getattr(cfg, "final_norm", False):
        return (
            "this model normalises before each sublayer (pre-norm) and has no final norm, so a layer's output is an "
            "unnormalised residual that the output head was never trained to read"
        )
    if cfg.n_decoder_layers < 1:
        return "this model has no decoder layer to read"
    return None


def lens_reads_final_norm(cfg: ModelConfig) -> bool:
    """Whether the lens reads each layer through the model's final norm (a pre-norm model), as the head reads the
    last layer's."""
    return bool(cfg.final_norm)


@dataclass(frozen=True)
class LogitLens:
    top_ids: np.ndarray  # (L, T, k) most likely tokens per layer and position
    top_probs: np.ndarray  # (L, T, k)
    chosen_prob: np.ndarray  # (L, T) probability of the token finally chosen at each position (NaN: none)
    chosen_rank: np.ndarray  # (L, T) its rank, 1 = top (0: none)
    entropy: np.ndarray  # (L, T) nats


def _top_k(x: np.ndarray, k: int) -> np.ndarray:
    """(N, k) column indices of each row's k largest, largest first."""
    part = np.argpartition(x, x.shape[1] - k, axis=1)[:, x.shape[1] - k :]
    order = np.argsort(-np.take_along_axis(x, part, 1), axis=1, kind="stable")
    return np.take_along_axis(part, order, 1)


@torch.inference_mode()
def logit_lens(
    model: Transformer,
    arrays: Records[np.ndarray],
    chosen_ids: Sequence[int],
    k: int = 10,
    lean: LeanDecoder | None = None,
    record: OutputRecord | None = None,
) -> LogitLens:
    """The output head applied to every decoder layer's output. ``arrays`` holds ``dec.{l}.norm3.out`` (T, D) for
    every layer l (a teacher-forced trace's arrays, or ``steps.stack_view`` of a recorded decode); ``chosen_ids``
    (T,) the token chosen (or the label) at each position, negative where there is none (a beam row that died).
    Probabilities are the model's own, before decoding forbids any token (``<pad>``, the start token).

    ``lean``, the model's LeanDecoder if there is one, lends its output head (prepacked for oneDNN when built for
    several rows, as the app's is): the product, the lens' main cost, takes a third to a half of the time it takes
    on the model's weight. ``record`` (``steps.output_record`` of the same positions) gives the last layer's
    distribution as the decode computed it, so only the L − 1 layers before it go through the head (k at most the
    record's TOP)."""
    problem = lens_problem(model.cfg)
    if problem:
        raise ValueError(f"the logit lens cannot read this model: {problem}")
    L = model.cfg.n_decoder_layers
    chosen = np.asarray(chosen_ids, np.int64)  # (T,)
    T = len(chosen)
    positions = np.shape(arrays.layer_output(L - 1))[0]
    if positions != T:
        raise ValueError(f"{T} chosen ids for {positions} positions")
    if record is not None and (record.top_ids.shape[0] != T or k > record.top_ids.shape[1]):
        raise ValueError(f"the output record holds {record.top_ids.shape} alternatives, not {T} positions × {k}")
    read = L if record is None else L - 1
    parts = [_head_lens(model, arrays, read, chosen, min(k, model.cfg.vocab_size), lean)] if read else []
    if record is not None:
        parts.append(_recorded_lens(record, forbidden_ids(model.cfg), chosen, k))
    return LogitLens(*(np.concatenate([getattr(p, f) for p in parts]) for f in LogitLens.__dataclass_fields__))


def _recorded_lens(rec: OutputRecord, forbidden: list[int], chosen: np.ndarray, k: int) -> LogitLens:
    """The last layer's lens (1, T, …) from a decode's record: its best allowed tokens merged with the forbidden
    ones by their own log-probabilities, the entropy completed with the forbidden tokens' terms."""
    T, F = rec.top_ids.shape[0], len(forbidden)
    ids = np.concatenate([rec.top_ids, np.broadcast_to(np.asarray(forbidden, np.int64), (T, F))], 1)
    lp = np.concatenate([rec.top_logprobs, rec.forbidden_logprobs], 1).astype(np.float32)
    order = np.argsort(-lp, axis=1, kind="stable")[:, :k]
    p_f = np.exp(rec.forbidden_logprobs.astype(np.float64))
    extra = -(p_f * np.where(p_f > 0, rec.forbidden_logprobs, 0.0)).sum(1)
    valid = chosen >= 0
    return LogitLens(
        top_ids=np.take_along_axis(ids, order, 1)[None],
        top_probs=np.exp(np.take_along_axis(lp, order, 1))[None],
        chosen_prob=np.where(valid, np.exp(rec.chosen_logprob), np.nan).astype(np.float32)[None],
        chosen_rank=np.where(valid, rec.chosen_rank, 0)[None],
        entropy=(rec.entropy + extra).astype(np.float32)[None],
    )


def _head_lens(model: Transformer, arrays: Records[np.ndarray], L: int, chosen: np.ndarray, k: int, lean) -> LogitLens:
    """Layers 0..L−1 through the output head: (L, T, …)."""
    D = model.cfg.d_model
    y = np.stack([np.asarray(arrays.layer_output(i), np.float32) for i in range(L)])  # (L, T, D)
    T = y.shape[1]
    # Transformer.logits, the lens' main cost: (L·T, D) @ (D, V) + bias. The lean decoder's output head takes the
    # fastest way it has: oneDNN on weights prepacked once when it was built for several rows (1.3 ms for 34 rows
    # of the bundled model on two threads), else numpy on its (D, V) layout (2.3 ms, as torch's product on two).
    # Without it, the (V, D) weight: numpy's product on its transposed view beats torch's W @ yᵀ on one thread
    # (3.3 against 4.1 ms for 51 rows); on two, torch's W @ yᵀ and a transposed copy of its (V, N) result.
    N = L * T
    y = np.ascontiguousarray(y.reshape(N, D))
    if lens_reads_final_norm(model.cfg) or model.cfg.output_scale != 1.0:  # through the final norm (pre-norm)
        z = model.logits(torch.from_numpy(y)[None])[0].numpy()  # (N, V), as the last layer's output is read
    elif lean is not None and lean.fallback is None:  # a family the numpy step does not cover has no head of its own
        z = lean.out(y)  # (N, V) logits, bias included
    else:
        W_t = model.embed.weight if model.out_proj is None else model.out_proj.weight  # (V, D)
        W = np.asarray(W_t.detach().cpu().numpy(), np.float32)
        two = torch.get_num_threads() > 1
        z = torch.from_numpy(W).mm(torch.from_numpy(y).T).T.contiguous().numpy() if two else y @ W.T
        if model.final_logits_bias is not None:
            z += model.final_logits_bias.detach().cpu().numpy()
    V = z.shape[1]
    rows = np.arange(N)
    c = np.tile(np.where(chosen >= 0, chosen, 0), L)  # (N,)
    c_z = z[rows, c]
    rank = np.count_nonzero(z > c_z[:, None], 1) + 1  # (N,): ties share the better rank
    # the k best among few candidates: the tokens j, j + nb, j + 2·nb, … form block j (a strided view, whose
    # maxima are one pass of elementwise maxima); the k best lie in the k blocks with the highest maxima, or in
    # the ragged tail of ids from B·nb on
    B = 64
    nb, Vb = V // B, V // B * B
    if nb > k:
        z3 = z[:, :Vb].reshape(N, B, nb)
        best = np.argpartition(z3.max(1), nb - k, axis=1)[:, nb - k :]  # (N, k) blocks
        cand_z = z3[rows[:, None], :, best].reshape(N, k * B)  # block best[r, i] at i·B … (i + 1)·B
        if Vb < V:
            cand_z = np.concatenate([cand_z, z[:, Vb:]], 1)
        pick = _top_k(cand_z, k)  # (N, k) best first
        i, j = np.minimum(pick // B, k - 1), pick % B
        top = np.where(pick < k * B, np.take_along_axis(best, i, 1) + nb * j, Vb + pick - k * B)
    else:
        top = _top_k(z, k)
    m = np.take_along_axis(z, top[:, :1], 1)  # (N, 1) row maxima
    # softmax as torch computes it, exp(z - max) / sum, in place: one exp pass gives the sum and the entropy
    z -= m
    e_n = np.exp(z)
    s_n = e_n.sum(-1)  # (N,)
    dot = np.einsum("ij,ij->i", e_n, z)  # sum e · (z - max); 0 · -inf is NaN, 0 wanted
    bad = ~np.isfinite(dot)
    if bad.any():
        dot[bad] = np.einsum("ij,ij->i", e_n[bad], np.maximum(z[bad], np.finfo(np.float32).min))
    entropy = np.log(s_n) - dot / s_n
    valid = np.tile(chosen >= 0, L)
    c_p = e_n[rows, c] / s_n
    return LogitLens(
        top_ids=top.reshape(L, T, k),
        top_probs=(np.take_along_axis(e_n, top, 1) / s_n[:, None]).reshape(L, T, k),
        chosen_prob=np.where(valid, c_p, np.nan).reshape(L, T).astype(np.float32),
        chosen_rank=np.where(valid, rank, 0).reshape(L, T),
        entropy=entropy.reshape(L, T),
    )


# ---------------------------------------------------------------------------
# Head ablation on a teacher-forced pair.


def _pair(model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """(source, decoder input <s> y, labels y </s>): ``tgt_ids`` are target tokens (a trailing </s> is dropped, as
    a decode's ``ids`` end with it), cut to the model's limit like the teacher-forced trace."""
    cfg = model.cfg
    src, y = [int(i) for i in src_ids], [int(i) for i in tgt_ids]
    if y and y[-1] == cfg.eos_id:
        y = y[:-1]
    if not src or len(src) > cfg.max_len:
        raise ValueError(f"the source must have 1 to {cfg.max_len} tokens, not {len(src)}")
    y = y[: cfg.max_len - 1]
    return src, [cfg.decoder_start_id, *y], [*y, cfg.eos_id]


def _stacked(rows: Sequence[Ablation | None], cfg, side: str) -> dict[str, HeadMask]:
    """Per-row ablations as one HeadMask per block with a leading row axis (rows that keep a block: keep 1, fill 0;
    x · 1 + 0 is x exactly, so an unablated row computes what an unablated pass does)."""
    per_row = [head_masks(a, cfg) for a in rows]
    blocks = sorted({k for m in per_row for k in m if keys.parse(k).side == side})
    H, d_k = cfg.n_heads, cfg.d_k
    out = {}
    for key in blocks:
        keep, fill = torch.ones(len(rows), H, 1, 1), torch.zeros(len(rows), H, 1, d_k)
        for r, m in enumerate(per_row):
            if key in m:
                keep[r], fill[r] = m[key].keep[0], m[key].fill[0]
        out[key] = HeadMask(keep, fill)
    return out


@torch.inference_mode()
def _losses(model: Transformer, src_ids, tgt_ids, rows: Sequence[Ablation | None]) -> np.ndarray:
    """Cross-entropy of each label (len(rows), T) in one batched teacher-forced pass per chunk of rows, row r with
    the heads of ``rows[r]`` switched off."""
    cfg = model.cfg
    src, dec_in, labels = _pair(model, src_ids, tgt_ids)
    T = len(dec_in)
    src_t, dec_t, lab_t = (torch.tensor([s]) for s in (src, dec_in, labels))
    chunk = max(1, MAX_LOGITS // (T * cfg.vocab_size))
    shared = None if any(a and any(h[0] == "enc" for h in a.heads) for a in rows) else model.encode(src_t)
    out = []
    for b in range(0, len(rows), chunk):
        part = rows[b : b + chunk]
        B = len(part)
        if shared is None:
            memory, src_mask, _ = model.encode(src_t.expand(B, -1), heads=_stacked(part, cfg, "enc"))
        else:
            memory, src_mask = shared[0].expand(B, -1, -1), shared[1]
        logits, _, _ = model.decode(dec_t.expand(B, -1), memory, src_mask, heads=_stacked(part, cfg, "dec"))
        labels_t = lab_t.to(logits.device).expand(B, -1).reshape(-1)
        loss = F.cross_entropy(logits.reshape(B * T, -1).float(), labels_t, reduction="none")
        out.append(loss.view(B, T).cpu().numpy())
    return np.concatenate(out)


@torch.inference_mode()
def head_means(model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int]) -> dict[Head, np.ndarray]:
    """Every head's mean context (d_k,) over the positions of one unablated teacher-forced pass of the pair: the
    target positions for decoder heads, the source positions for encoder heads."""
    cfg = model.cfg
    src, dec_in, _ = _pair(model, src_ids, tgt_ids)
    memory, src_mask, enc = model.encode(torch.tensor([src]), record=True)
    _, _, dec = model.decode(torch.tensor([dec_in]), memory, src_mask, record=True)
    rec = {**enc, **dec}
    means = {}
    for kind, n in (("self", cfg.n_decoder_layers), ("cross", cfg.n_decoder_layers), ("enc", cfg.n_encoder_layers)):
        for layer in range(n):
            ctx = rec[keys.join(record_prefix(kind, layer), "context")][0].mean(1).cpu().numpy()  # (H, d_k)
            means.update({(kind, layer, h): ctx[h] for h in range(cfg.n_heads)})
    return means


def mean_ablation(
    model: Transformer,
    heads: str | Iterable[Head],
    src_ids: Sequence[int],
    tgt_ids: Sequence[int],
    means: Mapping[Head, np.ndarray] | None = None,
) -> Ablation:
    """A mean ablation of ``heads`` (a set of heads, or their text ``dec.1.cross.2,...``): each head's output
    replaced by its mean context over an unablated teacher-forced pass of this sentence pair (``head_means``).
    Without a reference, pass the model's own translation as ``tgt_ids``: the head then says what it says on
    average about this sentence. ``means``: precomputed head_means of the pair."""
    heads = parse_heads(heads) if isinstance(heads, str) else frozenset(heads)
    means = head_means(model, src_ids, tgt_ids) if means is None else means
    Ablation(heads).check(model.cfg)
    return Ablation(heads, "mean", tuple((h, tuple(float(x) for x in means[h])) for h in sorted(heads)))


def ablation_of(
    model: Transformer, heads: Iterable[Head], mode: str, src_ids: Sequence[int], tgt_ids: Sequence[int]
) -> Ablation:
    """``heads`` switched off by ``mode``: "zero" (their output zeroed before W_O) or "mean" (``mean_ablation`` on
    the pair)."""
    return mean_ablation(model, heads, src_ids, tgt_ids) if mode == "mean" else Ablation(frozenset(heads))


def ablated_decode(
    model: Transformer,
    src_ids: Sequence[int],
    opts: DecodeOptions,
    ablation: Ablation,
    lean: LeanDecoder | ModuleDecoder | None = None,
) -> DecodeResult:
    """The sentence decoded again with the same choices and ``ablation``'s heads switched off (translation only)."""
    return decode(model, src_ids, replace(opts, ablation=ablation, record=False), lean)


def same_positions(ids: Sequence[int], other: Sequence[int]) -> set[int]:
    """The positions of ``ids`` whose token is matched in ``other`` (aligned by difflib): the rest differ."""
    same: set[int] = set()
    for a, _, n in difflib.SequenceMatcher(a=list(ids), b=list(other), autojunk=False).get_matching_blocks():
        same.update(range(a, a + n))
    return same


def position_loss_delta(
    model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int], ablation: Ablation
) -> np.ndarray:
    """(T,) cross-entropy of each label with ``ablation`` minus without, teacher-forced on the pair (positive: the
    ablated model finds the reference less likely there). Two passes of one row, not one of two: rows of a batch
    can round differently, and an empty ablation must give exactly zero."""
    return _losses(model, src_ids, tgt_ids, [ablation])[0] - _losses(model, src_ids, tgt_ids, [None])[0]


@dataclass(frozen=True)
class HeadImportance:
    self_loss_delta: np.ndarray  # (L, H) mean cross-entropy increase over the target when that head alone is removed
    cross_loss_delta: np.ndarray  # (L, H)
    base_loss: float  # mean cross-entropy of the unablated pass
    mode: str  # zero | mean
    base_position_loss: np.ndarray  # (T,) cross-entropy of each label, unablated
    self_position_delta: np.ndarray  # (L, H, T) per-position loss change when that head alone is removed
    cross_position_delta: np.ndarray  # (L, H, T)


def head_importance(
    model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int], mode: str = "zero"
) -> HeadImportance:
    """Remove each decoder head alone (self- and cross-attention) and measure the loss change on the pair,
    teacher-forced: the 2·L·H ablated passes and the unablated one run as rows of one batched pass. ``mode="mean"``
    replaces each head by its mean over the unablated pass of the same pair (``head_means``)."""
    cfg = model.cfg
    L, H = cfg.n_decoder_layers, cfg.n_heads
    heads = [(kind, layer, h) for kind in ("self", "cross") for layer in range(L) for h in range(H)]
    if mode == "zero":
        rows = [Ablation(frozenset({h})) for h in heads]
    elif mode == "mean":
        means = head_means(model, src_ids, tgt_ids)
        rows = [mean_ablation(model, {h}, src_ids, tgt_ids, means) for h in heads]
    else:
        raise ValueError(f"ablation mode must be zero or mean, not {mode!r}")
    loss = _losses(model, src_ids, tgt_ids, [None, *rows])  # (1 + 2LH, T)
    delta = (loss[1:] - loss[0]).reshape(2, L, H, -1)  # (kind, L, H, T)
    return HeadImportance(
        self_loss_delta=delta[0].mean(-1),
        cross_loss_delta=delta[1].mean(-1),
        base_loss=float(loss[0].mean()),
        mode=mode,
        base_position_loss=loss[0],
        self_position_delta=delta[0],
        cross_position_delta=delta[1],
    )


# ---------------------------------------------------------------------------
# Everything at once, for the command line and exports.


# Long on purpose: the report's sections (translation, lens, importance, ablation, attribution) in the order of
# docs/cli.md's key table, each a few lines that name its keys.
@dataclass(frozen=True)
class ExplainOptions:
    """What ``report`` adds to the lens and the head-importance map: ``heads`` ablated (``mode`` zero or mean, means
    from the same pair), an attribution by ``method`` ("ig" or "ixg", ``steps`` for ig), and the lens's top ``k``."""

    heads: frozenset[Head] = frozenset()
    mode: str = "zero"
    method: str | None = None
    steps: int | None = None
    k: int = 10


def report(
    model: Transformer,
    tokenizer: Tokenizer,
    src_ids: Sequence[int],
    target_ids: Sequence[int] | None = None,
    opts: ExplainOptions = ExplainOptions(),
) -> dict[str, np.ndarray]:
    """The explanation of one sentence as named arrays (docs/cli.md lists the keys): the greedy translation; the
    logit lens and the head-importance map on the pair (source, ``target_ids``, or the translation when there is
    no target); with ``opts.heads``, the translation decoded again without them (``opts.mode`` zero or mean, means
    from the same pair) and the loss change per position; with ``opts.method`` ("ig" or "ixg"), the attribution of
    each label to the source and earlier target tokens and its agreement with cross-attention."""
    heads, mode, method, steps, k = opts.heads, opts.mode, opts.method, opts.steps, opts.k
    from model.decode.decoding import DecodeOptions, decode, source_body
    from model.decode.trace import teacher_forced_trace

    cfg = model.cfg
    Ablation(heads, "zero").check(cfg)
    translation = decode(model, src_ids, DecodeOptions(max_len=cfg.max_len - 1)).ids
    pair = translation if target_ids is None else target_ids
    src, dec_in, _ = _pair(model, src_ids, pair)
    tr = teacher_forced_trace(model, tokenizer, source_body(src, cfg), dec_in[1:])  # the trace reads it as src
    a, labels = tr.arrays, [int(i) for i in tr.arrays.label_ids]
    lens = logit_lens(model, a, labels, k)
    imp = head_importance(model, src_ids, pair, mode)
    out = {
        keys.TOKENS_SRC: np.array(tr.src_tokens),
        keys.TOKENS_LABEL: np.array(tr.label_tokens),
        keys.SRC_IDS: a.src_ids,
        keys.LABEL_IDS: a.label_ids,
        keys.LOSS: a.loss,
        "translation": np.array(tokenizer.decode(translation)),
        "translation_ids": np.array(translation),
        "lens.top_ids": lens.top_ids,
        "lens.top_tokens": np.array([tokenizer.id_to_token(i) for i in lens.top_ids.reshape(-1).tolist()]).reshape(
            lens.top_ids.shape
        ),  # independent ids: each by its own name, not read as a sequence
        "lens.top_probs": lens.top_probs,
        "lens.chosen_prob": lens.chosen_prob,
        "lens.chosen_rank": lens.chosen_rank,
        "lens.entropy": lens.entropy,
        "importance.mode": np.array(mode),
        "importance.base_loss": np.array(imp.base_loss),
        "importance.self": imp.self_loss_delta,
        "importance.cross": imp.cross_loss_delta,
    }
    if target_ids is not None:
        out["target"] = np.array(tokenizer.decode(list(labels[:-1])))
    if heads:
        abl = mean_ablation(model, heads, src_ids, pair) if mode == "mean" else Ablation(frozenset(heads))
        ids = decode(model, src_ids, DecodeOptions(max_len=cfg.max_len - 1, ablation=abl)).ids
        out.update(
            {
                "ablation.heads": np.array(format_heads(heads)),
                "ablation.mode": np.array(mode),
                "ablation.translation": np.array(tokenizer.decode(ids)),
                "ablation.ids": np.array(ids, dtype=np.int64),
                "ablation.loss_delta": position_loss_delta(model, src_ids, pair, abl),
            }
        )
    if method is not None:
        from model.interpret.attribution import agreement, attribute

        at = attribute(model, src_ids, labels, method, steps)
        cross = np.mean([a.cross_weights(i) for i in range(cfg.n_decoder_layers)], axis=(0, 1))  # (T, S)
        ag = agreement(at.src, cross)
        out.update(
            {
                "attribution.method": np.array(at.method),
                "attribution.steps": np.array(at.steps),
                "attribution.src": at.src,
                "attribution.tgt": at.tgt,
                "attribution.completeness": at.completeness,
                "agreement.top1": np.asarray(ag.top1),
                "agreement.spearman": np.asarray(ag.spearman),
                "agreement.summary": np.array(ag.summary),
            }
        )
    return out
