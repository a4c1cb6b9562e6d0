"""The stage registry: every stage the step view and the teacher-forcing view can show, in the data-flow order of the
paper's figure, then the explanations. Every page iterates it: Explore (the stage selector, its labels, "All
stages", both views and the section numbers), Compare (the stages it compares and those it leaves out, saying why)
and Learn (its chapters link to the stages they teach). A new stage is one module (its ``render(ctx)``, and what it
shows for one run or why it cannot be compared) and its line here.

Declarations only (no streamlit): ``views.state`` reads the ids and labels from here; a stage's module is imported
when one of its functions is first called (by the function standing for it below).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.core.config import ModelConfig

if TYPE_CHECKING:
    from model.decode.trace import Trace

    from .context import RunMatrix, StageContext

Draws = Callable[["StageContext"], None]
Matrix = Callable[["Trace", int, "int | str"], "RunMatrix"]


@dataclass(frozen=True)
class Stage:
    """``render`` draws the stage for the view's ``StageContext``. ``sections``: the numbered sections it opens
    (their numbers follow the registry's order). ``header``: a heading the stage shares with its neighbours (drawn
    once for a run of them). ``decoder``: drawn by All stages (the explanations, which compute more, are shown one
    at a time). ``compared``: ``(trace, layer, head) -> RunMatrix``, what the stage shows for one teacher-forced
    run, which Compare draws for A and B; a stage without one says why in ``not_compared`` (Compare names it among
    the stages it leaves out). ``pre_norm``: its label on a pre-norm model, where the norm comes before the sublayer
    (``label`` when the same). The Learn chapters that teach it name it (``views.chapters``)."""

    id: str
    label: str
    render: Draws
    sections: tuple[str, ...] = ()
    header: Draws | None = None
    decoder: bool = True
    compared: Matrix | None = None
    not_compared: str = ""
    pre_norm: str = ""

    def __post_init__(self) -> None:
        if (self.compared is None) == (not self.not_compared):
            raise ValueError(f"stage {self.id!r}: give Compare's matrix (compared) or why there is none (not_compared)")

    def run_matrix(self, trace: Trace, layer: int, head: int | str) -> RunMatrix:
        """What the stage shows for one teacher-forced run, for Compare."""
        if self.compared is None:
            raise ValueError(f"stage {self.id!r} is not compared: {self.not_compared}")
        return self.compared(trace, layer, head)


# ---------------------------------------------------------------------------
# The stages' functions, each imported where it is first called: a stage's module draws with streamlit and reads
# ``views.state``, which reads this registry.


def _inputs(ctx: StageContext) -> None:
    from .inputs import render

    render(ctx)


def _inputs_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .inputs import compared

    return compared(trace, layer, head)


def _self_attention_header(ctx: StageContext) -> None:
    from .self_attention import header

    header(ctx)


def _qkv(ctx: StageContext) -> None:
    from .self_attention import render_qkv

    render_qkv(ctx)


def _qkv_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .self_attention import compared_qkv

    return compared_qkv(trace, layer, head)


def _scores(ctx: StageContext) -> None:
    from .self_attention import render_scores

    render_scores(ctx)


def _scores_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .self_attention import compared_scores

    return compared_scores(trace, layer, head)


def _weights(ctx: StageContext) -> None:
    from .self_attention import render_weights

    render_weights(ctx)


def _weights_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .self_attention import compared_weights

    return compared_weights(trace, layer, head)


def _self_out(ctx: StageContext) -> None:
    from .self_attention import render_output

    render_output(ctx)


def _self_out_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .self_attention import compared_output

    return compared_output(trace, layer, head)


def _cross(ctx: StageContext) -> None:
    from .cross_attention import render

    render(ctx)


def _cross_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .cross_attention import compared

    return compared(trace, layer, head)


def _ffn(ctx: StageContext) -> None:
    from .ffn import render

    render(ctx)


def _ffn_matrix(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    from .ffn import compared

    return compared(trace, layer, head)


def _output(ctx: StageContext) -> None:
    from .output import render

    render(ctx)


def _lens(ctx: StageContext) -> None:
    from .lens import render

    render(ctx)


def _ablation(ctx: StageContext) -> None:
    from .ablation import render

    render(ctx)


def _attribution(ctx: StageContext) -> None:
    from .attribution import render

    render(ctx)


REGISTRY = (
    Stage("inputs", "Inputs & embeddings", _inputs, ("inputs", "embeddings"), compared=_inputs_matrix),
    Stage("qkv", "Q · K · V", _qkv, ("self",), _self_attention_header, compared=_qkv_matrix),
    Stage("scores", "Scores → causal mask", _scores, ("self",), _self_attention_header, compared=_scores_matrix),
    Stage("self", "Masked self-attention", _weights, ("self",), _self_attention_header, compared=_weights_matrix),
    Stage(
        "self_out",
        "α·V → Add & Norm 1",
        _self_out,
        ("self", "add_norm"),
        _self_attention_header,
        compared=_self_out_matrix,
        pre_norm="α·V → add 1 (Norm 1 came before Q · K · V)",
    ),
    Stage(
        "cross",
        "Cross-attention → Add & Norm 2",
        _cross,
        ("cross",),
        compared=_cross_matrix,
        pre_norm="Norm 2 → cross-attention → add",
    ),
    Stage("ffn", "FFN → Add & Norm 3", _ffn, ("ffn",), compared=_ffn_matrix, pre_norm="Norm 3 → FFN → add"),
    Stage(
        "output",
        "Output & beam",
        _output,
        ("output", "kv_cache", "beam"),
        not_compared="a distribution over the vocabulary at each position, not one matrix: the table above "
        "compares the token each run chooses",
    ),
    Stage(
        "lens",
        "Logit lens",
        _lens,
        decoder=False,
        not_compared="it reads one position's prediction after each layer, not one matrix per run",
    ),
    Stage(
        "ablation",
        "Head ablation",
        _ablation,
        decoder=False,
        not_compared="it decodes the sentence again with heads switched off, a run of its own",
    ),
    Stage(
        "attribution",
        "Attribution vs attention",
        _attribution,
        decoder=False,
        not_compared="the contrast below attributes one position's choice to the source",
    ),
)
ALL = "all"  # the selector's last choice: every decoder stage at once
SECTIONS = tuple(dict.fromkeys(sec for s in REGISTRY for sec in s.sections))


def labels(cfg: ModelConfig) -> dict[str, str]:
    """Each stage's label for the model ``cfg`` describes (a pre-norm model's in its order: Norm → sublayer → add),
    and All stages'."""
    pre = cfg.norm_position == "pre"
    return {**{s.id: (s.pre_norm if pre and s.pre_norm else s.label) for s in REGISTRY}, ALL: "All stages"}


