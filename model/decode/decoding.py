"""Step-by-step decoding with a KV cache: one loop (``search``), whose policy is greedy, sampling or beam search.

Each step feeds one new query position per row, reuses the cached K, V of earlier positions and,
when ``record`` is set, returns that position's full per-stage record, its top tokens and (beam
search) every expansion considered. Without ``record`` only the translation and the n-best come back,
and none of that bookkeeping is paid for. The step function is ``lean.LeanDecoder`` (numpy: the decoder's
operations without PyTorch's per-operation overhead) or ``ModuleDecoder`` (the readable modules, same interface
and records). Greedy is a beam of one without the beam's bookkeeping; sampling is greedy drawing its token; a
batch of sources is greedy with one row each. Beam search follows transformers' ``generate()`` (same candidates,
EOS handling, length penalty and stopping rule) so the same request gives the same n-best in both.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from model.core import keys
from model.core.ablation import Ablation
from model.core.config import ModelConfig
from model.core.constants import BATCH_SIZE, MAX_BEAM, NEG
from model.core.tokenizer import Tokenizer
from model.core.transformer import LayerCache, Transformer, head_masks
from model.decode.lean import AnyArray, LeanCache, LeanDecoder

TOP = 20  # alternatives kept per step for display


@dataclass(frozen=True)
class DecodeOptions:
    strategy: str = "greedy"  # greedy | beam | sample
    beam: int = 5
    length_penalty: float = 1.0
    n_best: int | None = None  # beam candidates returned (default: all `beam`)
    temperature: float = 1.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    seed: int = 0
    max_len: int = 128  # new tokens, </s> included
    prefix: tuple[int, ...] = ()  # forced first tokens
    record: bool = False  # keep every step (stages, top tokens, beam expansions); off = translation only
    ablation: Ablation | None = None  # attention heads switched off for this decode

    def __post_init__(self):
        if self.strategy not in ("greedy", "beam", "sample"):
            raise ValueError(f"strategy must be greedy, beam or sample, not {self.strategy!r}")
        if not 1 <= self.beam <= MAX_BEAM:
            raise ValueError(f"beam width must be between 1 and {MAX_BEAM}, not {self.beam}")
        if self.max_len < 1:
            raise ValueError("max_len must be at least 1")
        if self.temperature < 0 or not math.isfinite(self.temperature):
            raise ValueError("temperature must be a finite number >= 0")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")
        if not 0.0 <= self.top_p <= 1.0:
            raise ValueError("top_p must be between 0 and 1")


@dataclass(frozen=True)
class Step:
    """One decoder position: what was fed, what came out, and (if recorded) every stage for it."""

    position: int  # index of the new query position; 0 is the decoder-start token
    input_ids: np.ndarray  # (R,) token fed at this position, one per row (beam)
    chosen: np.ndarray  # (R,) token appended after it (beam: the running hypothesis' next token)
    forced: bool  # the token came from the user's prefix, not the model
    top_ids: np.ndarray  # (R, TOP) most likely next tokens
    top_logprobs: np.ndarray  # (R, TOP)
    entropy: np.ndarray  # (R,) of the next-token distribution, in nats
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # per-stage record, leading axis R
    # the model's own distribution where decoding changed it (the logit lens reads its last layer from these):
    forbidden_logprobs: np.ndarray | None = None  # (R, F) log-probabilities of forbidden_ids(cfg) before suppress
    chosen_rank: np.ndarray | None = None  # (R,) rank of ``chosen`` among all V logits, 1 = top (0: none)
    chosen_logprob: np.ndarray | None = None  # (R,) its own log-probability (NaN: none)


@dataclass(frozen=True)
class Expansion:
    parent: int  # row of the live hypothesis it extends
    token: int
    token_logprob: float
    cum_logprob: float
    status: str  # kept | finished | pruned


@dataclass(frozen=True)
class Hypothesis:
    ids: tuple[int, ...]  # generated tokens (</s> included when it ended)
    logprob: float  # cumulative log-probability
    score: float  # logprob / len ** length_penalty
    parent: int = -1  # row at the previous step (beam search)
    finished: bool = False


@dataclass(frozen=True)
class BeamStep:
    position: int
    live: list[Hypothesis]  # the rows that were expanded at this step
    expansions: list[Expansion]  # each live row's top-`beam` continuations and their fate
    finished: list[Hypothesis]  # the n-best pool after this step


@dataclass(frozen=True)
class DecodeResult:
    src_ids: tuple[int, ...]
    ids: tuple[int, ...]  # best hypothesis (</s> included when it ended)
    steps: list[Step]
    n_best: list[Hypothesis]
    beam_steps: list[BeamStep] | None = None
    encoder: dict[str, np.ndarray] = field(default_factory=dict)


def to_numpy(rec: dict[str, torch.Tensor], drop: tuple[str, ...] = (keys.LOGITS,)) -> dict[str, np.ndarray]:
    """Read-only views on the CPU, not copies (some share memory with the KV cache or the PE table); a record made
    on another device is copied to the CPU."""
    out = {}
    for k, v in rec.items():
        if keys.parse(k).quantity not in drop:
            out[k] = (v if v.dtype == torch.float32 else v.float()).cpu().numpy()
            out[k].flags.writeable = False
    return out


def forbidden_ids(cfg: ModelConfig) -> list[int]:
    """Tokens decoding never generates: <pad> and the decoder-start token (transformers: bad_words_ids=[[pad]])."""
    return sorted({cfg.pad_id, cfg.decoder_start_id} - {cfg.eos_id})


def suppress(scores: np.ndarray, forbidden: list[int]) -> np.ndarray:
    """Set the forbidden tokens' scores (R, V) to −inf, in place."""
    scores[:, forbidden] = -np.inf
    return scores


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax of (R, V) logits over V, as torch's to float rounding. In numpy: between a step's numpy
    operations torch's call came out a little slower, one row or five."""
    z = logits - np.maximum.reduce(logits, -1, keepdims=True)
    z -= np.log(np.add.reduce(np.exp(z), -1, keepdims=True))
    return z


