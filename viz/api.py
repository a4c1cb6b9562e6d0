"""Every figure builder of ``viz`` in one namespace (``views.plot.builders`` wraps it for the pages).

Every function takes arrays, token lists and options (a frozen dataclass) and returns a ``viz.common.Figure``
(its trace and layout dicts; ``plotly()`` makes it Plotly's ``go.Figure``)
(or a ``pandas.DataFrame`` / number for the table and metric helpers). Shapes are checked against
the token lists (``ValueError`` on mismatch); every heatmap goes through :func:`heatmap`, drawn as a
:class:`HeatmapSpec` says and sized as a :class:`Framing` says.
"""

from .classroom import (
    CheckScores,
    checks_figure,
    concepts_figure,
    first_try_figure,
    progress_figure,
    transitions_figure,
)
from .common import MASK_COLOR, MASKED_HOVER, safe_label, unique_labels
from .corpus import bar_figure, head_grid, sentence_scatter
from .decoding import TreeOptions, beam_table, beam_tree_figure, entropy, loss_table, topk_figure
from .explain import LayerOptions, importance_figure, layer_position_figure, lens_figure, loss_delta_figure
from .figures import (
    ALIGNMENT,
    AttentionOptions,
    MatrixOptions,
    addnorm_figure,
    alignment_figure,
    attention_figure,
    ffn_figure,
    ffn_sparsity,
    heads_grid,
    kv_cache_figure,
    matrix_figure,
    positional_curves,
)
from .heatmap import Framing, HeatmapSpec, Marks, Ticks, heatmap
from .patching import (
    PairOptions,
    PatchScale,
    aligned_difference,
    pair_figures,
    patch_decoder_figure,
    patch_encoder_figure,
    patch_heads_figure,
    shared_range,
)

__all__ = [
    "ALIGNMENT",
    "AttentionOptions",
    "Framing",
    "HeatmapSpec",
    "LayerOptions",
    "Marks",
    "PairOptions",
    "PatchScale",
    "MASK_COLOR",
    "MASKED_HOVER",
    "MatrixOptions",
    "Ticks",
    "TreeOptions",
    "addnorm_figure",
    "aligned_difference",
    "alignment_figure",
    "bar_figure",
    "attention_figure",
    "beam_table",
    "beam_tree_figure",
    "entropy",
    "ffn_figure",
    "ffn_sparsity",
    "head_grid",
    "heads_grid",
    "heatmap",
    "importance_figure",
    "layer_position_figure",
    "lens_figure",
    "loss_delta_figure",
    "kv_cache_figure",
    "loss_table",
    "matrix_figure",
    "pair_figures",
    "patch_decoder_figure",
    "patch_encoder_figure",
    "patch_heads_figure",
    "positional_curves",
    "safe_label",
    "sentence_scatter",
    "shared_range",
    "topk_figure",
    "unique_labels",
    "CheckScores",
    "checks_figure",
    "concepts_figure",
    "first_try_figure",
    "progress_figure",
    "transitions_figure",
]
# The functions that return a figure: ``views.plot.builders`` hands the pages a ``Drawing`` of these (built, or
# taken from the figure cache, when drawn) and every other function as it is.
FIGURE_BUILDERS = frozenset(
    {
        "addnorm_figure",
        "alignment_figure",
        "attention_figure",
        "bar_figure",
        "beam_tree_figure",
        "checks_figure",
        "concepts_figure",
        "ffn_figure",
        "first_try_figure",
        "head_grid",
        "heads_grid",
        "heatmap",
        "importance_figure",
        "kv_cache_figure",
        "layer_position_figure",
        "lens_figure",
        "loss_delta_figure",
        "matrix_figure",
        "patch_decoder_figure",
        "patch_encoder_figure",
        "patch_heads_figure",
        "positional_curves",
        "progress_figure",
        "sentence_scatter",
        "topk_figure",
        "transitions_figure",
    }
)
