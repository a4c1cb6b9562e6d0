"""Strict JSON (RFC 8259) for everything the project writes: no NaN, no Infinity.

Non-finite numbers are written as null; numpy scalars and arrays become numbers and lists. ``allow_nan=False``
stays on, so a value that slips past the conversion raises instead of writing ``NaN``. No torch here, so
viz/ and the benchmarks can import it cheaply.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def finite(x: Any) -> Any:
    """``x`` with every non-finite float replaced by None, numpy values as Python ones, tuples as lists."""
    if isinstance(x, float | np.floating):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, bool | int | str) or x is None:
        return x
    if isinstance(x, np.ndarray):
        return finite(x.tolist())
    if isinstance(x, np.generic):
        return finite(x.item())
    if isinstance(x, Mapping):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [finite(v) for v in (sorted(x) if isinstance(x, set | frozenset) else x)]
    return x


def _default(o: Any) -> Any:
    """Objects json does not know (paths, enums, ...) as their text."""
    return str(o)


def dumps(obj: Any, *, indent: int | None = None, ensure_ascii: bool = False, **kw: Any) -> str:
    """Strict JSON text of ``obj`` (non-finite numbers as null)."""
    return json.dumps(finite(obj), indent=indent, ensure_ascii=ensure_ascii, allow_nan=False, default=_default, **kw)


def dump_bytes(obj: Any, *, indent: int | None = 1) -> bytes:
    """``dumps`` as UTF-8 bytes (downloads)."""
    return dumps(obj, indent=indent).encode()


def write(path: str | Path, obj: Any, *, indent: int | None = 1) -> Path:
    """Write ``obj`` as strict JSON (UTF-8, a final newline) to ``path``."""
    path = Path(path)
    path.write_text(dumps(obj, indent=indent) + "\n", encoding="utf-8")
    return path


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON, refusing the ``NaN``/``Infinity`` extensions Python's json accepts by default."""

    def refuse(constant: str):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)
