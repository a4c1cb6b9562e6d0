"""The chapter registry: every chapter of the Learn page, in the lesson's order, each declared once: what writes it
(its title, words, question and what to notice, from the model's numbers: ``model.lesson.learn``), the stages it
teaches (``views.stages``: the page links to them in Explore), its figure (its stage's own figure builder, on the
lesson's teacher-forced run at the chapter's layer and head) and what it adds under the figure. A new chapter is
its writer and one line here.

A chapter's figure and additions read a ``Reading``: the lesson's run as a ``StageContext``, None without a model
(only the hand-sized worked example needs none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import streamlit as st

from model.decode.decoding import DecodeResult
from model.decode.trace import Trace
from model.interpret.explain import LogitLens
from model.io.checkpoint import LoadedModel
from model.lesson import learn as lesson
from model.lesson.learn import SELF_HEAD, SELF_LAYER, Learn, Run, mistakes
from model.lesson.lesson import EXAMPLE_TOKENS, Lesson, build_lesson, causal_mask
from viz.decoding import TreeOptions

from .common import md, token_texter
from .plot import Drawing
from .plot import builders as viz  # viz, its figures built on first use (cached)
from .stages import add_norm, beam, cross_attention, ffn, inputs, lens, output, self_attention
from .stages.context import StageContext, TeacherForced
from .state import DEFAULTS, MEAN_HEADS, Source, View

MISTAKE_KINDS = (  # the worked example's mistakes, in two lists: (Mistake.arithmetic, the list's heading)
    (True, "Numbers that do not follow from their formula, in the order of the steps"),
    (False, "Mistakes of set-up: the arithmetic holds, the choice is wrong"),
)


@st.cache_resource(show_spinner=False)
def worked_example() -> Lesson:
    return build_lesson()


@dataclass(frozen=True)
class LessonRun:
    """The runs the lesson reads on the learner's sentence: the teacher-forced trace of the greedy translation
    (``trace``; ``nomask``: the same without the causal mask), the beam search decode, the logit lens (None where
    the model has no lens) and the cache key (model, source ids, decode length) that names them."""

    lm: LoadedModel
    src: Source
    trace: Trace
    nomask: Trace
    beam: DecodeResult
    lens: LogitLens | None
    key: tuple[str, tuple[int, ...], int]

    @property
    def max_len(self) -> int:
        return self.key[2]

    def text(self, ids: Sequence[int] | np.ndarray) -> str:
        """A decoded candidate as text, without its </s>."""
        return self.lm.tokenizer.decode([int(i) for i in ids if i != self.lm.cfg.eos_id])


@dataclass(frozen=True)
class Reading:
    """What a chapter's figure reads: the lesson's teacher-forced run as a stage sees it (``ctx``, at the focus row,
    in the chapter's layer and head), the lesson and its runs."""

    ctx: StageContext
    learn: Learn
    run: LessonRun


Figure = Callable[[Reading | None], Drawing | None]
Below = Callable[[Reading | None], None]


@dataclass(frozen=True)
class Chapter:
    """``write``: the model's function writing the chapter from the lesson's run (its key, title, words, question,
    what to notice). ``stages``: the ids of the stages it teaches. ``figure``: the chapter's figure, a stage's
    builder (None without a figure). ``cross``: the figure reads the sharpest cross-attention layer (the mean of its
    heads) rather than self-attention's (``SELF_LAYER``, ``SELF_HEAD``). ``below``: what the chapter shows under its
    figure."""

    write: Callable[[Run], lesson.Chapter]
    figure: Figure
    stages: tuple[str, ...] = ()
    cross: bool = False
    below: Below | None = None

    def reading(self, learn: Learn, run: LessonRun) -> Reading:
        f, tr, lm = learn.focus, run.trace, run.lm
        layer, head = (f.cross_layer, MEAN_HEADS) if self.cross else (SELF_LAYER, SELF_HEAD)
        view = View(source=run.src.text, layer=layer, head=head, step=f.row)
        forced = TeacherForced(lm, view.choices(str(lm.path)), tr, run.src.ids, f.row)
        reads, predicts, src = tr.dec_input_tokens, tr.label_tokens, tr.src_tokens
        ctx = StageContext(lm, view, forced, tr.arrays, reads, predicts, src, f.row, False, True, "learn")
        return Reading(ctx, learn, run)


def live(draw: Callable[[Reading], Drawing | None]) -> Figure:
    """A figure of the live model: none without a model."""
    return lambda r: None if r is None else draw(r)


# ---------------------------------------------------------------------------
# What chapters draw beyond a stage's figure.


def beam_tree(r: Reading) -> Drawing:
    """Explore's hypothesis tree, cut where the translation beam search returns finished."""
    res = r.run.beam
    answer = tuple(res.n_best[0].ids)
    end = len(answer) - 1  # the position that predicted the answer's last token: the tree up to there
    return beam.tree_figure(
        res,
        end,
        token_texter(r.run.lm),
        f"Beam search, width {DEFAULTS.beam}, up to position {end}, where the translation it returns "
        "finished: what it kept, finished, and the best it dropped from each",
        {"the translation beam search returns": answer},
        TreeOptions(
            max_pruned=1,  # the lesson's tree: one dropped candidate per hypothesis (Explore's shows three)
            x_title="position that predicted the token (position 0 reads <s>, as in chapter 1)",
            whole=True,  # every position of the answer's path in view
        ),
    ).keyed(*r.run.key)  # the decode it draws: its model, source and length


def lens_top(r: Reading) -> Drawing | None:
    """The lens stage's top tokens after each layer at the chapter's row, the token chosen there outlined (what the
    chapter asks: after which layer it is the top one); none where the model has no lens."""
    if r.run.lens is None:
        return None
    t = r.ctx.current
    return lens.top_figure(r.run.lens, r.run.lm.tokenizer.id_to_token, int(r.run.trace.arrays.label_ids[t]), t)


def example_weights(_: Reading | None) -> Drawing:
    """The worked example's attention weights, recomputed (it needs no model)."""
    w = worked_example().stage("weights").ours
    n = w.shape[0]
    rows = list(EXAMPLE_TOKENS[:n])
    return viz.attention_figure(
        np.where(np.isfinite(causal_mask(n)), w, -np.inf),
        rows,
        rows,
        viz.AttentionOptions(
            q_title="row: the token it reads", k_title="key token", masked_hover="masked (the future): weight 0"
        ),
        title="Attention weights α of the worked example, recomputed",
    )


def cheat(r: Reading | None) -> None:
    """The loss with and without the causal mask, on the live model."""
    if r is None:
        return
    on, off = float(r.run.trace.arrays.loss.mean()), float(r.run.nomask.arrays.loss.mean())
    c1, c2 = st.columns(2)
    c1.metric("Mean loss with the causal mask", f"{on:.3f}")
    c2.metric("Mean loss without it", f"{off:.3f}", delta=f"{off - on:+.3f}", delta_color="inverse")


def candidates(r: Reading | None) -> None:
    """Beam search's finished candidates under its tree, best first: the list the chapter's answer points to."""
    if r is None:
        return
    text_of = partial(LessonRun.text, r.run)
    st.markdown(
        "**The finished candidates, best score first:**\n\n"
        + "\n".join(f"{i}. {md(text_of(h.ids))} (score {h.score:.3f})" for i, h in enumerate(r.run.beam.n_best, 1))
    )


def row0_against(r: Reading) -> Drawing:
    """Row 0 of α·V above the rows the chapter offers as what it equals, on a colour scale fitted to row 0 (its
    values are small beside V's other rows, which would draw it white like the row of zeros)."""
    h = lesson.SELF_HEAD
    cand = lesson.row0_candidates(r.ctx.arrays, h)
    row0 = r.ctx.arrays.dec(SELF_LAYER, "self", "context")[h][0]
    limit = float(np.abs(row0).max()) or 1.0
    return viz.matrix_figure(
        np.stack([row0, *cand.values()]),
        ["row 0 of α·V", *cand],
        viz.MatrixOptions(token_label="row", dim_label="d_k dimension", limit=limit),
        title=f"Row 0 of α·V (layer {SELF_LAYER}, head {h}) and the rows it might equal; colours span row 0's "
        f"values, ±{limit:.2f} (larger ones are drawn at the ends)",
        highlight_row=0,
    )


def lengths_table(r: Reading | None) -> None:
    """The embedding chapter's table: each row's lengths of X's two parts, which its question compares (the figure
    shows their sum)."""
    if r is None:
        return
    emb, pe = lesson.part_lengths(r.ctx.arrays)
    scaled = "‖E[y]·√d_model‖" if r.ctx.cfg.scale_embedding else "‖E[y]‖"
    rows = "\n".join(
        f"| {i} | {md(label)} | {e:.2f} | {p:.2f} |" for i, (label, e, p) in enumerate(zip(r.ctx.rows, emb, pe))
    )
    head = f"| row | reads → predicts | {scaled} | ‖PE‖ |\n|---|---|---|---|"
    st.markdown(f"**The lengths of X's two parts, each row:**\n\n{head}\n{rows}")


def common_mistakes(_: Reading | None) -> None:
    """The worked example's printed numbers that do not follow, in two lists."""
    with st.container(key="learn_mistakes"):
        st.subheader("Common mistakes to avoid")
        found = mistakes(worked_example())
        for arithmetic, heading in MISTAKE_KINDS:
            # one element, a paragraph each: every element of a chapter costs its turn a few ms in the browser
            shown = "\n\n".join(f"**{md(m.title)}.** {md(m.computation)}" for m in found if m.arithmetic == arithmetic)
            st.markdown(f"*{heading}*\n\n{shown}")


CHAPTERS = (
    Chapter(lesson.tokens_chapter, live(lambda r: output.label_figure(r.ctx)), ("inputs",)),
    Chapter(lesson.embed_chapter, live(lambda r: inputs.embedding_figure(r.ctx)), ("inputs",), below=lengths_table),
    Chapter(lesson.qkv_chapter, live(lambda r: self_attention.qkv_figure(r.ctx, "Q")), ("qkv",)),
    Chapter(lesson.scores_chapter, live(lambda r: self_attention.score_figure(r.ctx, "scores")), ("scores",)),
    Chapter(
        lesson.mask_chapter,
        live(lambda r: self_attention.score_figure(r.ctx, "masked_scores")),
        ("scores",),
        below=cheat,
    ),
    Chapter(lesson.softmax_chapter, live(lambda r: self_attention.weights_figure(r.ctx)), ("self",)),
    Chapter(lesson.output_proj_chapter, live(row0_against), ("self_out",)),
    Chapter(lesson.addnorm_chapter, live(lambda r: add_norm.figure(r.ctx, 1)), ("self_out",)),
    Chapter(lesson.cross_chapter, live(lambda r: cross_attention.mean_figure(r.ctx)), ("cross",), cross=True),
    Chapter(lesson.ffn_chapter, live(lambda r: ffn.hidden_figure(r.ctx)), ("ffn",)),
    Chapter(
        lesson.output_chapter,
        live(lambda r: output.topk_figure(token_texter(r.run.lm), r.ctx.run.next_tokens())),
        ("output",),
    ),
    Chapter(lesson.decoding_chapter, live(beam_tree), ("output",), below=candidates),
    Chapter(lesson.lens_chapter, live(lens_top), ("lens",)),
    Chapter(lesson.by_hand_chapter, example_weights, below=common_mistakes),
)
