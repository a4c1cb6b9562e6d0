"""Add & Norm: LayerNorm(x + Sublayer(x))."""

from __future__ import annotations

from ..common import heading, show
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered
from .context import StageContext

AFTER = {2: "cross", 3: "ffn"}  # the section each later Add & Norm closes


def render(ctx: StageContext, n: int, what: str) -> None:
    title = f"Add & Norm {n} — after {what}"
    heading(
        # the first opens its section; the others close the sublayer's they follow
        numbered("add_norm", title) if n == 1 else numbered(AFTER[n], title, part=1),
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
