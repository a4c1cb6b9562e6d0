"""Model directory IO: config.json + model.safetensors + tokenizer.json (+ MODEL_CARD.md).

Weights load through safetensors only, never through pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from .config import ModelConfig
from .tokenizer import Tokenizer
from .transformer import Transformer

CONFIG, WEIGHTS, TOKENIZER, CARD = "config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"
ENV_MODEL = "DECODER_LENS_MODEL"  # environment variable: the model directory the app opens first


def default_model_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "assets" / "models" / "en-fr"


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message is one sentence naming the file."""


@dataclass(frozen=True)
class LoadedModel:
    model: Transformer
    tokenizer: Tokenizer
    path: Path
    card: str

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg


def save_model_dir(model: Transformer, tokenizer: Tokenizer, path: str | Path, card: str | None = None) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.cfg.save(path / CONFIG)
    save_model(model, str(path / WEIGHTS))
    tokenizer.save(path / TOKENIZER)
    if card is not None:
        (path / CARD).write_text(card)
    return path


def load_model_dir(path: str | Path | None = None) -> LoadedModel:
    """Load a model directory for inference (eval mode, no grad needed)."""
    path = Path(path) if path is not None else default_model_dir()
    if not path.is_dir():
        hint = " (the bundled model is not built yet: see README, 'Train')" if path == default_model_dir() else ""
        raise ModelDirError(f"model directory {path} does not exist{hint}")
    for name in (CONFIG, WEIGHTS, TOKENIZER):
        if not (path / name).is_file():
            raise ModelDirError(f"{path / name} is missing")
    try:
        cfg = ModelConfig.load(path / CONFIG)
    except (ValueError, TypeError) as e:
        raise ModelDirError(f"{path / CONFIG} is not a valid model config: {e}") from None
    try:
        tokenizer = Tokenizer.load(path / TOKENIZER)
    except Exception as e:  # tokenizers raises a bare Exception on malformed JSON
        raise ModelDirError(f"{path / TOKENIZER} is not a valid tokenizer file: {e}") from None
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ModelDirError(
            f"{path / TOKENIZER} has {tokenizer.vocab_size} tokens but {path / CONFIG} says vocab_size={cfg.vocab_size}"
        )
    model = Transformer(cfg)
    try:
        missing, unexpected = load_model(model, str(path / WEIGHTS), strict=False)
    except (SafetensorError, OSError, json.JSONDecodeError) as e:
        raise ModelDirError(f"{path / WEIGHTS} is unreadable or truncated ({e})") from None
    except RuntimeError as e:
        raise ModelDirError(f"{path / WEIGHTS} does not match {path / CONFIG}: {str(e).splitlines()[0]}") from None
    if missing or unexpected:
        raise ModelDirError(
            f"{path / WEIGHTS} does not match {path / CONFIG}: "
            f"missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]}"
        )
    model.eval()
    card = (path / CARD).read_text() if (path / CARD).is_file() else ""
    return LoadedModel(model, tokenizer, path, card)


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def use_threads(n: int, single_row: bool = False) -> int:
    """Share ``n`` threads between torch and numpy's BLAS. Never both on several threads: each pool's idle
    threads spin, and on this 2-core machine 2 + 2 threads made a greedy step 8 ms instead of 1.6.

    - default: torch on ``n`` (the encoder, and oneDNN's products for several rows: beam search, batched
      greedy), BLAS on one;
    - ``single_row`` (greedy or sampled decoding of one sentence): torch on one, BLAS on ``n``, since such a
      step is numpy's matrix-vector products (lean.LeanDecoder). On 2 threads here a greedy step took
      0.83 ms this way against 1.02 ms the default way (60 Multi30k sentences)."""
    import numpy  # noqa: F401  (loaded, so threadpoolctl finds its BLAS)
    from threadpoolctl import threadpool_limits

    n = max(1, n)
    torch.set_num_threads(1 if single_row else n)
    threadpool_limits(n if single_row else 1, user_api="blas")
    return n


def set_threads(default: int = 1, single_row: bool = False) -> int:
    """Set the thread count (use_threads): DECODER_LENS_THREADS, else ``default``.

    The CLI asks for 2. The app keeps 1, as one server decodes for several browser sessions at once
    and 2 threads each would oversubscribe the cores."""
    import os

    try:
        n = int(os.environ.get("DECODER_LENS_THREADS", default))
    except ValueError:
        n = default
    return use_threads(n, single_row)
