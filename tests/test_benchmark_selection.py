"""The controls benchmark's ``--only``: the controls named, by the start of their names, with those they need clicked
before them in the same pass, in the pass's order; a name that matches none is refused."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from benchmarks.controls_latency import LOST_CLICK_MS, NEEDS, controls, lost_switches, selected

NAMES = [name for name, _ in controls(MagicMock(), "")]  # the pass's controls, none of them clicked


def test_only_the_controls_named_and_those_they_need_in_pass_order():
    assert selected(NAMES, None) == NAMES
    assert selected(NAMES, ["change stage", "change layer"]) == ["change stage", "change layer"]
    assert selected(NAMES, ["switch to C"]) == ["switch to Compare", "switch to Corpus"]
    assert selected(NAMES, ["clear"]) == ["open What if?", "force a token", "Clear"]
    assert selected(NAMES, ["a position's ZIP", "open what"]) == [
        "open What if?",
        "open Export",
        "handout",
        "a position's ZIP (handout)",
    ]
    assert set(NEEDS) | set(NEEDS.values()) <= set(NAMES)


def test_a_name_that_matches_no_control_is_refused():
    with pytest.raises(SystemExit, match="no control is named zoom"):
        selected(NAMES, ["zoom"])


def test_a_lost_page_switch_fails_the_run_whatever_the_median():
    lost = LOST_CLICK_MS / 1000 + 0.4  # clicked again after LOST_CLICK_MS, then arrived
    times = {"force a token": [99.0], "switch to Learn": [0.3, 0.4, 0.3], "switch to Explore": [0.5, lost, 0.6]}
    assert lost_switches(times) == "page switches whose first click was lost: 1 of 6  FAIL (none)"
    times["switch to Explore"][1] = 0.7
    assert lost_switches(times) == "page switches whose first click was lost: 0 of 6  PASS (none)"
