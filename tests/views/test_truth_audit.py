"""The truth audit (harness/audit.py) on the tiny model: at least 30 seeded states, every number shown in two places
agrees; and the audit fails when one of them is broken."""

from __future__ import annotations

import pytest

import views.export
import views.stepping
from harness.audit import audit, states
from views.state import STAGES


def test_the_states_cover_every_strategy_stage_and_place():
    visited = states(36)
    assert {s["name"] for s in visited} == {"greedy", "beam 3", "beam 5", "sampling"}
    assert {s["query"]["stage"] for s in visited} == set(STAGES)
    assert {s["place"] for s in visited} == {"first", "middle", "last"} and {s["forced"] for s in visited} == {0, 1}
    beams = {s["query"]["stage"] for s in visited if s["name"].startswith("beam")}
    assert {"output", "all"} <= beams  # the beam tables and the tree are audited


@pytest.mark.slow
def test_every_number_shown_twice_agrees(tiny_model_dir):
    rep = audit(tiny_model_dir, n=36)
    assert rep.states == 36 and rep.checks > 600
    assert rep.problems == []


def _header_p_off(p):
    return "" if p is None or p != p else f"{min(p + 0.01, 1):.3f}"


def _no_mask_on_the_export(Q, K, causal=True, scaled=True, bias=None):
    from model.decode.steps import prefix_scores

    return prefix_scores(Q, K, False, scaled, bias)


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, name, broken, says",
    [
        (views.stepping, "fmt_p", _header_p_off, "p"),  # chips and header print another p than the table
        (views.export, "prefix_scores", _no_mask_on_the_export, "NPZ weights on the future"),
    ],
    ids=["header-p", "export-weights"],
)
def test_the_audit_fails_when_a_number_is_broken(tiny_model_dir, monkeypatch, module, name, broken, says):
    monkeypatch.setattr(module, name, broken)
    rep = audit(tiny_model_dir, n=8)
    assert rep.problems and any(says in p for p in rep.problems), rep.problems[:5]
