"""The Compare page's patching section is a fragment, driven over Streamlit's protocol (harness/protocol.py) on a
real server: ▶ and the map's site rerun it alone (the decodes, their outputs and the stage compared above it are
not sent again) and the URL follows; a new sentence B reruns the whole page."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from harness.protocol import Connection
from views.state import SITE_LABELS

A = "The cat is sleeping on the sofa."
B = "The man is sleeping on the sofa."


def texts(run) -> list[str]:
    return [el.body for kind, el, _ in run.elements.values() if kind in ("markdown", "text")]


@pytest.mark.slow  # a real server: a fresh Python process
def test_a_step_and_the_site_rerun_the_patching_part_alone(server):
    query = urlencode({"src": A, "srcb": B, "step": "1", "site": "dec", "max_len": "6"})
    conn = Connection(server, query, path="compare")
    try:
        full = conn.run()
        assert "site" not in parse_qs(conn.query)  # the default map, the decoder's
        assert not full.exceptions and not full.error_boxes, full.exceptions + full.error_boxes
        assert any(t.startswith("**French A**") for t in texts(full))
        assert any("at position 1 (" in t for t in texts(full))
        wid, frag = conn.widgets["next"]
        assert frag, "the step buttons are not in a fragment"
        step = conn.run([WidgetState(id=wid, trigger_value=True)], frag)
        assert not step.exceptions and not step.error_boxes, step.exceptions + step.error_boxes
        assert any("at position 2 (" in t for t in texts(step))
        assert not any(t.startswith("**French A**") for t in texts(step))  # the part above is not sent again
        assert {f for _, _, f in step.elements.values()} == {frag}
        assert parse_qs(conn.query)["step"] == ["2"]
        wid, frag = conn.widgets["site"]
        site = conn.run([WidgetState(id=wid, string_value=SITE_LABELS["enc"])], frag)
        assert not site.exceptions and {f for _, _, f in site.elements.values()} == {frag}
        assert parse_qs(conn.query)["site"] == ["enc"] and parse_qs(conn.query)["step"] == ["2"]
        wid, _ = conn.widgets["source_b"]
        again = conn.run([WidgetState(id=wid, string_value="The dog is sleeping on the sofa.")])
        assert any(t.startswith("**French A**") for t in texts(again))  # the whole page
        assert parse_qs(conn.query)["srcb"] == ["The dog is sleeping on the sofa."]
    finally:
        conn.close()
