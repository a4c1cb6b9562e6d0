"""The stage registry: every stage the step view and the teacher-forcing view can show, in the data-flow order of the
paper's figure, then the explanations. Every page iterates it: Explore (the stage selector, its labels, "All
stages", both views and the section numbers), Compare (the stages it compares and those it leaves out, saying why)
and Learn (which stage each chapter teaches). A new stage is one module (its ``render(ctx)``, and what it shows for
one run or why it cannot be compared) and one line here.

Declarations only (no streamlit): ``views.state`` reads the ids and labels from here; a stage's module is imported
when it is first drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module


@dataclass(frozen=True)
class Stage:
    """``render`` is ``views/stages/<module>.py``'s function ``entry``, called with the view's ``StageContext``.
    ``sections``: the numbered sections it opens (their numbers follow the registry's order). ``header``: a function
    of the same module drawing a heading the stage shares with its neighbours (drawn once for a run of them).
    ``decoder``: drawn by All stages (the explanations, which compute more, are shown one at a time).
    ``compared``: the module's function ``(trace, layer, head) -> RunMatrix`` giving what the stage shows for one
    teacher-forced run, which Compare draws for A and B; a stage without one says why in ``not_compared`` (Compare
    names it among the stages it leaves out). ``chapters``: the keys of the Learn chapters that teach it
    (``model.lesson.learn.CHAPTER_KEYS``). ``pre_norm``: its label on a pre-norm model, where the norm comes before
    the sublayer (``label`` when the same)."""

    id: str
    label: str
    module: str
    entry: str = "render"
    sections: tuple[str, ...] = ()
    header: str | None = None
    decoder: bool = True
    compared: str | None = None
    not_compared: str = ""
    chapters: tuple[str, ...] = ()
    pre_norm: str = ""

    def __post_init__(self) -> None:
        if (self.compared is None) == (not self.not_compared):
            raise ValueError(f"stage {self.id!r}: give Compare's matrix (compared) or why there is none (not_compared)")

    def function(self, name: str) -> Callable:
        return getattr(import_module(f"{__name__}.{self.module}"), name)

    def render(self, ctx) -> None:
        self.function(self.entry)(ctx)

    def run_matrix(self, trace, layer: int, head):
        """What the stage shows for one teacher-forced run (a ``RunMatrix``), for Compare."""
        if self.compared is None:
            raise ValueError(f"stage {self.id!r} is not compared: {self.not_compared}")
        return self.function(self.compared)(trace, layer, head)


REGISTRY = (
    Stage(
        "inputs",
        "Inputs & embeddings",
        "inputs",
        sections=("inputs", "embeddings"),
        compared="compared",
        chapters=("tokens", "embed"),
    ),
    Stage(
        "qkv",
        "Q · K · V",
        "self_attention",
        "render_qkv",
        ("self",),
        header="header",
        compared="compared_qkv",
        chapters=("qkv",),
    ),
    Stage(
        "scores",
        "Scores → causal mask",
        "self_attention",
        "render_scores",
        ("self",),
        header="header",
        compared="compared_scores",
        chapters=("scores", "mask"),
    ),
    Stage(
        "self",
        "Masked self-attention",
        "self_attention",
        "render_weights",
        ("self",),
        header="header",
        compared="compared_weights",
        chapters=("softmax",),
    ),
    Stage(
        "self_out",
        "α·V → Add & Norm 1",
        "self_attention",
        "render_output",
        ("self", "add_norm"),
        header="header",
        compared="compared_output",
        chapters=("output_proj", "addnorm"),
        pre_norm="α·V → add 1 (Norm 1 came before Q · K · V)",
    ),
    Stage(
        "cross",
        "Cross-attention → Add & Norm 2",
        "cross_attention",
        sections=("cross",),
        compared="compared",
        chapters=("cross",),
        pre_norm="Norm 2 → cross-attention → add",
    ),
    Stage(
        "ffn",
        "FFN → Add & Norm 3",
        "ffn",
        sections=("ffn",),
        compared="compared",
        chapters=("ffn",),
        pre_norm="Norm 3 → FFN → add",
    ),
    Stage(
        "output",
        "Output & beam",
        "output",
        sections=("output", "kv_cache", "beam"),
        not_compared="a distribution over the vocabulary at each position, not one matrix: the table above "
        "compares the token each run chooses",
        chapters=("output", "decoding"),
    ),
    Stage(
        "lens",
        "Logit lens",
        "lens",
        decoder=False,
        not_compared="it reads one position's prediction after each layer, not one matrix per run",
        chapters=("lens",),
    ),
    Stage(
        "ablation",
        "Head ablation",
        "ablation",
        decoder=False,
        not_compared="it decodes the sentence again with heads switched off, a run of its own",
    ),
    Stage(
        "attribution",
        "Attribution vs attention",
        "attribution",
        decoder=False,
        not_compared="the contrast below attributes one position's choice to the source",
    ),
)
ALL = "all"  # the selector's last choice: every decoder stage at once
SECTIONS = tuple(dict.fromkeys(sec for s in REGISTRY for sec in s.sections))


def labels(cfg) -> dict[str, str]:
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


def teaching(chapter: str) -> tuple[Stage, ...]:
    """The stages a Learn chapter teaches (none for the hand-sized worked example)."""
    return tuple(s for s in REGISTRY if chapter in s.chapters)


def numbered(section: str, title: str, part: int | None = None) -> str:
    """A section's heading, numbered by its place in the registry ("3 · Masked self-attention"), or a ``part`` of
    it ("7.1 · Add & Norm 2 — after cross-attention")."""
    n = f"{SECTIONS.index(section) + 1}" + ("" if part is None else f".{part}")
    return f"{n} · {title}"


def shows(chosen: str, stage: str) -> bool:
    """Whether the selector's choice ``chosen`` draws ``stage`` (All stages: every decoder stage)."""
    return chosen == stage or (chosen == ALL and by_id(stage).decoder)


def render(ctx, chosen: str) -> None:
    """Every stage the selector's choice ``chosen`` draws, in the registry's order."""
    header = None
    for stage in REGISTRY:
        if not shows(chosen, stage.id):
            continue
        if stage.header and (stage.module, stage.header) != header:
            stage.function(stage.header)(ctx)
        header = (stage.module, stage.header) if stage.header else None
        stage.render(ctx)