def by_id(stage: str) -> Stage:
    return next(s for s in REGISTRY if s.id == stage)


def compared() -> tuple[Stage, ...]:
    """The stages Compare draws for two runs, in the registry's order."""
    return tuple(s for s in REGISTRY if s.compared)


def left_out() -> tuple[Stage, ...]:
    """The stages Compare leaves out, each saying why (``not_compared``)."""
    return tuple(s for s in REGISTRY if not s.compared)


def numbered(section: str, title: str, part: int | None = None) -> str:
    """A section's heading, numbered by its place in the registry ("3 · Masked self-attention"), or a ``part`` of
    it ("7.1 · Add & Norm 2 — after cross-attention")."""
    n = f"{SECTIONS.index(section) + 1}" + ("" if part is None else f".{part}")
    return f"{n} · {title}"


def shows(chosen: str, stage: str) -> bool:
    """Whether the selector's choice ``chosen`` draws ``stage`` (All stages: every decoder stage)."""
    return chosen == stage or (chosen == ALL and by_id(stage).decoder)


def render(ctx: StageContext, chosen: str) -> None:
    """Every stage the selector's choice ``chosen`` draws, in the registry's order."""
    header = None
    for stage in REGISTRY:
        if not shows(chosen, stage.id):
            continue
        if stage.header is not None and stage.header is not header:
            stage.header(ctx)
        header = stage.header
        stage.render(ctx)
