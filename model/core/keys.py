"""The names of a trace's records, spelled in one place, and a typed view over a trace or a step's records.

A record of a layer is named side.layer.block.quantity (``dec.1.cross.weights``: decoder layer 1, cross-attention,
its softmax weights), a side's embedding side.quantity (``dec.pe``), and what belongs to the whole model one word
(``memory``, ``logits``). The modules record their own stages under the quantity's name alone (``weights``) and
their callers prefix them (``prefixed``), so the names below are every name a trace holds (docs/cli.md, "Trace keys").
Every other module asks this one for a key (``dec(1, "cross", "weights")``) or reads it through ``Records``
(``records.cross_weights(1)``); a test fails on a key spelled by hand anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, NamedTuple, TypeVar

EMBEDDING = ("embed", "pe", "input")  # token embedding × √d_model, positional encoding, their sum
ATTENTION = ("Q", "K", "V", "scores", "mask", "masked_scores", "weights", "context", "concat", "out")
NORM = ("residual", "mean", "std", "out")  # Add & Norm: x + Sublayer(x), its mean and std per position, LayerNorm
FFN = ("hidden", "out")
BLOCKS: dict[str, dict[str, tuple[str, ...]]] = {
    "enc": {"self": ATTENTION, "norm1": NORM, "ffn": FFN, "norm2": NORM},
    "dec": {"self": ATTENTION, "norm1": NORM, "cross": ATTENTION, "norm2": NORM, "ffn": FFN, "norm3": NORM},
}
SIDES = tuple(BLOCKS)
# quantities only some of the family records: a pre-norm block's Norm(x), what its sublayer reads (its residual and
# out are then the stream itself, mean and std those of x); T5's relative position bias, added to the scores
NORM_PRE = ("normed",)
ATTENTION_RELATIVE = ("position_bias",)
OPTIONAL: dict[tuple[str, ...], tuple[str, ...]] = {NORM: NORM_PRE, ATTENTION: ATTENTION_RELATIVE}
FINAL_NORM = "final_norm"  # a side's own record: the output of its stack's final norm (the pre-norm models)
ATTENTION_KV = ("K", "V")  # the projections of the keys' positions (a cache, in a step's records)
ATTENTION_MAPS = ("scores", "mask", "masked_scores", "weights")  # a query row over every key position

MEMORY, LOGITS, PROBS, LOSS, CAUSAL = "memory", "logits", "probs", "loss", "causal"
SRC_IDS, DEC_INPUT_IDS, LABEL_IDS = "src_ids", "dec_input_ids", "label_ids"
TOKENS_SRC, TOKENS_DEC_INPUT, TOKENS_LABEL = "tokens.src", "tokens.dec_input", "tokens.label"

A = TypeVar("A")  # what a record holds: a numpy array or a torch tensor


def _check(side: str, block: str | None = None, quantity: str | None = None) -> None:
    if side not in BLOCKS:
        raise KeyError(f"no side {side!r}: {SIDES}")
    if block is not None and block not in BLOCKS[side]:
        raise KeyError(f"no block {block!r} in {side}: {tuple(BLOCKS[side])}")
    known = () if block is None else BLOCKS[side][block] + OPTIONAL.get(BLOCKS[side][block], ())
    if quantity is not None and block is not None and quantity not in known:
        raise KeyError(f"no quantity {quantity!r} in {side}.{block}: {BLOCKS[side][block]}")


def join(*parts: str | int) -> str:
    return ".".join(str(p) for p in parts)


def layer(side: str, i: int, block: str | None = None, quantity: str | None = None) -> str:
    """``layer("dec", 1)`` → ``dec.1``; with a block, ``dec.1.cross``; with a quantity, ``dec.1.cross.weights``."""
    _check(side, block, quantity)
    return join(side, i, *(p for p in (block, quantity) if p is not None))


def dec(i: int, block: str | None = None, quantity: str | None = None) -> str:
    """Decoder layer ``i``'s key: ``dec(1, "cross", "weights")`` → ``dec.1.cross.weights``."""
    return layer("dec", i, block, quantity)


