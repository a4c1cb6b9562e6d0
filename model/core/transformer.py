"""The encoder-decoder Transformer of "Attention Is All You Need", one class per box of its figure, and the
family that grew from it (Marian, BART, mBART, M2M100/NLLB, T5) as settings of the same boxes: where the norm sits
(``AddNorm``: after the sublayer, or before it), LayerNorm or RMSNorm, the positions (a sinusoidal or learned table
added to the embeddings, or ``RelativePositionBias`` added to the self-attention scores), an embedding LayerNorm, a
final norm after each stack, a gated FFN, biases, the attention scale (``ModelConfig``).

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
    first and all cosines after (Marian); ``fairseq`` is ``half`` with the angles of tensor2tensor,
    pos / 10000^(i/(D/2 − 1)) for i < D/2 (M2M100, NLLB), and a zero last column when D is odd. Computed on the CPU
    even when the model is built on the meta device for its shapes (the table is not a weight; meta sin/cos would
    cost a 1.2 s import).
    """
    cpu = torch.device("cpu")
    pos = torch.arange(n_pos, dtype=torch.float64, device=cpu)[:, None]  # (P, 1)
    if layout == "fairseq":
        half = d_model // 2
        step = math.log(10000) / max(half - 1, 1)
        inv = torch.exp(torch.arange(half, dtype=torch.float32, device=cpu) * -step)  # (D/2,) in float32, as fairseq
        angle32 = pos.float() * inv  # (P, D/2)
        pe32 = torch.zeros(n_pos, d_model, device=cpu)
        pe32[:, :half], pe32[:, half : 2 * half] = torch.sin(angle32), torch.cos(angle32)
        return pe32
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


def make_norm(cfg: ModelConfig) -> nn.Module:
    """LayerNorm: (x − mean) / sqrt(var + eps) · g + b; RMSNorm (T5): x / sqrt(mean(x²) + eps) · g."""
    if cfg.norm_kind == "rms":
        return nn.RMSNorm(cfg.d_model, eps=cfg.layer_norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)


def norm_stats(norm: nn.Module, z: Tensor) -> tuple[Tensor, Tensor]:
    """What ``norm`` subtracts and divides by, per position (B, T) each: the mean and the std (LayerNorm), or 0 and
    the root mean square (RMSNorm, which subtracts nothing)."""
    eps = cast(float, norm.eps)
    if isinstance(norm, nn.RMSNorm):
        return torch.zeros_like(z[..., 0]), torch.sqrt(z.pow(2).mean(-1) + eps)
    var, mean = torch.var_mean(z, -1, unbiased=False)  # (B, T) each
    return mean, torch.sqrt(var + eps)


def position_table(cfg: ModelConfig) -> Tensor:
    """PE (max_len, D) of positions 0..max_len − 1: rows ``position_offset``.. of the model's sinusoidal table (zeros
    for relative positions, which add nothing to the embeddings)."""
    if cfg.positions == "relative":
        return torch.zeros(cfg.max_len, cfg.d_model, device=torch.device("cpu"))
    return sinusoidal_table(cfg.max_len + cfg.position_offset, cfg.d_model, cfg.pe_layout)[cfg.position_offset :]


class InputEmbedding(nn.Module):
    """Token embedding × sqrt(d_model) + positional encoding (a fixed or a learned table; none with relative
    positions), LayerNorm'd where the model normalises its embeddings (BART), then dropout."""

    pe: Tensor  # (max_len, D): a buffer, or a learned parameter (positions="learned")

    def __init__(self, cfg: ModelConfig, embed: nn.Embedding):
        super().__init__()
        self.embed = embed
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        if cfg.positions == "learned":
            self.pe = nn.Parameter(torch.empty(cfg.max_len, cfg.d_model))
        else:
            self.register_buffer("pe", position_table(cfg), persistent=False)
        self.norm = make_norm(cfg) if cfg.embed_norm else None
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(
        self, ids: Tensor, offset: int = 0, record: bool = False, tok: Tensor | None = None
    ) -> tuple[Tensor, Record | None]:
        """``tok``: scaled token embeddings (B, T, D) read instead of the ids' (an attribution's or a patching's
        inputs, interpolated or corrupted); the positions, norm and dropout follow as for the ids."""
        tok = self.embed(ids) * self.scale if tok is None else tok  # (B, T, D)
        x = self.place(tok, offset)
        rec = {"embed": tok, "pe": self.pe[offset : offset + tok.shape[1]], "input": x} if record else None
        return self.dropout(x), rec

    def place(self, tok: Tensor, offset: int = 0) -> Tensor:
        """Scaled token embeddings (B, T, D) at positions offset… : plus the positional encoding, then the
        embedding norm where the model has one (dropout not applied)."""
        T = tok.shape[1]
        if offset + T > self.pe.shape[0]:
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len={self.pe.shape[0]}")
        x = tok + self.pe[offset : offset + T]  # (B, T, D)
        return x if self.norm is None else self.norm(x)


