"""The guided lesson's numbers: every chapter's "what to notice" sentence and every question's answer, computed from
a teacher-forced trace of the live model on the learner's sentence (and its greedy and beam decodes).

Numpy only, over recorded values: the page shows what this module returns. One decoder position, the *focus row*,
carries the lesson: the row (neither the first nor the one predicting ``</s>``, when there are others) whose
cross-attention is sharpest, so the alignment the lesson points at is a clear one. Self-attention is read in
decoder layer 0, head 0 (the figures say so); cross-attention in the layer whose alignment is sharpest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from model.core.config import ModelConfig
from model.core.keys import Records
from model.core.positions import position_labels
from model.decode.trace import Trace
from model.interpret.explain import lens_problem, lens_reads_final_norm
from model.lesson.lesson import EXAMPLE_SOURCE, Lesson

READ_S = 50  # reading time of one chapter, question included
CHECK_S = 60  # one five-question check
SELF_LAYER, SELF_HEAD = 0, 0  # the self-attention the chapters read
# the chapters in the lesson's order and their headings (the lesson's, and the teacher's dashboard's)
CHAPTER_TITLES = {
    "tokens": "The task: English tokens in, French tokens out",
    "embed": "Embeddings and positional encoding",
    "qkv": "Queries, keys and values",
    "scores": "Scaled scores: how well each query matches each key",
    "mask": "The causal mask: no peeking at the future",
    "softmax": "Softmax: scores become weights",
    "output_proj": "α·V and W_O: mixing the values",
    "addnorm": "Add & Norm: keep the input, rescale the sum",
    "cross": "Cross-attention: the bridge to the English sentence",
    "ffn": "The feed-forward network: one small network per position",
    "output": "The output: a probability for every token",
    "decoding": "Greedy decoding versus beam search",
    "lens": "What each layer would predict",
    "by_hand": "Check it by hand: 3-dimensional masked self-attention, every number recomputed",
}
CHAPTER_KEYS = tuple(CHAPTER_TITLES)
# the five ideas both checks ask about (``pre_<idea>``, ``post_<idea>``); each is taught by the chapter of that key
CHECK_CONCEPTS = ("tokens", "mask", "softmax", "cross", "decoding")
FFN_BANDS = ("less than a quarter", "a quarter to a half", "a half to three quarters", "more than three quarters")


@dataclass(frozen=True)
class Question:
    """Predict, then reveal: ``options[answer]`` is right; ``where`` names the cell of the figure that shows it and
    ``why`` the numbers that decide it."""

    key: str
    prompt: str
    options: tuple[str, ...]
    answer: int
    where: str
    why: str


@dataclass(frozen=True)
class Chapter:
    key: str
    title: str
    text: str  # 2–5 plain sentences
    equation: str  # LaTeX
    notice: str  # what to notice, with the model's numbers
    alt: str  # the figure's text alternative, one line read from the figure's data
    question: Question


@dataclass(frozen=True)
class Focus:
    """Where the chapters look: decoder row ``row`` (reads ``reads``, predicts ``predicts``), self-attention of
    (``SELF_LAYER``, ``SELF_HEAD``), cross-attention of layer ``cross_layer`` (mean of its heads)."""

    row: int
    reads: str
    predicts: str
    cross_layer: int


@dataclass(frozen=True)
class Mistake:
    """A step of the hand-sized example whose printed numbers do not follow from its formula."""

    key: str
    title: str
    computation: str
    arithmetic: bool  # the printed numbers do not follow from the step's formula (else: a mistake of set-up)


@dataclass(frozen=True)
class Learn:
    focus: Focus
    chapters: tuple[Chapter, ...]
    pre: tuple[Question, ...]  # the check before the chapters
    post: tuple[Question, ...]  # the check after them: the same concepts, other items
    mistakes: tuple[Mistake, ...]

    @property
    def minutes(self) -> int:
        """How long the lesson takes: chapters × reading time, plus both checks."""
        return round((len(self.chapters) * READ_S + 2 * CHECK_S) / 60)

    def chapter(self, key: str) -> Chapter:
        return next(c for c in self.chapters if c.key == key)


# ---------------------------------------------------------------------------
# Helpers.


def _shuffled(key: str, options: Sequence[str], right: str) -> tuple[tuple[str, ...], int]:
    """Distinct options in an order fixed by their text (never "the first is right"), and the right one's index."""
    seen = list(dict.fromkeys(options))
    order = sorted(seen, key=lambda o: hashlib.sha256(f"{key}\0{o}".encode()).hexdigest())
    return tuple(order), order.index(right)


def _ranked(key: str, values: np.ndarray, label: Callable[[int], str], n: int = 4) -> tuple[tuple[str, ...], int]:
    """Options naming the ``n`` largest finite ``values``, the largest right; shown in index order."""
    v = np.asarray(values, dtype=float)
    order = [int(i) for i in np.argsort(-np.where(np.isfinite(v), v, -np.inf), kind="stable") if np.isfinite(v[i])][:n]
    best = order[0]
    shown = sorted(order)
    return tuple(label(int(i)) for i in shown), shown.index(best)


def _numbers(values: Sequence[int]) -> tuple[tuple[str, ...], list[int]]:
    uniq = sorted(dict.fromkeys(int(v) for v in values if v >= 0))
    return tuple(str(v) for v in uniq), uniq


def sharpest_cross_layer(arrays: Records[np.ndarray], n_layers: int) -> int:
    """The decoder layer whose cross-attention (mean of heads) puts the most weight on one source token, on
    average over the rows."""
    peaks = [float(arrays.dec(i, "cross", "weights").mean(axis=0).max(axis=1).mean()) for i in range(n_layers)]
    return int(np.argmax(peaks))


def focus_row(cross: np.ndarray) -> int:
    """The row of the sharpest alignment in ``cross`` (T, S), among rows 1 … T−2 when there are any (row 0 reads
    only <s>; the last one predicts </s>)."""
    T = cross.shape[0]
    rows = list(range(1, T - 1)) if T >= 3 else list(range(T))
    return rows[int(np.argmax(cross[rows].max(axis=1)))]


