"""A class's dashboard in a real browser: it refreshes while the class works (an answer stored after the page
opened appears without a reload), its figures are legible at 1366×768 and on a phone (390 px), measured by the
legibility harness, and a large class's one-row-per-student figure waits in its closed expander until opened.
Screenshots go to ``test-artifacts/class/``. A missing browser is a failure, never a skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from classroom.db import URL_ENV
from classroom.store import QUESTIONS, Answer
from harness.browser import DRAWN_JS, app_env, serve
from harness.legibility import violations
from tests.helpers import seed_class, wait_idle
from views.teacher import STUDENT_ROWS_SHOWN

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "class"
TIMEOUT_MS = 120_000
LARGE_CLASS = 300  # the class size the dashboard is made for: its one-row-each figure is 9,000 px tall
# every figure as wide as its column at most, and its title's every line inside the figure
OVERFLOW_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(d => {
  const fig = d.getBoundingClientRect(), col = d.closest('[data-testid="stVerticalBlock"]').getBoundingClientRect();
  const out = fig.right > col.right + 1 || fig.left < col.left - 1 ? [`figure ${fig.width} px in ${col.width} px`] : [];
  for (const t of d.querySelectorAll('.gtitle')) {
    const r = t.getBoundingClientRect();
    if (r.right > fig.right + 1 || r.left < fig.left - 1) out.push(`title ${t.textContent} cut`);
  }
  return out;
})"""
ANSWERS_JS = """() => {
  const m = [...document.querySelectorAll('[data-testid="stMetric"]')]
    .find(e => e.textContent.startsWith('Answers'));
  return m ? m.querySelector('[data-testid="stMetricValue"]').textContent.trim() : null;
}"""


@pytest.fixture
def classroom_db(tmp_path):
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    store, cls = seed_class(url, 12, "Monday <b>9:00</b>")
    yield url, store, cls
    store.close_connections()


def test_the_dashboard_refreshes_itself_and_is_legible(browser, tiny_model_dir, tmp_path, classroom_db):
    url, store, cls = classroom_db
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serve(ROOT / "app.py", tmp_path / "server.log", {**app_env(tiny_model_dir), URL_ENV: url}) as server:
        for width, height in ((1366, 768), (390, 844)):
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{server.url}/class?c={cls.id}#t={cls.secret}")
            page.wait_for_function(DRAWN_JS, arg=5, timeout=TIMEOUT_MS)
            assert page.locator(".js-plotly-plot").count() == 5
            wait_idle(page, TIMEOUT_MS)
            assert page.evaluate(ANSWERS_JS) == str(12 * len(QUESTIONS))
            problems = violations(page) + page.evaluate(OVERFLOW_JS)
            page.screenshot(path=str(SHOTS / f"dashboard_{width}.png"), full_page=True)
            assert problems == [], problems
            assert page.locator("text=Monday <b>9:00</b>").count() >= 1  # the name as text, not markup
            page.close()
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto(f"{server.url}/class?c={cls.id}&t={cls.secret}")
        page.wait_for_function(DRAWN_JS, arg=4, timeout=TIMEOUT_MS)
        late = store.join(cls.id, "late")
        store.answer(Answer(f"{late.id}:pre_mask:1", cls.id, late.id, "pre_mask", "x", 0, True, "I like pizza."))
        page.wait_for_function(f"() => ({ANSWERS_JS})() === '{12 * len(QUESTIONS) + 1}'", timeout=30_000)
        assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1  # no reload
        page.close()
        big_store, big = seed_class(url, LARGE_CLASS, "A large class")
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto(f"{server.url}/class?c={big.id}&t={big.secret}")
        page.wait_for_function(DRAWN_JS, arg=4, timeout=TIMEOUT_MS)
        late = big_store.join(big.id, "late")  # a refresh after the page was laid out: the figure still waits
        big_store.answer(Answer(f"{late.id}:pre_mask:1", big.id, late.id, "pre_mask", "x", 0, True, "I like pizza."))
        page.wait_for_function(f"() => ({ANSWERS_JS})() === '{LARGE_CLASS * len(QUESTIONS) + 1}'", timeout=30_000)
        wait_idle(page, TIMEOUT_MS)
        inside = page.locator('[data-testid="stExpander"] .decoder-lens-plot')
        assert inside.count() == 1 and page.locator('[data-testid="stExpander"] .js-plotly-plot').count() == 0
        page.get_by_text("Each student's scores, one row each").click()
        page.wait_for_function(DRAWN_JS, arg=5, timeout=TIMEOUT_MS)
        assert inside.evaluate("d => d._fullLayout.height") > STUDENT_ROWS_SHOWN * 20  # a row each
        page.screenshot(path=str(SHOTS / "dashboard_large_class.png"), full_page=True)
        page.close()
        big_store.close_connections()
        assert server.tracebacks() == 0
