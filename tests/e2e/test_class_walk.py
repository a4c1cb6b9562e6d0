"""A student and a teacher in Chromium: the student answers the opening check on the class link before joining,
with one question left blank; the page reveals its answer; the student joins (the answers given are sent), picks
the revealed answer and checks again. The teacher's dashboard then shows the score the student's screen showed
(the revealed answer is not a first try), and the answers carried from before joining are stored. Screenshots in
``test-artifacts/class/`` (1366×768 and 390×844). A missing Chromium is a failure, never a skip."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from classroom import stats
from classroom.db import URL_ENV
from classroom.store import NO_ANSWER, Store
from harness.browser import app_env, serve
from model.lesson.learn import CHECK_CONCEPTS
from tests.helpers import wait_idle

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "class"
TIMEOUT_MS = 120_000
SCORE_JS = """() => {
  const m = [...document.querySelectorAll('[data-testid="stMarkdownContainer"]')]
    .map(e => e.textContent).find(t => /^Score: \\d \\/ 5$/.test(t.trim()));
  return m ? Number(m.trim().split(' ')[1]) : null;
}"""


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_a_blank_check_before_joining_is_scored_on_the_dashboard_as_on_the_screen(
    browser, tiny_model_dir, tmp_path, size
):
    SHOTS.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    store = Store.open(url)
    cls = store.create_class("Monday")
    w, h = size
    with serve(ROOT / "app.py", tmp_path / "server.log", {**app_env(tiny_model_dir), URL_ENV: url}) as server:
        page = browser.new_page(viewport={"width": w, "height": h})
        page.goto(f"{server.url}/?class={cls.id}&max_len=8")
        page.get_by_text("Answers you check before joining are sent when you join.").wait_for(timeout=TIMEOUT_MS)
        page.locator(".st-key-learn_nav").wait_for(timeout=TIMEOUT_MS)
        wait_idle(page, TIMEOUT_MS)
        for i in range(2, 6):  # the first question left blank
            page.locator(f'[class*="st-key-learn_pre_{i}_"] [role="radiogroup"] label').first.click()
        page.get_by_role("button", name="Check my answers").click()
        page.wait_for_function(f"({SCORE_JS})() !== null", timeout=TIMEOUT_MS)
        wait_idle(page, TIMEOUT_MS)
        shown = page.evaluate(SCORE_JS)
        revealed = re.search(r"No answer chosen\. The answer is (.+?)\. See", page.inner_text("body"))
        assert revealed, page.inner_text("body")[:2000]
        page.screenshot(path=str(SHOTS / f"walk_before_joining_{w}.png"), full_page=True)
        page.get_by_label(re.compile("^Your nickname")).fill("ada")
        page.get_by_role("button", name="Join", exact=True).click()
        page.get_by_text("Saved to the class “Monday”: 5 answers just now").wait_for(timeout=TIMEOUT_MS)
        page.locator('[class*="st-key-learn_pre_1_"] [role="radiogroup"] label').filter(
            has_text=revealed.group(1)
        ).first.click()
        page.get_by_role("button", name="Check my answers").click()
        page.get_by_text("checked again,").wait_for(timeout=TIMEOUT_MS)
        wait_idle(page, TIMEOUT_MS)
        assert page.evaluate(SCORE_JS) == shown  # the first try's score stays
        page.screenshot(path=str(SHOTS / f"walk_checked_again_{w}.png"), full_page=True)
        teacher = browser.new_page(viewport={"width": w, "height": h})
        teacher.goto(f"{server.url}/class?c={cls.id}#t={cls.secret}")
        teacher.get_by_text("The first check against the final one").wait_for(timeout=TIMEOUT_MS)
        wait_idle(teacher, TIMEOUT_MS)
        # a figure below the window is drawn once the page is idle: waited for, as a reader scrolling to it would
        drawn = teacher.wait_for_function(
            """() => [...document.querySelectorAll('.js-plotly-plot')]
                 .map(d => (d._fullData || []).filter(t => t.name === 'first check').map(t => Array.from(t.x)))
                 .find(x => x.length) || null""",
            timeout=TIMEOUT_MS,
        ).json_value()
        assert drawn == [[shown]], drawn  # the student's row of "Each student's score": the screen's score
        assert server.tracebacks() == 0
    data = store.snapshot(cls.id, cls.secret)
    (scores,) = stats.check_scores(data)
    first = [(a.option, a.first_try) for a in data.answers if a.question == f"pre_{CHECK_CONCEPTS[0]}"]
    assert scores.pre == shown and first == [(NO_ANSWER, True), (revealed.group(1), False)]
    store.close_connections()


def test_an_answer_lost_with_its_frozen_then_killed_server_is_said_not_saved(browser, tiny_model_dir, tmp_path):
    """The student chooses an option and presses Check while the server is frozen (SIGSTOP); the server is killed
    and started again; the page reconnects with the option still chosen. It says that answer is not saved (the
    database holds none), never "saved"; checked again, it is stored."""
    from deploy.serve import start_replicas
    from harness.browser import free_port

    url = f"sqlite:///{tmp_path / 'classes.db'}"
    store = Store.open(url)
    cls = store.create_class("Monday")
    run = tmp_path / "run"
    run.mkdir()
    (server,) = start_replicas([free_port()], run, tiny_model_dir, {URL_ENV: url})
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto(f"{server.url}/?class={cls.id}&max_len=8")
        page.get_by_label(re.compile("^Your nickname")).fill("ada")
        page.get_by_role("button", name="Join", exact=True).click()
        page.get_by_text("In the class “Monday” as ada").wait_for(timeout=TIMEOUT_MS)
        page.locator(".st-key-learn_next button").click()
        page.locator('[class*="st-key-learn_check_"]').wait_for(timeout=TIMEOUT_MS)
        wait_idle(page, TIMEOUT_MS)
        option = page.locator('[class*="st-key-learn_q_"] [role="radiogroup"] label').nth(1)
        chosen = option.inner_text().strip()
        server.proc.send_signal(signal.SIGSTOP)
        option.click()
        page.locator('[class*="st-key-learn_check_"] button').click()
        page.wait_for_timeout(1500)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=15)
        server.start()
        server.wait_healthy()
        page.get_by_text("Not saved: your answer").wait_for(timeout=TIMEOUT_MS)
        assert f"“{chosen}”" in page.inner_text("body") and store.counts(cls.id).answers == 0
        page.screenshot(path=str(SHOTS / "walk_not_saved_after_kill.png"), full_page=True)
        page.locator('[class*="st-key-learn_check_"] button').click()
        page.get_by_text("Saved to the class “Monday”: 1 answer just now").wait_for(timeout=TIMEOUT_MS)
        assert store.counts(cls.id).answers == 1
    finally:
        server.stop()
        store.close_connections()
