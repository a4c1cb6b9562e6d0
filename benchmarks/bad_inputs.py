"""Bad-input matrix: every case through the command line and through the app (Streamlit AppTest).

    python benchmarks/bad_inputs.py [--model DIR] [--subprocess] [--smoke] [--model-dirs] [--timeout S]

Each case must end in a clear message or a sane clamp: never a traceback, never a hang, and the app
must still translate "I am a student." afterwards. Prints the matrix (case | CLI | app | message) and
a verdict line; exits 1 if any case did not behave as expected.

The cases and their checks live in ``harness/bad_inputs.py`` (shared with tests/views/test_bad_inputs.py,
which runs every case on the tests' tiny model). By default every CLI case runs ``model.cli.main(argv)``
in this process under a SIGALRM watchdog, and the cases that need a real process (undecodable bytes in
argv) run ``python -m model`` as a subprocess; ``--subprocess`` runs every case that way.

``--model`` defaults to the bundled model; ``--smoke`` runs a handful of cases on a tiny random
model built on the fly (``model.testing``). ``--model-dirs`` runs only the model-directory section (every
damaged config.json, weight file, header and path), all of it, on the tiny model with ``--smoke``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from harness.bad_inputs import CASES, MODEL_DIR_CASES, Outcome, run_matrix


def print_matrix(rows: list[dict]) -> int:
    w = max(len(r["case"]) for r in rows)
    print(f"{'case':<{w}}  {'CLI':<9}  {'app':<9}  message")
    print(f"{'-' * w}  {'-' * 9}  {'-' * 9}  {'-' * 60}")
    bad = 0
    for r in rows:
        problems = [p for p in (r["cli_problem"], r.get("app_problem", "")) if p]
        bad += bool(problems)
        cli, app = r["cli"], r.get("app", Outcome("n/a"))
        same = app.message.removeprefix("Cannot load the model: ") == cli.message.removeprefix("error: ")
        msgs = [cli.message[:200], f"app: {'the same' if same else app.message[:75]}" if app.message else ""]
        msg = " | ".join(problems) if problems else " | ".join(m for m in msgs if m) or "-"
        msg = msg.replace("\n", " ")
        mark = "" if not problems else "FAIL "
        print(f"{r['case']:<{w}}  {cli.kind:<9}  {app.kind:<9}  {mark}{msg[:240]}")
    n = len(rows)
    print(
        f"\nverdict: {n - bad}/{n} cases behave as expected (clear message or sane clamp, no traceback, no hang, "
        f"app usable afterwards){'' if not bad else f'; {bad} FAILED'}"
    )
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="model directory (default: the bundled model)")
    ap.add_argument("--smoke", action="store_true", help="a handful of cases (tiny random model unless --model)")
    ap.add_argument("--subprocess", action="store_true", help="run every CLI case as `python -m model`")
    ap.add_argument("--model-dirs", action="store_true", help="only the damaged model directories (all of them)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a case counts as a hang")
    a = ap.parse_args(argv)
    from model.io.checkpoint import default_model_dir
    from model.testing import build_tiny_model_dir

    damaged = [c for c in CASES if c.damage]
    cases = damaged if a.model_dirs else [c for c in CASES if c.smoke or not a.smoke]
    with tempfile.TemporaryDirectory(prefix="bad-inputs-model-") as tmp:
        model_dir = a.model or (build_tiny_model_dir(Path(tmp) / "tiny") if a.smoke else default_model_dir())
        t0 = time.perf_counter()
        rows = run_matrix(cases, model_dir, timeout=a.timeout, use_subprocess=a.subprocess, app_every=not a.smoke)
        print(
            f"model: {model_dir}; {len(cases)} cases in {time.perf_counter() - t0:.1f} s "
            f"(CLI {'subprocess' if a.subprocess else 'in-process'}; {len(damaged)} damaged model directories, "
            f"{len(MODEL_DIR_CASES)} of them in the model-directory section)\n"
        )
        bad = print_matrix(rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