def peek_of(weights: np.ndarray) -> tuple[int, int | None, float]:
    """Where unmasked self-attention ``weights`` (H, T, T) look hardest at the token a row must predict (row i,
    column i + 1): (head, row, weight); row None when there is no such cell (one position)."""
    H, T, _ = weights.shape
    if T < 2:
        return 0, None, 0.0
    ahead = weights[:, np.arange(T - 1), np.arange(1, T)]  # (H, T - 1)
    h, r = np.unravel_index(int(np.argmax(ahead)), ahead.shape)
    return int(h), int(r), float(ahead[h, r])


def other_rows(focus: int, T: int) -> tuple[int, int]:
    """Two rows for the checks, other than the focus row when the sentence has them: (before, after)."""
    rows = [r for r in range(1, T - 1) if r != focus] or [r for r in range(T) if r != focus] or [focus]
    return rows[0], rows[-1]


# ---------------------------------------------------------------------------
# The lesson.


@dataclass(frozen=True)
class Run:
    """What every chapter reads: the recorded values, the tokens as the figures show them, the focus row ``f``,
    the sharpest cross-attention layer ``cl`` (its mean of heads, ``cross``), and ``build``'s other arguments."""

    arrays: Records[np.ndarray]
    nomask: Records[np.ndarray]  # the arrays of the pass without the causal mask
    q: list[str]  # what each position reads
    p_: list[str]  # what each position predicts
    s_: list[str]  # the source tokens
    rows: list[str]  # each position's label, "reads → predicts"
    cl: int
    cross: np.ndarray  # (T, S)
    f: int
    activation: str
    lens_rank: np.ndarray | None  # None: the model has no lens (``no_lens`` says why)
    beam: Sequence[tuple[str, float]]
    beam_width: int
    greedy: tuple[str, float]
    label: Callable[[str], str]
    token_text: Callable[[int], str]
    scale_embedding: bool
    tie_output: bool
    example: Lesson
    h: int = SELF_HEAD
    no_lens: str | None = None
    lens_norm: bool = False  # the lens reads each layer through the final norm (a pre-norm model)

    @property
    def T(self) -> int:
        return len(self.q)

    @property
    def S(self) -> int:
        return len(self.s_)

    @property
    def fr(self) -> str:
        return f"row {self.f} ({self.rows[self.f]})"

    @property
    def Fr(self) -> str:
        return self.fr[0].upper() + self.fr[1:]

    def key_label(self, i: int) -> str:
        return f"‘{self.q[i]}’ (column {i})"


@dataclass(frozen=True)
class Outcomes:
    """What the lesson reads besides the teacher-forced traces: beam search's candidates as (text, score), the one
    it returns first, and its width; greedy decoding's translation and score (same length penalty); ``lens_rank``
    (L, T): the rank of each label after each layer (``explain.logit_lens``), None where the model has no lens."""

    beam: Sequence[tuple[str, float]]
    beam_width: int
    greedy: tuple[str, float]
    lens_rank: np.ndarray | None


def build(
    trace: Trace,
    nomask: Trace,
    cfg: ModelConfig,
    outcomes: Outcomes,
    example: Lesson,
    label: Callable[[str], str] = str,
    token_text: Callable[[int], str] = str,
    chapters: Sequence[Callable[[Run], Chapter]] | None = None,
) -> Learn:
    """Every chapter and question from the recorded values.

    ``trace`` / ``nomask``: the teacher-forced pass with and without the causal mask; ``cfg``: the model's (its
    equations depend on it); ``example``: the hand-sized worked example recomputed; ``label`` shows a token as the
    figures do, ``token_text`` names a token id; ``chapters``: the functions writing each chapter, in the lesson's
    order (``CHAPTERS`` unless given).
    """
    chapters = CHAPTERS if chapters is None else chapters
    arrays, reads, predicts, src = trace.arrays, trace.dec_input_tokens, trace.label_tokens, trace.src_tokens
    beam, greedy = outcomes.beam, outcomes.greedy
    q = [label(t) for t in reads]
    p_ = [label(t) for t in predicts]
    s_ = [label(t) for t in src]
    cl = sharpest_cross_layer(arrays, cfg.n_decoder_layers)
    cross = arrays.dec(cl, "cross", "weights").mean(axis=0)  # (T, S)
    f = focus_row(cross)
    r = Run(
        arrays,
        nomask.arrays,
        q,
        p_,
        s_,
        position_labels(q, p_),
        cl,
        cross,
        f,
        cfg.activation,
        outcomes.lens_rank,
        beam,
        outcomes.beam_width,
        greedy,
        label,
        token_text,
        cfg.scale_embedding,
        cfg.tie_output,
        example,
        no_lens=lens_problem(cfg) if outcomes.lens_rank is None else None,
        lens_norm=lens_reads_final_norm(cfg),
    )
    written = tuple(chapter(r) for chapter in chapters)
    assert len({c.key for c in written}) == len(written), "a chapter's key is its own"
    a_, b_ = other_rows(f, r.T)
    beam_text, beam_score = beam[0]
    return Learn(
        Focus(f, q[f], p_[f], cl),
        written,
        _pre(arrays, q, p_, s_, cross, a_, beam_text, greedy[0]),
        _post(arrays, q, p_, s_, cross, b_, (beam_text, beam_score), greedy),
        mistakes(example),
    )


# ---------------------------------------------------------------------------
# One function per chapter, in the lesson's order (the hand-sized example, last, is ``by_hand``).


