"""The page script ``views/main.py``, each script run sampled by pyinstrument (``classroom.py --profile``).

Run by the benchmark as ``DECODER_LENS_PROFILE_DIR=DIR streamlit run benchmarks/profiled_app.py``; the page is
views/main.py's, unchanged; ``harness/profiling.py`` says what is written to DIR and when.
"""

from __future__ import annotations

from pathlib import Path

from harness.profiling import run_profiled

ROOT = Path(__file__).resolve().parents[1]

run_profiled(ROOT / "views" / "main.py")
