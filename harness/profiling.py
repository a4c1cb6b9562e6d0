"""Profiles of the app's script runs inside a live server, grouped by benchmark phase (``classroom.py --profile``).

``benchmarks/profiled_app.py`` runs the page script ``views/main.py`` through ``run_profiled``, which wraps Streamlit's
``ScriptRunner._run_script`` once: from then on every script run (one per click, in the session's own thread;
the step buttons' fragment reruns included) is sampled by pyinstrument, and the runs are combined per phase.
The benchmark names the phase in the file ``phase`` of the folder $DECODER_LENS_PROFILE_DIR ("-": not
recorded); when the name changes, a watcher thread in the server writes the finished phase as
``profile-PHASE.html`` (pyinstrument's call tree), ``profile-PHASE.txt`` (the same as text) and
``profile-PHASE.json`` (script runs, their wall time, the functions with the most time of their own), then
``profile-PHASE.done``.
"""

from __future__ import annotations

import functools
import json
import os
import runpy
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from pyinstrument.session import Session

P = ParamSpec("P")  # a profiled run's parameters
T = TypeVar("T")  # and its result

ROOT = Path(__file__).resolve().parents[1]
ENV_DIR = "DECODER_LENS_PROFILE_DIR"
IDLE = "-"
TOP = 15


def phase_path(folder: Path) -> Path:
    return Path(folder) / "phase"


def set_phase(folder: Path, phase: str) -> None:
    tmp = Path(folder) / "phase.tmp"
    tmp.write_text(phase)
    tmp.replace(phase_path(folder))  # atomic: the server never reads half a name


def served_script(env: dict[str, str], profile: Path | None) -> tuple[dict[str, str], Path]:
    """The environment and script a benchmark serves: ``app.py`` or, given a ``profile`` folder (emptied, its phase
    not recorded), ``benchmarks/profiled_app.py``, which writes each phase's profile there."""
    if profile is None:
        return env, ROOT / "app.py"
    shutil.rmtree(profile, ignore_errors=True)
    profile.mkdir(parents=True)
    set_phase(profile, IDLE)
    return {**env, ENV_DIR: str(profile.resolve())}, ROOT / "benchmarks" / "profiled_app.py"


def wait_written(folder: Path, phase: str, timeout: float = 120.0) -> dict | None:
    """The summary of ``phase`` once the server has written it (None if it did not within ``timeout``)."""
    done, summary = Path(folder) / f"profile-{phase}.done", Path(folder) / f"profile-{phase}.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done.exists():
            return json.loads(summary.read_text())
        time.sleep(0.2)
    return None


def summarize(session: Session | None, runs: int) -> dict:
    """Script runs, their summed wall time and the functions with the most time of their own (pyinstrument samples
    wall time: a thread waiting for the GIL counts in the function it was in)."""
    own: dict[str, float] = {}
    root = session.root_frame() if session else None  # None too for a session without samples
    todo = [root] if root is not None else []
    while todo:
        f = todo.pop()
        todo += f.children
        if f.is_synthetic or not f.file_path_short or f.file_path_short == "<thread>":
            continue
        key = f"{f.function} ({f.file_path_short}:{f.line_no})"
        own[key] = own.get(key, 0.0) + f.total_self_time
    top = sorted(own.items(), key=lambda kv: -kv[1])[:TOP]
    return {
        "runs": runs,
        "wall_s": session.duration if session else 0.0,
        "samples": session.sample_count if session else 0,
        "top_self": [[k, v] for k, v in top],
    }


class PhaseProfiles:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.lock = threading.Lock()
        self.sessions: dict[str, Session] = {}
        self.runs: dict[str, int] = {}
        threading.Thread(target=self._watch, name="profile-writer", daemon=True).start()

    def phase(self) -> str:
        try:
            return phase_path(self.folder).read_text().strip() or IDLE
        except OSError:
            return IDLE

    def profiled(self, run: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``run(*args, **kwargs)`` sampled by pyinstrument, its profile added to the current phase's."""
        from pyinstrument import Profiler
        from pyinstrument.session import Session

        phase = self.phase()
        if phase == IDLE:
            return run(*args, **kwargs)
        profiler = Profiler(interval=0.001, async_mode="disabled")
        profiler.start()
        try:
            return run(*args, **kwargs)
        finally:
            session = profiler.stop()
            with self.lock:
                old = self.sessions.get(phase)
                self.sessions[phase] = session if old is None else Session.combine(old, session)
                self.runs[phase] = self.runs.get(phase, 0) + 1

    def _watch(self) -> None:
        last = self.phase()
        while True:
            time.sleep(0.25)
            now = self.phase()
            if now != last:
                if last != IDLE:
                    self.write(last)
                last = now

    def write(self, phase: str) -> None:
        from pyinstrument.renderers import ConsoleRenderer, HTMLRenderer

        with self.lock:
            session, runs = self.sessions.pop(phase, None), self.runs.pop(phase, 0)
        base = self.folder / f"profile-{phase}"
        if session is not None:
            base.with_suffix(".html").write_text(HTMLRenderer().render(session))
            base.with_suffix(".txt").write_text(ConsoleRenderer(unicode=True, color=False).render(session))
        base.with_suffix(".json").write_text(json.dumps(summarize(session, runs), indent=1))
        base.with_suffix(".done").write_text("")


_profiles: PhaseProfiles | None = None
_init = threading.Lock()


def run_profiled(script: Path) -> None:
    """Run the Streamlit ``script`` as this run's page; the first call makes every later script run profiled."""
    global _profiles
    with _init:
        if _profiles is None:
            from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

            profiles = _profiles = PhaseProfiles(Path(os.environ[ENV_DIR]))
            original = ScriptRunner._run_script

            @functools.wraps(original)
            def _run_script(self, rerun_data):
                return profiles.profiled(original, self, rerun_data)

            ScriptRunner._run_script = _run_script  # type: ignore[method-assign]  # every script run profiled
    runpy.run_path(str(script), run_name="__main__")
