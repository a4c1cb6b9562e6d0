"""What if? decodes the alternative chosen in it off the page's run, while the reader is still choosing: forcing it
then waits for that decode instead of starting it again, and shows the same line a fresh decode shows."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from tests.helpers import chip_markdown, ok, open_app, open_panel
from views import common, plot
from views.common import DECODES_AHEAD

SRC = "The cat is sleeping on the sofa."


def forced_prefixes(monkeypatch) -> list[tuple[int, ...]]:
    """The forced prefix of every decode the app starts from now on (the page's own and those started ahead)."""
    calls: list[tuple[int, ...]] = []
    real = common.decode

    def counted(model, src_ids, options, lean=None):
        calls.append(tuple(options.prefix))
        return real(model, src_ids, options, lean)

    monkeypatch.setattr(common, "decode", counted)
    return calls


def test_the_chosen_alternative_is_decoded_ahead_and_forcing_it_does_not_decode_again(tiny_model_dir, monkeypatch):
    at = open_app(tiny_model_dir, monkeypatch, src=SRC)
    at.button(key="next").click().run()
    at.button(key="next").click().run()
    calls = forced_prefixes(monkeypatch)
    open_panel(at, "whatif_open")
    ok(at)
    (job,) = at.session_state[DECODES_AHEAD].values()
    job.result(timeout=120)
    assert len(calls) == 1 and len(calls[0]) == 3  # the two tokens so far, then the alternative chosen

    at.selectbox(key="whatif_pick").select_index(3).run()  # another alternative: decoded ahead in its turn
    (job,) = at.session_state[DECODES_AHEAD].values()
    job.result(timeout=120)
    assert len(calls) == 2 and calls[1][:2] == calls[0][:2] and calls[1][2] != calls[0][2]

    at.button(key="whatif_go").click().run()
    ok(at)
    assert at.session_state["forced"] == calls[1]
    assert len(calls) == 2  # the forced line was the one decoded ahead
    shown = chip_markdown(at)

    for job in at.session_state.get(DECODES_AHEAD, {}).values():  # the page's own next pick, decoded ahead: done
        job.exception(timeout=120)
    before = len(calls)
    at.session_state["session_cache"].data.clear()  # decodes are shared between sessions: make the next one decode
    fresh = open_app(tiny_model_dir, monkeypatch, **{k: at.query_params[k] for k in at.query_params})
    assert chip_markdown(fresh) == shown  # the same line as a fresh decode of the page's link
    assert calls[before] == calls[1]  # which the fresh page decoded itself (then it may decode its own pick ahead)


def test_work_ahead_starts_once_the_run_that_asked_for_it_is_over():
    asked, release, jobs = threading.Event(), threading.Event(), []

    def run() -> None:  # a page's run: asks for work ahead, then goes on drawing
        jobs.append(plot.ahead(asked.set))
        release.wait(30)

    page_run = threading.Thread(target=run)
    page_run.start()
    assert not asked.wait(1.0)  # the run goes on: the work ahead waits
    release.set()
    page_run.join()
    jobs[0].result(timeout=30)
    assert asked.is_set()


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own priority is set on Linux only")
def test_work_ahead_runs_at_a_lower_priority_than_the_page():
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    theirs = plot.ahead(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result(timeout=30)
    assert theirs == max(mine, plot.AHEAD_NICE) and os.getpriority(os.PRIO_PROCESS, 0) == mine
