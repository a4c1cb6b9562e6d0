"""The stage registry: every stage the step view and the teacher-forcing view can show, in the data-flow order of the
paper's figure, then the explanations. The stage selector, its labels, "All stages", both views and the section
numbers iterate it. A new stage is one module (its ``render(ctx)``) and one line here.

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
    ``decoder``: drawn by All stages (the explanations, which compute more, are shown one at a time)."""

    id: str
    label: str
    module: str
    entry: str = "render"
    sections: tuple[str, ...] = ()
    header: str | None = None
    decoder: bool = True

    def function(self, name: str) -> Callable:
        return getattr(import_module(f"{__name__}.{self.module}"), name)

    def render(self, ctx) -> None:
        self.function(self.entry)(ctx)


REGISTRY = (
    Stage("inputs", "Inputs & embeddings", "inputs", sections=("inputs", "embeddings")),
    Stage("qkv", "Q · K · V", "self_attention", "render_qkv", ("self",), header="header"),
    Stage("scores", "Scores → causal mask", "self_attention", "render_scores", ("self",), header="header"),
    Stage("self", "Masked self-attention", "self_attention", "render_weights", ("self",), header="header"),
    Stage("self_out", "α·V → Add & Norm 1", "self_attention", "render_output", ("self", "add_norm"), header="header"),
    Stage("cross", "Cross-attention → Add & Norm 2", "cross_attention", sections=("cross",)),
    Stage("ffn", "FFN → Add & Norm 3", "ffn", sections=("ffn",)),
    Stage("output", "Output & beam", "output", sections=("output", "kv_cache", "beam")),
    Stage("lens", "Logit lens", "lens", decoder=False),
    Stage("ablation", "Head ablation", "ablation", decoder=False),
    Stage("attribution", "Attribution vs attention", "attribution", decoder=False),
)
ALL = "all"  # the selector's last choice: every decoder stage at once
BY_ID = {s.id: s for s in REGISTRY}
SECTIONS = tuple(dict.fromkeys(sec for s in REGISTRY for sec in s.sections))


def numbered(section: str, title: str) -> str:
    """A section's heading, numbered by its place in the registry ("3 · Masked self-attention")."""
    return f"{SECTIONS.index(section) + 1} · {title}"


def shows(chosen: str, stage: str) -> bool:
    """Whether the selector's choice ``chosen`` draws ``stage`` (All stages: every decoder stage)."""
    return chosen == stage or (chosen == ALL and BY_ID[stage].decoder)


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
