"""Decoder Lens model package: an instrumented encoder-decoder Transformer."""

from .config import ModelConfig
from .transformer import Transformer

__all__ = ["ModelConfig", "Transformer"]