def tokens_chapter(r: Run) -> Chapter:
    """The task, the tokens and teacher forcing."""
    arrays, T, S, q, p_, rows, f, Fr = r.arrays, r.T, r.S, r.q, r.p_, r.rows, r.f, r.Fr
    p_label = arrays.probs[np.arange(T), arrays.label_ids]
    loss = arrays.loss
    opts, right = _numbers((T, T - 1, T + 1, S))
    return Chapter(
        "tokens",
        CHAPTER_TITLES["tokens"],
        "The model reads an English sentence cut into subword tokens and writes French one token at a time. "
        "In training it is shown the right French sentence shifted one place to the right: position t reads the "
        "token before it (position 0 reads the start token <s>) and must predict the token at t. This is teacher "
        "forcing: every position is trained at once, each with the correct tokens before it. Here the model's own "
        "translation stands in for the reference.",
        r"\text{input} = (\langle s\rangle, y_1, \dots, y_n),\quad \text{labels} = (y_1, \dots, y_n, "
        r"\langle/s\rangle),\quad \mathcal{L} = -\tfrac{1}{T}\textstyle\sum_t \log p(y_t \mid y_{<t}, x)",
        f"The English side has {S} tokens and the French side {T - 1} plus </s>: the decoder reads {T} positions. "
        f"{Fr} reads ‘{q[f]}’ and gives the label ‘{p_[f]}’ probability {p_label[f]:.2f}; the mean "
        f"loss over the {T} positions is {loss.mean():.3f}.",
        f"Probability of each label: lowest {p_label.min():.2f} at position {int(np.argmin(p_label))} "
        f"({rows[int(np.argmin(p_label))]}), highest {p_label.max():.2f} at position {int(np.argmax(p_label))}.",
        Question(
            "tokens",
            "How many positions does the decoder read in one teacher-forced pass of this "
            "translation (count the columns of the figure)?",
            opts,
            right.index(T),
            f"the figure's columns: positions 0 … {T - 1}",
            f"{T - 1} French tokens + the start token <s> = {T} positions",
        ),
    )