def enc(i: int, block: str | None = None, quantity: str | None = None) -> str:
    """Encoder layer ``i``'s key: ``enc(0, "self", "weights")`` → ``enc.0.self.weights``."""
    return layer("enc", i, block, quantity)


def local(block: str, quantity: str) -> str:
    """The name a layer records a block's quantity under, before its caller prefixes the layer: ``self.weights``."""
    kinds = [blocks.get(block, ()) for blocks in BLOCKS.values()]
    if not any(quantity in qs + OPTIONAL.get(qs, ()) for qs in kinds):
        raise KeyError(f"no quantity {quantity!r} in a {block!r} block")
    return join(block, quantity)


def embedding(side: str, quantity: str) -> str:
    """``embedding("dec", "pe")`` → ``dec.pe``."""
    _check(side)
    if quantity not in EMBEDDING:
        raise KeyError(f"no embedding quantity {quantity!r}: {EMBEDDING}")
    return join(side, quantity)


def final_norm(side: str) -> str:
    """``final_norm("dec")`` → ``dec.final_norm``: the output of the side's final norm (pre-norm models have one)."""
    _check(side)
    return join(side, FINAL_NORM)


def layer_output(i: int) -> str:
    """What decoder layer ``i`` hands on, its last Add & Norm's output (the logit lens reads it)."""
    return dec(i, "norm3", "out")


def is_layer_output(key: str) -> bool:
    """Whether ``key`` is a decoder layer's output (``layer_output``): for ``steps.stack_view``'s ``keep``."""
    i = parse(key).layer
    return i is not None and key == layer_output(i)


def head(side: str, i: int, block: str, h: int) -> str:
    """One attention head, as ablation writes it: ``head("dec", 1, "cross", 2)`` → ``dec.1.cross.2``."""
    if BLOCKS[side].get(block) is not ATTENTION:
        raise KeyError(f"{side}.{block} is not an attention block")
    return join(layer(side, i, block), h)


def _check_name(key: str) -> None:
    """Refuse a name that is not one of the above: a side's embedding (``dec.pe``), a block's own record
    (``self.Q``) or a layer's (``dec.1.self.Q``)."""
    parts = key.split(".")
    if len(parts) == 4 and parts[0] in BLOCKS and parts[1].isdigit():
        _check(parts[0], parts[2], parts[3])
    elif len(parts) == 2 and parts[0] in BLOCKS:
        embedding(*parts)
    elif len(parts) == 2:
        local(*parts)
    else:
        raise KeyError(f"{key!r} is not a record's name")


def prefixed(prefix: str, rec: Mapping[str, A] | None) -> dict[str, A]:
    """A block's or a layer's own records under their full names: ``prefixed("dec.1", {"self.Q": q})``; a block
    or quantity misspelt where the records are made raises KeyError there."""
    out = {join(prefix, k): v for k, v in rec.items()} if rec else {}
    for key in out:
        _check_name(key)
    return out


class Key(NamedTuple):
    """A key read back: side (None for the model's own records), layer (None for an embedding), block (None for an
    embedding or a whole layer), quantity (None for a block or a layer)."""

    side: str | None
    layer: int | None
    block: str | None
    quantity: str | None


def parse(key: str) -> Key:
    """``dec.1.cross.weights`` → Key("dec", 1, "cross", "weights"); a block, ``dec.1.cross`` → Key("dec", 1,
    "cross", None); ``dec.pe`` → Key("dec", None, None, "pe"); ``logits`` → Key(None, None, None, "logits")."""
    parts = key.split(".")
    if parts[0] in BLOCKS and 2 <= len(parts) <= 4 and parts[1].isdigit():
        block, quantity = (parts[2] if len(parts) > 2 else None), (parts[3] if len(parts) > 3 else None)
        return Key(parts[0], int(parts[1]), block, quantity)
    if parts[0] in BLOCKS and len(parts) == 2:
        return Key(parts[0], None, None, parts[1])
    return Key(None, None, None, key)


def is_kv(key: str, block: str) -> bool:
    """Whether ``key`` is the K or V projection of an attention block of kind ``block`` ("self" or "cross")."""
    k = parse(key)
    return k.block == block and k.layer is not None and k.quantity in ATTENTION_KV


