"""Add & Norm: LayerNorm(x + Sublayer(x)) (post-norm, the paper); pre-norm models: Norm → sublayer → add,
x + Sublayer(Norm(x)). RMSNorm (T5) subtracts no mean and has no β."""

from __future__ import annotations

from ..common import caption, heading, show
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered
from .context import StageContext

AFTER = {2: "cross", 3: "ffn"}  # the section each later Add & Norm closes


def equation(pre: bool, rms: bool) -> str:
    """The block's equation: where the norm sits, and what it computes (LayerNorm, or RMSNorm without μ and β)."""
    norm = r"\operatorname{RMSNorm}" if rms else r"\operatorname{LayerNorm}"
    z = "x" if pre else r"x + \text{Sublayer}(x)"
    inner = rf"\gamma \odot \frac{{{z}}}{{\sigma}}" if rms else rf"\gamma \odot \frac{{{z} - \mu}}{{\sigma}} + \beta"
    if pre:
        return rf"x + \text{{Sublayer}}\big({norm}(x)\big),\quad {norm}(x) = {inner}"
    return rf"{norm}({z}) = {inner}"


def render(ctx: StageContext, n: int, what: str) -> None:
    pre, rms = ctx.cfg.norm_position == "pre", ctx.cfg.norm_kind == "rms"
    name = f"Norm → {what} → add {n}" if pre else f"Add & Norm {n} — after {what}"
    # the first opens its section; the others close the sublayer's they follow
    heading(numbered("add_norm", name) if n == 1 else numbered(AFTER[n], name, part=1), equation(pre, rms))
    if pre:
        caption(
            "Pre-norm: the norm is applied to the sublayer's input, and the sublayer's output is added to the "
            "residual stream x, which is never normalised itself. Below: x + Sublayer(Norm(x)) (the residual and "
            "what the block hands on, the same), and the mean and std of x that the norm used"
            + (" (RMSNorm: μ is 0, σ the root mean square)." if rms else ".")
        )
    show(figure(ctx, n), f"{ctx.key}_norm{n}")


def figure(ctx: StageContext, n: int) -> Drawing:
    """The ``n``-th norm block of the view's layer: the residual sum, its mean and std, and the block's output."""
    a, pre = ctx.arrays, ctx.cfg.norm_position == "pre"
    return viz.addnorm_figure(
        a.norm(ctx.layer, n, "residual"),
        a.norm(ctx.layer, n, "mean"),
        a.norm(ctx.layer, n, "std"),
        a.norm(ctx.layer, n, "out"),
        ctx.rows,
        highlight_row=ctx.current,
        title=f"{'Norm → sublayer → add' if pre else 'Add & Norm'} {n} (layer {ctx.layer})",
    )