def own_view(
    logits: np.ndarray, logp: np.ndarray, held: np.ndarray, forbidden: list[int], chosen: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rank (1 = top, 0: none) and own log-probability (NaN: none) of each row's ``chosen`` token among the model's
    own logits (R, V), from the suppressed log-probabilities (R, V) and the forbidden tokens' own ones (R, F)."""
    rows = np.arange(len(chosen))
    c = np.where(chosen >= 0, chosen, 0)
    own = logp[rows, c].copy()
    for j, f in enumerate(forbidden):
        own = np.where(c == f, held[:, j], own)
    rank = np.count_nonzero(logits > logits[rows, c][:, None], 1) + 1  # ties share the better rank, as the lens counts
    return np.where(chosen >= 0, rank, 0), np.where(chosen >= 0, own, np.nan).astype(np.float32)


def step_summary(logp: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = min(TOP, logp.shape[-1])
    top_lp, top_ids = logp.topk(k, dim=-1)
    p = logp.exp()
    entropy = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)
    return top_ids.numpy(), top_lp.numpy(), entropy.numpy()


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Temperature, then top-k, then nucleus (top-p), in transformers' order. logits: (R, V)."""
    logits = logits / temperature
    if top_k > 0:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= top_p  # tokens after the nucleus is complete
        drop[..., 0] = False
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def output_limit(max_len: int, cfg: ModelConfig) -> int:
    """The most tokens a decode writes (</s> included): ``max_len`` within the model's positions (its first is
    the decoder's start token), the one number every decode and every report of one uses."""
    return min(max_len, cfg.max_len - 1)


def prepare_ids(body: Sequence[int], eos_id: int, max_len: int, first: int = -1) -> list[int]:
    """What a model of ``max_len`` positions reads for a token sequence: its first max_len − 1 tokens, then </s>.
    Sources are prepared so (and teacher-forced labels); the body was cut when the result, ``first`` left out, is
    not longer than it. ``first``: a token read before the body (``ModelConfig.source_prefix_id``, a source-language
    code: mBART-50, NLLB); -1: none."""
    head = [first] if first >= 0 else []
    return [*head, *body[: max(1, max_len - 1 - len(head))], eos_id]


def read_source(body: Sequence[int], cfg: ModelConfig) -> tuple[list[int], bool]:
    """What the model reads for a source's tokens, and whether the body was cut to fit: the source's language code
    first where the model has one (``cfg.source_prefix_id``: mBART-50, NLLB), then the body, then </s>. Every path
    that reads a source (the CLI, the pages, the corpus, the trace) prepares it here."""
    ids = prepare_ids(body, cfg.eos_id, cfg.max_len, cfg.source_prefix_id)
    return ids, len(ids) - (cfg.source_prefix_id >= 0) <= len(body)


def source_body(ids: Sequence[int], cfg: ModelConfig) -> list[int]:
    """``read_source``'s body back from the ids it gave: the language code and </s> left out (what
    ``teacher_forced_trace`` takes, reading it as ``read_source`` does)."""
    return [int(i) for i in ids[int(cfg.source_prefix_id >= 0) : -1]]


def length_batches(items: Sequence[Sized], batch_size: int) -> Iterator[list[int]]:
    """The indices of ``items`` in batches of ``batch_size``, shortest items first, so a batch carries little
    padding; outputs go back to input order by these indices."""
    order = sorted(range(len(items)), key=lambda i: len(items[i]))
    for b in range(0, len(order), max(1, batch_size)):
        yield order[b : b + batch_size]


# ---------------------------------------------------------------------------
# The step function: one new position per row. ``lean.LeanDecoder`` is the fast one; ``ModuleDecoder`` runs the
# readable modules (Transformer.decode on its KV cache) behind the same interface, as the reference.


@dataclass
class ModuleCache:
    """Transformer.decode's cache of each row, with what its first step reads."""

    memory: torch.Tensor  # (R, S, D): read by the first step (cross K, V), then held in ``layers``
    src_mask: torch.Tensor | None  # (R, 1, 1, S)
    heads: dict  # transformer.head_masks of the decode's ablation
    layers: list[LayerCache] | None = None  # None before the first step
    t: int = 0

    @property
    def rows(self) -> int:
        return self.memory.shape[0]

    def select(self, rows: np.ndarray | Sequence[int]) -> ModuleCache:
        idx = torch.as_tensor(np.asarray(rows), dtype=torch.long, device=self.memory.device)

        def pick(x: torch.Tensor) -> torch.Tensor:
            return x.index_select(0, idx)

        layers = None if self.layers is None else [LayerCache(*(pick(x) for x in c)) for c in self.layers]
        src_mask = None if self.src_mask is None else pick(self.src_mask)
        return ModuleCache(pick(self.memory), src_mask, self.heads, layers, self.t)


class ModuleDecoder:
    """``LeanDecoder``'s interface (``start``, ``step``) on the model's own modules: slower, and the reference the
    tests hold the fast step to; on a GPU, the step function (``step_decoder``), since the numpy step runs on the
    CPU alone."""

    def __init__(self, model: Transformer):
        self.model = model

    def encode(self, src_ids: AnyArray, ablation: Ablation | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        memory, src_mask, _ = self.model.encode(torch.as_tensor(src_ids), heads=head_masks(ablation, self.model.cfg))
        return memory, src_mask

    def start(self, memory: AnyArray, src_mask: AnyArray | None, ablation: Ablation | None = None) -> ModuleCache:
        """An empty cache for the rows of ``memory`` (R, S, D): the model's encoder output (or LeanDecoder.encode's)."""
        mask = None if src_mask is None else torch.as_tensor(src_mask)
        return ModuleCache(torch.as_tensor(memory), mask, head_masks(ablation, self.model.cfg))

    def step(
        self, tokens: np.ndarray | Sequence[int], cache: ModuleCache, record: bool = False
    ) -> tuple[np.ndarray, ModuleCache, dict[str, np.ndarray] | None]:
        ids = torch.as_tensor(np.asarray(tokens), dtype=torch.long)[:, None]  # (R, 1)
        if ids.shape[0] != cache.rows:
            raise ValueError(f"{ids.shape[0]} tokens for a cache of {cache.rows} rows")
        logits, layers, rec = self.model.decode(
            ids, cache.memory, cache.src_mask, cache.layers, record=record, heads=cache.heads
        )
        cache = ModuleCache(cache.memory, cache.src_mask, cache.heads, layers, cache.t + 1)
        return logits[:, 0].float().cpu().numpy(), cache, to_numpy(rec) if record else None


def step_decoder(model: Transformer, rows: int = 1) -> LeanDecoder | ModuleDecoder:
    """The step function for ``model``: the numpy LeanDecoder (``rows``: the rows it usually steps) where the weights
    are on the CPU, the model's own modules where they are on another device (a GPU), where numpy cannot read them."""
    return LeanDecoder(model, rows=rows) if model.device.type == "cpu" else ModuleDecoder(model)


# ---------------------------------------------------------------------------
# The decoding loop and its policies.


@torch.inference_mode()
def decode(
    model: Transformer,
    src_ids: Sequence[int] | np.ndarray,
    opts: DecodeOptions = DecodeOptions(),
    decoder: LeanDecoder | ModuleDecoder | None = None,
) -> DecodeResult:
    """Decode one source sentence (ids, </s> included) with the chosen strategy. ``decoder``: the encoder (untraced)
    and step function, the model's LeanDecoder built once per model by callers that decode many sentences (built
    here otherwise, ~30 ms), or a ModuleDecoder. Recorded, the encoder is the model's own, for its record."""
    src = np.array([list(src_ids)], dtype=np.int64)
    if src.shape[1] > model.cfg.max_len:
        raise ValueError(f"source has {src.shape[1]} tokens; this model takes at most {model.cfg.max_len}")
    beam = opts.strategy == "beam" and opts.beam > 1
    decoder = decoder or step_decoder(model, rows=opts.beam if beam else 1)
    if opts.record and isinstance(decoder, LeanDecoder) and decoder.fallback is not None:
        decoder = decoder.fallback  # a family whose steps the numpy step does not record: its modules do
    memory: AnyArray  # the model's own encoder's when recorded, the decoder's otherwise
    src_mask: AnyArray | None
    if opts.record:
        heads = head_masks(opts.ablation, model.cfg)
        memory, src_mask, enc = model.encode(torch.from_numpy(src), record=True, heads=heads)
        encoder = to_numpy(enc)
    else:
        (memory, src_mask), encoder = decoder.encode(src, opts.ablation), {}
    policy = beam_search(model.cfg, opts) if beam else greedy(model.cfg, opts)
    steps, (n_best, beam_steps) = search(
        decoder, decoder.start(memory, src_mask, opts.ablation), policy, model.cfg, opts
    )
    return DecodeResult(tuple(src[0].tolist()), n_best[0].ids, steps, n_best, beam_steps, encoder)


# a decoding policy (greedy, sampling, beam search): yields tokens, is sent each step's scores, returns its result
Policy = Generator[Any, Any, Any]


def search(
    decoder: LeanDecoder | ModuleDecoder,
    cache: LeanCache | ModuleCache,  # the decoder's own, from its start()
    policy: Policy,
    cfg: ModelConfig,
    opts: DecodeOptions,
) -> tuple[list[Step], tuple]:
    """The decoding loop. Each step feeds every row its newest token; the policy reads the log-probabilities and
    says which rows go on (a beam reorders them, greedy and sampling keep them: None) and the token each feeds next;
    the cache follows. Returns the recorded steps (``opts.record``) and what the policy returns when it is done.

    A policy is a generator: it yields the first tokens, then receives (t, logits, log-probabilities with the
    forbidden tokens suppressed (both (R, V) numpy arrays), forced token or None, the step's top tokens when
    recorded) and yields (rows, tokens, the token each row chose, done) until it is sent None."""
    max_len = output_limit(opts.max_len, cfg)
    forbidden = forbidden_ids(cfg)
    tokens = next(policy)
    if cache.rows != len(tokens):
        cache = cache.select(np.zeros(len(tokens), dtype=np.int64))
    steps = []
    for t in range(max_len):
        logits, cache, rec = decoder.step(tokens, cache, opts.record)  # type: ignore[arg-type]  # (R, V)
        logp = log_softmax(logits)
        held = logp[:, forbidden].copy() if opts.record else None  # (R, F) before suppress
        logp = suppress(logp, forbidden)
        forced_tok = opts.prefix[t] if t < len(opts.prefix) else None
        if forced_tok is None and t == 0 and cfg.forced_bos_id >= 0:  # the model's own first token (a language
            forced_tok = cfg.forced_bos_id  # code), as transformers forces it: the only token, log-probability 0
            logp[:] = -np.inf
            logp[:, forced_tok] = 0.0
        forced = forced_tok is not None
        summary = step_summary(torch.from_numpy(logp)) if opts.record else None
        rows, nxt, chosen, done = policy.send((t, logits, logp, forced_tok, summary))
        if opts.record:
            assert held is not None and summary is not None and rec is not None  # all made when recording
            rank, own = own_view(logits, logp, held, forbidden, chosen)
            steps.append(Step(t, np.array(tokens), chosen, forced, *summary, rec, held, rank, own))
        if done:
            break
        if rows is not None:
            cache = cache.select(rows)  # every row reads the same source: cross K, V are not copied
        tokens = nxt
    try:
        policy.send(None)
    except StopIteration as stop:
        return steps, stop.value
    raise RuntimeError("the decoding policy did not stop")


def greedy(cfg: ModelConfig, opts: DecodeOptions, rows: int = 1) -> Policy:
    """Greedy decoding (or sampling, ``opts.strategy == "sample"``) of ``rows`` independent rows, each its own
    source: the most likely token (or a drawn one), a row that produced </s> fed <pad> after it. Returns one
    Hypothesis per row."""
    sample = opts.strategy == "sample" and opts.temperature > 0
    gen = torch.Generator().manual_seed(opts.seed) if sample else None
    forbidden, every = forbidden_ids(cfg), np.arange(rows)
    out: list[list[int]] = [[] for _ in range(rows)]
    logprob = [0.0] * rows
    done = [False] * rows  # the rows' bookkeeping in Python: a few numpy calls a step, not a dozen
    step = yield np.full(rows, cfg.decoder_start_id)
    while step is not None:
        t, logits, logp, forced, _ = step
        if forced is not None:
            nxt = np.full(rows, forced)
        elif sample:
            suppressed = torch.from_numpy(suppress(logits.copy(), forbidden))
            filtered = filter_logits(suppressed, opts.temperature, opts.top_k, opts.top_p)
            nxt = torch.multinomial(filtered.softmax(-1), 1, generator=gen)[:, 0].numpy()
        else:
            nxt = logp.argmax(-1)
        tokens, lp = nxt.tolist(), logp[every, nxt].tolist()
        for r in range(rows):
            if done[r]:
                tokens[r] = cfg.pad_id
            else:
                out[r].append(tokens[r])
                logprob[r] += lp[r]
                done[r] = tokens[r] == cfg.eos_id
        nxt = np.array(tokens)
        step = yield None, nxt, nxt, all(done)
    hyps = [
        Hypothesis(tuple(o), lp_, lp_ / max(len(o), 1) ** opts.length_penalty, finished=bool(o) and o[-1] == cfg.eos_id)
        for o, lp_ in zip(out, logprob)
    ]
    return hyps, None


def top(x: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n largest, largest first (ties: lower index first)."""
    return np.argsort(-x, kind="stable")[:n]


# Long on purpose: one generator whose steps follow transformers' beam search line by line (candidates, EOS
# handling, length penalty, the stopping rule), so the two can be read side by side.
def beam_search(cfg: ModelConfig, opts: DecodeOptions) -> Policy:
    """transformers' vectorised beam search (batch of one). The bookkeeping of the 2k candidates is numpy float32,
    as transformers' is torch float32: the same numbers, a few microseconds per operation rather than several.
    Returns the n-best and, recorded, every step's BeamStep."""
    from model.decode import fused  # numba (~0.25 s): imported by the first beam search, not by every import of this

    k, lp = opts.beam, opts.length_penalty
    max_len = output_limit(opts.max_len, cfg)
    n_return = min(opts.n_best or k, k)
    f32 = np.float32
    seqs: list[list[int]] = [[] for _ in range(k)]  # running hypotheses, generated tokens only
    parents = [-1] * k
    running = np.full(k, NEG, f32)
    running[0] = 0.0
    fin_scores = np.full(k, NEG, f32)  # the n-best pool, as in transformers
    fin_logprobs = [NEG] * k
    fin_seqs: list[list[int]] = [[] for _ in range(k)]
    fin_done = np.zeros(k, dtype=bool)
    unsatisfied = True
    first_k = np.arange(2 * k) < k
    beam_steps: list[BeamStep] = []
    # the k rows start identical: unrecorded, one is computed and repeated (the record shows every row)
    step = yield np.full(k if opts.record else 1, cfg.decoder_start_id)
    while step is not None:
        t, logits, logp, forced_tok, summary = step
        R, V = logp.shape
        if R < k:
            logp = np.broadcast_to(logp, (k, V))
        if forced_tok is not None:
            cand_lp = np.concatenate([logp[:, forced_tok] + running, np.full(k, NEG * 2, f32)])
            cand_rows = np.concatenate([np.arange(k), np.zeros(k, dtype=np.int64)])
            cand_tok = np.full(2 * k, forced_tok)
        else:
            cand_lp, cand_rows, cand_tok = fused.best_continuations(logp, running, 2 * k)
        hits = (cand_tok == cfg.eos_id) | (t + 1 >= max_len)  # (2k,)
        # next running beams: best k candidates that did not just finish
        open_lp = cand_lp + hits.astype(f32) * NEG  # (2k,)
        keep = top(open_lp, k)
        # candidates that finished inside the top k go to the n-best pool
        just_done = hits & first_k
        rows_l, tok_l = cand_rows.tolist(), cand_tok.tolist()
        # none did, and the pool holds nothing below NEG: every other candidate scores NEG or less (log-probabilities
        # are <= 0), so the pool, sorted and first among ties, stays as it is: most steps
        if just_done.any() or fin_scores[-1] < NEG:
            fin_cand = cand_lp / (t + 1) ** lp
            fin_cand = fin_cand + (0.0 if unsatisfied else NEG) + (~just_done).astype(f32) * NEG
            merged = np.concatenate([fin_scores, fin_cand])
            best_l = top(merged, k).tolist()
            all_seqs = fin_seqs + [seqs[r] + [tok] for r, tok in zip(rows_l, tok_l)]
            all_lp = fin_logprobs + cand_lp.tolist()
            all_done = np.concatenate([fin_done, just_done])
            fin_scores, fin_done = merged[best_l], all_done[best_l]
            fin_seqs = [all_seqs[i] for i in best_l]
            fin_logprobs = [all_lp[i] for i in best_l]
        else:
            best_l, all_done = list(range(k)), None
        rows, next_tok = cand_rows[keep], cand_tok[keep]
        rows_k, next_k = rows.tolist(), next_tok.tolist()
        chosen = None
        if opts.record:
            live = [
                Hypothesis(tuple(seqs[r]), float(running[r]), float(running[r]) / max(t, 1) ** lp, parents[r])
                for r in range(k)
            ]
            top_ids, top_lp, _ = summary
            beam_steps.append(
                beam_step_record(
                    t,
                    live,
                    (top_ids, top_lp),
                    logp,
                    running,
                    Candidates(rows_l, tok_l, cand_lp, keep, best_l, all_done),
                    Pool(fin_seqs, fin_logprobs, fin_scores, fin_done),
                )
            )
            chosen = np.full(k, -1)  # first surviving continuation of each row, -1 if it died
            for r, tok in reversed(list(zip(rows_k, next_k))):
                chosen[r] = tok
        seqs = [seqs[r] + [tok] for r, tok in zip(rows_k, next_k)]
        parents = rows_k
        running = open_lp[keep]
        # transformers' stopping rule (early_stopping=False)
        if unsatisfied:
            best_possible = running[0] / (t + 1) ** lp
            worst = np.where(fin_done, fin_scores.min(), f32(NEG))
            unsatisfied = bool((best_possible > worst).any())
        done = not unsatisfied or bool(hits.all())
        step = yield (rows if R == k else np.zeros_like(rows)), next_tok, chosen, done
    n_best = [
        Hypothesis(tuple(s), float(lp_), float(sc), finished=bool(d))
        for s, lp_, sc, d in zip(fin_seqs, fin_logprobs, fin_scores, fin_done)
    ][:n_return]
    return n_best, beam_steps if opts.record else None


@dataclass(frozen=True)
class Candidates:
    """One beam step's 2k candidates: the row each continues, its token and cumulative log-prob; the k the beam
    keeps (``keep``); where the merge into the n-best pool put them (``best``: indices into pool + candidates,
    ``done``: which of those are finished; None when no candidate finished and the pool stayed as it was)."""

    rows: list[int]
    tokens: list[int]
    logprob: np.ndarray  # (2k,)
    keep: np.ndarray  # (k,)
    best: list[int]
    done: np.ndarray | None


@dataclass(frozen=True)
class Pool:
    """The n-best pool after a step: its sequences, their log-probs and scores, and which hold a finished one."""

    seqs: list[list[int]]
    logprobs: list[float]
    scores: np.ndarray  # (k,)
    done: np.ndarray  # (k,) bool


def beam_step_record(
    t: int,
    live: list[Hypothesis],
    summary: tuple[np.ndarray, np.ndarray],
    logp: np.ndarray,
    running: np.ndarray,
    cands: Candidates,
    pool: Pool,
) -> BeamStep:
    """What the beam view shows for step t: each live row's top-k continuations and their fate. ``summary``: the
    step's recorded top ids and log-probs per row; ``logp`` (k, V) its log-probs; ``running`` (k,) the rows'
    cumulative log-probs before it."""
    k = len(live)
    top_ids, top_lp = summary
    rows_l, tok_l, best_l, all_done = cands.rows, cands.tokens, cands.best, cands.done
    if top_ids.shape[1] < min(k, logp.shape[-1]):  # the display summary keeps TOP; wide beams need more
        lp_k, ids_k = torch.from_numpy(np.ascontiguousarray(logp)).topk(min(k, logp.shape[-1]), dim=-1)
        top_ids, top_lp = ids_k.numpy(), lp_k.numpy()
    top_ids, top_lp = top_ids[:, :k].tolist(), top_lp[:, :k].tolist()  # plain Python: ~25 items per step
    run, cand = running.tolist(), cands.logprob.tolist()
    kept = set(cands.keep.tolist())
    finished = {i - k for i in best_l if i >= k and all_done is not None and all_done[i]}
    alive = [i for i in range(2 * k) if cand[i] > NEG / 2]
    status = {
        (rows_l[i], tok_l[i]): ("finished" if i in finished else "kept" if i in kept else "pruned") for i in alive
    }
    expansions = [
        Expansion(r, tok, lp_, lp_ + run[r], status.get((r, tok), "pruned"))
        for r in range(k)
        if run[r] > NEG / 2
        for tok, lp_ in zip(top_ids[r], top_lp[r])
    ]
    shown = {(e.parent, e.token) for e in expansions}
    for i in alive:  # candidates outside a row's top-k (forced tokens) are shown too
        r, tok = rows_l[i], tok_l[i]
        if (r, tok) not in shown:
            expansions.append(Expansion(r, tok, float(logp[r, tok]), cand[i], status[(r, tok)]))
    finals = [
        Hypothesis(tuple(s), float(lp_), float(sc), finished=bool(d))
        for s, lp_, sc, d in zip(pool.seqs, pool.logprobs, pool.scores, pool.done)
        if d
    ]
    return BeamStep(t, live, expansions, finals)


BEAM_ROWS = 160  # rows of one batched beam step (sentences × beam width): 0.9 ms of CPU a sentence's step, as 320


def batch_beams(opts: DecodeOptions, decoder: LeanDecoder | None) -> bool:
    """Whether ``beam_batch`` searches several sources at once for ``opts``: a plain beam search (no forced prefix,
    no record, no ablated heads) stepped by a LeanDecoder that covers the model."""
    plain = opts.strategy == "beam" and opts.beam > 1 and not opts.prefix and not opts.record
    return plain and opts.ablation is None and isinstance(decoder, LeanDecoder) and decoder.fallback is None


@torch.inference_mode()
def beam_batch(
    model: Transformer, src_batch: list[list[int]], opts: DecodeOptions, decoder: LeanDecoder | None = None
) -> list[list[Hypothesis]]:
    """Beam search of several sources (ids, </s> included) at once: each source's k rows side by side in one step,
    each searched by its own ``beam_search`` policy on its rows' scores, as ``decode`` searches it alone (the same
    candidates, </s> handling, length penalty and stopping rule); a source whose search is done leaves the batch.
    Returns each source's n-best. Other decodings (``batch_beams``) decode one source at a time. ``decoder``: a
    LeanDecoder with ``compiled_steps`` off (built here if not given), whose BLAS products suit many rows."""
    decoder = decoder or LeanDecoder(model, rows=BEAM_ROWS, compiled_steps=False)
    if not batch_beams(opts, decoder):
        return [decode(model, s, opts, decoder).n_best for s in src_batch]
    cfg, k = model.cfg, opts.beam
    src = np.full((len(src_batch), max(len(s) for s in src_batch)), cfg.pad_id, dtype=np.int64)
    for i, s in enumerate(src_batch):
        src[i, : len(s)] = s
    cache = decoder.start(*decoder.encode(src)).select(np.repeat(np.arange(len(src_batch)), k))
    policies = [beam_search(cfg, opts) for _ in src_batch]
    for p in policies:
        next(p)  # its first tokens: the decoder's start token, which every row is fed below
    live = list(range(len(src_batch)))  # the sources still searched, in the order of their rows
    n_best: list[list[Hypothesis]] = [[] for _ in src_batch]
    tokens, forbidden = np.full(len(src_batch) * k, cfg.decoder_start_id), forbidden_ids(cfg)
    for t in range(output_limit(opts.max_len, cfg)):
        logits, cache, _ = decoder.step(tokens, cache)  # (R, V)
        logp = suppress(log_softmax(logits), forbidden)
        forced = cfg.forced_bos_id if t == 0 and cfg.forced_bos_id >= 0 else None
        if forced is not None:  # as ``search`` forces the model's own first token
            logp[:] = -np.inf
            logp[:, forced] = 0.0
        rows, kept = np.arange(len(tokens)), []
        for j, b in enumerate(live):
            own = slice(j * k, (j + 1) * k)
            r, tokens[own], _, done = policies[b].send((t, logits[own], logp[own], forced, None))
            rows[own] = r + j * k
            if done:
                n_best[b] = finish(policies[b])
            else:
                kept.append(j)
        if len(kept) == len(live):
            cache = cache.reorder(rows)
        elif kept:  # the finished sources' rows leave: a copy of the rest
            at = np.concatenate([np.arange(j * k, (j + 1) * k) for j in kept])  # their rows' places
            cache, tokens = cache.shrink(rows[at]), tokens[at]
        live = [live[j] for j in kept]
        if not live:
            break
    for b in live:  # searches still open at max_len (none: its last step finishes every hypothesis)
        n_best[b] = finish(policies[b])
    return n_best


def finish(policy: Policy) -> list[Hypothesis]:
    """The n-best a beam search policy returns when it is sent None."""
    try:
        policy.send(None)
    except StopIteration as stop:
        return stop.value[0]
    raise RuntimeError("the decoding policy did not stop")


@torch.inference_mode()
def greedy_batch(
    model: Transformer,
    src_batch: list[list[int]],
    max_len: int = DecodeOptions.max_len,
    decoder: LeanDecoder | ModuleDecoder | None = None,
) -> list[list[int]]:
    """Greedy decoding of several sources (ids, </s> included) at once, one row each: the same loop and policy as
    ``decode``'s greedy. Returns the generated ids. ``decoder``: the model's LeanDecoder, built here if not given."""
    cfg = model.cfg
    S = max(len(s) for s in src_batch)
    src = np.full((len(src_batch), S), cfg.pad_id, dtype=np.int64)
    for i, s in enumerate(src_batch):
        src[i, : len(s)] = s
    if max_len < 1:
        return [[] for _ in src_batch]
    decoder = decoder or step_decoder(model, rows=len(src_batch))
    memory, src_mask = decoder.encode(src)
    opts = DecodeOptions(max_len=max_len)
    _, (hyps, _) = search(decoder, decoder.start(memory, src_mask), greedy(cfg, opts, len(src_batch)), cfg, opts)
    return [list(h.ids) for h in hyps]


def translate_batch(
    model: Transformer,
    tokenizer: Tokenizer,
    texts: list[str],
    beam: int = 1,
    max_len: int = DecodeOptions.max_len,
    batch_size: int = BATCH_SIZE,
    lean: LeanDecoder | ModuleDecoder | None = None,
    length_penalty: float = DecodeOptions.length_penalty,
) -> list[str]:
    """Translate sentences: batched greedy when beam == 1 (shortest first, ``batch_size`` a batch), beam search per
    sentence otherwise (``length_penalty`` as DecodeOptions')."""
    cfg = model.cfg
    lean = lean or step_decoder(model, rows=beam if beam > 1 else min(batch_size, len(texts)))
    srcs = [read_source(tokenizer.encode(t), cfg)[0] for t in texts]
    if beam <= 1:
        ids: list[list[int]] = [[] for _ in srcs]
        for chunk in length_batches(srcs, batch_size):
            for i, out in zip(chunk, greedy_batch(model, [srcs[i] for i in chunk], max_len, lean)):
                ids[i] = out
    else:
        opts = DecodeOptions(strategy="beam", beam=beam, max_len=max_len, length_penalty=length_penalty)
        ids = [list(decode(model, s, opts, lean).ids) for s in srcs]
    return [tokenizer.decode(i) for i in ids]


def translate_corpus(
    model: Transformer,
    tokenizer: Tokenizer,
    texts: list[str],
    beam: int = 1,
    batch_size: int = BATCH_SIZE,
    length_penalty: float = DecodeOptions.length_penalty,
) -> list[str]:
    """Translate many sentences as the app and the CLI would with their default limits (``DecodeOptions``),
    shortest first in batches of ``batch_size`` (greedy), output in input order. This is the one path that
    ``benchmarks/bleu.py`` scores and that training validates with, so a checkpoint is chosen by the decoding
    that ships. The model is put in eval mode for the call (training mode comes back after)."""
    was_training = model.training
    model.eval()
    try:
        return translate_batch(model, tokenizer, texts, beam=beam, batch_size=batch_size, length_penalty=length_penalty)
    finally:
        model.train(was_training)
