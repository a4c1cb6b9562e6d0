"""Views of a recorded decode for any consumer (the app, exports): compact storage, the arrays of one
hypothesis up to a step (shaped like ``Trace.arrays``), beam ancestry and the following of a hypothesis by
identity, the full-prefix self-attention scores, the chips and the summary of a decode.

Numpy only: a recorded decode (``decoding.DecodeResult`` with ``record=True``) is plain arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from model.core import keys
from model.core.constants import IMPOSSIBLE
from model.core.keys import ATTENTION_MAPS, ATTENTION_RELATIVE, Records
from model.decode.decoding import BeamStep, DecodeResult, Step

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# ---------------------------------------------------------------------------
# Compact storage and the arrays of one path.


def _kv_kind(key: str) -> str | None:
    """ "self" / "cross" for attention K and V records, else None."""
    return next((block for block in ("self", "cross") if keys.is_kv(key, block)), None)


def compact_result(result: DecodeResult) -> DecodeResult:
    """A copy of a recorded decode that keeps O(T) instead of O(T²) K/V records.

    Self-attention K, V at step t hold the whole cache (t + 1 rows); only the row added at that step is kept
    (the cache of a hypothesis is the rows its ancestors added, see ``stack_view``). Cross-attention K, V are the
    same at every step and for every beam row: kept once, at step 0.
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


