"""The encoder-decoder Transformer of "Attention Is All You Need", one class per box of its figure.

Every forward takes ``record``: when true it also returns a dict of every intermediate
tensor (the trace). Nothing is stored on the modules; the trace is a returned value. Encoder and decoder
take ``heads``: per attention block (``dec.1.cross``), the heads to switch off (``HeadMask``, from
``head_masks`` of a ``model.core.ablation.Ablation``), an argument like the mask, never a hook.
Shapes: B batch, S source length, T target length, H heads, D d_model, V vocab.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.core import keys
from model.core.config import ModelConfig
from model.core.keys import prefixed

if TYPE_CHECKING:
    from model.core.ablation import Ablation

Record = dict[str, Tensor]


class HeadMask(NamedTuple):
    """Heads of one attention block switched off: their context (α·V) becomes context · keep + fill before W_O."""

    keep: Tensor  # (B or 1, H, 1, 1): 1 keeps a head, 0 removes it
    fill: Tensor  # (B or 1, H, 1 or Tq, d_k): what a removed head hands to W_O instead (zeros, its mean context, or
    # per position, the clean run's context that activation patching restores)


HeadMasks = Mapping[str, HeadMask]  # keyed by block: keys.enc(0, "self"), keys.dec(1, "cross")


def head_masks(ablation: Ablation | None, cfg: ModelConfig) -> dict[str, HeadMask]:
    """The HeadMask of every block with an ablated head ({} for none)."""
    if not ablation:
        return {}
    arrays = ablation.arrays(cfg)
    return {k: HeadMask(torch.from_numpy(keep), torch.from_numpy(fill)) for k, (keep, fill) in arrays.items()}


def sinusoidal_table(n_pos: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same angle).

    ``interleaved`` puts sin/cos in alternating columns (the paper); ``half`` puts all sines
    first and all cosines after (Marian, fairseq). Computed on the CPU even when the model is built on the meta
    device for its shapes (the table is not a weight; meta sin/cos would cost a 1.2 s import).
    """
    cpu = torch.device("cpu")
    pos = torch.arange(n_pos, dtype=torch.float64, device=cpu)[:, None]  # (P, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64, device=cpu) / d_model)  # (ceil(D/2),)
    angle = pos * inv_freq  # (P, ceil(D/2))
    pe = torch.empty(n_pos, d_model, dtype=torch.float64, device=cpu)
    n_cos = d_model // 2
    if layout == "interleaved":
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, :n_cos])
    else:
        n_sin = d_model - n_cos
        pe[:, :n_sin] = torch.sin(angle)
        pe[:, n_sin:] = torch.cos(angle[:, :n_cos])
    return pe.float()


class InputEmbedding(nn.Module):
    """Token embedding × sqrt(d_model) + positional encoding, then dropout."""

    pe: Tensor  # (max_len, D), a buffer

    def __init__(self, cfg: ModelConfig, embed: nn.Embedding):
        super().__init__()
        self.embed = embed
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        self.register_buffer("pe", sinusoidal_table(cfg.max_len, cfg.d_model, cfg.pe_layout), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, ids: Tensor, offset: int = 0, record: bool = False) -> tuple[Tensor, Record | None]:
        T = ids.shape[1]
        if offset + T > self.pe.shape[0]:
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len={self.pe.shape[0]}")
        tok = self.embed(ids) * self.scale  # (B, T, D)
        pe = self.pe[offset : offset + T]  # (T, D)
        x = tok + pe  # (B, T, D)
        rec = {"embed": tok, "pe": pe, "input": x} if record else None
        return self.dropout(x), rec