def relative_bucket(rel: Tensor, bidirectional: bool, n_buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of each relative distance key − query (Tq, Tk): half the buckets (bidirectional: per direction)
    hold one distance each, the rest logarithmically wider bins up to ``max_distance``; the decoder's keys are never
    ahead of its query, so it has one direction."""
    buckets = torch.zeros_like(rel)
    if bidirectional:
        n_buckets //= 2
        buckets += (rel > 0).long() * n_buckets
        dist = rel.abs()
    else:
        dist = -torch.clamp(rel, max=0)
    exact = n_buckets // 2
    log_bin = (
        exact + (torch.log(dist.float() / exact) / math.log(max_distance / exact) * (n_buckets - exact)).long()
    )  # distance 0 is exact: its log is never used
    return buckets + torch.where(dist < exact, dist, torch.clamp(log_bin, max=n_buckets - 1))


class RelativePositionBias(nn.Module):
    """T5's positions: no positional encoding; a learned bias per head and bucket of relative distance, added to
    every self-attention layer's scores of its stack (computed once per stack)."""

    def __init__(self, cfg: ModelConfig, bidirectional: bool):
        super().__init__()
        self.bidirectional = bidirectional
        self.n_buckets, self.max_distance = cfg.relative_buckets, cfg.relative_max_distance
        self.bias = nn.Embedding(cfg.relative_buckets, cfg.n_heads)

    def forward(self, Tq: int, Tk: int, offset: int = 0) -> Tensor:
        """(1, H, Tq, Tk): the bias of queries at positions offset.. over keys at 0..Tk − 1."""
        device = self.bias.weight.device
        q = torch.arange(offset, offset + Tq, device=device)[:, None]
        k = torch.arange(Tk, device=device)[None, :]
        bucket = relative_bucket(k - q, self.bidirectional, self.n_buckets, self.max_distance)  # (Tq, Tk)
        return self.bias(bucket).permute(2, 0, 1)[None]  # (1, H, Tq, Tk)


class MultiHeadAttention(nn.Module):
    """softmax(Q Kᵀ / sqrt(d_k) + bias + mask) V per head, heads concatenated, then W_O. T5 leaves QKᵀ unscaled
    and adds its relative position bias; the others add no bias."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.d_k, self.scaled = cfg.n_heads, cfg.d_k, cfg.scale_attention
        inner = cfg.n_heads * cfg.d_k  # d_model, unless the model sets its own head width (T5's d_kv)
        self.W_Q = nn.Linear(cfg.d_model, inner, bias=cfg.bias)
        self.W_K = nn.Linear(cfg.d_model, inner, bias=cfg.bias)
        self.W_V = nn.Linear(cfg.d_model, inner, bias=cfg.bias)
        self.W_O = nn.Linear(inner, cfg.d_model, bias=cfg.bias)

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
        position_bias: Tensor | None = None,  # (1, H, Tq, Tk): T5's relative position bias
    ) -> tuple[Tensor, Record | None]:
        B, Tq, _ = x_q.shape
        HD = self.n_heads * self.d_k
        Q = self.split(self.W_Q(x_q))  # (B, H, Tq, d_k)
        if not record:
            attn_mask = mask if position_bias is None else position_bias if mask is None else position_bias + mask
            scale = None if self.scaled else 1.0  # None: SDPA's own 1/sqrt(d_k)
            context = F.scaled_dot_product_attention(Q, K, V, attn_mask=attn_mask, scale=scale)  # (B, H, Tq, d_k)
            if heads is not None:
                context = context * heads.keep.to(context) + heads.fill.to(context)
            return self.W_O(context.transpose(1, 2).reshape(B, Tq, HD)), None
        scores = Q @ K.transpose(-2, -1)  # (B, H, Tq, Tk)
        if self.scaled:
            scores = scores / math.sqrt(self.d_k)
        if position_bias is not None:
            scores = scores + position_bias
        full_mask = torch.zeros_like(scores) if mask is None else mask.expand_as(scores)
        masked_scores = scores + full_mask  # (B, H, Tq, Tk)
        weights = masked_scores.softmax(dim=-1)  # (B, H, Tq, Tk): an ablated head still attends; its output is dropped
        context = weights @ V  # (B, H, Tq, d_k)
        if heads is not None:
            context = context * heads.keep.to(context) + heads.fill.to(context)
        concat = context.transpose(1, 2).reshape(B, Tq, HD)  # (B, Tq, H·d_k)
        out = self.W_O(concat)  # (B, Tq, D)
        rec: Record = {} if position_bias is None else {"position_bias": position_bias.expand(B, -1, Tq, -1)}
        rec |= {
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
    """Post-norm (the paper): Norm(x + dropout(Sublayer(x))). Pre-norm: x + dropout(Sublayer(Norm(x))): Norm →
    sublayer → add, the residual stream itself never normalised. ``sublayer_input`` is what the sublayer reads."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.pre = cfg.norm_position == "pre"
        self.norm = make_norm(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre else x  # (B, T, D)

    def forward(self, x: Tensor, sublayer_out: Tensor, record: bool = False) -> tuple[Tensor, Record | None]:
        residual = x + self.dropout(sublayer_out)  # (B, T, D)
        out = residual if self.pre else self.norm(residual)  # (B, T, D)
        if not record:
            return out, None
        if self.pre:  # mean and std of the norm's input x; what it gave the sublayer
            mean, std = norm_stats(self.norm, x)
            return out, {"residual": residual, "mean": mean, "std": std, "out": out, "normed": self.norm(x)}
        mean, std = norm_stats(self.norm, residual)  # (B, T) each
        return out, {"residual": residual, "mean": mean, "std": std, "out": out}


def _gelu_tanh(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATION_FNS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "swish": F.silu,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
}


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to each position separately; gated (T5 v1.1):
    (act(x W_1) ⊙ x W_3) W_2."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.W_3 = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias) if cfg.gated_ffn else None
        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.act = ACTIVATION_FNS[cfg.activation]
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, record: bool = False) -> tuple[Tensor, Record | None]:
        hidden = self.act(self.W_1(x))  # (B, T, d_ff)
        if self.W_3 is not None:
            hidden = hidden * self.W_3(x)  # (B, T, d_ff)
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
        self,
        x: Tensor,  # (B, S, D)
        src_mask: Tensor | None,
        record: bool = False,
        heads: HeadMask | None = None,
        position_bias: Tensor | None = None,  # (1, H, S, S)
    ) -> tuple[Tensor, Record]:
        h = self.norm1.sublayer_input(x)  # x itself (post-norm) or Norm(x) (pre-norm)
        K, V = self.self_attn.project_kv(h)
        a, r1 = self.self_attn(h, K, V, src_mask, record, heads, position_bias)
        x, r2 = self.norm1(x, a, record)
        f, r3 = self.ffn(self.norm2.sublayer_input(x), record)
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
        heads: tuple[HeadMask | None, HeadMask | None] = (None, None),  # switched off in (self, cross)
        position_bias: Tensor | None = None,  # (1, H, T, t + T)
    ) -> tuple[Tensor, LayerCache, Record]:
        h = self.norm1.sublayer_input(y)  # y itself (post-norm) or Norm(y) (pre-norm)
        K_new, V_new = self.self_attn.project_kv(h)  # (B, H, T, d_k)
        if cache is None:
            K, V = K_new, V_new
            cross_K, cross_V = self.cross_attn.project_kv(memory)  # (B, H, S, d_k)
        else:
            K = torch.cat([cache.self_K, K_new], dim=2)  # (B, H, t + T, d_k)
            V = torch.cat([cache.self_V, V_new], dim=2)
            cross_K, cross_V = cache.cross_K, cache.cross_V
        self_heads, cross_heads = heads
        a, r1 = self.self_attn(h, K, V, causal_mask, record, self_heads, position_bias)
        y, r2 = self.norm1(y, a, record)
        c, r3 = self.cross_attn(self.norm2.sublayer_input(y), cross_K, cross_V, src_mask, record, cross_heads)
        y, r4 = self.norm2(y, c, record)
        f, r5 = self.ffn(self.norm3.sublayer_input(y), record)
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


