"""The dashboard's figures: one bar or row per item, sized from the item count, user text escaped, shapes checked."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from viz.api import CheckScores
from viz.classroom import ROW_PX, checks_figure, concepts_figure, first_try_figure, progress_figure, transitions_figure


def test_progress_has_a_bar_per_stage_and_grows_with_them():
    small = progress_figure(["first check", "1. The task"], [3, 1], title="Students").plotly()
    big = progress_figure([f"{i}. chapter" for i in range(16)], list(range(16)), title="Students").plotly()
    assert small.data[0].x == (3, 1) and len(big.data[0].y) == 16
    assert big.layout.height - small.layout.height == 14 * ROW_PX
    ticks = {n: progress_figure(["a"], [n], title="t").plotly().layout.xaxis.dtick for n in (3, 16, 300, 1000)}
    assert ticks == {3: 1, 16: 2, 300: 50, 1000: 200}  # round steps, at most 8 of them
    go.Figure(big.to_dict())  # valid for Plotly


def test_first_try_bars_say_share_and_students_and_escape_options():
    fig = first_try_figure(["5. The causal mask"], [0.25], [8], ["<b>row 0</b>"], title="Questions").plotly()
    bar = fig.data[0]
    assert bar.x == (0.25,) and bar.text == ("25% of 8",)
    assert "&lt;b&gt;row 0&lt;/b&gt;" in bar.customdata[0][2] and "<b>" not in str(bar.customdata)
    assert bar.marker.color == ("#e4572e",)  # below half: the colour of a wrong answer


def test_checks_draw_both_scores_and_skip_a_missing_one():
    fig = checks_figure(CheckScores(["ana", "<i>bo</i>", "cy"], [1, 2, None], [4, None, 3], 5), title="Checks").plotly()
    link, before, after = fig.data
    assert before.x == (1, 2) and after.x == (4, 3)
    assert [x for x in link.x if x is not None] == [1, 4]  # only ana took both
    assert "&lt;i&gt;bo&lt;/i&gt;" in fig.layout.yaxis.ticktext
    assert tuple(fig.layout.yaxis.range) == (2.5, -0.5)  # a row each, the first on top, no padding rows
    tall = checks_figure(CheckScores([f"s{i}" for i in range(40)], [1] * 40, [2] * 40, 5), title="Checks").plotly()
    assert fig.layout.xaxis.side is None and tall.layout.xaxis.side == "top"  # the scores' axis where a reader starts


def test_concepts_group_the_two_checks():
    fig = concepts_figure(["tokens", "mask"], [0.5, None], [1.0, 0.75], title="Ideas").plotly()
    assert [t.name for t in fig.data] == ["first check", "final check"] and fig.layout.barmode == "overlay"
    assert fig.data[0].text == ("50%", "–") and math.isclose(fig.data[1].x[1], 0.75)


@pytest.mark.parametrize(
    "build",
    [
        lambda: progress_figure(["a", "b"], [1], title="t").plotly(),
        lambda: first_try_figure(["a"], [0.5, 0.2], [1], ["x"], title="t").plotly(),
        lambda: checks_figure(CheckScores(["a"], [1, 2], [1], 5), title="t").plotly(),
        lambda: concepts_figure(["a"], [0.1], [], title="t").plotly(),
        lambda: transitions_figure(CheckScores(["a", "b"], [1], [1, 2], 5), title="t").plotly(),
    ],
)
def test_shapes_that_do_not_match_their_labels_are_refused(build):
    with pytest.raises(ValueError, match="labels"):
        build()


def test_transitions_count_each_student_who_took_both_checks_in_their_cell():
    names = ["ana", "<b>bo</b>", "cy", "dee", "eve"]
    fig = transitions_figure(CheckScores(names, [1, 1, 2, None, 5], [4, 4, 2, 3, None], 5), title="Moves").plotly()
    (cells,) = fig.data
    z = [list(r) for r in cells.z]
    assert sum(map(sum, z)) == 3 and z[1][4] == 2 and z[2][2] == 1  # dee and eve took one check only
    assert "ana, &lt;b&gt;bo&lt;/b&gt;" == cells.customdata[1][4] and cells.customdata[0][0] == "nobody"
    assert cells.text[1][4] == "2" and cells.text[0][0] == ""
    go.Figure(fig.to_dict())


def test_transitions_list_a_few_names_and_count_the_rest():
    fig = transitions_figure(CheckScores([f"s{i}" for i in range(12)], [0] * 12, [5] * 12, 5), title="Moves").plotly()
    assert fig.data[0].customdata[0][5].endswith("s7 and 4 more")


def test_transitions_refuse_a_score_outside_the_check():
    with pytest.raises(ValueError, match="outside"):
        transitions_figure(CheckScores(["a"], [6], [1], 5), title="t").plotly()