def of_layer(key: str, i: int) -> bool:
    """Whether ``key`` belongs to layer ``i`` (of either side)."""
    return parse(key).layer == i


def layer_keys(side: str, i: int) -> list[str]:
    """Every key of layer ``i`` of ``side``, in the order of the layer's stages."""
    return [layer(side, i, b, q) for b, qs in BLOCKS[side].items() for q in qs]


def trace_keys(n_encoder_layers: int, n_decoder_layers: int) -> list[str]:
    """Every key a teacher-forced trace holds (``model.decode.trace.teacher_forced_trace``; its NPZ file adds the
    tokens and ``causal``)."""
    return [
        *(embedding("enc", q) for q in EMBEDDING),
        *(k for i in range(n_encoder_layers) for k in layer_keys("enc", i)),
        MEMORY,
        *(embedding("dec", q) for q in EMBEDDING),
        *(k for i in range(n_decoder_layers) for k in layer_keys("dec", i)),
        LOGITS,
        PROBS,
        LOSS,
        SRC_IDS,
        DEC_INPUT_IDS,
        LABEL_IDS,
    ]


class Records(Mapping[str, A], Generic[A]):
    """A trace's or a decode step's records by name, read as ``records.cross_weights(1)`` rather than
    ``records["dec.1.cross.weights"]`` (a read-only mapping of every key too, for the NPZ files and the loops that
    go over every record). Holds numpy arrays or torch tensors alike."""

    __slots__ = ("_arrays",)

    def __init__(self, arrays: Mapping[str, A]) -> None:
        self._arrays = dict(arrays)

    def __getitem__(self, key: str) -> A:
        return self._arrays[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        return f"Records({list(self._arrays)})"

    def __reduce__(self):  # pickled (Streamlit's caches) as the dict it wraps
        return (Records, (self._arrays,))

    def dec(self, i: int, block: str, quantity: str) -> A:
        return self._arrays[dec(i, block, quantity)]

    def enc(self, i: int, block: str, quantity: str) -> A:
        return self._arrays[enc(i, block, quantity)]

    def embedding(self, side: str, quantity: str) -> A:
        return self._arrays[embedding(side, quantity)]

    def self_attn(self, i: int, quantity: str) -> A:
        """Decoder layer ``i``'s masked self-attention: ``self_attn(0, "Q")``."""
        return self.dec(i, "self", quantity)

    def cross(self, i: int, quantity: str) -> A:
        """Decoder layer ``i``'s cross-attention: ``cross(0, "weights")``."""
        return self.dec(i, "cross", quantity)

    def norm(self, i: int, n: int, quantity: str) -> A:
        """Decoder layer ``i``'s Add & Norm ``n`` (1 after self-attention, 2 after cross-attention, 3 after the FFN)."""
        return self.dec(i, f"norm{n}", quantity)

    def ffn(self, i: int, quantity: str) -> A:
        return self.dec(i, "ffn", quantity)

    def self_weights(self, i: int) -> A:
        return self.self_attn(i, "weights")

    def position_bias(self, i: int) -> A | None:
        """Decoder layer ``i``'s relative position bias (H, T, T) added to its self-attention scores (T5); None for
        a model whose positions are not relative."""
        return self._arrays.get(dec(i, "self", "position_bias"))

    def cross_weights(self, i: int) -> A:
        return self.cross(i, "weights")

    def layer_output(self, i: int) -> A:
        """What decoder layer ``i`` hands on (its last Add & Norm's output): the logit lens reads it."""
        return self._arrays[layer_output(i)]

    def enc_weights(self, i: int) -> A:
        return self.enc(i, "self", "weights")

    @property
    def memory(self) -> A:
        return self._arrays[MEMORY]

    @property
    def logits(self) -> A:
        return self._arrays[LOGITS]

    @property
    def probs(self) -> A:
        return self._arrays[PROBS]

    @property
    def loss(self) -> A:
        return self._arrays[LOSS]

    @property
    def src_ids(self) -> A:
        return self._arrays[SRC_IDS]

    @property
    def dec_input_ids(self) -> A:
        return self._arrays[DEC_INPUT_IDS]

    @property
    def label_ids(self) -> A:
        return self._arrays[LABEL_IDS]