def causal_mask(T: int, offset: int = 0, device: torch.device | str | None = None) -> Tensor:
    """(T, offset + T): 0 where key j <= query i (absolute positions), -inf on the future."""
    q = torch.arange(offset, offset + T, device=device)[:, None]
    k = torch.arange(offset + T, device=device)[None, :]
    return torch.zeros(T, offset + T, device=device).masked_fill(k > q, float("-inf"))


class Transformer(nn.Module):
    final_logits_bias: Tensor | None  # (V,), a buffer (Marian's), or None
    enc_bias: RelativePositionBias | None  # T5's relative positions, one per stack
    dec_bias: RelativePositionBias | None
    enc_norm: nn.Module | None  # the pre-norm models' norm after each stack's last layer
    dec_norm: nn.Module | None

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
        relative = cfg.positions == "relative"
        self.enc_bias = RelativePositionBias(cfg, bidirectional=True) if relative else None
        self.dec_bias = RelativePositionBias(cfg, bidirectional=False) if relative else None
        self.enc_norm = make_norm(cfg) if cfg.final_norm else None
        self.dec_norm = make_norm(cfg) if cfg.final_norm else None
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
        self, src_ids: Tensor, record: bool = False, heads: HeadMasks | None = None, tok: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None, Record]:
        """Source ids (B, S) -> memory (B, S, D), the source padding mask, and the trace. ``tok``: the source's
        scaled token embeddings read instead of the ids' (``InputEmbedding``)."""
        src_ids = src_ids.to(self.device)
        src_mask = padding_mask(src_ids, self.cfg.pad_id)
        x, rec = self.src_embed(src_ids, record=record, tok=tok)
        trace = prefixed("enc", rec)
        heads = heads or {}
        S = src_ids.shape[1]
        bias = None if self.enc_bias is None else self.enc_bias(S, S)  # (1, H, S, S)
        for i, layer in enumerate(self.encoder_stack):
            x, r = layer(x, src_mask, record, heads.get(keys.enc(i, "self")), bias)
            trace.update(prefixed(keys.enc(i), r))
        if self.enc_norm is not None:
            x = self.enc_norm(x)  # (B, S, D)
            if record:
                trace[keys.final_norm("enc")] = x
        if record:
            trace[keys.MEMORY] = x
        return x, src_mask, trace

    @property
    def W_out(self) -> Tensor:
        """The final linear layer's weight (V, D): the embedding's when the output is tied to it."""
        return self.embed.weight if self.out_proj is None else self.out_proj.weight

    def logits(self, y: Tensor) -> Tensor:
        """The final linear layer on the decoder's output y (B, T, D), after its final norm where it has one."""
        if self.dec_norm is not None:
            y = self.dec_norm(y)
        if self.cfg.output_scale != 1.0:
            y = y * self.cfg.output_scale
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
        y, new_cache, trace = self.decode_states(tgt_in, memory, src_mask, cache, causal, record, heads)
        logits = self.logits(y)
        if record:
            if self.dec_norm is not None:
                trace[keys.final_norm("dec")] = self.dec_norm(y)
            trace[keys.LOGITS] = logits
        return logits, new_cache, trace

    def decode_states(
        self,
        tgt_in: Tensor,  # (B, T)
        memory: Tensor,  # (B, S, D)
        src_mask: Tensor | None,
        cache: list[LayerCache] | None = None,
        causal: bool = True,
        record: bool = False,
        heads: HeadMasks | None = None,
        tok: Tensor | None = None,  # (B, T, D) scaled token embeddings read instead of the ids' (InputEmbedding)
    ) -> tuple[Tensor, list[LayerCache], Record]:
        """The decoder stack alone: its last layer's output (B, T, D), before the final norm and the output head
        (``logits`` applies both), the updated cache, the trace."""
        tgt_in = tgt_in.to(self.device)
        offset = 0 if cache is None else cache[0].self_K.shape[2]
        T = tgt_in.shape[1]
        y, rec = self.tgt_embed(tgt_in, offset=offset, record=record, tok=tok)
        trace = prefixed("dec", rec)
        # a single newest query may see every cached key: no mask needed unless it is to be recorded
        mask = causal_mask(T, offset, y.device) if causal and (T > 1 or record) else None
        bias = None if self.dec_bias is None else self.dec_bias(T, offset + T, offset)  # (1, H, T, t + T)
        new_cache, heads = [], heads or {}
        for i, layer in enumerate(self.decoder_stack):
            y, c, r = layer(
                y,
                memory,
                src_mask,
                mask,
                None if cache is None else cache[i],
                record,
                (heads.get(keys.dec(i, "self")), heads.get(keys.dec(i, "cross"))),
                bias,
            )
            new_cache.append(c)
            trace.update(prefixed(keys.dec(i), r))
        return y, new_cache, trace

    def forward(self, src_ids: Tensor, tgt_in: Tensor) -> Tensor:
        memory, src_mask, _ = self.encode(src_ids)
        logits, _, _ = self.decode(tgt_in, memory, src_mask)
        return logits