def lower_rows(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Per-step attention rows (row t holds t + 1 keys) as a (T, T) matrix, −inf on the future."""
    T = len(rows)
    out = np.full((T, T), -np.inf, dtype=np.float32)
    for t, r in enumerate(rows):
        r = np.asarray(r)
        if r.shape != (t + 1,):
            raise ValueError(f"row {t} must hold {t + 1} values (one per key so far), got shape {r.shape}")
        out[t, : t + 1] = r
    return out


def layer_keep(layer: int) -> Callable[[str], bool]:
    """For ``stack_view``'s ``keep``: the keys of decoder layer ``layer`` and those of no layer (embeddings, PE)."""

    def keep(key: str) -> bool:
        return keys.parse(key).layer in (None, layer)

    return keep


def stack_view(
    steps: Sequence[Step], rows: Sequence[int], step: int, keep: Callable[[str], bool] | None = None
) -> Records[np.ndarray]:
    """Per-step records of positions 0..step along ``rows`` → arrays shaped like ``Trace.arrays``.

    ``keep`` (optional) picks the keys to build (e.g. one layer's). Q, context, embeddings, norms, FFN: one new
    row per step, stacked. Self-attention K, V: the KV cache at ``step``. Self-attention maps: rows of growing
    length, −inf on the future (a KV-cached step never computes it; ``prefix_scores`` does, for display).
    Cross-attention K, V: the projections of the encoder output. Works on full and on ``compact_result`` records.
    """
    recs = [steps[i].arrays for i in range(step + 1)]
    last, r_last = recs[-1], rows[step]
    out: dict[str, np.ndarray] = {}
    for key in recs[0]:
        if keep is not None and not keep(key):
            continue
        name, kind = keys.parse(key), _kv_kind(key)
        if key == keys.embedding("dec", "pe"):
            out[key] = np.concatenate([np.asarray(r[key]).reshape(1, -1) for r in recs])
        elif kind == "cross":
            src = last if key in last else recs[0]
            out[key] = src[key][r_last if src is last else 0]  # (H, S, d_k)
        elif kind == "self" and last[key].shape[-2] == step + 1:
            out[key] = last[key][r_last]  # a full record: the cache itself, (H, t+1, d_k)
        elif kind == "self":
            out[key] = np.concatenate([r[key][row][:, -1:] for r, row in zip(recs, rows)], axis=1)
        elif name.layer is not None and name.block == "self" and name.quantity in ATTENTION_MAPS + ATTENTION_RELATIVE:
            per = [r[key][row][:, 0, :] for r, row in zip(recs, rows)]  # each (H, i+1)
            out[key] = np.stack([lower_rows([p[h] for p in per]) for h in range(per[0].shape[0])])
            if name.quantity in ATTENTION_RELATIVE:  # a decoder's bias of a future key is that of distance 0
                out[key] = np.where(np.isinf(out[key]), np.diagonal(out[key], axis1=1, axis2=2)[..., None], out[key])
        else:
            x = [r[key][row] for r, row in zip(recs, rows)]  # (H, 1, d) | (1, D) | (1,)
            out[key] = np.concatenate(x, axis=1 if x[0].ndim == 3 else 0)
    return Records(out)


@dataclass(frozen=True)
class OutputRecord:
    """The model's output distribution at positions 0..step along one hypothesis, as a recorded decode kept it:
    what the logit lens needs of the last layer, so that it need not send that layer through the output head
    again. T positions, TOP recorded alternatives, F forbidden tokens."""

    top_ids: np.ndarray  # (T, TOP) best tokens decoding allows, best first
    top_logprobs: np.ndarray  # (T, TOP) their own log-probabilities
    entropy: np.ndarray  # (T,) nats, over the tokens decoding allows
    forbidden_logprobs: np.ndarray  # (T, F) own log-probabilities of the tokens decoding forbids
    chosen_rank: np.ndarray  # (T,) 1 = top (0: none)
    chosen_logprob: np.ndarray  # (T,) NaN: none


def output_record(steps: Sequence[Step], rows: Sequence[int], step: int) -> OutputRecord | None:
    """``OutputRecord`` of positions 0..step along ``rows``; None for steps recorded without it."""
    picked = [(steps[i], rows[i]) for i in range(step + 1)]
    if any(s.chosen_rank is None for s, _ in picked):
        return None
    return OutputRecord(
        *(
            np.stack([getattr(s, name)[r] for s, r in picked])
            for name in ("top_ids", "top_logprobs", "entropy", "forbidden_logprobs", "chosen_rank", "chosen_logprob")
        )
    )


def prefix_scores(
    Q: np.ndarray, K: np.ndarray, causal: bool = True, scaled: bool = True, bias: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Self-attention of a whole prefix from its queries (H, T, d_k) and keys (H, T, d_k), future included.

    A KV-cached step computes only the newest query row against the keys so far, so the future cells of the
    scores matrix never exist there; this computes them for display: ``scores`` = QKᵀ/√d_k (every cell; unscaled
    where ``scaled`` is false, plus ``bias``, T5's relative position bias (H, T, T), where given),
    ``mask`` (0, or −inf on the future), ``masked_scores`` and ``weights`` (softmax over the unmasked cells).
    """
    Q, K = np.asarray(Q, dtype=np.float32), np.asarray(K, dtype=np.float32)
    if Q.ndim != 3 or Q.shape != K.shape:
        raise ValueError(f"Q and K must both be (H, T, d_k), got {Q.shape} and {K.shape}")
    T, d_k = Q.shape[1], Q.shape[2]
    scores = Q @ K.transpose(0, 2, 1)  # (H, T, T)
    if scaled:  # T5 leaves its dot products unscaled
        scores = scores / np.float32(math.sqrt(d_k))
    if bias is not None:  # T5's relative position bias (H, T, T)
        scores = scores + np.asarray(bias, dtype=np.float32)
    future = np.triu(np.ones((T, T), dtype=bool), k=1) if causal else np.zeros((T, T), dtype=bool)
    mask = np.broadcast_to(np.where(future, -np.inf, 0.0).astype(np.float32), scores.shape)
    masked = scores + mask
    z = masked - masked.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return {
        "scores": scores,
        "mask": np.ascontiguousarray(mask),
        "masked_scores": masked,
        "weights": (e / e.sum(axis=-1, keepdims=True)).astype(np.float32),
    }


def heads_concat(arr: np.ndarray) -> np.ndarray:
    """(H, T, d_k) → (T, H·d_k): every head side by side (the matrix before the head split)."""
    H, T, d = arr.shape
    return arr.transpose(1, 0, 2).reshape(T, H * d)


def mean_weights(arr: np.ndarray) -> np.ndarray:
    """Mean over heads of attention weights (H, Tq, Tk), keeping −inf (masked) cells as −inf."""
    finite = np.isfinite(arr).all(axis=0)
    m = np.where(np.isfinite(arr), arr, 0).mean(axis=0)
    return np.where(finite, m, -np.inf).astype(np.float32)


def future_weight(weights: np.ndarray) -> float:
    """Attention weights (Tq, Tk) → the weight a position puts on later positions, averaged over positions (0 under
    the causal mask; what leaks to the future without it)."""
    return float(np.triu(weights, k=1).sum(axis=1).mean())


def top_k(probs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k most likely tokens of a distribution (V,), the most likely first, and their probabilities."""
    ids = np.argsort(-probs)[:k]
    return ids, probs[ids]


def sharpest_head(weights: np.ndarray) -> int:
    """The head (H, Tq, Tk) whose rows put the most weight on one key, on average (ties: the first)."""
    w = np.where(np.isfinite(weights), weights, 0)
    return int(np.argmax(w.max(axis=-1).mean(axis=-1)))


# ---------------------------------------------------------------------------
# Beam paths and following a hypothesis by identity.


def beam_path(beam_steps: Sequence[BeamStep], step: int, row: int) -> list[int]:
    """Rows of one hypothesis at steps 0..step (row ``row`` at ``step``), following parents back."""
    rows = [0] * (step + 1)
    rows[step] = row
    for t in range(step, 0, -1):
        parent = beam_steps[t].live[rows[t]].parent
        rows[t - 1] = parent if parent >= 0 else 0
    return rows


def path_rows(result: DecodeResult, step: int, row: int = 0) -> list[int]:
    if result.beam_steps is None:
        return [0] * (step + 1)
    return beam_path(result.beam_steps, step, row)


def live_rows(result: DecodeResult, step: int) -> list[int]:
    """Rows that hold a real hypothesis at this step (beam search starts with one)."""
    if result.beam_steps is None:
        return [0]
    return [r for r, h in enumerate(result.beam_steps[step].live) if h.logprob > IMPOSSIBLE]


@dataclass(frozen=True)
class Line:
    """One hypothesis followed from <s> to where it ended: what the step view walks through.

    ``ids``: its generated tokens (``</s>`` included when it finished); ``rows``: its row in the beam at positions
    0..``end``; position t reads ``inputs[t]`` and predicts ``predicts[t]`` with the model's probability
    ``probs[t]`` (the same number as that position's output distribution). ``how``: "finished" (predicted
    ``</s>`` at ``end``), "cut" (the maximum length stopped it), "pruned" (none of its continuations at ``end``
    kept a place: its best one ranked ``rank`` of ``of`` candidates) or "stopped" (still live when beam search
    stopped, since nothing left could beat the finished hypotheses). ``final_rank``: 1 for the translation shown
    as the result, 2, 3, … for the other final candidates, None for a line that is not among them.
    """

    ids: tuple[int, ...]
    rows: tuple[int, ...]
    inputs: tuple[int, ...]
    predicts: tuple[int, ...]
    probs: tuple[float, ...]
    how: str
    score: float | None = None
    final_rank: int | None = None
    rank: int | None = None
    of: int | None = None

    @property
    def end(self) -> int:
        return len(self.rows) - 1


def _prob(step, row: int, token: int, expansions=()) -> float:
    """The model's probability of ``token`` at one step and row, from what the decode recorded."""
    p = token_prob(step, row, token)
    if p is not None:
        return p
    if step.chosen_logprob is not None and int(step.chosen[row]) == token:
        return float(np.exp(step.chosen_logprob[row]))
    for e in expansions:  # beam candidates outside the recorded top (wide beams, forced tokens)
        if e.parent == row and e.token == token:
            return float(np.exp(e.token_logprob))
    return float("nan")


def _extends(ids: Sequence[int], prefix: tuple[int, ...]) -> bool:
    return tuple(ids[: len(prefix)]) == prefix


def follow_line(result: DecodeResult, eos_id: int, picked: Sequence[int] = ()) -> Line:
    """The line the step view follows for the hypothesis whose tokens were ``picked`` (() = the result).

    Identity is the token sequence, not a row number (rows are re-sorted at every step). A picked prefix is
    followed to its best outcome: the best final candidate that extends it; else the best hypothesis extending
    it that finished on the way and was later pushed out of the n-best pool; else its continuation that lived
    longest (best first), which was pruned or still live when the search stopped. A prefix that is in no
    hypothesis of the decode gives the result's line. Greedy and sampling have one line.
    """
    picked = tuple(int(i) for i in picked)
    start = int(result.steps[0].input_ids[0])
    best = result.n_best[0]
    if result.beam_steps is None:
        ids = tuple(int(i) for i in result.ids)
        return _line(result, ids, (0,) * len(ids), start, Ending(_how(ids, eos_id), best.score, 1))
    beams = result.beam_steps
    for rank, h in enumerate(result.n_best, 1):
        if h.logprob > IMPOSSIBLE and _extends(h.ids, picked):
            return _finished(result, tuple(h.ids), start, _how(h.ids, eos_id), h.score, rank)
    pooled = [h for bs in beams for h in bs.finished if h.logprob > IMPOSSIBLE and _extends(h.ids, picked)]
    if pooled:
        h = max(pooled, key=lambda h: h.score)
        return _finished(result, tuple(h.ids), start, _how(h.ids, eos_id), h.score, None)
    for t in range(len(beams) - 1, -1, -1):
        live = beams[t].live
        hits = [r for r in live_rows(result, t) if _extends(live[r].ids, picked)]
        if not hits:
            continue
        r = hits[0]  # rows are sorted best first
        rows = tuple(beam_path(beams, t, r))
        mine = [e for e in beams[t].expansions if e.parent == r]
        top_e = max(mine, key=lambda e: e.cum_logprob)
        ids = (*(int(i) for i in live[r].ids), int(top_e.token))
        if any(e.status == "kept" for e in mine):
            return _line(result, ids, rows, start, Ending("stopped"))
        cands = [e.cum_logprob for e in beams[t].expansions]
        rank = 1 + sum(c > top_e.cum_logprob for c in cands)
        return _line(result, ids, rows, start, Ending("pruned", rank=rank, of=len(cands)))
    return follow_line(result, eos_id)


def _how(ids: Sequence[int], eos_id: int) -> str:
    return "finished" if ids and int(ids[-1]) == eos_id else "cut"


def _finished(result: DecodeResult, ids: tuple[int, ...], start: int, how: str, score: float, rank) -> Line:
    """A hypothesis of the n-best pool: its last token was predicted at position len(ids) - 1."""
    e = len(ids) - 1
    if result.beam_steps is None:
        raise ValueError("an n-best hypothesis of a decode that is not beam search")
    live = result.beam_steps[e].live
    r = next(r for r in live_rows(result, e) if tuple(live[r].ids) == ids[:e])
    return _line(result, ids, tuple(beam_path(result.beam_steps, e, r)), start, Ending(how, score, rank))


@dataclass(frozen=True)
class Ending:
    """How a followed line ended: ``Line``'s last fields, which say so."""

    how: str
    score: float | None = None
    final_rank: int | None = None
    rank: int | None = None
    of: int | None = None


def _line(result, predicts, rows, start, end: Ending) -> Line:
    """``predicts``: the token predicted at each position of ``rows`` (a pruned line's last: its best candidate)."""
    n = len(rows)
    beams = result.beam_steps
    probs = tuple(_prob(result.steps[t], rows[t], predicts[t], beams[t].expansions if beams else ()) for t in range(n))
    ids = predicts[: n - 1] if end.how in ("pruned", "stopped") else predicts
    reads = (start, *predicts[: n - 1])
    return Line(
        tuple(ids), tuple(rows), reads, tuple(predicts), probs, end.how, end.score, end.final_rank, end.rank, end.of
    )


# ---------------------------------------------------------------------------
# Tokens along a line.


def token_prob(step: Step, row: int, token: int) -> float | None:
    """Probability of ``token`` at one step/row, if it is among the recorded top alternatives."""
    hits = np.nonzero(step.top_ids[row] == token)[0]
    return float(np.exp(step.top_logprobs[row][hits[0]])) if len(hits) else None


@dataclass(frozen=True)
class Chip:
    position: int  # the decoder position that produced the token (it is fed at position + 1)
    token_id: int
    prob: float | None
    forced: bool  # chosen by the user, not by the model


def chips(line: Line, step: int, user_forced: frozenset[int] = frozenset()) -> list[Chip]:
    """Tokens generated before ``step`` along a line (= the decoder inputs after <s>), with their probabilities.

    ``user_forced``: the positions whose token the user forced; the rest of a forced prefix is the model's own
    earlier choices, replayed, and is not marked.
    """
    return [Chip(i, line.predicts[i], line.probs[i], i in user_forced) for i in range(step)]


def mean_token_prob(result: DecodeResult, eos_id: int = -1, skip: Collection[int] = ()) -> float:
    """Geometric mean probability of the best output's tokens: exp(log p / length); ``skip``: positions left out,
    the tokens the user forced (the model did not choose them: a forced unlikely token is not the model's doubt),
    read on the output's line (``follow_line`` with ``eos_id``)."""
    h = result.n_best[0]
    if h.logprob <= IMPOSSIBLE:
        return 0.0
    if not skip:
        return math.exp(h.logprob / max(len(h.ids), 1))
    own = [p for t, p in enumerate(follow_line(result, eos_id).probs) if t not in skip and p is not None]
    return math.exp(sum(math.log(max(p, 1e-300)) for p in own) / len(own)) if own else 1.0


LOW_CONFIDENCE = 0.45  # bundled model: good translations score 0.64-0.87, garbled output 0.22-0.40; below: out of depth


def ended_by_length(result: DecodeResult, eos_id: int) -> bool:
    """The best output stopped at the length limit without producing </s>."""
    return not result.ids or result.ids[-1] != eos_id


# ---------------------------------------------------------------------------
# Summary.


def _flat(choices: dict) -> dict:
    """The choices with a nested ``DecodeOptions`` (``decode``) spread in place: what was decoded, not how
    (``record``, ``ablation`` and ``n_best`` are left out)."""
    out = {}
    for k, v in choices.items():
        if k == "decode":
            out.update({n: x for n, x in v.items() if n not in ("n_best", "record", "ablation")})
        else:
            out[k] = v
    return out


def summary_dict(
    choices: DataclassInstance,
    result: DecodeResult,
    token_text: Callable[[int], str],
    src_tokens: Sequence[str],
    step: int,
    extra: dict | None = None,
    user_forced: Collection[int] = (),
) -> dict:
    """A JSON-able summary of one decode (strict JSON: no NaN or infinity; an impossible log p is null). Each step:
    ``forced``, the user forced its token (``user_forced``, as the page's chips say); ``prefix``, the token was fed
    from the forced prefix (the model's own earlier choices before a forced one included); ``rows``, the beam's live
    rows at that step (a hypothesis that ended there is in ``n_best``, not among them)."""

    def num(x: float) -> float | None:
        return round(float(x), 6) if math.isfinite(x) and x > IMPOSSIBLE else None

    steps = []
    for s in result.steps:
        steps.append(
            {
                "position": s.position,
                "forced": s.position in user_forced,
                "prefix": bool(s.forced),
                "rows": [
                    {
                        "input": token_text(int(s.input_ids[r])),
                        "chosen": token_text(int(s.chosen[r])) if int(s.chosen[r]) >= 0 else None,
                        "entropy": num(s.entropy[r]),
                        "top": [
                            [token_text(int(i)), num(lp)] for i, lp in zip(s.top_ids[r][:5], s.top_logprobs[r][:5])
                        ],
                    }
                    for r in range(len(s.input_ids))
                ],
            }
        )
    return {
        "choices": {
            k: sorted(v) if isinstance(v, frozenset) else list(v) if isinstance(v, tuple) else v
            for k, v in _flat(asdict(choices)).items()
        },
        "source_tokens": list(src_tokens),
        "output_tokens": [token_text(i) for i in result.ids],
        "n_best": [
            {
                "tokens": [token_text(i) for i in h.ids],
                "logprob": num(h.logprob),
                "score": num(h.score),
                "finished": h.finished,
            }
            for h in result.n_best
        ],
        "current_step": step,
        "steps": steps,
        **(extra or {}),
    }