class MultiHeadAttention(nn.Module):
    """softmax(Q Kᵀ / sqrt(d_k) + mask) V per head, heads concatenated, then W_O."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.d_k = cfg.n_heads, cfg.d_k
        self.W_Q = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_K = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_V = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_O = nn.Linear(cfg.d_model, cfg.d_model)

    def split(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)

    def project_kv(self, x_kv: Tensor) -> tuple[Tensor, Tensor]:
        K, V = self.W_K(x_kv), self.W_V(x_kv)
        return self.split(K), self.split(V)  # (B, H, Tk, d_k) each

    def forward(
        self,
        x_q: Tensor,  # (B, Tq, D)
        K: Tensor,  # (B, H, Tk, d_k)
        V: Tensor,  # (B, H, Tk, d_k)
        mask: Tensor | None,  # additive 0/-inf, broadcastable to (B, H, Tq, Tk)
        record: bool = False,
        heads: HeadMask | None = None,  # heads to switch off
    ) -> tuple[Tensor, Record | None]:
        B, Tq, D = x_q.shape
        Q = self.split(self.W_Q(x_q))  # (B, H, Tq, d_k)
        if not record:
            context = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)  # (B, H, Tq, d_k)
            if heads is not None:
                context = context * heads.keep.to(context) + heads.fill.to(context)
            return self.W_O(context.transpose(1, 2).reshape(B, Tq, D)), None
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, Tq, Tk)
        full_mask = torch.zeros_like(scores) if mask is None else mask.expand_as(scores)
        masked_scores = scores + full_mask  # (B, H, Tq, Tk)
        weights = masked_scores.softmax(dim=-1)  # (B, H, Tq, Tk): an ablated head still attends; its output is dropped
        context = weights @ V  # (B, H, Tq, d_k)
        if heads is not None:
            context = context * heads.keep.to(context) + heads.fill.to(context)
        concat = context.transpose(1, 2).reshape(B, Tq, D)  # (B, Tq, D)
        out = self.W_O(concat)  # (B, Tq, D)
        rec = {
            "Q": Q,
            "K": K,
            "V": V,
            "scores": scores,
            "mask": full_mask,
            "masked_scores": masked_scores,
            "weights": weights,
            "context": context,
            "concat": concat,
            "out": out,
        }
        return out, rec


class AddNorm(nn.Module):
    """LayerNorm(x + dropout(Sublayer(x))), the post-norm residual of the paper."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, sublayer_out: Tensor, record: bool = False) -> tuple[Tensor, Record | None]:
        residual = x + self.dropout(sublayer_out)  # (B, T, D)
        out = self.norm(residual)  # (B, T, D)
        if not record:
            return out, None
        var, mean = torch.var_mean(residual, -1, unbiased=False)  # (B, T) each
        std = torch.sqrt(var + self.norm.eps)  # (B, T)
        return out, {"residual": residual, "mean": mean, "std": std, "out": out}


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to each position separately."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model)
        acts: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "swish": F.silu, "silu": F.silu, "gelu": F.gelu}
        self.act = acts[cfg.activation]
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, record: bool = False) -> tuple[Tensor, Record | None]:
        hidden = self.act(self.W_1(x))  # (B, T, d_ff)
        out = self.W_2(self.dropout(hidden))  # (B, T, D)
        return out, ({"hidden": hidden, "out": out} if record else None)


class EncoderLayer(nn.Module):
    self_attn: MultiHeadAttention
    norm1: AddNorm
    ffn: FeedForward
    norm2: AddNorm

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.norm1 = MultiHeadAttention(cfg), AddNorm(cfg)
        self.ffn, self.norm2 = FeedForward(cfg), AddNorm(cfg)

    def forward(
        self, x: Tensor, src_mask: Tensor | None, record: bool = False, heads: HeadMask | None = None
    ) -> tuple[Tensor, Record]:
        K, V = self.self_attn.project_kv(x)
        a, r1 = self.self_attn(x, K, V, src_mask, record, heads)
        x, r2 = self.norm1(x, a, record)
        f, r3 = self.ffn(x, record)
        x, r4 = self.norm2(x, f, record)
        return x, {**prefixed("self", r1), **prefixed("norm1", r2), **prefixed("ffn", r3), **prefixed("norm2", r4)}


