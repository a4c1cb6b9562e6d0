"""Shared fixtures: the tiny seeded model and tokenizer of ``model.testing``, built once per session, one Chromium per
browser-test module and one server of the app on the tiny model for the session's browser tests; and the slow
tier: tests that drive Chromium or run a benchmark script are marked ``slow`` here, and tests that start a fresh Python
process or audit the whole app state by state are marked where they are written (``pytest -m "not slow"``
leaves them out while developing; CI runs everything)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from model import Transformer
    from model.core.tokenizer import Tokenizer

THREADS = pytest.StashKey[int]()  # torch's threads for every test, as pytest_configure set them


def _runs_tests(config) -> bool:
    """False in pytest-xdist's controller, which hands the tests to its workers and runs none itself: the project's
    modules (torch, Streamlit, Alembic: ~5 CPU seconds) are imported where tests run, by the hooks and fixtures
    below, and not in the controller too."""
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) or not config.getoption("numprocesses", None)


def pytest_configure(config) -> None:
    """Under pytest-xdist each worker decodes on one thread: one worker a core, and a worker's torch and BLAS pools
    on several threads each would spin against the other workers' (the fast tier took 1.5 times as long).

    The CLI asks for 2 threads (``model.io.checkpoint.set_threads``): a worker runs its tests on one through the
    variable that overrides that, or the CLI's tests spin a second thread against the other worker (an explain
    --contrast test took 15 CPU seconds instead of 2).

    Every new AppTest scans the metadata of every installed package for Streamlit components (0.3 s, a third of a
    typical AppTest test here); the installed packages do not change during a session, so the scan runs once."""
    if not _runs_tests(config):
        _name_the_run(config)
        return
    import torch

    from model.io.checkpoint import ENV_THREADS, use_threads

    if os.environ.get("PYTEST_XDIST_WORKER"):
        use_threads(1)
        os.environ.setdefault(ENV_THREADS, "1")
    config.stash[THREADS] = torch.get_num_threads()
    from streamlit.components.v2 import manifest_scanner

    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


@pytest.hookimpl(trylast=True)  # after the test's fixtures are set up
def pytest_runtest_setup(item) -> None:
    """Each test starts on the session's threads. The CLI's main asks for 2 (its default): a test or a fixture that
    calls it would leave the worker's later tests on them, and on a busy 2-core machine a tiny model's every op
    then waits for the other thread (a family's generate() parity test took a minute instead of seconds)."""
    import torch

    from model.io.checkpoint import use_threads

    n = item.config.stash[THREADS]
    if torch.get_num_threads() != n:
        use_threads(n)


def _name_the_run(config) -> None:
    """The xdist controller names the run (xdist hands the name to every worker): it knows the lock files' names
    and removes them once every worker has ended (``pytest_unconfigure``)."""
    if config.getoption("numprocesses", None) and config.getoption("testrunuid", None) is None:
        config.option.testrunuid = uuid.uuid4().hex


def _lock_paths(run: str | None) -> tuple[Path, Path] | None:
    """The gate's and the machine's lock files of the xdist run ``run`` (None: no run, nothing locked)."""
    if not run:
        return None
    folder = Path(tempfile.gettempdir())
    return folder / f"pytest-{run}.gate", folder / f"pytest-{run}.machine"


def _worker_run(config) -> str | None:
    return getattr(config, "workerinput", {}).get("testrunuid")


def pytest_unconfigure(config) -> None:
    """The controller, every worker ended, removes the run's lock files (a worker that ended early must not: the
    others would lock files made anew, each its own)."""
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        for path in _lock_paths(config.getoption("testrunuid", None)) or ():
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def _machine(config, alone: bool):
    """Under pytest-xdist, a test marked ``alone`` runs while no other worker runs one: it holds the run's machine
    lock exclusively, every other test holds it shared. A gate taken before the machine lock and let go once it is
    held keeps a waiting ``alone`` test ahead of the tests that come after it (a writer first, or two workers could
    keep it waiting for ever). Outside xdist, or in its controller, nothing is locked."""
    paths = _lock_paths(_worker_run(config))
    if not paths:
        yield
        return
    with open(paths[0], "a") as gate, open(paths[1], "a") as machine:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of a test under the machine lock (``_machine``)."""
    with _machine(item.config, item.get_closest_marker("alone") is not None):
        yield


@pytest.fixture(scope="session", autouse=True)
def class_data_dir(tmp_path_factory):
    """The class store's default SQLite file in the session's own folder, not the home directory: the apps a test
    serves without a ``DATABASE_URL`` never share one file with another pytest-xdist worker's (two workers migrating
    one fresh file at once could collide) or with the developer's classes."""
    from classroom.db import DATA_ENV

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_ENV, str(tmp_path_factory.mktemp("class-data")))
        yield


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Tokenizer:
    from model.testing import make_tokenizer

    return make_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer) -> Transformer:
    from model.testing import make_model

    return make_model(tiny_tokenizer.vocab_size)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from model.testing import build_tiny_model_dir

    return build_tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def browser():
    """One Chromium for a module's tests (each opens its own pages, in contexts of their own: no cookie, storage or
    cache passes from one test to the next); a missing one is a failure, never a skip. Not one for the session:
    Playwright's synchronous API keeps an event loop in the thread while it is open, and the later modules'
    ``asyncio.run`` would find it."""
    from harness.browser import BROWSER_ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); .ci/run does this")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def server(tiny_model_dir, tmp_path_factory):
    """The app on the tiny model, served once for the session's browser tests (a module that needs another app
    defines its own ``server``): its URL. Each page opens a Streamlit session of its own, so a test sees no other
    test's state; what they share is the server's caches, which hold results, never a session's choices. Once it
    stops, its log must hold no traceback."""
    from tests.helpers import app_served

    with app_served(tiny_model_dir, tmp_path_factory.mktemp("app") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server for the session (Debian's binaries; harness/pgserver.py), its database's URL. Its own
    temporary folder: pytest's are closed to the postgres user that runs the server under root."""
    from harness.pgserver import TempPostgres

    with TempPostgres() as pg:
        yield pg.url


@pytest.fixture(params=["sqlite", "postgresql"])
def class_db(request, tmp_path) -> str:
    """The class store's tests run on both databases: SQLite in a fresh file, and the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'classes.db'}"
    return request.getfixturevalue("postgres_url")


SLOW_FILES = {  # every test here drives Chromium or a benchmark script
    "test_browser.py",
    "test_browser_a11y.py",
    "test_learn_browser.py",
    "test_legibility.py",
    "test_bench_smoke.py",
    "test_engines.py",
    "test_capacity.py",
}
SLOW_NAMES = ("chromium", "smoke", "as_a_script")  # such tests in the other files


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if (
            item.path.name in SLOW_FILES
            or "browser" in getattr(item, "fixturenames", ())
            or any(word in item.name for word in SLOW_NAMES)
        ):
            item.add_marker(pytest.mark.slow)
