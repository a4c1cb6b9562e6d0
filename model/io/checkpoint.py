"""Model directory IO: config.json + model.safetensors + tokenizer.json (+ MODEL_CARD.md).

Weights load through safetensors only, never through pickle.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_model

from model.core.config import ModelConfig
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer

CONFIG, WEIGHTS, TOKENIZER, CARD = "config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"
ENV_MODEL = "DECODER_LENS_MODEL"  # environment variable: the model directory the app opens first
ENV_DEVICE = "DECODER_LENS_DEVICE"  # cpu (the default) or cuda: where the CLI runs the model
ENV_THREADS = "DECODER_LENS_THREADS"  # the threads the CLI and the app decode on, instead of their defaults


def default_model_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "assets" / "models" / "en-fr"


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


# safetensors dtypes: bytes per element; only the floating ones are accepted as weights
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _entry_ok(entry) -> bool:
    """A header entry: {"dtype": str, "shape": [n, ...], "data_offsets": [begin, end]} with sane numbers."""

    def whole(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(entry, dict) or not isinstance(entry.get("dtype"), str):
        return False
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(whole(d) for d in shape):
        return False
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(whole(o) for o in offsets):
        return False
    return offsets[0] <= offsets[1]


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor name: (dtype, shape)} from a safetensors file's header, without reading any tensor.

    Checks what a loader would trust: the 8-byte header length, the JSON, each entry's fields, and that every
    tensor's bytes lie inside the file and match its shape and dtype. Raises ModelDirError (one sentence).
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ModelDirError(f"{path} is too short to be a safetensors file ({_plural(size, 'byte')})")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise ModelDirError(
                f"{path} is truncated or damaged: its header length field says {n:,} bytes but "
                f"the file holds only {size - 8:,} after it"
            )
        if n > MAX_HEADER:
            raise ModelDirError(f"{path} has a header of {n:,} bytes, more than a safetensors file may have")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ModelDirError(f"{path} has a damaged header: its {n:,} header bytes are not valid JSON") from None
    if not isinstance(header, dict):
        raise ModelDirError(f"{path} has a damaged header: it holds a JSON {type(header).__name__}, not an object")
    data_size = size - 8 - n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not _entry_ok(entry):
            raise ModelDirError(
                f"{path} has a damaged header: the entry for {name} lacks a valid dtype, shape or data offsets"
            )
        dtype, shape = entry["dtype"], tuple(entry["shape"])
        begin, stop = entry["data_offsets"]
        if stop > data_size:
            raise ModelDirError(
                f"{path} is truncated or damaged: the data of {name} (bytes {begin:,}–{stop:,}) lies "
                f"beyond the end of the file's {data_size:,} data bytes"
            )
        if dtype in DTYPE_BYTES and stop - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise ModelDirError(
                f"{path} has a damaged header: {name} takes {stop - begin:,} bytes, not the "
                f"{math.prod(shape) * DTYPE_BYTES[dtype]:,} of a {dtype} tensor of shape "
                f"{list(shape)}"
            )
        out[name] = (dtype, shape)
    return out


def expected_tensors(cfg: ModelConfig) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
    """{name: (shape, aliases)} of what a weight file for ``cfg`` holds: one entry per tensor, under the name
    safetensors keeps for tied ones (the alphabetically first) with the other names of the same tensor beside.

    Built on the ``meta`` device, so it allocates no weight whatever the sizes (only the position table, which is
    not one; check the sizes first anyway)."""
    with torch.device("meta"):
        model = Transformer(cfg, init=False)
    groups: dict[int, list[str]] = {}
    tensors = model.state_dict(keep_vars=True)
    for name, t in tensors.items():
        groups.setdefault(id(t), []).append(name)
    out = {}
    for names in groups.values():
        names = sorted(names)
        out[names[0]] = (tuple(tensors[names[0]].shape), tuple(names))
    return out


def check_weights_header(path: Path, cfg: ModelConfig) -> dict[str, tuple[str, ...]]:
    """Compare the weight file's header with the tensors ``cfg`` needs; returns {name in the file: the model's
    names for that tensor (several for a tied one)}.

    Raises ModelDirError naming the first tensor whose dtype, presence or shape is wrong."""
    found = read_header(path)
    for name, (dtype, _) in sorted(found.items()):
        if dtype not in FLOAT_DTYPES:
            raise ModelDirError(
                f"{path} stores {name} as {dtype}, not a floating-point type ({', '.join(FLOAT_DTYPES)})"
            )
    want = expected_tensors(cfg)
    where = {alias: key for key, (_, aliases) in want.items() for alias in aliases}
    unexpected = sorted(k for k in found if k not in where)
    present: dict[str, list[str]] = {}
    for k in found:
        if k in where:
            present.setdefault(where[k], []).append(k)
    unexpected += sorted(k for names in present.values() for k in sorted(names)[1:])  # a tied tensor stored twice
    missing = [k for k in want if k not in present]  # in the model's order, as the shapes below
    if missing or unexpected:
        parts = []
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            parts.append(f"{_plural(len(missing), 'tensor')} missing ({', '.join(missing[:3])}{more})")
        if unexpected:
            more = f" and {len(unexpected) - 3} more" if len(unexpected) > 3 else ""
            parts.append(f"{_plural(len(unexpected), 'unexpected tensor')} ({', '.join(unexpected[:3])}{more})")
        raise ModelDirError(f"{path} does not match its {CONFIG}: {'; '.join(parts)}")
    mapping = {}
    wrong = []
    for key, (shape, aliases) in want.items():  # the model's order: the embedding first, then layer by layer
        name = present[key][0]
        if found[name][1] != shape:
            wrong.append((name, shape, found[name][1]))
        mapping[name] = aliases
    if wrong:
        name, shape, got = wrong[0]
        more = f" ({len(wrong) - 1} more tensors differ too)" if len(wrong) > 1 else ""
        raise ModelDirError(
            f"{path} does not match its {CONFIG}: {name} has shape {list(got)} in the file but the "
            f"config needs {list(shape)}{more}"
        )
    return mapping


def transformers_directory(path: Path) -> None:
    """Refuse, in one sentence, a transformers directory given where a model directory is expected (its config.json
    names a ``model_type``): it is read through the importer, which refuses what it cannot read."""
    import json

    try:
        kind = json.loads((path / CONFIG).read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return  # no config, or not one of transformers': the checks that follow say what is wrong
    if isinstance(kind, str):
        raise ModelDirError(
            f"{path} is a transformers directory (model_type={kind!r}), not a Decoder Lens model directory: "
            f"import it first with python -m model import {path} OUT_DIR (a decoder-only model cannot be)"
        )


def load_model_dir(path: str | Path | None = None, device: str | None = None) -> LoadedModel:
    """Load a model directory for inference (eval mode, no grad needed), on ``device`` (``resolve_device``).

    Before anything is allocated, config.json's sizes are checked against sane bounds and the weight file's
    header against the tensors the config needs (names, shapes, floating dtypes, offsets inside the file);
    after loading, every tensor must be finite. Every failure is a ModelDirError of one sentence."""
    path = Path(path) if path is not None else default_model_dir()
    if path.is_file():
        raise ModelDirError(
            f"{path} is a file, not a model directory (a directory holding {CONFIG}, {WEIGHTS} and {TOKENIZER})"
        )
    if not path.is_dir():
        hint = " (the bundled model is not built yet: see docs/training.md)" if path == default_model_dir() else ""
        raise ModelDirError(f"model directory {path} does not exist{hint}")
    transformers_directory(path)
    for name in (CONFIG, WEIGHTS, TOKENIZER):
        if not (path / name).is_file():
            raise ModelDirError(f"{path / name} is missing")
    try:
        cfg = ModelConfig.load(path / CONFIG)
    except (ValueError, TypeError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise ModelDirError(f"{path / CONFIG} is not a valid model config: {e}") from None
    try:
        tokenizer = Tokenizer.load(path / TOKENIZER)
    except Exception as e:  # tokenizers raises a bare Exception on malformed JSON
        raise ModelDirError(f"{path / TOKENIZER} is not a valid tokenizer file: {e}") from None
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ModelDirError(
            f"{path / TOKENIZER} has {tokenizer.vocab_size} tokens but {path / CONFIG} says vocab_size={cfg.vocab_size}"
        )
    weights = path / WEIGHTS
    aliases = check_weights_header(weights, cfg)
    model = Transformer(cfg, init=False)  # every tensor is overwritten below (a header check made sure)
    targets = model.state_dict()
    try:
        with safe_open(str(weights), "pt") as f, torch.no_grad():
            for name in f.keys():
                t = f.get_tensor(name)
                if not bool(torch.isfinite(t).all()):
                    bad = int((~torch.isfinite(t)).sum())
                    raise ModelDirError(
                        f"{weights} holds non-finite values (NaN or infinity) in {name}: "
                        f"{bad:,} of its {t.numel():,} values"
                    )
                for alias in aliases[name]:
                    targets[alias].copy_(t)
    except (SafetensorError, OSError) as e:
        raise ModelDirError(f"{weights} is unreadable or damaged ({str(e).splitlines()[0] if str(e) else e})") from None
    model.to(resolve_device(device)).eval()
    card = (path / CARD).read_text() if (path / CARD).is_file() else ""
    return LoadedModel(model, tokenizer, path, card)


def resolve_device(name: str | None = None) -> torch.device:
    """``name``, else DECODER_LENS_DEVICE, else the CPU; "cuda" (or "cuda:N") only where torch sees that GPU."""
    import os

    name = name or os.environ.get(ENV_DEVICE) or "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}: use cpu or cuda") from None
    if device.type == "cuda" and not (torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()):
        raise ValueError(f"device {name} was asked for, but torch sees no such GPU")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r}: use cpu or cuda")
    return device


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
        n = int(os.environ.get(ENV_THREADS, default))
    except ValueError:
        n = default
    return use_threads(n, single_row)