class LayerCache(NamedTuple):
    """What one decoder layer keeps between steps: self-attention K, V so far, cross-attention K, V."""

    self_K: Tensor  # (B, H, t, d_k)
    self_V: Tensor  # (B, H, t, d_k)
    cross_K: Tensor  # (B, H, S, d_k)
    cross_V: Tensor  # (B, H, S, d_k)


class DecoderLayer(nn.Module):
    self_attn: MultiHeadAttention
    norm1: AddNorm
    cross_attn: MultiHeadAttention
    norm2: AddNorm
    ffn: FeedForward
    norm3: AddNorm

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.norm1 = MultiHeadAttention(cfg), AddNorm(cfg)
        self.cross_attn, self.norm2 = MultiHeadAttention(cfg), AddNorm(cfg)
        self.ffn, self.norm3 = FeedForward(cfg), AddNorm(cfg)

    def forward(
        self,
        y: Tensor,  # (B, T, D) new positions only when a cache is given
        memory: Tensor,  # (B, S, D)
        src_mask: Tensor | None,
        causal_mask: Tensor | None,  # (T, t + T)
        cache: LayerCache | None,
        record: bool = False,
        self_heads: HeadMask | None = None,
        cross_heads: HeadMask | None = None,
    ) -> tuple[Tensor, LayerCache, Record]:
        K_new, V_new = self.self_attn.project_kv(y)  # (B, H, T, d_k)
        if cache is None:
            K, V = K_new, V_new
            cross_K, cross_V = self.cross_attn.project_kv(memory)  # (B, H, S, d_k)
        else:
            K = torch.cat([cache.self_K, K_new], dim=2)  # (B, H, t + T, d_k)
            V = torch.cat([cache.self_V, V_new], dim=2)
            cross_K, cross_V = cache.cross_K, cache.cross_V
        a, r1 = self.self_attn(y, K, V, causal_mask, record, self_heads)
        y, r2 = self.norm1(y, a, record)
        c, r3 = self.cross_attn(y, cross_K, cross_V, src_mask, record, cross_heads)
        y, r4 = self.norm2(y, c, record)
        f, r5 = self.ffn(y, record)
        y, r6 = self.norm3(y, f, record)
        rec = {
            **prefixed("self", r1),
            **prefixed("norm1", r2),
            **prefixed("cross", r3),
            **prefixed("norm2", r4),
            **prefixed("ffn", r5),
            **prefixed("norm3", r6),
        }
        return y, LayerCache(K, V, cross_K, cross_V), rec


def padding_mask(ids: Tensor, pad_id: int) -> Tensor | None:
    """Additive key mask (B, 1, 1, S): -inf on padding, None when there is none."""
    pad = ids == pad_id
    if not pad.any():
        return None
    return torch.zeros(pad.shape, device=ids.device).masked_fill(pad, float("-inf"))[:, None, None, :]


def causal_mask(T: int, offset: int = 0, device=None) -> Tensor:
    """(T, offset + T): 0 where key j <= query i (absolute positions), -inf on the future."""
    q = torch.arange(offset, offset + T, device=device)[:, None]
    k = torch.arange(offset + T, device=device)[None, :]
    return torch.zeros(T, offset + T, device=device).masked_fill(k > q, float("-inf"))