def part_lengths(arrays: Records[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each position's length (vector norm) of the two parts of the decoder's input X, (T,) each: its token
    embedding (scaled as the model scales it) and its positional encoding."""
    return np.linalg.norm(arrays.embedding("dec", "embed"), axis=1), np.linalg.norm(
        arrays.embedding("dec", "pe"), axis=1
    )


def embed_chapter(r: Run) -> Chapter:
    """Embeddings and positional encoding."""
    arrays, f, fr, scale_embedding = r.arrays, r.f, r.fr, r.scale_embedding
    emb_lengths, pe_lengths = part_lengths(arrays)
    en, pn = float(emb_lengths[f]), float(pe_lengths[f])
    D = arrays.embedding("dec", "embed").shape[1]
    which = "the token embedding" if en > 1.01 * pn else "the positional encoding" if pn > 1.01 * en else "equal"
    scaled = "E[y]·√d_model" if scale_embedding else "E[y]"
    opts_e = (f"the token embedding {scaled}", "the positional encoding PE", "they are about equal")
    x = arrays.embedding("dec", "input")
    j = int(np.argmax(np.abs(x[f])))
    return Chapter(
        "embed",
        CHAPTER_TITLES["embed"],
        "Each token becomes a vector of d_model numbers, its embedding"
        + (", scaled by √d_model" if scale_embedding else "")
        + ". Attention itself does not know the order of the tokens, so a positional encoding of sines and "
        "cosines of the position is added. The decoder's input X is their sum: one row per position.",
        (r"X = E[y]\,\sqrt{d_{\text{model}}} + PE" if scale_embedding else r"X = E[y] + PE")
        + r",\quad PE_{(pos,2i)} = \sin\!\left(\tfrac{pos}{10000^{2i/d}}\right),"
        r"\ PE_{(pos,2i+1)} = \cos\!\left(\tfrac{pos}{10000^{2i/d}}\right)",
        f"At {fr} the embedding part has length {en:.1f} and the positional part {pn:.1f}. Every position's "
        f"encoding has the same length, √(d_model/2) = {np.sqrt(D / 2):.1f}, since sin² + cos² = 1 for "
        "each pair of dimensions.",
        f"Row {f} of X: largest value {x[f, j]:+.2f} at dimension {j}; X ranges from {x.min():.2f} to {x.max():.2f}.",
        Question(
            "embed",
            f"In {fr}, which part of X is longer (larger vector norm)?",
            opts_e,
            {"the token embedding": 0, "the positional encoding": 1, "equal": 2}[which],
            f"row {f} of the table of lengths under the figure",
            f"‖{scaled}‖ = {en:.2f}, ‖PE‖ = {pn:.2f}",
        ),
    )


def qkv_chapter(r: Run) -> Chapter:
    """Q, K, V."""
    arrays, T, f, fr, h = r.arrays, r.T, r.f, r.fr, r.h
    Q = arrays.dec(SELF_LAYER, "self", "Q")[h]
    d_k = Q.shape[1]
    D = arrays.embedding("dec", "input").shape[1]
    H = arrays.dec(SELF_LAYER, "self", "Q").shape[0]
    shape = f"{Q.shape[0]} × {Q.shape[1]}"
    opts_q, r_q = _shuffled("qkv", (shape, f"{T} × {D}", f"{d_k} × {T}", f"{T} × {T}"), shape)
    jq, jm = int(np.argmax(Q[f])), int(np.argmin(Q[f]))
    return Chapter(
        "qkv",
        CHAPTER_TITLES["qkv"],
        "Each position asks a question (its query q), offers a description of itself (its key k) and carries "
        "content (its value v). All three are X multiplied by learned matrices. The model does this in "
        f"{H} heads at once, each with its own matrices of d_k = d_model / heads = {d_k} columns.",
        r"Q = X W_Q,\quad K = X W_K,\quad V = X W_V,\qquad "
        r"W_Q, W_K, W_V \in \mathbb{R}^{d_{\text{model}} \times d_k}",
        f"In layer {SELF_LAYER}, head {h}, Q has one row per position and {d_k} columns; {fr}'s query values go "
        f"from {Q[f, jm]:+.2f} (column {jm}) to {Q[f, jq]:+.2f} (column {jq}), and the query's length is "
        f"{np.linalg.norm(Q[f]):.2f}.",
        f"Q of head {h}: {Q.shape[0]} rows × {Q.shape[1]} columns, values from {Q.min():.2f} to {Q.max():.2f}.",
        Question(
            "qkv",
            f"What shape is Q for one head (layer {SELF_LAYER}, head {h}) on this sentence (rows × columns)?",
            opts_q,
            r_q,
            "the figure's rows and columns",
            f"{T} positions × d_k = {D} / {H} = {d_k}",
        ),
    )


def scores_chapter(r: Run) -> Chapter:
    """Scaled scores."""
    arrays, T, q, f, fr, Fr, h = r.arrays, r.T, r.q, r.f, r.fr, r.Fr, r.h
    sc = arrays.dec(SELF_LAYER, "self", "scores")[h]  # (T, T), every cell
    d_k = arrays.dec(SELF_LAYER, "self", "Q").shape[2]
    key_label = r.key_label
    opts_s, r_s = _ranked("scores", sc[f], key_label)
    top = int(np.argmax(sc[f]))
    future = T - 1 - f
    return Chapter(
        "scores",
        CHAPTER_TITLES["scores"],
        "The score of row i and column j is the dot product of query i with key j, divided by √d_k so that the "
        "numbers stay in a range the softmax handles well. Every pair gets a score, the future included: "
        "the next chapter hides the future.",
        r"\text{scores} = \frac{Q K^{\top}}{\sqrt{d_k}}",
        f"Here √d_k = √{d_k} = {np.sqrt(d_k):.2f}. {Fr} scores highest {sc[f, top]:+.2f} at column "
        f"{top} (‘{q[top]}’); {future} of its {T} scores are for positions after it, which it must not use.",
        f"Raw scores, layer {SELF_LAYER}, head {h}: from {sc.min():.2f} to {sc.max():.2f}; row {f}'s largest is "
        f"{sc[f, top]:+.2f} at column {top}.",
        Question(
            "scores",
            f"Before the mask, which key does {fr} score highest?",
            opts_s,
            r_s,
            f"row {f}, column {top} of the figure",
            f"score {sc[f, top]:+.3f}, the largest of row {f}",
        ),
    )


def mask_chapter(r: Run) -> Chapter:
    """The causal mask, and the cheat without it."""
    arrays, nomask, T, f, fr, h, rows = r.arrays, r.nomask, r.T, r.f, r.fr, r.h, r.rows
    ms = arrays.dec(SELF_LAYER, "self", "masked_scores")[h]
    loss = arrays.loss
    n_inf = int(np.isinf(ms[f]).sum())
    opts_m, vals_m = _numbers((n_inf, f, T - f, T - 1))
    loss_on, loss_off = float(loss.mean()), float(nomask.loss.mean())
    leak = float(np.triu(nomask.dec(SELF_LAYER, "self", "weights").mean(axis=0), k=1).sum(axis=1).mean())
    ph, pr, peek = peek_of(nomask.dec(SELF_LAYER, "self", "weights"))
    moved = "rises" if loss_off > loss_on else "falls"
    why = (
        f": unmasked, the rows of layer {SELF_LAYER} put {leak:.0%} of their weight (mean of heads) on future "
        "positions, which this model, trained with the mask, never learned to read"
        if loss_off > loss_on
        else ""
    )
    peeked = (
        f"The clearest peek: in layer {SELF_LAYER}, head {ph}, row {pr} ({rows[pr]}) puts {peek:.2f} of its weight "
        f"on column {pr + 1}, the very token it must predict. "
        if pr is not None
        else ""
    )
    return Chapter(
        "mask",
        CHAPTER_TITLES["mask"],
        "In training the whole French sentence is there at once, so without a rule row i could look at the token "
        "it must predict, which sits in column i + 1. The causal mask adds −∞ to every score right of the "
        "diagonal; it is a fixed rule, not learned. At inference the future does not exist yet, so training with "
        "the mask matches what the model will face.",
        r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases},\qquad "
        r"\text{masked} = \frac{QK^{\top}}{\sqrt{d_k}} + M",
        f"With the mask the mean loss is {loss_on:.3f}; without it, on this model, the loss {moved} to "
        f"{loss_off:.3f}{why}. {peeked}This model was trained with the mask, so it never learned to copy; a model "
        "trained without it would learn to copy the next token, its training loss would collapse towards 0, and it "
        "would be useless at inference.",
        f"Masked scores: {int(np.isinf(ms).sum())} of {T * T} cells are −∞ (grey), all right of the diagonal; "
        f"row {f} keeps {f + 1} finite scores.",
        Question(
            "mask",
            f"How many cells of {fr} of the masked scores are −∞?",
            opts_m,
            vals_m.index(n_inf),
            f"row {f}: the grey cells right of the diagonal, columns {f + 1} … {T - 1}"
            if n_inf
            else f"row {f}: no grey cell (it is the last row)",
            f"{T} columns − {f + 1} allowed (columns 0 … {f}) = {n_inf}",
        ),
    )


def softmax_chapter(r: Run) -> Chapter:
    """Softmax weights."""
    arrays, T, q, f, fr, Fr, h = r.arrays, r.T, r.q, r.f, r.fr, r.Fr, r.h
    key_label = r.key_label
    w = arrays.dec(SELF_LAYER, "self", "weights")[h]
    opts_w, r_w = _ranked("softmax", np.where(np.arange(T) <= f, w[f], -np.inf), key_label)
    tw = int(np.argmax(w[f]))
    return Chapter(
        "softmax",
        CHAPTER_TITLES["softmax"],
        "The softmax turns each row of masked scores into weights between 0 and 1 that sum to 1. A score of −∞ "
        "becomes exactly 0, so the future gets no weight at all. A large score takes most of the weight.",
        r"\alpha = \operatorname{softmax}\!\left(\frac{Q K^{\top}}{\sqrt{d_k}} + M\right),\qquad "
        r"\alpha_{ij} = \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}",
        f"{Fr} puts {w[f, tw]:.2f} of its weight on column {tw} (‘{q[tw]}’); its {T} weights sum "
        f"to {w[f].sum():.3f}, and the {T - 1 - f} future ones are exactly {w[f, f + 1 :].max(initial=0):.0f}.",
        f"Attention weights, layer {SELF_LAYER}, head {h}: row {f}'s largest weight {w[f, tw]:.2f} at column {tw}; "
        f"row 0 puts {w[0, 0]:.2f} on itself.",
        Question(
            "softmax",
            f"Which token gets the most weight in {fr}: its own, or one before it?",
            opts_w,
            r_w,
            f"row {f}, column {tw} of the figure",
            f"weight {w[f, tw]:.3f}, the largest of row {f}",
        ),
    )


def row0_candidates(arrays: Records[np.ndarray], h: int) -> dict[str, np.ndarray]:
    """What row 0 of α·V (layer SELF_LAYER, head ``h``) might equal, each a (d_k,) row: the output chapter's
    options, and its figure's rows below α·V's row 0."""
    V = arrays.dec(SELF_LAYER, "self", "V")[h]  # (T, d_k)
    return {
        "row 0 of V": V[0],
        "the mean of V's rows": V.mean(axis=0),
        f"row {len(V) - 1} of V": V[len(V) - 1],
        "a row of zeros": np.zeros_like(V[0]),
    }


def output_proj_chapter(r: Run) -> Chapter:
    """α·V and W_O."""
    arrays, f, fr, h = r.arrays, r.f, r.fr, r.h
    H, _, d_k = arrays.dec(SELF_LAYER, "self", "Q").shape  # (H, T, d_k)
    w = arrays.dec(SELF_LAYER, "self", "weights")[h]
    ctx = arrays.dec(SELF_LAYER, "self", "context")[h]
    cand = row0_candidates(arrays, h)
    dist = {k: float(np.abs(ctx[0] - v).max()) for k, v in cand.items()}
    best = min(dist, key=dist.__getitem__)
    opts_o, r_o = _shuffled("output_proj", list(cand), best)
    out = arrays.dec(SELF_LAYER, "self", "out")
    return Chapter(
        "output_proj",
        CHAPTER_TITLES["output_proj"],
        "Each row's output is the weighted sum of the value rows, with the row's attention weights. The heads' "
        "outputs are put side by side and multiplied by W_O, which mixes them back into d_model numbers per "
        "position.",
        r"\text{head}_h = \alpha_h V_h,\qquad \text{MultiHead} = \operatorname{Concat}(\text{head}_1, \dots, "
        r"\text{head}_H)\, W_O",
        f"Row 0 can only see <s> (weight {w[0, 0]:.2f}), so its output is row 0 of V ({_gap(dist['row 0 of V'])}); "
        f"{fr} mixes {f + 1} value rows. {H} heads × {d_k} = {H * d_k} numbers per "
        f"row go into W_O and {out.shape[1]} come out.",
        f"Row 0 of α·V, layer {SELF_LAYER}, head {h}, above the {len(cand)} rows it might equal, {ctx.shape[1]} "
        f"dimensions each; against row 0 of V: {_gap(dist['row 0 of V'])}.",
        Question(
            "output_proj",
            f"Row 0 of α·V (layer {SELF_LAYER}, head {h}) equals…",
            opts_o,
            r_o,
            "the figure's first row against the rows under it",
            f"{best}: {_gap(dist[best])}",
        ),
    )


def addnorm_chapter(r: Run) -> Chapter:
    """Add & Norm."""
    arrays, rows, f, fr = r.arrays, r.rows, r.f, r.fr
    std = arrays.dec(SELF_LAYER, "norm1", "std")
    row_label = lambda i: f"row {i} ({rows[i]})"  # noqa: E731
    opts_n, r_n = _ranked("addnorm", std, row_label)
    big = int(np.argmax(std))
    mu = arrays.dec(SELF_LAYER, "norm1", "mean")
    return Chapter(
        "addnorm",
        CHAPTER_TITLES["addnorm"],
        "The sublayer's output is added to its own input (the residual connection), so nothing the input carried "
        "is lost. Layer normalisation then brings each row to mean 0 and standard deviation 1, position by "
        "position, and learned γ and β rescale each dimension.",
        r"\operatorname{LayerNorm}(x + \text{Sublayer}(x)) = \gamma \odot \frac{x + \text{Sublayer}(x) - \mu}"
        r"{\sigma} + \beta",
        f"Before normalising, {fr} has mean {mu[f]:+.3f} and standard deviation {std[f]:.3f}; the rows' σ go "
        f"from {std.min():.3f} to {std.max():.3f} and LayerNorm divides each row by its own σ.",
        f"Add & Norm 1, layer {SELF_LAYER}: largest σ {std[big]:.3f} at row {big}, smallest {std.min():.3f} at "
        f"row {int(np.argmin(std))}.",
        Question(
            "addnorm",
            f"Which row of x + Sublayer(x) (layer {SELF_LAYER}) has the largest standard "
            "deviation σ before it is normalised?",
            opts_n,
            r_n,
            f"row {big} of the figure's middle panel (std, in orange)",
            f"σ = {std[big]:.3f}",
        ),
    )


def cross_chapter(r: Run) -> Chapter:
    """Cross-attention."""
    T, S, p_, s_, cl, cross, f, fr = r.T, r.S, r.p_, r.s_, r.cl, r.cross, r.f, r.fr
    src_label = lambda i: f"‘{s_[i]}’ (column {i})"  # noqa: E731
    opts_c, r_c = _ranked("cross", cross[f], src_label)
    a = int(np.argmax(cross[f]))
    return Chapter(
        "cross",
        CHAPTER_TITLES["cross"],
        "This is where the decoder reads the source. Its queries come from the decoder's own rows, but the keys "
        "and values come from the encoder's output, one per English token. So each French position can look at "
        "any English token, the whole sentence, with no mask.",
        r"\operatorname{softmax}\!\left(\frac{Q_{\text{dec}} K_{\text{enc}}^{\top}}{\sqrt{d_k}}\right) "
        r"V_{\text{enc}}",
        f"In layer {cl} (its alignment is the sharpest), {fr}, predicting ‘{p_[f]}’, puts {cross[f, a]:.2f} of its "
        f"weight (mean of heads) on ‘{s_[a]}’.",
        f"Cross-attention, layer {cl}, mean of heads: {T} French rows × {S} English columns; row {f}'s largest "
        f"weight {cross[f, a]:.2f} at column {a} (‘{s_[a]}’).",
        Question(
            "cross",
            f"Which English token does the decoder attend to most while predicting ‘{p_[f]}’ ({fr})?",
            opts_c,
            r_c,
            f"row {f}, column {a} of the figure",
            f"weight {cross[f, a]:.3f}, the largest of row {f}",
        ),
    )


def ffn_chapter(r: Run) -> Chapter:
    """FFN."""
    arrays, f, fr, activation = r.arrays, r.f, r.fr, r.activation
    hid = arrays.dec(SELF_LAYER, "ffn", "hidden")
    relu = activation == "relu"
    share = float((hid[f] == 0).mean() if relu else (hid[f] < 0).mean())
    band = min(int(share * 4), 3)
    what = "exactly 0" if relu else "negative"
    return Chapter(
        "ffn",
        CHAPTER_TITLES["ffn"],
        f"After attention, every position goes alone through the same two-layer network: widen to d_ff = "
        f"{hid.shape[1]} units, apply the non-linearity ({activation}), narrow back to d_model. It does not mix "
        "positions; attention did that. Many hidden units are switched off for a given token.",
        r"\operatorname{FFN}(x) = \max(0,\, x W_1 + b_1)\, W_2 + b_2"
        if relu
        else r"\operatorname{FFN}(x) = \operatorname{GELU}(x W_1 + b_1)\, W_2 + b_2",
        f"In layer {SELF_LAYER}, {share:.0%} of {fr}'s {hid.shape[1]} hidden units are {what}; over all rows "
        f"{float((hid == 0).mean() if relu else (hid < 0).mean()):.0%}.",
        f"FFN hidden units, layer {SELF_LAYER}: {hid.shape[0]} rows × {hid.shape[1]} units; row {f} has "
        f"{int((hid[f] == 0).sum() if relu else (hid[f] < 0).sum())} {what}.",
        Question(
            "ffn",
            f"What share of {fr}'s hidden units are {what} after the {activation}?",
            FFN_BANDS,
            band,
            f"row {f} of the figure (white cells are 0)",
            f"{share:.1%} of {hid.shape[1]} units",
        ),
    )


def output_chapter(r: Run) -> Chapter:
    """The output distribution."""
    arrays, p_, f, fr, label, token_text, tie_output = r.arrays, r.p_, r.f, r.fr, r.label, r.token_text, r.tie_output
    probs = arrays.probs[f]
    top_ids = np.argsort(-probs, kind="stable")[:4]
    second = int(top_ids[1]) if len(top_ids) > 1 else int(top_ids[0])
    names = {int(i): f"‘{label(token_text(int(i)))}’" for i in top_ids}
    opts_p, r_p = _shuffled("output", [names[int(i)] for i in top_ids], names[second])
    ent = float(-(probs[probs > 0] * np.log(probs[probs > 0])).sum())
    return Chapter(
        "output",
        CHAPTER_TITLES["output"],
        "The last layer's row is multiplied by the output matrix ("
        + ("here the token embeddings, transposed" if tie_output else "a learned linear layer")
        + ") to get one score per vocabulary token, and a softmax turns the scores into probabilities. The "
        "entropy says how spread the distribution is: 0 when the model is certain.",
        (
            r"p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}(h_t W_E^{\top} + b),\qquad "
            if tie_output
            else r"p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}(h_t W_{\text{out}} + b),\qquad "
        )
        + r"H = -\textstyle\sum_v p_v \log p_v",
        f"At {fr} the label ‘{p_[f]}’ has probability {probs[int(arrays.label_ids[f])]:.1%}, the second "
        f"choice {names[second]} {probs[second]:.1%}, and the entropy is {ent:.2f} nats.",
        f"Top {len(top_ids)} at row {f}: " + ", ".join(f"{names[int(i)]} {probs[i]:.1%}" for i in top_ids) + ".",
        Question(
            "output",
            f"At {fr}, which token is the model's second choice?",
            opts_p,
            r_p,
            "the second bar from the top",
            f"p = {probs[second]:.1%}",
        ),
    )


def decoding_chapter(r: Run) -> Chapter:
    """Greedy decoding versus beam search."""
    beam, beam_width, greedy = r.beam, r.beam_width, r.greedy
    beam_text, beam_score = beam[0]
    g_text, g_score = greedy
    # candidates that differ by a final full stop alone read as one option twice: the best of such a pair is kept
    seen: dict[str, str] = {}
    for t, _ in beam:
        seen.setdefault(t.rstrip(" .!?"), t)
    cands = list(seen.values())[:4]
    if len(cands) < 2:
        cands.append(g_text if g_text not in cands else "(an empty translation)")
    opts_b, r_b = _shuffled("decoding", [_quote(c) for c in cands], _quote(beam_text))
    same = beam_text == g_text
    return Chapter(
        "decoding",
        CHAPTER_TITLES["decoding"],
        "At inference there is no reference: the decoder writes one token, reads it back, and writes the next, "
        "until </s>. Greedy decoding always takes the most likely token. Beam search keeps the "
        f"{beam_width} best partial translations at every step and returns the one with the best score "
        "(log-probability divided by length), which can start with a less likely token.",
        r"\text{score}(y) = \frac{1}{|y|^{\,lp}} \sum_t \log p(y_t \mid y_{<t}, x)",
        f"Greedy writes {_quote(g_text)} (score {g_score:.3f}); beam search of width {beam_width} returns "
        f"{_quote(beam_text)} (score {beam_score:.3f}): " + ("the same translation." if same else "a different one."),
        f"Beam tree, width {beam_width}: {len(beam)} finished candidates, the best {_quote(beam_text)} with score "
        f"{beam_score:.3f}.",
        Question(
            "decoding",
            "Which candidate does beam search return?",
            opts_b,
            r_b,
            "the path drawn in the tree to the best finished node, and the first candidate in the list under it",
            f"its score {beam_score:.3f} is the best of the {len(beam)}",
        ),
    )


def lens_chapter(r: Run) -> Chapter:
    """The logit lens; on a model whose layers the output head cannot read, why not, and no figure."""
    if r.lens_rank is None:
        return _no_lens_chapter(r.no_lens or "the output head cannot read this model's layers")
    p_, f, fr, lens_rank = r.p_, r.f, r.fr, r.lens_rank
    ranks = lens_rank[:, f]
    L = lens_rank.shape[0]
    first = next((int(layer) for layer in range(L) if ranks[layer] == 1), None)
    opts_l = tuple(f"after layer {layer}" for layer in range(L)) + ("at no layer",)
    r_l = L if first is None else first
    return Chapter(
        "lens",
        CHAPTER_TITLES["lens"],
        *_lens_idea(r.lens_norm),
        f"At {fr} the rank of ‘{p_[f]}’ after each layer is "
        + ", ".join(f"{int(r)}" for r in ranks)
        + " (1 = top); it "
        + (
            f"first becomes the top prediction after layer {first}."
            if first is not None
            else "never becomes the top prediction."
        ),
        f"Lens at {fr}, one row per layer, its likeliest tokens left to right: ‘{p_[f]}’ (outlined) ranks "
        + ", ".join(f"{int(r)}" for r in ranks)
        + f" after layers 0 to {L - 1}.",
        Question(
            "lens",
            f"After which layer does ‘{p_[f]}’ first become the top prediction at {fr}?",
            opts_l,
            r_l,
            "the figure's first row whose top (#1) cell is the outlined token",
            "ranks per layer: " + ", ".join(str(int(r)) for r in ranks),
        ),
    )


def _lens_idea(through_norm: bool) -> tuple[str, str]:
    """The lens chapter's text and equation: each layer read by the output head, through the final norm first on a
    model whose last layer is read that way (pre-norm)."""
    through, h = (
        ("the final norm and ", r"\operatorname{Norm}(h^{(\ell)}_t)") if through_norm else ("", r"h^{(\ell)}_t")
    )
    return (
        f"The logit lens sends every decoder layer's output through {through}the output head, as if decoding "
        "stopped there. It shows when the choice becomes clear across the layers. It does not show why: the "
        "earlier layers were never trained to be read this way.",
        r"p^{(\ell)} = \operatorname{softmax}\!\left(" + h + r" W_E^{\top} + b\right),\quad \ell = 0, \dots, L-1",
    )


def _no_lens_chapter(why: str) -> Chapter:
    """The lens chapter on a model that has no lens: the idea, why it cannot be read here, and a question on that."""
    return Chapter(
        "lens",
        CHAPTER_TITLES["lens"],
        *_lens_idea(False),
        "The loaded model has no lens to draw. The lens reads the paper's post-norm model, whose every layer ends "
        "in a LayerNorm, and a pre-norm model through its final norm: either way, a vector scaled as the output head "
        "expects.",
        "No figure: the loaded model's layers cannot be read by the output head.",
        Question(
            "lens",
            "Why does this chapter draw no lens for the loaded model?",
            ("The lens needs beam search", why[0].upper() + why[1:], "The decoder has no output head"),
            1,
            "the note at the top of the page, on how the loaded model differs",
            "With no norm between a layer and the head, a layer's output is on another scale than the one the "
            "output head was trained on, so its predictions would mean nothing.",
        ),
    )


def _quote(text: str) -> str:
    return f"“{text}”"


def _gap(d: float) -> str:
    """The largest difference of two vectors in words: "equal" rather than 0.0e+00."""
    return "equal in every dimension" if d == 0 else f"largest difference {d:.1e}"


def _cross_question(key: str, p_: Sequence[str], s_: Sequence[str], cross: np.ndarray, r: int) -> Question:
    """Which source token row ``r`` of the cross-attention ``cross`` (T, S) weighs most: asked before and after."""
    a = int(np.argmax(cross[r]))
    opts_c, r_c = _ranked(key, cross[r], lambda k: f"‘{s_[k]}’ (column {k})")
    return Question(
        key,
        f"While predicting ‘{p_[r]}’ (row {r}), which English token gets the most cross-attention?",
        opts_c,
        r_c,
        f"chapter 9, row {r}, column {a}",
        f"weight {cross[r, a]:.3f}",
    )


def _pre(arrays, q, p_, s_, cross, r: int, beam_text: str, g_text: str) -> tuple[Question, ...]:
    T = len(q)
    i, j = (0, 1) if T > 1 else (0, 0)
    cells = [(i, j), (j, i), (T - 1, T - 1), (T - 1, 0)]
    m = arrays.dec(SELF_LAYER, "self", "mask")[SELF_HEAD]
    inf = [c for c in cells if np.isinf(m[c])]
    cell_opts = [f"row {a}, column {b}" for a, b in dict.fromkeys(cells)] + ["none of these"]
    right = f"row {inf[0][0]}, column {inf[0][1]}" if inf else "none of these"
    w = arrays.dec(SELF_LAYER, "self", "weights")[SELF_HEAD]
    total = float(w[r].sum())
    sums = dict.fromkeys(("0", "1", str(r + 1), str(T)))
    right_sum = min(sums, key=lambda s: abs(float(s) - total))
    same = "yes" if beam_text == g_text else "no"
    return (
        Question(
            "pre_tokens",
            f"In training, decoder position {r} must predict ‘{p_[r]}’. Which token does it read?",
            *_shuffled("pre_tokens", [f"‘{q[r]}’", f"‘{p_[r]}’", "‘<s>’", "the whole French sentence"], f"‘{q[r]}’"),
            f"chapter 1, column {r}",
            f"the input is the French sentence shifted right: position {r} reads ‘{q[r]}’",
        ),
        Question(
            "pre_mask",
            f"Which of these cells of the {T} × {T} causal mask is −∞?",
            *_shuffled("pre_mask", cell_opts, right),
            "chapter 5: the cells right of the diagonal",
            "a cell is −∞ when its column is after its row",
        ),
        Question(
            "pre_softmax",
            f"What do the self-attention weights of row {r} add up to?",
            *_shuffled("pre_softmax", list(sums), right_sum),
            f"chapter 6, row {r}",
            f"row {r} sums to {total:.3f}",
        ),
        _cross_question("pre_cross", p_, s_, cross, r),
        Question(
            "pre_decoding",
            "For this sentence, does beam search return the same translation as greedy decoding?",
            ("yes", "no"),
            ("yes", "no").index(same),
            "chapter 12",
            f"greedy: {_quote(g_text)}; beam: {_quote(beam_text)}",
        ),
    )


def _post(arrays, q, p_, s_, cross, r: int, beam: tuple[str, float], greedy: tuple[str, float]):
    T = len(q)
    m = arrays.dec(SELF_LAYER, "self", "mask")[SELF_HEAD]
    n_inf = int(np.isinf(m).sum())
    opts_m, vals_m = _numbers((n_inf, T * (T + 1) // 2, T * T, T - 1))
    w00 = float(arrays.dec(SELF_LAYER, "self", "weights")[SELF_HEAD][0, 0])
    w_opts = {"1": 1.0, "0": 0.0, "0.5": 0.5, f"1/{T}": 1 / T}
    right_w = min(w_opts, key=lambda s: abs(w_opts[s] - w00))
    (bt, bs), (gt, gs) = beam, greedy
    higher = "they are the same translation" if bt == gt else "beam search's" if bs >= gs else "greedy's"
    return (
        Question(
            "post_tokens",
            f"In training, decoder position {r} reads ‘{q[r]}’. Which token must it predict?",
            *_shuffled("post_tokens", [f"‘{p_[r]}’", f"‘{q[r]}’", "‘</s>’", "any token it likes"], f"‘{p_[r]}’"),
            f"chapter 1, column {r}",
            f"the label of position {r} is the next French token, ‘{p_[r]}’",
        ),
        Question(
            "post_mask",
            f"How many cells of the {T} × {T} causal mask are −∞?",
            opts_m,
            vals_m.index(n_inf),
            "chapter 5: every cell right of the diagonal",
            f"T(T − 1)/2 = {n_inf}",
        ),
        Question(
            "post_softmax",
            "Row 0 reads only <s>. What self-attention weight does it put on <s>?",
            *_shuffled("post_softmax", list(w_opts), right_w),
            "chapter 6, row 0, column 0",
            f"α₀₀ = {w00:.3f}",
        ),
        _cross_question("post_cross", p_, s_, cross, r),
        Question(
            "post_decoding",
            "Which translation has the better score (log-probability per length)?",
            *_shuffled("post_decoding", ["beam search's", "greedy's", "they are the same translation"], higher),
            "chapter 12",
            f"beam {bs:.3f}, greedy {gs:.3f}",
        ),
    )


# ---------------------------------------------------------------------------
# The hand-sized example.


def mistakes(example: Lesson) -> tuple[Mistake, ...]:
    """The printed example's inconsistencies as mistakes to avoid, each with the computation that shows it."""
    out = []
    for key, text in example.findings:
        if key == "T_input":
            title = "Listing more tokens than there are embeddings"
        elif key == "PE":
            title = "A positional encoding that is not the paper's"
        elif key == "W_O":
            title = "Reusing W_Q as the output projection W_O"
        elif key in ("output", "projected"):
            title = "Carrying an earlier mistake forward"
        elif "transposed" in text:
            title = "Transposing the scores: K·Qᵀ is not Q·Kᵀ"
        elif "truncated" in text:
            title = "Truncating instead of rounding"
        else:
            title = f"{example.stage(key).title} that do not follow from the formula"
        out.append(Mistake(key, title, text, example.stage(key).matches is False))
    return tuple(out)


def by_hand_chapter(r: Run) -> Chapter:
    return by_hand(r.example)


def by_hand(example: Lesson) -> Chapter:
    w = example.stage("weights").ours
    first = next(s for s in example.stages if s.matches is False)
    checked = [s for s in example.stages if s.matches is not None]
    n_ok = sum(1 for s in checked if s.matches)
    opts, right = _shuffled(
        "by_hand", [s.title for s in checked if s.key in ("Q", "scores", "weights", "projected", "X")], first.title
    )
    r = 3
    top = int(np.argmax(w[r]))
    return Chapter(
        "by_hand",
        CHAPTER_TITLES["by_hand"],
        f"A worked example, published by {EXAMPLE_SOURCE}, runs masked self-attention with d_model = 3 and one "
        "head, small enough to check with a calculator. Every matrix below is recomputed from its inputs and "
        "compared with the printed one, cell by cell, to the printed precision. Where the printed numbers do not "
        "follow from the formulas, the computation shows which mistake produces them: they are common mistakes "
        "to avoid.",
        r"\alpha = \operatorname{softmax}\!\left(\frac{QK^{\top}}{\sqrt{3}} + M\right),\quad "
        r"\text{Output} = \alpha V,\quad \text{Final} = \text{Output}\,W_O",
        f"{n_ok} of the {len(checked)} computed steps match the printed numbers; the first that does not is "
        f"“{first.title}”. Row {r} of the recomputed weights puts {w[r, top]:.4f} on column {top}.",
        f"Recomputed attention weights, 10 × 10: row {r}'s largest weight {w[r, top]:.4f} at column {top}; "
        f"{int((w == 0).sum())} cells are exactly 0 (the future).",
        Question(
            "by_hand",
            "Which printed step is the first whose numbers do not follow from its formula applied to the printed "
            "numbers before it? (Mistakes of set-up, where the arithmetic holds, do not count.)",
            opts,
            right,
            "the first of the numbers that do not follow from their formula, in the list under the figure",
            first.note,
        ),
    )


# the chapters in the lesson's order, each written from the run (the hand-sized example last)
CHAPTERS: tuple[Callable[[Run], Chapter], ...] = (
    tokens_chapter,
    embed_chapter,
    qkv_chapter,
    scores_chapter,
    mask_chapter,
    softmax_chapter,
    output_proj_chapter,
    addnorm_chapter,
    cross_chapter,
    ffn_chapter,
    output_chapter,
    decoding_chapter,
    lens_chapter,
    by_hand_chapter,
)


__all__ = [
    "CHAPTERS",
    "CHAPTER_KEYS",
    "Chapter",
    "Focus",
    "Learn",
    "Mistake",
    "Outcomes",
    "Question",
    "Run",
    "build",
    "by_hand",
    "focus_row",
    "mistakes",
]
