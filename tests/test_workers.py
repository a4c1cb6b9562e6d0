"""The machine lock of tests/conftest.py: under pytest-xdist a test marked ``alone`` runs while no other test does,
and a test waiting to run alone is not overtaken by the tests that ask after it."""

from __future__ import annotations

import threading
import time
import uuid
from types import SimpleNamespace

import pytest

from tests.conftest import _lock_paths, _machine, _name_the_run, pytest_unconfigure


def controller(run: str | None = None) -> SimpleNamespace:
    """The xdist controller's config as far as the lock reads it (two workers asked for; ``run`` its name)."""
    option = SimpleNamespace(numprocesses=2, testrunuid=run)
    return SimpleNamespace(option=option, getoption=lambda name, default=None: getattr(option, name, default))


@pytest.fixture
def config():
    """A worker's config as far as the lock reads it, its lock files removed afterwards (as the controller does)."""
    run = uuid.uuid4().hex
    yield SimpleNamespace(workerinput={"testrunuid": run}, getoption=lambda name, default=None: 2)
    pytest_unconfigure(controller(run))


def _run(config, alone: bool, name: str, events: list[str], hold: float) -> threading.Thread:
    def body():
        with _machine(config, alone):
            events.append(f"{name} in")
            time.sleep(hold)
            events.append(f"{name} out")

    t = threading.Thread(target=body)
    t.start()
    return t


def test_an_alone_test_waits_for_the_others_and_goes_before_later_ones(config):
    events: list[str] = []
    first = _run(config, False, "shared", events, 0.4)
    time.sleep(0.1)
    alone = _run(config, True, "alone", events, 0.3)
    time.sleep(0.1)
    later = _run(config, False, "later", events, 0.1)
    for t in (first, alone, later):
        t.join(5)
    assert events == ["shared in", "shared out", "alone in", "alone out", "later in", "later out"], events


def test_shared_tests_run_together(config):
    events: list[str] = []
    a = _run(config, False, "a", events, 0.3)
    time.sleep(0.1)
    b = _run(config, False, "b", events, 0.1)
    for t in (a, b):
        t.join(5)
    assert events == ["a in", "b in", "b out", "a out"], events


def test_nothing_is_locked_outside_a_worker():
    events: list[str] = []
    a = _run(SimpleNamespace(), True, "a", events, 0.3)
    time.sleep(0.1)
    b = _run(SimpleNamespace(), True, "b", events, 0.1)
    for t in (a, b):
        t.join(5)
    assert events == ["a in", "b in", "b out", "a out"], events


def test_the_run_leaves_no_lock_file_and_a_worker_done_removes_none(config):
    with _machine(config, True):
        pass
    paths = _lock_paths(config.workerinput["testrunuid"])
    assert paths and all(p.exists() for p in paths)
    pytest_unconfigure(config)  # a worker that ended: another may still lock these files
    assert all(p.exists() for p in paths)
    pytest_unconfigure(controller(config.workerinput["testrunuid"]))  # every worker ended
    assert not any(p.exists() for p in paths)


def test_the_controller_names_the_run_once():
    named = controller()
    _name_the_run(named)
    run = named.option.testrunuid
    assert isinstance(run, str) and len(run) == 32
    _name_the_run(named)  # a name given (--testrunuid) is kept
    assert named.option.testrunuid == run
