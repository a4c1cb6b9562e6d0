"""Decoding steps in numpy: the decoder's operations for one new position per row, on the model's own weights.

A decoding step is ~25 small products and ~100 small elementwise operations. Through PyTorch each
operation costs several microseconds of dispatch, which made up most of a step (benchmarks/decode.py,
benchmarks/engines.py); numpy's cost one. ``LeanDecoder`` lays the weights out once per loaded model
(fused Q/K/V, (in, out) layout, which numpy's OpenBLAS streams fastest for one row and MKL for several on an
Intel CPU; oneDNN-prepacked copies for several rows elsewhere, as in a beam step), keeps the K, V cache in
preallocated buffers, and runs a step with or without its record. The record has the keys and shapes of
``Transformer.decode(..., record=True)`` for the same step (``dec.embed``, ``dec.0.self.weights``, ...) and the
same numbers to float rounding: tests/model/test_core.py checks every key. Without a record a step does the same
arithmetic in fewer operations where nothing is shown (the cross-attention's W_Q and W_O folded into the source's
K, V once per sentence), as one compiled function (``model.decode.fused``) unless decoder heads are ablated, and
``encode``
runs the encoder for it, equal to Transformer.encode to float rounding (the modules' dispatch cost ~1 ms a
sentence). The nn.Module classes stay the readable
reference (``decoding.ModuleDecoder`` steps them behind this interface), and the teacher-forced trace runs through
them. The model is never modified. Ablated heads (``model.core.ablation.Ablation``) belong to one decode, so they
travel in its cache, not on the decoder. ``model.decode.fused`` (numba, ~0.25 s to import) is imported by the first
call that runs compiled code: a recorded greedy decode, a fresh server's first page, runs none.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import torch
import torch.nn.functional as F

from model.core import keys
from model.core.ablation import Ablation
from model.core.config import ModelConfig
from model.core.keys import prefixed
from model.core.transformer import Transformer

if TYPE_CHECKING:
    from model.decode.decoding import ModuleDecoder
    from model.decode.family_step import FamilyStep


AnyArray: TypeAlias = np.ndarray | torch.Tensor  # what the steps take: their own arrays, or the model's tensors


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy()


def _array(x: AnyArray) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else _np(x)


def decoder_heads(ablation: Ablation | None, cfg: ModelConfig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The decoder heads ``ablation`` switches off, as the step reads them (every step of a cache)."""
    return {k: v for k, v in ablation.arrays(cfg).items() if keys.parse(k).side == "dec"} if ablation else {}


ENCODER_ROWS = 16  # oneDNN's prepacking hint for the encoder's products, whose rows are a sentence's tokens

# ufunc reductions directly: ndarray.max/.sum/.mean add microseconds of Python each, and a step calls dozens
_max, _sum = np.maximum.reduce, np.add.reduce


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - _max(s, -1, keepdims=True))
    e /= _sum(e, -1, keepdims=True)
    return e


