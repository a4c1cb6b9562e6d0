"""The figure cache (``views.plot``): a figure is built once per distinct builder inputs, and what a cached figure
sends is exactly what building it again sends."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest

from harness import audit
from tests.helpers import open_app, specs, title
from views.plot import Drawing, FigureCache, builders
from viz import api as viz


def drawing(values, **kw) -> Drawing:
    return builders.attention_figure(values, ["a", "b"], ["x", "y"], title="t", **kw)


def test_builders_return_drawings_of_the_figure_builders_only():
    d = drawing(np.eye(2))
    assert isinstance(d, Drawing) and d.build is viz.attention_figure
    assert builders.beam_table is viz.beam_table  # not a figure: viz's own function
    assert pio.to_json(d.figure().plotly(), validate=False) == pio.to_json(
        viz.attention_figure(np.eye(2), ["a", "b"], ["x", "y"], title="t").plotly(), validate=False
    )


def test_every_function_that_returns_a_figure_is_declared_a_builder():
    import inspect

    returns_figure = {
        n
        for n in viz.__all__
        if inspect.isfunction(getattr(viz, n)) and "Figure" in str(inspect.signature(getattr(viz, n)).return_annotation)
    } - {"pair_figures"}  # three figures at once: drawn as figures, not as one drawing
    assert viz.FIGURE_BUILDERS == returns_figure
    for name in viz.__all__:
        made = getattr(builders, name)
        assert (made is getattr(viz, name)) == (name not in viz.FIGURE_BUILDERS), name


def test_the_digest_tells_every_input_apart():
    base = np.array([[0.25, 0.75], [0.5, 0.5]])
    d = drawing(base).digest()
    assert d == drawing(base.copy()).digest()  # the same values
    changed = base.copy()
    changed[1, 1] = 0.5000001
    others = [
        drawing(changed),  # one value
        drawing(base.astype(np.float32)),  # the dtype
        drawing(base.reshape(1, 4)),  # the shape
        drawing(base, highlight_row=1),  # a keyword
        drawing(base, options=viz.AttentionOptions(kind="scores")),  # the options (a frozen dataclass)
        drawing(base, options=viz.AttentionOptions(k_title="key")),  # one field of them
        builders.attention_figure(base, ["a", "c"], ["x", "y"], title="t"),  # a label
        builders.alignment_figure(base, ["a", "b"], ["x", "y"], title="t"),  # the builder
    ]
    digests = [o.digest() for o in others]
    assert d not in digests and len(set(digests)) == len(digests)
    assert d not in digests and None not in digests
    assert drawing(base, options=object()).digest() is None  # not plain data: never cached


def test_the_cache_keeps_its_bound_and_drops_the_least_recently_used():
    cache = FigureCache(max_bytes=30)
    cache.put("a", ("x" * 10, None))
    cache.put("b", ("y" * 10, "alt"))
    assert cache.get("a") == ("x" * 10, None)  # now the most recent
    cache.put("c", ("z" * 10, None))  # over the bound: "b" goes
    assert cache.get("b") is None and cache.get("a") and cache.get("c")
    assert cache.nbytes <= cache.max_bytes
    cache.put("huge", ("w" * 31, None))  # larger than the bound: not kept
    assert cache.get("huge") is None


def by_title(at) -> dict[str, str]:
    """Each figure title of the page and the figure ``figure(at, title)`` finds for it, as JSON: the page's figures
    read (and checked) once, not once a title."""
    shown = specs(at)
    return {
        title(f): json.dumps(next(g for g in shown if title(g).startswith(title(f))), sort_keys=True) for f in shown
    }


def test_stepping_back_sends_the_same_figures_from_the_cache(tiny_model_dir, monkeypatch):
    from views.plot import figure_cache

    at = open_app(tiny_model_dir, monkeypatch, stage="all", step="1")
    first = by_title(at)
    at.button(key="next").click().run()
    cache = figure_cache()
    hits = cache.hits
    at.button(key="prev").click().run()
    assert cache.hits - hits >= len(first) - 1  # every figure of position 1 again, from the cache
    again = by_title(at)
    assert again == first


@pytest.mark.parametrize("stage", ["inputs", "cross", "output"])
def test_a_cached_figure_is_what_building_it_sends(tiny_model_dir, monkeypatch, stage):
    """The page's figures at a position, sent from the cache after stepping away and back, are byte for byte the
    figures the page sends when nothing is cached."""
    import views.plot as plot

    def page(at) -> list[str]:
        return [json.dumps(f, sort_keys=True) for f in audit.figures(at)]

    monkeypatch.setattr(plot.FigureCache, "get", lambda self, digest: None)  # every figure built
    built = page(open_app(tiny_model_dir, monkeypatch, stage=stage, step="2"))
    monkeypatch.undo()
    cache = FigureCache(max_bytes=2**26)
    monkeypatch.setattr(plot, "figure_cache", lambda: cache)
    at = open_app(tiny_model_dir, monkeypatch, stage=stage, step="2")
    at.button(key="prev").click().run()
    hits = cache.hits
    at.button(key="next").click().run()
    assert cache.hits > hits
    assert page(at) == built


def test_a_keyed_drawing_is_hashed_by_its_identity_and_scalars():
    from model.decode.decoding import Expansion

    def tree(steps, namer=str, title="t", options=viz.TreeOptions()) -> Drawing:
        return builders.beam_tree_figure(steps, options, token_text=namer, title=title)

    e = Expansion(parent=0, token=3, token_logprob=-0.5, cum_logprob=-0.5, status="kept")
    assert tree([e]).digest() is None  # not plain data, no identity: never cached
    keyed = tree([e]).keyed("model-a", (5, 7, 2), 20).digest()
    assert keyed is not None
    assert keyed == tree([e], namer=repr).keyed("model-a", (5, 7, 2), 20).digest()  # the identity stands for them
    assert keyed != tree([e]).keyed("model-b", (5, 7, 2), 20).digest()  # another model
    assert keyed != tree([e]).keyed("model-a", (5, 7, 3), 20).digest()  # another source
    assert keyed != tree([e], title="u").keyed("model-a", (5, 7, 2), 20).digest()  # a scalar argument
    lesson = viz.TreeOptions(max_pruned=1)  # the options: hashed as the scalars are
    assert keyed != tree([e], options=lesson).keyed("model-a", (5, 7, 2), 20).digest()
    assert keyed != builders.topk_figure(["a"], np.ones(1), 0, title="t").keyed("model-a", (5, 7, 2), 20).digest()
    assert tree([e]).keyed(object()).digest() is None  # the identity itself must be plain data