class Transformer(nn.Module):
    final_logits_bias: Tensor | None  # (V,), a buffer (Marian's), or None

    def __init__(self, cfg: ModelConfig, init: bool = True):
        """``init=False`` leaves the weights uninitialised (for a model whose weights are loaded next, or one built on
        the meta device for its shapes: torch's first meta ``normal_`` costs a 1.2 s import)."""
        super().__init__()
        self.cfg = cfg
        # shared src/tgt/out; without init, ``_weight`` skips nn.Embedding's own initialisation (its normal_)
        self.embed = nn.Embedding(
            cfg.vocab_size,
            cfg.d_model,
            padding_idx=cfg.pad_id,
            _weight=None if init else torch.empty(cfg.vocab_size, cfg.d_model),
        )
        self.src_embed = InputEmbedding(cfg, self.embed)
        self.tgt_embed = InputEmbedding(cfg, self.embed)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.out_proj = None if cfg.tie_output else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.final_logits_bias:
            self.register_buffer("final_logits_bias", torch.zeros(cfg.vocab_size))
        else:
            self.final_logits_bias = None
        if init:
            self.reset_parameters()

    @property
    def encoder_stack(self) -> list[EncoderLayer]:
        """The encoder layers, typed (iterating an nn.ModuleList yields plain Modules)."""
        return [cast(EncoderLayer, layer) for layer in self.encoder_layers]

    @property
    def decoder_stack(self) -> list[DecoderLayer]:
        """The decoder layers, typed."""
        return [cast(DecoderLayer, layer) for layer in self.decoder_layers]

    def reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        nn.init.normal_(self.embed.weight, std=self.cfg.d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[self.cfg.pad_id].zero_()

    @property
    def device(self) -> torch.device:
        """Where the weights are: ids handed to encode and decode go there, whatever device they came from."""
        return self.embed.weight.device

    def encode(
        self, src_ids: Tensor, record: bool = False, heads: HeadMasks | None = None
    ) -> tuple[Tensor, Tensor | None, Record]:
        """Source ids (B, S) -> memory (B, S, D), the source padding mask, and the trace."""
        src_ids = src_ids.to(self.device)
        src_mask = padding_mask(src_ids, self.cfg.pad_id)
        x, rec = self.src_embed(src_ids, record=record)
        trace = prefixed("enc", rec)
        heads = heads or {}
        for i, layer in enumerate(self.encoder_stack):
            x, r = layer(x, src_mask, record, heads.get(keys.enc(i, "self")))
            trace.update(prefixed(keys.enc(i), r))
        if record:
            trace[keys.MEMORY] = x
        return x, src_mask, trace

    @property
    def W_out(self) -> Tensor:
        """The final linear layer's weight (V, D): the embedding's when the output is tied to it."""
        return self.embed.weight if self.out_proj is None else self.out_proj.weight

    def logits(self, y: Tensor) -> Tensor:
        logits = y @ self.W_out.T  # (B, T, V)
        return logits if self.final_logits_bias is None else logits + self.final_logits_bias

    def decode(
        self,
        tgt_in: Tensor,  # (B, T) decoder input ids: the new positions when a cache is given
        memory: Tensor,  # (B, S, D)
        src_mask: Tensor | None,
        cache: list[LayerCache] | None = None,
        causal: bool = True,
        record: bool = False,
        heads: HeadMasks | None = None,
    ) -> tuple[Tensor, list[LayerCache], Record]:
        """Decoder stack + final linear. Returns logits (B, T, V), the updated cache, the trace."""
        tgt_in = tgt_in.to(self.device)
        offset = 0 if cache is None else cache[0].self_K.shape[2]
        T = tgt_in.shape[1]
        y, rec = self.tgt_embed(tgt_in, offset=offset, record=record)
        trace = prefixed("dec", rec)
        # a single newest query may see every cached key: no mask needed unless it is to be recorded
        mask = causal_mask(T, offset, y.device) if causal and (T > 1 or record) else None
        new_cache, heads = [], heads or {}
        for i, layer in enumerate(self.decoder_stack):
            y, c, r = layer(
                y,
                memory,
                src_mask,
                mask,
                None if cache is None else cache[i],
                record,
                heads.get(keys.dec(i, "self")),
                heads.get(keys.dec(i, "cross")),
            )
            new_cache.append(c)
            trace.update(prefixed(keys.dec(i), r))
        logits = self.logits(y)
        if record:
            trace[keys.LOGITS] = logits
        return logits, new_cache, trace

    def forward(self, src_ids: Tensor, tgt_in: Tensor) -> Tensor:
        memory, src_mask, _ = self.encode(src_ids)
        logits, _, _ = self.decode(tgt_in, memory, src_mask)
        return logits
