"""Decoder Lens model package: an instrumented encoder-decoder Transformer.

``ModelConfig`` and ``Transformer`` are imported on first use, so that torch-free modules of the package
(``model.core.constants``) can be imported without torch.
"""

from __future__ import annotations

import importlib

__all__ = ["ModelConfig", "Transformer"]
_LAZY = {"ModelConfig": "model.core.config", "Transformer": "model.core.transformer"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