def _frozen(rec: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for a in rec.values():
        a.flags.writeable = False
    return rec


@dataclass
class LeanCache:
    """K, V of the positions decoded so far (preallocated to max_len) and the source's cross K, V. K and V of every
    layer share one array, so a step writes a layer's in one copy and a beam's reorder is one copy; a position's
    keys are a row of it (not a column), so what a step reads, writes and reorders is contiguous: touched
    memory, not strided across every page of the buffer."""

    KV: np.ndarray  # (layers, R, 2, H, max_len, d_k): K, then V
    cross: np.ndarray  # (layers, R or 1, 2, H, S, d_k): cross K, then V; 1 row when every row reads one source
    folded: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # M, c, Nᵀ of LeanDecoder.start, leading axis the layer
    src_mask: np.ndarray | None  # (R or 1, 1, 1, S) additive 0/-inf
    t: int = 0  # positions filled
    heads: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # Ablation.arrays: keep, fill

    @property
    def rows(self) -> int:
        return self.KV.shape[1]

    def select(self, rows: np.ndarray | Sequence[int]) -> LeanCache:
        """Reorder or repeat the rows, as beam search does after each step. Reorders in place (``fused.reorder``), so
        this cache is the one to keep; cross K, V shared by every row are not copied."""
        rows, t = np.asarray(rows, np.int64), self.t
        if len(rows) == self.rows:  # a beam step: only the rows that take another row's place are copied
            KV = self.KV
            from model.decode import fused

            fused.reorder(KV, rows, t)
        else:
            KV = np.empty((self.KV.shape[0], len(rows), *self.KV.shape[2:]), np.float32)
            KV[:, :, :, :, :t] = self.KV[:, rows, :, :, :t]
        if self.cross.shape[1] == 1:
            cross, folded = self.cross, self.folded
        else:
            cross = self.cross[:, rows]
            folded = (
                None
                if self.folded is None
                else (self.folded[0][:, rows], self.folded[1][:, rows], self.folded[2][:, rows])
            )
        mask = self.src_mask if self.src_mask is None or self.src_mask.shape[0] == 1 else self.src_mask[rows]
        return LeanCache(KV, cross, folded, mask, t, self.heads)

    def reorder(self, rows: np.ndarray | Sequence[int]) -> LeanCache:
        """``select`` of as many rows, each taking the place of a row that reads the same source (a batch of beams,
        whose rows stay their sentence's): only the K, V of the decoded positions move, in place; the source's
        cross K, V and mask stay where they are."""
        from model.decode import fused

        fused.reorder(self.KV, np.asarray(rows, np.int64), self.t)
        return self

    def shrink(self, rows: np.ndarray | Sequence[int]) -> LeanCache:
        """``select`` of fewer rows, in place (a batch of beams whose finished sentences leave it): row d takes row
        rows[d]'s K, V and source, the rest are dropped, and the buffers become views of this cache's first rows, so
        nothing is allocated and only the rows that move are copied. A cache whose rows share a source, or that
        folded it, is selected."""
        from model.decode import fused

        rows, R = np.asarray(rows, np.int64), self.rows
        if self.folded is not None or self.cross.shape[1] != R:
            return self.select(rows)
        n = len(rows)
        every = np.concatenate([rows, np.arange(n, R)])  # the rows left behind stay as they are
        fused.reorder(self.KV, every, self.t)
        fused.reorder(self.cross, every, self.cross.shape[4])  # the same layout: (layers, R, 2, H, S, d_k)
        mask = None if self.src_mask is None else self.src_mask[rows]
        return LeanCache(self.KV[:, :n], self.cross[:, :n], None, mask, self.t, self.heads)


def check_step(rows: int, cache: LeanCache, positions: int) -> None:
    """A step feeds one token to each row of its cache, at a position the model's table has."""
    if rows != cache.rows:
        raise ValueError(f"{rows} tokens for a cache of {cache.rows} rows")
    if cache.t >= positions:
        raise ValueError(f"sequence of {cache.t + 1} positions exceeds max_len={positions}")


@dataclass(frozen=True)
class _Block:
    """An attention block of a decoder layer as the numpy step reads and records it."""

    name: str  # its record's prefix
    norm: str  # its Add & Norm's record prefix
    W_O: str  # the layer's key of its output product
    norm_index: int  # its Add & Norm among the layer's norms
    copy_kv: bool  # K, V copied into the record: later steps write and reorder the self-attention cache


_SELF = _Block("self", "norm1", "o", 0, True)
_CROSS = _Block("cross", "norm2", "co", 1, False)


def intel_mkl() -> bool:
    """Whether PyTorch has MKL and runs on an Intel CPU, where MKL multiplies several rows fastest."""
    if not torch.backends.mkl.is_available():
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return "GenuineIntel" in f.read(4096)
    except OSError:
        return False


class _Linear:
    """x W + b for rows x: numpy's BLAS for one row; for several (a beam step), MKL on an Intel CPU, where it was
    the fastest of the three (5 rows, a whole step's weights, 1 thread: MKL 1.07-1.35 ms, oneDNN prepacked
    1.5-2.4 ms, numpy 2.1 ms; benchmarks/gemv.py), oneDNN with prepacked weights elsewhere (~1.75x MKL on an AMD
    CPU) when ``pack_min`` is given. Small matrices stay with numpy there: below ~0.2 M weights the oneDNN call
    costs more than the product (5 rows × 256×256: 9 us numpy, 22 us oneDNN on 2 threads; 768×256: 25 vs 29 us;
    1024×256: 121 vs 34 us), and below ``mkl_min`` weights with MKL too for fewer than 16 rows (the 256×256 ones:
    beam 5 decoding 2-7% faster with numpy's, the 768×256 one 2% slower; a 32-row step 5% slower). numpy too when
    PyTorch has neither."""

    def __init__(self, W: torch.Tensor, b: torch.Tensor | None, rows: int, pack_min: int | None, mkl_min: int = 0):
        self.W = np.ascontiguousarray(_np(W).T)  # (in, out)
        self.b = None if b is None else _np(b).copy()
        self.packed = self.W_mkl = None
        self.b_t = None if b is None else torch.from_numpy(self.b)
        self.mkl_rows = 2 if W.numel() >= mkl_min else 16  # the fewest rows MKL multiplies
        if pack_min is None:
            self.W_mkl = torch.from_numpy(self.W)  # the same memory, for torch.mm
        elif rows > 1 and W.numel() >= pack_min and torch.backends.mkldnn.is_available():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(W.detach().float().contiguous(), rows)

    def __call__(self, x: np.ndarray) -> np.ndarray:  # (R, in) -> (R, out)
        if x.shape[0] > 1 and self.packed is not None:
            x_t = torch.from_numpy(x if x.flags.c_contiguous else np.ascontiguousarray(x))
            return torch.ops.mkldnn._linear_pointwise(x_t, self.packed, self.b_t, "none", [], "").numpy()
        if x.shape[0] >= self.mkl_rows and self.W_mkl is not None:
            x_t = torch.from_numpy(x if x.flags.c_contiguous else np.ascontiguousarray(x))
            return (torch.mm(x_t, self.W_mkl) if self.b_t is None else torch.addmm(self.b_t, x_t, self.W_mkl)).numpy()
        y = x @ self.W
        if self.b is not None:
            y += self.b
        return y


def _fused(*linears: torch.nn.Linear, q_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The linears' weights and biases stacked, the first one's times ``q_scale`` (1/sqrt(d_k) for W_Q: Q comes
    out scaled, one operation fewer per attention)."""
    W, b = torch.cat([m.weight for m in linears]), torch.cat([m.bias for m in linears])
    n = linears[0].weight.shape[0]
    W[:n] *= q_scale
    b[:n] *= q_scale
    return W, b


def _affine(add_norm) -> tuple[np.ndarray, np.ndarray]:
    """A LayerNorm's weight and bias, copied."""
    return _np(add_norm.norm.weight).copy(), _np(add_norm.norm.bias).copy()


def lean_covers(cfg: ModelConfig) -> bool:
    """Whether the numpy step and its compiled twin compute ``cfg``'s model: the paper's post-norm LayerNorm stack
    with biases, scaled attention, an ungated FFN and a positional table added to the embeddings (the bundled model,
    Marian, and any post-norm model without an embedding norm, sinusoidal or learned positions alike). The rest of
    the family (BART and mBART: embedding LayerNorm; mBART, M2M100, NLLB: pre-norm and final norms; T5: RMSNorm,
    relative position bias, unscaled attention, no biases, gated FFN) steps in ``family_step.FamilyStep`` without a
    record and through the model's own modules (``decoding.ModuleDecoder``) with one."""
    return (
        cfg.norm_position == "post"
        and cfg.norm_kind == "layer"
        and not (cfg.final_norm or cfg.embed_norm or cfg.gated_ffn)
        and cfg.positions != "relative"
        and cfg.bias
        and cfg.scale_attention
        and cfg.output_scale == 1.0
        and cfg.n_heads * cfg.d_k == cfg.d_model
        and cfg.activation in ("relu", "swish", "silu", "gelu")  # model.decode.fused.ACTIVATION_CODES
    )


class LeanDecoder:
    """The model's decoder as numpy arrays, for step-by-step decoding, and its encoder, for untraced decoding.
    Build it once per loaded model (~30 ms for this project's model; it copies the weights, ~50 MB with the compiled
    step's own (out, in) copies) and reuse it;
    ``rows`` is the number of rows steps will usually have (the beam width), for oneDNN's prepacking; ``pack_min``
    the fewest weights a matrix needs to be prepacked by oneDNN, ``mkl_min`` to be multiplied by MKL (see _Linear;
    0 takes all, as the tests do on their tiny models; by default MKL multiplies several rows on an Intel CPU,
    matrices of 0.1 M weights or more, and oneDNN prepacks matrices of 0.2 M weights or more elsewhere).
    A model this step does not cover (``lean_covers``) steps in numpy through ``family`` (``family_step.FamilyStep``)
    behind the same methods, and through its own modules (``fallback``) where a step is recorded: ``decoding.decode``
    hands a recorded decode of such a model to ``fallback``.
    """

    fallback: ModuleDecoder | None
    family: FamilyStep | None

    def __init__(
        self,
        model: Transformer,
        rows: int = 1,
        pack_min: int | None = None,
        mkl_min: int = 100_000,
        compiled_steps: bool = True,
    ):
        # compiled_steps False: untraced steps in numpy too, whose BLAS products read each weight once for all the
        # rows, where the compiled step reads it once per five (a batch of beams' 160 rows: 0.9 ms of CPU a
        # sentence's step against 2.1)
        self.compiled_steps = compiled_steps
        if pack_min is None and not intel_mkl():
            pack_min = 200_000
        cfg = self.cfg = model.cfg
        self.fallback = self.family = None
        if not lean_covers(cfg):
            from model.decode.decoding import ModuleDecoder  # decoding imports this module
            from model.decode.family_step import FamilyStep

            self.fallback = ModuleDecoder(model)
            with torch.no_grad():
                self.family = FamilyStep(model, lambda W, b: _Linear(W, b, rows, pack_min, mkl_min))
            return
        self.H, self.d_k, self.D = cfg.n_heads, cfg.d_k, cfg.d_model
        with torch.no_grad():

            def linear(W, b, n=rows):  # n: the rows it usually multiplies
                return _Linear(W, b, n, pack_min, mkl_min)

            q_scale = 1.0 / math.sqrt(self.d_k)

            # (V, D), times sqrt(D) (source and target alike): a snapshot, as every weight here
            self.embed = _np(model.embed.weight) * np.float32(model.tgt_embed.scale)
            self.pe = _np(model.tgt_embed.pe)  # (max_len, D)
            self.layers = []
            for layer in model.decoder_stack:
                sa, ca, ffn = layer.self_attn, layer.cross_attn, layer.ffn
                self.layers.append(
                    {
                        # (D, 3D): one product for Q / sqrt(d_k), K, V
                        "qkv": linear(*_fused(sa.W_Q, sa.W_K, sa.W_V, q_scale=q_scale)),
                        "o": linear(sa.W_O.weight, sa.W_O.bias),
                        "cq": linear(*_fused(ca.W_Q, q_scale=q_scale)),
                        "co": linear(ca.W_O.weight, ca.W_O.bias),
                        "w1": linear(ffn.W_1.weight, ffn.W_1.bias),
                        "w2": linear(ffn.W_2.weight, ffn.W_2.bias),
                        "norms": [_affine(n) for n in (layer.norm1, layer.norm2, layer.norm3)],
                    }
                )
            # on the source, once per sentence: every layer's cross W_K, W_V in one product (D, layers·2D), and
            # W_Q (scaled) and W_O per head, (layers, H, d_k, D), to fold into the source's K, V (start)
            cross = [layer.cross_attn for layer in model.decoder_stack]
            self.ckv = linear(*_fused(*(m for ca in cross for m in (ca.W_K, ca.W_V))), 1)
            per_head = (len(cross), cfg.n_heads, cfg.d_k, -1)
            self.cq_heads = np.stack([_np(ca.W_Q.weight * q_scale) for ca in cross]).reshape(per_head)
            self.cq_b = np.stack([w["cq"].b for w in self.layers]).reshape(*per_head[:2], 1, cfg.d_k)
            self.co_heads = np.stack([w["co"].W for w in self.layers]).reshape(per_head)
            W_out = model.embed.weight if model.out_proj is None else model.out_proj.weight
            self.out = linear(W_out, model.final_logits_bias)  # (D, V)
            # the encoder multiplies a sentence's tokens at once: several rows, whatever the beam
            self.src_pe = _np(model.src_embed.pe)
            self.encoder = [
                {
                    "qkv": linear(*_fused(sa.W_Q, sa.W_K, sa.W_V, q_scale=q_scale), ENCODER_ROWS),
                    "o": linear(sa.W_O.weight, sa.W_O.bias, ENCODER_ROWS),
                    "w1": linear(layer.ffn.W_1.weight, layer.ffn.W_1.bias, ENCODER_ROWS),
                    "w2": linear(layer.ffn.W_2.weight, layer.ffn.W_2.bias, ENCODER_ROWS),
                    "norms": [_affine(n) for n in (layer.norm1, layer.norm2)],
                }
                for layer in model.encoder_stack
                for sa in [layer.self_attn]
            ]
        self.eps = np.float32(cfg.layer_norm_eps)
        self.mean_of = np.full((cfg.d_model, 1), 1.0 / cfg.d_model, np.float32)  # x @ mean_of: the mean over D
        self.sqrt_dk = np.float32(math.sqrt(self.d_k))
        self.fold_max = cfg.d_model  # the largest R·H·S whose cross-attention start folds: M, N no larger than W_Q
        self.act = cfg.activation

    @functools.cached_property
    def compiled(self) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], np.ndarray] | None:
        """The compiled step's weights and biases (model.decode.fused.step's W, b, norms), built at the first
        untraced step
        from this decoder's own copies (recorded decodes, the app's, never need them: ~19 MB): torch's (out, in)
        layout, which its products read row by row. Set to None, steps run in numpy (the tests compare the two)."""
        linears = [w[k] for w in self.layers for k in ("qkv", "o", "cq", "co", "w1", "w2")] + [self.out]
        W = tuple(np.ascontiguousarray(lin.W.T) for lin in linears)
        b = tuple(np.zeros(lin.W.shape[1], np.float32) if lin.b is None else lin.b for lin in linears)
        return W, b, np.array([w["norms"] for w in self.layers], np.float32)  # norms: (layers, 3, 2, D)

    def encode(self, src_ids: AnyArray, ablation: Ablation | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Transformer.encode without its record, in numpy: source ids (B, S) -> memory (B, S, D) and the additive
        padding mask (B, 1, 1, S), None without padding; the same numbers to float rounding. The encoder heads of
        ``ablation`` are switched off."""
        if self.family is not None:
            return self.family.encode(src_ids, ablation)
        ids = np.asarray(src_ids)
        B, S = ids.shape
        H, d_k, D = self.H, self.d_k, self.D
        if S > self.src_pe.shape[0]:
            raise ValueError(f"sequence of {S} positions exceeds max_len={self.src_pe.shape[0]}")
        pad = ids == self.cfg.pad_id
        mask = np.where(pad, np.float32(-np.inf), np.float32(0))[:, None, None] if pad.any() else None
        heads = ablation.arrays(self.cfg) if ablation else {}
        x = (self.embed[ids] + self.src_pe[:S]).reshape(B * S, D)
        ctx = np.empty((B * S, D), np.float32)
        scores_mask = np.zeros((1, S), np.float32) if mask is None else np.ascontiguousarray(mask.reshape(B, S))
        from model.decode import fused

        act = fused.ACTIVATION_CODES[self.act]
        for i, w in enumerate(self.encoder):
            # the products in BLAS (MKL: several rows), what lies between them compiled (model.decode.fused)
            fused.encoder_attention(w["qkv"](x), B, H, scores_mask, ctx)  # (B·S, D): heads side by side
            if keys.enc(i, "self") in heads:
                keep, fill = heads[keys.enc(i, "self")]  # (1, H, 1, 1), (1, H, 1, d_k)
                per_head = ctx.reshape(B, S, H, d_k).transpose(0, 2, 1, 3)  # (B, H, S, d_k), a view of ctx
                per_head *= keep
                per_head += fill
            fused.add_norm(x, w["o"](ctx), *w["norms"][0], self.eps, x)
            hidden = w["w1"](x)
            fused.activate(hidden, act)
            fused.add_norm(x, w["w2"](hidden), *w["norms"][1], self.eps, x)
        return x.reshape(B, S, D), mask

    def start(self, memory: AnyArray, src_mask: AnyArray | None, ablation: Ablation | None = None) -> LeanCache:
        """An empty cache for the rows of ``memory`` (R, S, D) from ``encode`` (or Transformer.encode's tensors):
        projects the cross-attention K, V once. A memory of one row serves any number of rows (beam search repeats
        it with select). The decoder heads of ``ablation`` are switched off at every step of this cache (encoder
        heads: pass the ablation to ``encode``, or to Transformer.encode through ``transformer.head_masks``)."""
        if self.family is not None:
            return self.family.start(memory, src_mask, ablation)
        R, S, _ = memory.shape
        L, H, d_k, D = len(self.layers), self.H, self.d_k, self.D
        kv = self.ckv(_array(memory).reshape(R * S, D)).reshape(R, S, L, 2, H, d_k)
        cross = np.ascontiguousarray(kv.transpose(2, 0, 3, 4, 1, 5))  # (layers, R, 2, H, S, d_k)
        # the cross-attention folded into the source for steps without a record: the scores Q Kᵀ = (y W_Q + b_Q) Kᵀ
        # = y Mᵀ + c with M = K W_Q, and the output α V W_O = α N, per head. M and N (R, H·S, D) are a few times
        # smaller than W_Q and W_O for one sentence (H·S < D): a step reads less, and runs two products instead of
        # four. Not for long sources, nor for a batch of sources, which would read more
        folded = None
        if R * H * S <= self.fold_max:
            K, V = cross[:, :, 0], cross[:, :, 1]  # (layers, R, H, S, d_k)
            M = (K @ self.cq_heads[:, None]).reshape(L, R, H * S, D)
            c = (self.cq_b[:, None] @ K.swapaxes(-1, -2)).reshape(L, R, H * S)
            N = (V @ self.co_heads[:, None]).reshape(L, R, H * S, D)
            folded = (M, c, np.ascontiguousarray(N.swapaxes(-1, -2)))  # Nᵀ (layers, R, D, H·S): a product's W layout
        KV = np.empty((L, R, 2, H, self.cfg.max_len, d_k), np.float32)  # only positions written are read
        mask = None if src_mask is None else _array(src_mask)  # (R, 1, 1, S)
        return LeanCache(KV, cross, folded, mask, heads=decoder_heads(ablation, self.cfg))

    def _norm(self, x: np.ndarray, gb) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # means over D as products with a column of 1/D: one call each, not a reduction and a scaling (~2% of a step)
        mean = x @ self.mean_of  # (R, 1)
        centered = x - mean
        std = np.sqrt((centered * centered) @ self.mean_of + self.eps)
        out = centered / std
        out *= gb[0]
        out += gb[1]
        return out, mean, std

    def _act(self, h: np.ndarray) -> np.ndarray:
        if self.act == "relu":
            return np.maximum(h, 0, out=h)
        fns: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"swish": F.silu, "silu": F.silu, "gelu": F.gelu}
        fn = fns[self.act]
        return fn(torch.from_numpy(h)).numpy()

    def step(
        self, tokens: np.ndarray | Sequence[int], cache: LeanCache, record: bool = False
    ) -> tuple[np.ndarray, LeanCache, dict[str, np.ndarray] | None]:
        """Feed each row its newest token (R,): logits (R, V), the cache (updated in place, position t filled),
        and, with ``record``, every stage as Transformer.decode(record=True) names and shapes them (read-only
        arrays, leading axis R, the logits left out)."""
        if self.family is not None:
            if record:
                raise ValueError("this model's steps are recorded through its modules: step LeanDecoder.fallback")
            return self.family.step(tokens, cache), cache, None
        tokens = np.asarray(tokens)
        R, t, H, d_k, D = len(tokens), cache.t, self.H, self.d_k, self.D
        check_step(R, cache, self.pe.shape[0])
        mask, heads = cache.src_mask, cache.heads
        if not record and not heads and self.compiled_steps and self.compiled is not None:
            return self._compiled_step(tokens, cache), cache, None
        embed = self.embed[tokens]  # (R, D)
        y = embed + self.pe[t]  # (R, D)
        rec: dict[str, np.ndarray] = {}
        if record:
            rec = prefixed("dec", {"embed": embed[:, None], "pe": self.pe[t : t + 1], "input": y[:, None]})
        for i, w in enumerate(self.layers):
            qkv = w["qkv"](y)  # (R, 3D)
            Q = qkv[:, :D].reshape(R, H, 1, d_k)
            KV = cache.KV[i]  # (R, 2, H, max_len, d_k)
            KV[:, :, :, t] = qkv[:, D:].reshape(R, 2, H, d_k)
            # the newest query sees every cached key: the causal mask of this row is all zeros. Its K, V are
            # copied into the record, as later steps write and reorder these buffers
            kv = (KV[:, 0, :, : t + 1], KV[:, 1, :, : t + 1])
            y, r = self._attention(Q, kv, None, y, w, _SELF, record, heads.get(keys.dec(i, "self")))
            if record:
                rec.update(prefixed(keys.dec(i), r))
            if record or cache.folded is None or keys.dec(i, "cross") in heads:
                Q = w["cq"](y).reshape(R, H, 1, d_k)
                # the cross K, V never change after start(): the record holds views of them, not per-step copies
                kv = (cache.cross[i, :, 0], cache.cross[i, :, 1])
                y, r = self._attention(Q, kv, mask, y, w, _CROSS, record, heads.get(keys.dec(i, "cross")))
                if record:
                    rec.update(prefixed(keys.dec(i), r))
            else:
                y = self._cross_folded(y, [a[i] for a in cache.folded], mask, w["co"].b, w["norms"][1])
            hidden = self._act(w["w1"](y))  # (R, d_ff)
            f = w["w2"](hidden)  # (R, D)
            residual = y + f
            y, mean, std = self._norm(residual, w["norms"][2])
            if record:
                ffn = {"hidden": hidden[:, None], "out": f[:, None]}
                norm = {"residual": residual[:, None], "mean": mean, "std": std, "out": y[:, None]}
                rec.update(prefixed(keys.dec(i), {**prefixed("ffn", ffn), **prefixed("norm3", norm)}))
        cache.t = t + 1
        logits = self.out(y)  # (R, V)
        return logits, cache, (_frozen(rec) if record else None)

    def _compiled_step(self, tokens: np.ndarray, cache: LeanCache) -> np.ndarray:
        """step without a record or ablated heads, as one compiled function (model.decode.fused): the logits (R, V)."""
        if self.compiled is None:
            raise ValueError("the compiled step is switched off")
        W, b, norms = self.compiled
        S = cache.cross.shape[4]
        mask = np.zeros((1, S), np.float32) if cache.src_mask is None else cache.src_mask.reshape(-1, S)
        folded = cache.folded is not None
        if cache.folded is not None:
            M, c, N = cache.folded
        else:  # unread: the cross-attention reads cache.cross
            M = N = np.empty((0, 0, 0, 0), np.float32)
            c = np.empty((0, 0, 0), np.float32)
        logits = np.empty((len(tokens), W[-1].shape[0]), np.float32)
        from model.decode import fused

        weights = fused.StepWeights(self.embed, self.pe, W, b, norms, self.eps, fused.ACTIVATION_CODES[self.act])
        arrays = fused.StepCache(cache.KV, folded, M, c, N, cache.cross, np.ascontiguousarray(mask))
        fused.step(tokens.astype(np.int64, copy=False), cache.t, weights, arrays, logits)
        cache.t += 1
        return logits

    def _cross_folded(self, y, folded, mask, b_O, norm) -> np.ndarray:
        """The cross-attention block on y (R, D) with the weights folded into the source (start), then Add &
        Norm: the new y; the same numbers as _attention's to float rounding."""
        M, c, NT = folded  # (R or 1, H·S, D), (R or 1, H·S), (R or 1, D, H·S): one row when every row reads one source
        R, H = len(y), self.H
        S = M.shape[1] // H
        scores = y @ M[0].T if len(M) == 1 else (M @ y[:, :, None])[..., 0]  # (R, H·S)
        scores += c
        scores = scores.reshape(R, H, S)
        if mask is not None:
            scores += mask.reshape(-1, 1, S)
        weights = _softmax(scores).reshape(R, H * S)
        out = weights @ NT[0].T if len(NT) == 1 else (NT @ weights[:, :, None])[..., 0]  # (R, D)
        out += b_O
        out += y
        return self._norm(out, norm)[0]

    def _attention(self, Q, kv, mask, y, w, block: _Block, record, heads=None):
        """softmax(Q Kᵀ / sqrt(d_k) + mask) V, W_O, then Add & Norm, of ``block`` of the layer whose weights are ``w``:
        the new y and (with ``record``) the stages. Q arrives scaled by 1/sqrt(d_k) (folded into W_Q); kv: K, V
        (R or 1, H, Tk, d_k). ``heads``: (keep, fill) of the ablated heads, as HeadMask."""
        K, V = kv
        W_O, norm, copy_kv = w[block.W_O], w["norms"][block.norm_index], block.copy_kv
        R, H, _, d_k = Q.shape
        scores = Q @ K.swapaxes(-1, -2)  # (R, H, 1, Tk)
        masked = scores if mask is None else scores + mask
        weights = _softmax(masked)  # (R, H, 1, Tk)
        context = weights @ V  # (R, H, 1, d_k)
        if heads is not None:
            context = context * heads[0] + heads[1]
        concat = context.reshape(R, H * d_k)  # heads side by side: one query, so no transpose is needed
        out = W_O(concat)  # (R, D)
        residual = y + out
        y, mean, std = self._norm(residual, norm)
        if not record:
            return y, None
        Tk = scores.shape[-1]
        K, V = np.broadcast_to(K, (R, H, Tk, d_k)), np.broadcast_to(V, (R, H, Tk, d_k))
        full_mask = np.zeros_like(scores) if mask is None else np.broadcast_to(mask, scores.shape)
        rec = {
            "Q": Q * self.sqrt_dk,
            "K": K.copy() if copy_kv else K,
            "V": V.copy() if copy_kv else V,
            "scores": scores,
            "mask": full_mask,
            "masked_scores": masked,
            "weights": weights,
            "context": context,
            "concat": concat[:, None],
            "out": out[:, None],
        }
        norm_rec = {"residual": residual[:, None], "mean": mean, "std": std, "out": y[:, None]}
        return y, {**prefixed(block.name, rec), **prefixed(block.norm, norm_rec)}
