"""Add & Norm: LayerNorm(x + Sublayer(x))."""

from __future__ import annotations

from ..common import heading, show
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered
from .context import StageContext


def render(ctx: StageContext, n: int, what: str) -> None:
    title = f"Add & Norm {n} — after {what}"
    heading(
        numbered("add_norm", title) if n == 1 else title,  # the first opens its section
        r"\operatorname{LayerNorm}(x + \text{Sublayer}(x)) = \gamma \odot "
        r"\frac{x + \text{Sublayer}(x) - \mu}{\sigma} + \beta",
    )
    a = ctx.arrays
    show(
        viz.addnorm_figure(
            a.norm(ctx.layer, n, "residual"),
            a.norm(ctx.layer, n, "mean"),
            a.norm(ctx.layer, n, "std"),
            a.norm(ctx.layer, n, "out"),
            ctx.rows,
            highlight_row=ctx.current,
            title=f"Add & Norm {n} (layer {ctx.layer})",
        ),
        f"{ctx.key}_norm{n}",
    )
