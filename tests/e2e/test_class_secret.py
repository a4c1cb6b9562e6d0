"""The teacher's secret is exchanged, not carried, through nginx as deploy/serve.py runs it: the teacher link opens
the dashboard, the secret leaves the address bar, a reload opens it again from the teacher session's cookie (which
is not the secret), and afterwards no log (nginx's access and error logs, the app's own) holds the secret; a link
of the older form (the secret in the query) is traded and removed the same way. Chromium, nginx: a missing one is a
failure, never a skip."""

from __future__ import annotations

from pathlib import Path

from classroom.db import URL_ENV
from classroom.store import Store
from deploy.serve import Nginx, start_replicas
from harness.browser import free_port
from tests.helpers import wait_idle

TIMEOUT_MS = 120_000
STUDENTS_JS = """() => {
  const m = [...document.querySelectorAll('[data-testid="stMetric"]')]
    .find(e => e.textContent.startsWith('Students'));
  return m ? m.querySelector('[data-testid="stMetricValue"]').textContent.trim() : null;
}"""


def dashboard_shows(page, students: int) -> None:
    page.wait_for_function(f"() => ({STUDENTS_JS})() === '{students}'", timeout=TIMEOUT_MS)
    wait_idle(page, TIMEOUT_MS)


def test_the_teacher_secret_leaves_the_address_bar_and_no_log_holds_it(browser, tiny_model_dir, tmp_path):
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    store = Store.open(url)
    cls = store.create_class("Monday")
    store.join(cls.id, "otter")
    port, front = free_port(), free_port()
    run = tmp_path / "run"
    run.mkdir()
    replicas = start_replicas([port], run, tiny_model_dir, {URL_ENV: url})
    nginx = Nginx(run, f"127.0.0.1:{front}", [port])
    base = f"http://127.0.0.1:{front}"
    try:
        nginx.start(base)
        context = browser.new_context(viewport={"width": 1366, "height": 768})
        page = context.new_page()
        page.goto(f"{base}/class?c={cls.id}#t={cls.secret}")  # the link the Class page gives
        dashboard_shows(page, 1)
        assert cls.secret not in page.url and "#" not in page.url, page.url
        (cookie,) = [c for c in context.cookies() if c["name"] == f"dl_teacher_{cls.id}"]
        assert cookie["value"] and cookie["value"] != cls.secret and cookie["sameSite"] == "Strict"
        page.reload()  # the address without the secret: the teacher session's cookie opens it
        dashboard_shows(page, 1)
        context.close()
        older = browser.new_context(viewport={"width": 390, "height": 844})
        page = older.new_page()
        page.goto(f"{base}/class?c={cls.id}&t={cls.secret}")  # a link of the older form
        dashboard_shows(page, 1)
        page.wait_for_function(f"() => !location.href.includes('{cls.secret}')", timeout=TIMEOUT_MS)
        page.reload()
        dashboard_shows(page, 1)
        older.close()
        stranger = browser.new_context().new_page()  # no secret, no cookie: one sentence, no class data
        stranger.goto(f"{base}/class?c={cls.id}")
        stranger.get_by_text("opens a class's dashboard from its teacher link").wait_for(timeout=TIMEOUT_MS)
        assert stranger.evaluate(STUDENTS_JS) is None
        stranger.context.close()
    finally:
        nginx.stop()
        for r in replicas:
            r.stop()
        store.close_connections()
    logs = [p for p in run.rglob("*") if p.is_file() and p.suffix in (".log", ".stderr")]
    access = (run / "access.log").read_text()
    assert access.count("/class") >= 4 and "/_stcore/stream" in access  # the grep below reads real traffic
    assert {p.name for p in logs} >= {"access.log", "error.log", "replica-0.log"}
    holding = [p.name for p in logs if cls.secret in p.read_text(errors="replace")]
    assert holding == [], holding
    assert Path(run / "replica-0.log").read_text().count("Traceback") == 0
